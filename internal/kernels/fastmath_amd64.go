//go:build !purego && !noasm && gc

package kernels

import "github.com/radgen/radgen/internal/cpu"

// The assembly (fastmath_amd64.s) computes n values, a positive multiple
// of 4, four at a time, with the bits of the scalar code; dst may be src.
//
//   - expAVX2:        dst[i] = fastExp(src[i])
//   - sigmoidF32AVX2: dst[i] = float32(sigmoid(float64(src[i])))
//   - tanhF32AVX2:    dst[i] = float32(tanhFast(float64(src[i])))

//go:noescape
func expAVX2(dst, src *float64, n int, table *[32]float64)

//go:noescape
func sigmoidF32AVX2(dst, src *float32, n int, table *[32]float64)

//go:noescape
func tanhF32AVX2(dst, src *float32, n int, table *[32]float64)

// vectorised returns how many of n values the assembly takes: a multiple
// of 4, 0 where the CPU lacks AVX2.
func vectorised(n int) int {
	if !cpu.HasAVX2FMA() {
		return 0
	}
	return n &^ 3
}

// expBlock sets dst[i] = fastExp(src[i]) for i < len(dst); dst may be src.
func expBlock(dst, src []float64) {
	src = src[:len(dst)]
	n := vectorised(len(dst))
	if n > 0 {
		expAVX2(&dst[0], &src[0], n, &exp2Table)
	}
	for i := n; i < len(dst); i++ {
		dst[i] = fastExp(src[i])
	}
}

// sigmoidHead sets the first values of dst to float32(sigmoid(x[i])), as
// many as the assembly takes, and returns how many.
func sigmoidHead(dst, x []float32) int {
	n := vectorised(len(x))
	if n > 0 {
		sigmoidF32AVX2(&dst[0], &x[0], n, &exp2Table)
	}
	return n
}

// tanhHead sets the first values of dst to float32(tanhFast(x[i])), as
// many as the assembly takes, and returns how many.
func tanhHead(dst, x []float32) int {
	n := vectorised(len(x))
	if n > 0 {
		tanhF32AVX2(&dst[0], &x[0], n, &exp2Table)
	}
	return n
}
