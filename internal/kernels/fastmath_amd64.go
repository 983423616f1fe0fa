//go:build !purego && !noasm && gc

package kernels

import "github.com/radgen/radgen/internal/cpu"

// The assembly (fastmath_amd64.s) computes n values, a positive multiple
// of 4, four at a time (AVX2), or of 8, eight at a time (AVX-512), with
// the bits of the scalar code; dst may be src.
//
//   - expAVX2, expAVX512:               dst[i] = fastExp(src[i])
//   - sigmoidF32AVX2, sigmoidF32AVX512: dst[i] = float32(sigmoid(float64(src[i])))
//   - tanhF32AVX2, tanhF32AVX512:       dst[i] = float32(tanhFast(float64(src[i])))

//go:noescape
func expAVX2(dst, src *float64, n int, table *[32]float64)

//go:noescape
func sigmoidF32AVX2(dst, src *float32, n int, table *[32]float64)

//go:noescape
func tanhF32AVX2(dst, src *float32, n int, table *[32]float64)

//go:noescape
func expAVX512(dst, src *float64, n int, table *[32]float64)

//go:noescape
func sigmoidF32AVX512(dst, src *float32, n int, table *[32]float64)

//go:noescape
func tanhF32AVX512(dst, src *float32, n int, table *[32]float64)

// vectorised returns how many of n values the assembly takes, eight at a
// time (wide, where the CPU has AVX-512) and then four (AVX2): w and w+f
// values, multiples of 8 and 4; none where the CPU lacks AVX2.
func vectorised(n int) (w, f int) {
	if !cpu.HasAVX2FMA() {
		return 0, 0
	}
	if cpu.HasAVX512() {
		w = n &^ 7
	}
	return w, (n - w) &^ 3
}

// expBlock sets dst[i] = fastExp(src[i]) for i < len(dst); dst may be src.
func expBlock(dst, src []float64) {
	src = src[:len(dst)]
	w, f := vectorised(len(dst))
	if w > 0 {
		expAVX512(&dst[0], &src[0], w, &exp2Table)
	}
	if f > 0 {
		expAVX2(&dst[w], &src[w], f, &exp2Table)
	}
	for i := w + f; i < len(dst); i++ {
		dst[i] = fastExp(src[i])
	}
}

// sigmoidHead sets the first values of dst to float32(sigmoid(x[i])), as
// many as the assembly takes, and returns how many.
func sigmoidHead(dst, x []float32) int {
	w, f := vectorised(len(x))
	if w > 0 {
		sigmoidF32AVX512(&dst[0], &x[0], w, &exp2Table)
	}
	if f > 0 {
		sigmoidF32AVX2(&dst[w], &x[w], f, &exp2Table)
	}
	return w + f
}

// tanhHead sets the first values of dst to float32(tanhFast(x[i])), as
// many as the assembly takes, and returns how many.
func tanhHead(dst, x []float32) int {
	w, f := vectorised(len(x))
	if w > 0 {
		tanhF32AVX512(&dst[0], &x[0], w, &exp2Table)
	}
	if f > 0 {
		tanhF32AVX2(&dst[w], &x[w], f, &exp2Table)
	}
	return w + f
}
