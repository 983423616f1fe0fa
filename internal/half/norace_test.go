//go:build !race

package half

const raceEnabled = false
