//go:build race

package half

const raceEnabled = true
