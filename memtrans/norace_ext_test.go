//go:build !race

package memtrans_test

// raceEnabled is true under the race detector: its tests of file formats
// and of single-goroutine paths run without it (the normal run has them).
const raceEnabled = false
