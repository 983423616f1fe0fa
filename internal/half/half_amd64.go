//go:build !purego && !noasm && gc

package half

import (
	"sync/atomic"

	"golang.org/x/sys/cpu"

	icpu "github.com/radgen/radgen/internal/cpu"
)

// hasF16C: the conversion instructions. The kernels also need AVX2 and FMA,
// which internal/cpu reports (and tests may switch off).
var hasF16C = cpu.X86.HasF16C && cpu.X86.HasAVX

// noAsm switches the assembly off, for tests.
var noAsm atomic.Bool

// useAsm reports whether the assembly kernels may run.
func useAsm() bool { return hasF16C && icpu.HasAVX2FMA() && !noAsm.Load() }

func encodeAsm(dst []uint16, src []float32) { encodeF16C(&dst[0], &src[0], len(src)) }

func decodeAsm(dst []float32, src []uint16) { decodeF16C(&dst[0], &src[0], len(src)) }
