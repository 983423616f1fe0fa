//go:build race

package memtrans

// raceEnabled is true under the race detector (see skipUnderRace).
const raceEnabled = true
