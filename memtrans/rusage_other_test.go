//go:build !unix

package memtrans

import "time"

// usage is not measured on this system.
func usage() (cpu, sys time.Duration, faults int64) { return 0, 0, 0 }
