//go:build race

package f32

// raceEnabled says whether the race detector, which allocates, is on.
const raceEnabled = true
