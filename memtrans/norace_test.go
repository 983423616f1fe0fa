//go:build !race

package memtrans

// raceEnabled is true under the race detector: the tests of file formats,
// which run on one goroutine, run without it (the normal run has them).
const raceEnabled = false
