//go:build !race

package r2gen_test

// raceEnabled is true under the race detector, whose instrumentation allocates.
const raceEnabled = false
