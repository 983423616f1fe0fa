package f32

// goKernels is the portable kernel set: plain Go, 4×4 tiles held in sixteen
// scalar accumulators (what the Go compiler keeps in registers). It is the
// only set under -tags purego or noasm and on other architectures, and the
// twin that the tests compare the assembly against.
var goKernels = kernelSet{
	name: "go",
	mr:   4, nr: 4,
	kern: []microKernel{goKernel(1), goKernel(2), goKernel(3), goKernel4x4},
	mc:   128, kc: 256, nc: 1024,
	seqRows: 1,
}

// goKernel returns the r×4 micro-kernel for r < 4: the reference loop of
// microKernel, written out.
func goKernel(r int) microKernel {
	return func(k int, a, b []float32, bs int, c []float32, ldc int, beta float32, _ int, bias []float32, relu bool) {
		var acc [4][4]float32
		for p := 0; p < k; p++ {
			ap := a[p*r:][:r]
			bp := b[p*bs:][:4]
			for i, av := range ap {
				for j, bv := range bp {
					acc[i][j] += av * bv
				}
			}
		}
		for i := 0; i < r; i++ {
			cr := c[i*ldc:][:4]
			for j := range cr {
				v := acc[i][j]
				if beta != 0 {
					v += beta * cr[j]
				}
				cr[j] = epilogue(v, bias, j, relu)
			}
		}
	}
}

// goKernel4x4 is the full-size tile of goKernels, see microKernel.
func goKernel4x4(k int, a, b []float32, bs int, c []float32, ldc int, beta float32, _ int, bias []float32, relu bool) {
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	var c20, c21, c22, c23, c30, c31, c32, c33 float32
	a = a[:4*k]
	for p := 0; p < k; p++ {
		ap := a[4*p:][:4]
		bp := b[p*bs:][:4]
		a0, a1, a2, a3 := ap[0], ap[1], ap[2], ap[3]
		b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	rows := [4][4]float32{
		{c00, c01, c02, c03},
		{c10, c11, c12, c13},
		{c20, c21, c22, c23},
		{c30, c31, c32, c33},
	}
	for i := range rows {
		cr := c[i*ldc:][:4]
		if beta == 0 && bias == nil && !relu {
			copy(cr, rows[i][:])
			continue
		}
		for j := range cr {
			v := rows[i][j]
			if beta != 0 {
				v += beta * cr[j]
			}
			cr[j] = epilogue(v, bias, j, relu)
		}
	}
}

// goDot is the pure-Go twin of the dot kernels (see dotKernel) for r rows;
// the tests check the assembly against it.
func goDot(r int) dotKernel {
	return func(k int, a []float32, lda int, b []float32, ldb int, n int, dst []float32, ldd int, bias []float32, flags int) {
		ep := Epilogue{Bias: bias, ReLU: flags&dotReLU != 0, Add: flags&dotAdd != 0}
		for i := 0; i < r; i++ {
			ar := a[i*lda:][:k]
			for j := 0; j < n; j++ {
				br := b[j*ldb:][:k]
				var s float32
				for p, v := range ar {
					s += v * br[p]
				}
				dst[i*ldd+j] = ep.apply(s, j, dst[i*ldd+j])
			}
		}
	}
}

// goAxpy is the pure-Go twin of the axpy kernels (see axpyKernel) for r
// rows; the tests check the assembly against it.
func goAxpy(r int) axpyKernel {
	return func(n int, a, b []float32, ldb int, c []float32, ldc int) {
		for i := 0; i < r; i++ {
			cr := c[i*ldc:][:n]
			for q := 0; q < 4; q++ {
				br := b[q*ldb:][:n]
				for j, v := range br {
					cr[j] += a[i*4+q] * v
				}
			}
		}
	}
}
