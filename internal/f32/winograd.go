package f32

// Winograd's minimal filtering F(2×2, 3×3) for 3×3, stride-1 convolutions
// with padding 1 on channels-last images: Lavin and Gray, "Fast Algorithms
// for Convolutional Neural Networks", CVPR 2016, arXiv:1509.09308, section
// 4.1. Each 2×2 tile of the output is
//
//	Y = Aᵀ·[(G·g·Gᵀ) ⊙ (Bᵀ·d·B)]·A                         (Lavin & Gray, Eq. 8)
//
// for the 3×3 filter g and the 4×4 input patch d around the tile, with
//
//	Bᵀ = [1 0 −1 0; 0 1 1 0; 0 −1 1 0; 0 1 0 −1]
//	G  = [1 0 0; ½ ½ ½; ½ −½ ½; 0 0 1]
//	Aᵀ = [1 1 1 0; 0 1 −1 −1]
//
// Summed over the input channels, the elementwise products become 16
// independent matrix products, one per position ξ = 4i + j of the 4×4
// transformed tile: M_ξ (T, Cout) = V_ξ (T, C) · U_ξ (C, Cout) over the T
// tiles of the batch. They take 16 multiplications per tile and channel
// pair where the direct convolution takes 36, a 2.25-fold saving, for the
// price of the transforms, which are additions only (the ½ of G is applied
// to the weights, once). In float32 the error stays within a few times that
// of the direct convolution.
//
// The tiles of a batch of B images h×w are numbered t = (b·th + ty)·tw + tx
// with th = ⌈h/2⌉, tw = ⌈w/2⌉; tile (ty, tx) covers output rows 2ty, 2ty+1
// and columns 2tx, 2tx+1 (the last ones cut off when h or w is odd) and
// reads input rows 2ty−1 … 2ty+2, columns 2tx−1 … 2tx+2, zero outside.

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// WinogradTiles returns the number of 2×2 output tiles of b images h×w.
func WinogradTiles(b, h, w int) int { return b * ((h + 1) / 2) * ((w + 1) / 2) }

// WinogradWeights returns the transformed filters U_ξ = (G·g·Gᵀ)[i][j],
// ξ = 4i + j, of the weight w (Cout, C, 3, 3), as torch lays it out, each
// (C, Cout) packed for GemmPacked. The transform runs in float64.
func WinogradWeights(w []float64, cout, c int) [16]*PackedB {
	if len(w) < cout*c*9 {
		panic("f32: WinogradWeights: weight too short")
	}
	u := make([][]float32, 16)
	for x := range u {
		u[x] = make([]float32, c*cout)
	}
	g := [4][3]float64{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}}
	for o := range cout {
		for ci := range c {
			f := w[(o*c+ci)*9 : (o*c+ci+1)*9]
			var gf [4][3]float64 // G·f
			for i := range 4 {
				for j := range 3 {
					gf[i][j] = g[i][0]*f[j] + g[i][1]*f[3+j] + g[i][2]*f[6+j]
				}
			}
			for i := range 4 {
				for j := range 4 { // (G·f)·Gᵀ
					v := gf[i][0]*g[j][0] + gf[i][1]*g[j][1] + gf[i][2]*g[j][2]
					u[4*i+j][ci*cout+o] = float32(v)
				}
			}
		}
	}
	var out [16]*PackedB
	for x := range out {
		out[x] = PackB(false, c, cout, u[x], cout)
	}
	return out
}

// WinogradInput writes the transformed input tiles V_ξ = (Bᵀ·d·B)[i][j] of
// the tiles [lo, hi) of x (B, h, w, C), channels last, into v (16, T, C):
// v[ξ·T·C + t·C + c], with T = WinogradTiles(B, h, w).
func WinogradInput(v, x []float32, b, h, w, c, lo, hi int) {
	th, tw := (h+1)/2, (w+1)/2
	nt := b * th * tw
	if hi > lo && (len(v) < 15*nt*c+hi*c || len(x) < b*h*w*c) {
		panic("f32: WinogradInput buffer too short")
	}
	in := winoInKernel()
	var ws *workspace // its t holds a border tile's 4×4 patch, (4, 4, C)
	defer func() {
		if ws != nil {
			workspaces.Put(ws)
		}
	}()
	for t := lo; t < hi; t++ {
		bi, r := t/(th*tw), t%(th*tw)
		iy, ix := 2*(r/tw)-1, 2*(r%tw)-1
		dst := v[t*c:]
		if iy >= 0 && ix >= 0 && iy+4 <= h && ix+4 <= w {
			in(c, x[((bi*h+iy)*w+ix)*c:], w*c, c, dst, nt*c)
			continue
		}
		if ws == nil {
			ws = workspaces.Get()
			ws.t = grow(ws.t, 16*c)
		}
		patch := ws.t
		for py := range 4 {
			for px := range 4 {
				p := patch[(4*py+px)*c : (4*py+px+1)*c]
				y, x0 := iy+py, ix+px
				if y < 0 || y >= h || x0 < 0 || x0 >= w {
					clear(p)
					continue
				}
				copy(p, x[((bi*h+y)*w+x0)*c:])
			}
		}
		in(c, patch, 4*c, c, dst, nt*c)
	}
}

// WinogradOutput writes the output tiles [lo, hi) of y (B, h, w, C),
// channels last, from the products m (16, T, C), m[ξ·T·C + t·C + c]:
//
//	y = f(Aᵀ·M·A + beta·y + bias)
//
// with f the ReLU if relu and the identity otherwise, bias (C) nil for none;
// when beta is 0, y is not read.
func WinogradOutput(y, m []float32, b, h, w, c int, bias []float32, beta float32, relu bool, lo, hi int) {
	winogradOutput(y, nil, m, b, h, w, c, bias, beta, relu, lo, hi)
}

// winogradOutput is WinogradOutput whose y starts as res (of y's layout)
// instead of beta·y when res is not nil (WinogradOutputAdd).
func winogradOutput(y, res, m []float32, b, h, w, c int, bias []float32, beta float32, relu bool, lo, hi int) {
	th, tw := (h+1)/2, (w+1)/2
	nt := b * th * tw
	if hi > lo && (len(m) < 15*nt*c+hi*c || len(y) < b*h*w*c || bias != nil && len(bias) < c || res != nil && len(res) < b*h*w*c) {
		panic("f32: WinogradOutput buffer too short")
	}
	if res != nil {
		beta = 1 // each tile of res is copied into y before the transform adds to it
	}
	out := winoOutKernel()
	var ws *workspace // its t holds a border tile's 2×2 outputs, (2, 2, C)
	defer func() {
		if ws != nil {
			workspaces.Put(ws)
		}
	}()
	for t := lo; t < hi; t++ {
		bi, r := t/(th*tw), t%(th*tw)
		oy, ox := 2*(r/tw), 2*(r%tw)
		src := m[t*c:]
		if oy+2 <= h && ox+2 <= w {
			at := ((bi*h+oy)*w + ox) * c
			if res != nil {
				copyTile(y[at:], w*c, res[at:], w*c, 2, 2*c)
			}
			out(c, src, nt*c, y[at:], w*c, c, bias, beta, relu)
			continue
		}
		if ws == nil {
			ws = workspaces.Get()
			ws.t = grow(ws.t, 4*c)
		}
		tile := ws.t
		rows, cols := min(2, h-oy), min(2, w-ox)
		from := y
		if res != nil {
			from = res
		}
		if beta != 0 {
			for py := range rows {
				copy(tile[2*py*c:(2*py+cols)*c], from[((bi*h+oy+py)*w+ox)*c:])
			}
		}
		out(c, src, nt*c, tile, 2*c, c, bias, beta, relu)
		for py := range rows {
			copy(y[((bi*h+oy+py)*w+ox)*c:], tile[2*py*c:(2*py+cols)*c])
		}
	}
}

// winoIn is the input transform of one tile: for c channels, with
// d[i][j] = src[i·rs + j·ps : …+c] the 4×4 patch,
//
//	t = Bᵀ·d:  t0 = d0 − d2, t1 = d1 + d2, t2 = d2 − d1, t3 = d1 − d3   (rows)
//	V = t·B:   V[i][0] = t[i][0] − t[i][2], V[i][1] = t[i][1] + t[i][2],
//	           V[i][2] = t[i][2] − t[i][1], V[i][3] = t[i][1] − t[i][3]
//
// written to dst[(4i+j)·ds + ch].
type winoIn func(c int, src []float32, rs, ps int, dst []float32, ds int)

// winoOut is the output transform of one tile: for c channels, with
// M[i][j] = src[(4i+j)·ms + ch],
//
//	s = Aᵀ·M:  s0 = M0 + M1 + M2, s1 = M1 − M2 − M3                     (rows)
//	Y = s·A:   Y[i][0] = s[i][0] + s[i][1] + s[i][2], Y[i][1] = s[i][1] − s[i][2] − s[i][3]
//
// and dst[i·rs + j·ps + ch] = f(Y[i][j] + beta·dst[…] + bias[ch]) as in
// WinogradOutput (the beta term added first, as the GEMM kernels do).
type winoOut func(c int, src []float32, ms int, dst []float32, rs, ps int, bias []float32, beta float32, relu bool)

// goWinoIn is the pure-Go winoIn.
func goWinoIn(c int, src []float32, rs, ps int, dst []float32, ds int) {
	for ch := 0; ch < c; ch++ {
		var d [4][4]float32
		for i := range 4 {
			for j := range 4 {
				d[i][j] = src[i*rs+j*ps+ch]
			}
		}
		var t [4][4]float32
		for j := range 4 {
			t[0][j] = d[0][j] - d[2][j]
			t[1][j] = d[1][j] + d[2][j]
			t[2][j] = d[2][j] - d[1][j]
			t[3][j] = d[1][j] - d[3][j]
		}
		for i := range 4 {
			dst[(4*i+0)*ds+ch] = t[i][0] - t[i][2]
			dst[(4*i+1)*ds+ch] = t[i][1] + t[i][2]
			dst[(4*i+2)*ds+ch] = t[i][2] - t[i][1]
			dst[(4*i+3)*ds+ch] = t[i][1] - t[i][3]
		}
	}
}

// goWinoOut is the pure-Go winoOut.
func goWinoOut(c int, src []float32, ms int, dst []float32, rs, ps int, bias []float32, beta float32, relu bool) {
	for ch := 0; ch < c; ch++ {
		var mm [4][4]float32
		for i := range 4 {
			for j := range 4 {
				mm[i][j] = src[(4*i+j)*ms+ch]
			}
		}
		var s [2][4]float32
		for j := range 4 {
			s[0][j] = mm[0][j] + mm[1][j] + mm[2][j]
			s[1][j] = mm[1][j] - mm[2][j] - mm[3][j]
		}
		for i := range 2 {
			y := [2]float32{s[i][0] + s[i][1] + s[i][2], s[i][1] - s[i][2] - s[i][3]}
			for j, v := range y {
				o := &dst[i*rs+j*ps+ch]
				if beta != 0 {
					v += beta * *o
				}
				*o = epilogue(v, bias, ch, relu)
			}
		}
	}
}

// GemmPackedBatch computes the batch of independent products
//
//	C_i = A_i · op(B_i)    (A_i (m, k) at a[i·strideA], row stride lda;
//	                         C_i (m, n) at c[i·strideC], row stride ldc)
//
// with the packed matrices b (all k×n), as the 16 products of a Winograd
// convolution: each product runs on one goroutine, and the goroutines take
// them in turn. C is not read; its matrices must not overlap A's.
func GemmPackedBatch(m int, a []float32, lda, strideA int, b []*PackedB, c []float32, ldc, strideC int) {
	if len(b) == 0 || m == 0 {
		return
	}
	k, n := b[0].k, b[0].n
	for _, p := range b {
		if p.k != k || p.n != n {
			panic("f32: GemmPackedBatch of matrices of different shapes")
		}
	}
	last := len(b) - 1
	if strideA < 0 || strideC < 0 || m < 0 {
		panic("f32: negative size or stride")
	}
	checkMatrix("A", a[min(last*strideA, len(a)):], m, k, lda)
	checkMatrix("C", c[min(last*strideC, len(c)):], m, n, ldc)
	workers := min(len(b), runtime.GOMAXPROCS(0))
	if 2*m*n*k*len(b) < parallelFlops {
		workers = 1
	}
	var next atomic.Int64
	run := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(b) {
				return
			}
			gemmPacked(1, m, a[i*strideA:], lda, b[i], 0, c[i*strideC:], ldc, nil, false)
		}
	}
	if workers == 1 {
		run()
		return
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(run)
	}
	run()
	wg.Wait()
}
