// Package cpu says which instruction-set extensions the kernels in
// internal/f32 may use. It is the one place where radgen reads the CPU's
// features (through golang.org/x/sys/cpu); the kernels ask it on every call,
// so a test can switch a feature off with the Disable functions and cover the
// slower paths on a machine that has the faster ones, as klauspost/compress's
// internal/cpuinfo does.
//
// The functions are safe for concurrent use. A feature reads as present only
// if both the CPU and the operating system support it (the OS must save the
// wider registers), and only on amd64.
package cpu

import (
	"sync/atomic"

	"golang.org/x/sys/cpu"
)

var (
	hasAVX2FMA atomic.Bool
	hasAVX512  atomic.Bool
)

func init() {
	x := cpu.X86
	hasAVX2FMA.Store(x.HasAVX && x.HasAVX2 && x.HasFMA)
	// AVX512F covers the 512-bit FMA, loads with embedded broadcast and the
	// opmask registers the kernels use; x/sys/cpu sets it only when the OS
	// saves the ZMM and opmask state.
	hasAVX512.Store(hasAVX2FMA.Load() && x.HasAVX512F)
}

// HasAVX2FMA reports whether AVX2 and FMA3 (256-bit fused multiply-add) may
// be used.
func HasAVX2FMA() bool { return hasAVX2FMA.Load() }

// HasAVX512 reports whether AVX-512 Foundation (512-bit registers, opmasks,
// embedded broadcast) may be used. It implies HasAVX2FMA.
func HasAVX512() bool { return hasAVX512.Load() }

// DisableAVX2FMA makes HasAVX2FMA and HasAVX512 report false, for tests. Call
// the returned function to restore the previous state.
func DisableAVX2FMA() (restore func()) {
	old2, old512 := hasAVX2FMA.Load(), hasAVX512.Load()
	hasAVX2FMA.Store(false)
	hasAVX512.Store(false)
	return func() {
		hasAVX2FMA.Store(old2)
		hasAVX512.Store(old512)
	}
}

// DisableAVX512 makes HasAVX512 report false, for tests. Call the returned
// function to restore the previous state.
func DisableAVX512() (restore func()) {
	old := hasAVX512.Load()
	hasAVX512.Store(false)
	return func() { hasAVX512.Store(old) }
}
