//go:build !purego && !noasm && gc

package kernels

import "github.com/radgen/radgen/internal/cpu"

// expAVX2 sets dst[i] = fastExp(src[i]) for i < n, a positive multiple of
// 4, bit for bit; dst may be src.
//
//go:noescape
func expAVX2(dst, src *float64, n int, table *[32]float64)

// expBlock sets dst[i] = fastExp(src[i]) for i < len(dst), four values at
// a time where the CPU has AVX2; dst may be src.
func expBlock(dst, src []float64) {
	src = src[:len(dst)]
	n := 0
	if cpu.HasAVX2FMA() && len(dst) >= 4 {
		n = len(dst) &^ 3
		expAVX2(&dst[0], &src[0], n, &exp2Table)
	}
	for i := n; i < len(dst); i++ {
		dst[i] = fastExp(src[i])
	}
}
