//go:build race

package memtrans

// m2Race is true under the race detector, whose instrumentation allocates.
const m2Race = true
