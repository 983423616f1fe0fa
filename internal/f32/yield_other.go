//go:build !linux

package f32

import "runtime"

// yield gives the processor to other goroutines.
func yield() { runtime.Gosched() }
