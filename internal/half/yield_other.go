//go:build !linux

package half

import "runtime"

// yield gives the processor to other goroutines.
func yield() { runtime.Gosched() }
