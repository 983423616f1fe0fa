package f32

import "runtime"

// Products that add a residual read from its own matrix, for a residual
// block whose sum must not overwrite its shortcut (a graph's op writes a
// new result). GemmPackedAdd copies each block of R into its block of C,
// row by row, just before the kernels of that block first add onto it, so
// that the copy streams and the kernels find C in the cache; the Winograd
// output transform copies each tile. The results equal those of copying
// the residual into C and running the product with beta = 1, bit for bit.
// The copy is the price of the separate result: about 2.5% of a
// ResNet-101 forward's CPU samples, against the in-place sum (C holding R,
// beta = 1), whose reads the kernels' prefetches hide.

// GemmPackedAdd computes, for A (m, k) with row stride lda, the packed
// op(B) (k, n) and R (m, n) with row stride ldr,
//
//	C[i][j] = f(Σ_{p<k} A[i][p]·op(B)[p][j] + R[i][j] + bias[j])
//
// as GemmPacked does with C holding R and beta = 1 (f the ReLU if relu,
// bias nil for none). R may be C itself; neither may overlap A, and R must
// not overlap C otherwise. It panics, with a message prefixed "f32: ", on
// bad sizes, strides or slices.
func GemmPackedAdd(m int, a []float32, lda int, b *PackedB, r []float32, ldr int, c []float32, ldc int, bias []float32, relu bool) {
	if m < 0 {
		panic("f32: negative matrix size")
	}
	if r == nil {
		panic("f32: GemmPackedAdd without a residual")
	}
	checkMatrix("A", a, m, b.k, lda)
	checkMatrix("C", c, m, b.n, ldc)
	checkMatrix("R", r, m, b.n, ldr)
	if bias != nil && len(bias) < b.n {
		panic("f32: bias is too short")
	}
	gemmPackedRes(runtime.GOMAXPROCS(0), m, a, lda, b, 1, r, ldr, c, ldc, bias, relu)
}

// WinogradOutputAdd is WinogradOutput with y starting as res (B, h, w, C)
// instead of beta·y:
//
//	y = f(Aᵀ·M·A + res + bias)
//
// for the output tiles [lo, hi). res may be y itself; it must not overlap
// y otherwise, nor m.
func WinogradOutputAdd(y, res, m []float32, b, h, w, c int, bias []float32, relu bool, lo, hi int) {
	if res == nil {
		panic("f32: WinogradOutputAdd without a residual")
	}
	winogradOutput(y, res, m, b, h, w, c, bias, 1, relu, lo, hi)
}

// copyTile copies rows×cols values of src (row stride lds) to dst (row
// stride ldd).
func copyTile(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	if ldd == cols && lds == cols { // contiguous rows: one copy
		copy(dst[:rows*cols], src[:rows*cols])
		return
	}
	for i := 0; i < rows; i++ {
		copy(dst[i*ldd:][:cols], src[i*lds:][:cols])
	}
}
