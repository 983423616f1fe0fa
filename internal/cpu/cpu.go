// Package cpu says which instruction-set extensions the kernels in
// internal/f32 and internal/half may use. It is the one place where radgen
// reads the CPU's features (through golang.org/x/sys/cpu); the kernels ask
// it on every call, so a test can switch a feature off with the Disable
// functions and cover the slower paths on a machine that has the faster
// ones, as klauspost/compress's internal/cpuinfo does.
//
// # Forcing a kernel path
//
// The environment variable RADGEN_CPU, read once when the process starts,
// forces the kernel path of the whole process:
//
//	RADGEN_CPU=avx512  the AVX-512 kernels (an error where the CPU lacks AVX-512F)
//	RADGEN_CPU=avx2    the AVX2+FMA kernels, AVX-512 off
//	RADGEN_CPU=purego  the portable Go kernels
//	RADGEN_CPU=auto    or unset: the fastest path the CPU and the build have
//
// A path the CPU or the build cannot run (avx512 on a CPU without it, avx2
// under -tags purego, a misspelt name) is not taken silently: [Err] returns
// the error, the kernels keep the path they would use without the variable,
// and every package's tests fail on it (internal/testutil.KernelPath). The
// tests log [Path], so a test log names the kernels it ran on.
//
// The functions are safe for concurrent use. A feature reads as present only
// if the CPU and the operating system support it (the OS must save the wider
// registers), on amd64, in a build with the assembly kernels (not under the
// purego or noasm tags).
package cpu

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/cpu"
)

// Env is the environment variable that forces the kernel path.
const Env = "RADGEN_CPU"

// The kernel paths, as RADGEN_CPU names them and Path returns them.
const (
	PathAVX512 = "avx512"
	PathAVX2   = "avx2"
	PathPureGo = "purego"
)

var (
	hasAVX2FMA atomic.Bool
	hasAVX512  atomic.Bool

	// detected are the features before RADGEN_CPU; forceErr is what
	// RADGEN_CPU asked for and could not get.
	detected2, detected512 bool
	forceErr               error
)

func init() {
	x := cpu.X86
	detected2 = assembly && x.HasAVX && x.HasAVX2 && x.HasFMA
	// AVX512F covers the 512-bit FMA, loads with embedded broadcast and the
	// opmask registers the kernels use; x/sys/cpu sets it only when the OS
	// saves the ZMM and opmask state.
	detected512 = detected2 && x.HasAVX512F
	forceErr = force(os.Getenv(Env))
}

// force sets the features for the path v names ("" or "auto": all that
// were detected). It returns an error, and leaves the detected features,
// when v names an unknown path or one this CPU or build cannot run.
func force(v string) error {
	hasAVX2FMA.Store(detected2)
	hasAVX512.Store(detected512)
	why := ""
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "auto":
		return nil
	case PathAVX512:
		if !detected512 {
			why = "the AVX-512 kernels need AVX-512F" + missing()
		}
	case PathAVX2:
		if !detected2 {
			why = "the AVX2 kernels need AVX2 and FMA" + missing()
		}
		hasAVX512.Store(false)
	case PathPureGo:
		hasAVX2FMA.Store(false)
		hasAVX512.Store(false)
	default:
		why = fmt.Sprintf("unknown path (want %s, %s, %s or auto)", PathAVX512, PathAVX2, PathPureGo)
	}
	if why == "" {
		return nil
	}
	hasAVX2FMA.Store(detected2)
	hasAVX512.Store(detected512)
	return fmt.Errorf("cpu: %s=%s: %s; the kernels run on %s", Env, v, why, Path())
}

// missing says why a detected feature is absent: the build or the CPU.
func missing() string {
	if !assembly {
		return ", and this build has no assembly kernels (purego or noasm tag, or not amd64/gc)"
	}
	return ", which this CPU (or its operating system) does not offer"
}

// Err returns the error of the RADGEN_CPU setting (an unknown path, or one
// this CPU or build cannot run), or nil. With an error the kernels run on
// the path they would take without the variable.
func Err() error { return forceErr }

// Path names the kernel path in use now: "avx512", "avx2" or "purego".
// Disable calls in tests change it.
func Path() string {
	switch {
	case hasAVX512.Load():
		return PathAVX512
	case hasAVX2FMA.Load():
		return PathAVX2
	}
	return PathPureGo
}

// Describe is Path with how it was chosen, for test logs: for example
// "avx2 (RADGEN_CPU=avx2; this CPU has avx512)".
func Describe() string {
	best := PathPureGo
	switch {
	case detected512:
		best = PathAVX512
	case detected2:
		best = PathAVX2
	}
	how := Env + " unset"
	if v, ok := os.LookupEnv(Env); ok {
		how = Env + "=" + v
	}
	s := fmt.Sprintf("%s (%s; this CPU and build offer %s)", Path(), how, best)
	if forceErr != nil {
		s += "; error: " + forceErr.Error()
	}
	return s
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
