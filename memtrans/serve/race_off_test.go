//go:build !race

package serve

// raceEnabled is true under the race detector, whose shadow memory
// multiplies the process's and whose instrumentation slows decoding.
const raceEnabled = false
