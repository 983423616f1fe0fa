//go:build unix

package memtrans

import (
	"syscall"
	"time"
)

// usage returns the process's CPU time (user and system) and its minor
// page faults so far.
func usage() (cpu, sys time.Duration, faults int64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), time.Duration(ru.Stime.Nano()), int64(ru.Minflt)
}
