package kernels

import "github.com/radgen/radgen/internal/f32"

// Winograd's F(2×2, 3×3) for the 3×3, stride-1, padding-1 convolutions of
// images laid out channels first (B, C, H, W), as the graph's tensors are,
// on internal/f32's channels-last transforms and products (see
// internal/f32/winograd.go for the algorithm): the images are transposed
// to channels last, transformed into 16 matrices V_ξ (T, Cin) over the T
// tiles, multiplied by the transformed filters U_ξ (Cin, Cout), and the
// 16 products M_ξ (T, Cout) transformed back and transposed to channels
// first. float32 only.

// WinogradFilterStride is the distance, in values, between the 16
// transformed filters of a convolution from cin to cout channels in the
// buffer of WinogradFilters: a little more than cin·cout, so that the 16
// matrices, written together, do not fall into the same cache sets as
// they would a power of two apart.
func WinogradFilterStride(cin, cout int) int { return cin*cout + 64 }

// WinogradFilters writes the transformed filters U_ξ = (G·g·Gᵀ)[i][j],
// ξ = 4i + j, of the output channels [lo, hi) of w (Cout, Cin, 3, 3) into
// u (16, Cin, Cout), u[ξ·P + c·Cout + o] with P = WinogradFilterStride, in
// float32: with G = [1 0 0; ½ ½ ½; ½ −½ ½; 0 0 1], each entry is one or ½
// times a sum of up to nine taps, within a few roundings of the exact
// value.
func WinogradFilters(u, w []float32, cout, cin int, lo, hi int) {
	ps := WinogradFilterStride(cin, cout)
	if len(w) < cout*cin*9 || len(u) < 15*ps+cin*cout {
		panic("kernels: WinogradFilters buffer too short")
	}
	// In blocks of 16×16 channel pairs, the output channels inside: the 16
	// matrices are written in runs of 16 values, not one value a row
	// apart, and the block's filters stay in cache.
	const blk = 16
	for o0 := lo; o0 < hi; o0 += blk {
		o1 := min(hi, o0+blk)
		for c0 := 0; c0 < cin; c0 += blk {
			winogradFilterBlock(u, w, ps, cout, cin, o0, o1, c0, min(cin, c0+blk))
		}
	}
}

// winogradFilterBlock is WinogradFilters for the output channels [o0, o1)
// and the input channels [c0, c1).
func winogradFilterBlock(u, w []float32, ps, cout, cin, o0, o1, c0, c1 int) {
	for ci := c0; ci < c1; ci++ {
		for o := o0; o < o1; o++ {
			f := (*[9]float32)(w[(o*cin+ci)*9:])
			// The rows of G·f (columns j = 0, 1, 2), then each row times
			// Gᵀ.
			r00, r10, r20, r30 := winoRow(f[0], f[3], f[6])
			r01, r11, r21, r31 := winoRow(f[1], f[4], f[7])
			r02, r12, r22, r32 := winoRow(f[2], f[5], f[8])
			at := ci*cout + o
			u[at], u[ps+at], u[2*ps+at], u[3*ps+at] = winoRow(r00, r01, r02)
			u[4*ps+at], u[5*ps+at], u[6*ps+at], u[7*ps+at] = winoRow(r10, r11, r12)
			u[8*ps+at], u[9*ps+at], u[10*ps+at], u[11*ps+at] = winoRow(r20, r21, r22)
			u[12*ps+at], u[13*ps+at], u[14*ps+at], u[15*ps+at] = winoRow(r30, r31, r32)
		}
	}
}

// winoRow returns G·(a, b, c): a, ½(a + b + c), ½(a − b + c), c.
func winoRow(a, b, c float32) (float32, float32, float32, float32) {
	s := a + c
	return a, 0.5 * (s + b), 0.5 * (s - b), c
}

// WinogradTiles returns the number T of 2×2 output tiles of b images h×w.
func WinogradTiles(b, h, w int) int { return f32.WinogradTiles(b, h, w) }

// WinogradInput writes the transformed tiles [lo, hi) of x (B, h, w, C),
// channels last, into v (16, T, C); see f32.WinogradInput.
func WinogradInput(v, x []float32, b, h, w, c, lo, hi int) {
	f32.WinogradInput(v, x, b, h, w, c, lo, hi)
}

// WinogradProducts computes the 16 products M_ξ = V_ξ·U_ξ of the
// transformed tiles v (16, T, Cin) and the transformed filters u of
// WinogradFilters into m (16, T, Cout). With adjoint set
// it computes instead those of the adjoint convolution, the one whose
// weight is w̃[c][o][ky][kx] = w[o][c][2−ky][2−kx] (from Cout channels to
// Cin), from v (16, T, Cout) into m (16, T, Cin): the gradient of a
// convolution's input is the adjoint convolution of its output's
// gradient. Flipping g reverses the columns of G, which swaps rows 0 and 3
// of G, so the adjoint's filter (i, j) is filter (p(i), p(j)) of u
// transposed, p = (3, 1, 2, 0).
func WinogradProducts(m, v, u []float32, t, cin, cout int, adjoint bool) {
	ps := WinogradFilterStride(cin, cout)
	if !adjoint {
		f32.GemmStrided(false, false, 16, t, cout, cin, 1, v, cin, t*cin, u, cout, ps, 0, m, cout, t*cout)
		return
	}
	p := [4]int{3, 1, 2, 0}
	for xi := range 16 {
		src := 4*p[xi/4] + p[xi%4]
		f32.Gemm(false, true, t, cin, cout, 1, v[xi*t*cout:], cout, u[src*ps:], cout, 0, m[xi*t*cin:], cin)
	}
}

// WinogradOutput writes the output tiles [lo, hi) of y (B, h, w, C),
// channels last, from the products m (16, T, C): y = Aᵀ·M·A (+ bias); see
// f32.WinogradOutput.
func WinogradOutput(y, m []float32, b, h, w, c int, bias []float32, lo, hi int) {
	f32.WinogradOutput(y, m, b, h, w, c, bias, 0, false, lo, hi)
}

// The weight's gradient by the same transforms. For one tile, the 2×2
// output Y = Aᵀ·[(G·g·Gᵀ) ⊙ (Bᵀ·d·B)]·A is bilinear in the filter g and the
// input patch d, so for the tile's output gradient dY
//
//	Σ_ab dY[a][b]·Y[a][b] = Σ_ij (A·dY·Aᵀ)[i][j]·(G·g·Gᵀ)[i][j]·(Bᵀ·d·B)[i][j]
//	                      = Σ_kl g[k][l]·(Gᵀ·[(A·dY·Aᵀ) ⊙ (Bᵀ·d·B)]·G)[k][l],
//
// and the left side is Σ_kl g[k][l]·Σ_ab dY[a][b]·d[a+k][b+l] (Y is the
// correlation of d with g). Both hold for every g, so the tile's share of
// the weight's gradient, the correlation of d with dY, is
//
//	dW = Gᵀ·[(A·dY·Aᵀ) ⊙ (Bᵀ·d·B)]·G,   A = [1 0; 1 1; 1 −1; 0 −1] (4×2),
//
// exactly in exact arithmetic: F(3×3, 2×2), Winograd's transform of the
// filter-gradient correlation, with the roles of F(2×2, 3×3)'s matrices
// exchanged. Summed over the tiles t and the channels, with Ŷ_ξ (T, Cout)
// the transformed output-gradient tiles and V_ξ (T, Cin) the transformed
// input tiles (WinogradInput, as forward), the sums of the 16 positions are
// 16 products
//
//	M_ξ (Cout, Cin) = Ŷ_ξᵀ·V_ξ,   dW[o][c] = Gᵀ·M[o][c]·G
//
// with 16 multiplications per tile and channel pair where the product with
// the column matrix takes 36 (2.25 times fewer). Output positions past an
// odd edge have no gradient: their dY is zero. The transforms are additions
// and halvings (exact), so the error is that of the sums over tiles, of
// terms a few times larger than the direct ones.

// WinogradGradTiles writes the transformed output-gradient tiles
// Ŷ_ξ = (A·dY·Aᵀ)[i][j], ξ = 4i + j, of the tiles [lo, hi) of dy (B, h, w,
// C), channels last, into v (16, T, C): v[ξ·T·C + t·C + c], the layout of
// WinogradInput. With dY = [p q; r s] (zero past the edges),
//
//	A·dY = [p q; p+r q+s; p−r q−s; −r −s],   and each row (u, v) times Aᵀ
//	is (u, u+v, u−v, −v).
func WinogradGradTiles(v, dy []float32, b, h, w, c, lo, hi int) {
	th, tw := (h+1)/2, (w+1)/2
	nt := b * th * tw
	if hi > lo && (len(v) < 15*nt*c+hi*c || len(dy) < b*h*w*c) {
		panic("kernels: WinogradGradTiles buffer too short")
	}
	ds := nt * c
	for t := lo; t < hi; t++ {
		bi, r := t/(th*tw), t%(th*tw)
		oy, ox := 2*(r/tw), 2*(r%tw)
		at := ((bi*h+oy)*w + ox) * c
		p := dy[at : at+c]
		var q, rr, s []float32 // nil past the edges
		if ox+1 < w {
			q = dy[at+c : at+2*c]
		}
		if oy+1 < h {
			rr = dy[at+w*c : at+w*c+c]
			if q != nil {
				s = dy[at+w*c+c : at+w*c+2*c]
			}
		}
		gradTile(v[t*c:], ds, p, q, rr, s)
	}
}

// gradTile writes the 16 transformed values of one tile [p q; r s] (each
// len(p) channels; q, r or s nil for zero past an edge) to dst[ξ·ds + ch].
// It writes one row of four matrices at a time: the 16 matrices are
// usually a multiple of 4 KiB apart, in the same cache sets, and 16
// interleaved streams would evict each other's lines.
func gradTile(dst []float32, ds int, p, q, r, s []float32) {
	c := len(p)
	for i := range 4 {
		d0, d1, d2, d3 := dst[4*i*ds:][:c], dst[(4*i+1)*ds:][:c], dst[(4*i+2)*ds:][:c], dst[(4*i+3)*ds:][:c]
		// Row i of A·dY is (p, q), (p+r, q+s), (p−r, q−s) or (−r, −s).
		switch {
		case q == nil || r == nil:
			gradRowEdge(d0, d1, d2, d3, i, p, q, r, s)
		case i == 0:
			for ch, u := range p {
				v := q[ch]
				d0[ch], d1[ch], d2[ch], d3[ch] = u, u+v, u-v, -v
			}
		case i == 1:
			q, r, s := q[:c], r[:c], s[:c]
			for ch := range c {
				u, v := p[ch]+r[ch], q[ch]+s[ch]
				d0[ch], d1[ch], d2[ch], d3[ch] = u, u+v, u-v, -v
			}
		case i == 2:
			q, r, s := q[:c], r[:c], s[:c]
			for ch := range c {
				u, v := p[ch]-r[ch], q[ch]-s[ch]
				d0[ch], d1[ch], d2[ch], d3[ch] = u, u+v, u-v, -v
			}
		default:
			s := s[:c]
			for ch, rv := range r[:c] {
				u, v := -rv, -s[ch]
				d0[ch], d1[ch], d2[ch], d3[ch] = u, u+v, u-v, -v
			}
		}
	}
}

// gradRowEdge is gradTile's row i for a tile cut off by an edge.
func gradRowEdge(d0, d1, d2, d3 []float32, i int, p, q, r, s []float32) {
	for ch, pv := range p {
		var qv, rv, sv float32
		if q != nil {
			qv = q[ch]
		}
		if r != nil {
			rv = r[ch]
		}
		if s != nil {
			sv = s[ch]
		}
		u, v := pv, qv
		switch i {
		case 1:
			u, v = pv+rv, qv+sv
		case 2:
			u, v = pv-rv, qv-sv
		case 3:
			u, v = -rv, -sv
		}
		d0[ch], d1[ch], d2[ch], d3[ch] = u, u+v, u-v, -v
	}
}

// WinogradGradProducts computes the 16 sums M_ξ = Ŷ_ξᵀ·V_ξ over the t
// tiles of the transformed output gradient vy (16, T, Cout) and the
// transformed input vx (16, T, Cin), into m (16, Cout, Cin) with the stride
// WinogradFilterStride(cin, cout) between the matrices, adding to m's
// values when add is set. Each sum runs over the tiles in order, whatever
// the number of goroutines.
func WinogradGradProducts(m, vy, vx []float32, t, cin, cout int, add bool) {
	var beta float32
	if add {
		beta = 1
	}
	f32.GemmStrided(true, false, 16, cout, cin, t, 1, vy, cout, t*cout, vx, cin, t*cin, beta, m, cin, WinogradFilterStride(cin, cout))
}

// WinogradWeightGrad adds to dw (Cout, Cin, 3, 3) the weight's gradient
// dW[o][c] = Gᵀ·M[o][c]·G of the output channels [lo, hi) from the sums m
// of WinogradGradProducts, M[o][c][i][j] = m[ξ·P + o·Cin + c], ξ = 4i + j,
// P = WinogradFilterStride(cin, cout). Gᵀ takes (a, b, c, d) to
// (a + ½(b + c), ½(b − c), ½(b + c) + d).
func WinogradWeightGrad(dw, m []float32, cout, cin, lo, hi int) {
	ps := WinogradFilterStride(cin, cout)
	if len(dw) < cout*cin*9 || len(m) < 15*ps+cin*cout {
		panic("kernels: WinogradWeightGrad buffer too short")
	}
	for o := lo; o < hi; o++ {
		var rows [16][]float32 // M_ξ[o][·]
		for xi := range rows {
			rows[xi] = m[xi*ps+o*cin:][:cin]
		}
		dwo := dw[o*cin*9:][:cin*9]
		for ci := range cin {
			// Gᵀ·M: the columns j, then each row of the result times G.
			r00, r10, r20 := winoCol(rows[0][ci], rows[4][ci], rows[8][ci], rows[12][ci])
			r01, r11, r21 := winoCol(rows[1][ci], rows[5][ci], rows[9][ci], rows[13][ci])
			r02, r12, r22 := winoCol(rows[2][ci], rows[6][ci], rows[10][ci], rows[14][ci])
			r03, r13, r23 := winoCol(rows[3][ci], rows[7][ci], rows[11][ci], rows[15][ci])
			f := (*[9]float32)(dwo[ci*9:])
			a, b, c := winoCol(r00, r01, r02, r03)
			f[0], f[1], f[2] = f[0]+a, f[1]+b, f[2]+c
			a, b, c = winoCol(r10, r11, r12, r13)
			f[3], f[4], f[5] = f[3]+a, f[4]+b, f[5]+c
			a, b, c = winoCol(r20, r21, r22, r23)
			f[6], f[7], f[8] = f[6]+a, f[7]+b, f[8]+c
		}
	}
}

// winoCol returns Gᵀ·(a, b, c, d): a + ½(b + c), ½(b − c), ½(b + c) + d.
func winoCol(a, b, c, d float32) (float32, float32, float32) {
	s := 0.5 * (b + c)
	return a + s, 0.5 * (b - c), s + d
}

// ToChannelsLast writes the images [lo, hi) of x (B, C, plane) into dst
// (B, plane, C).
func ToChannelsLast(dst, x []float32, c, plane, lo, hi int) {
	for b := lo; b < hi; b++ {
		transpose(dst[b*c*plane:(b+1)*c*plane], x[b*c*plane:(b+1)*c*plane], c, plane, false)
	}
}

// FromChannelsLast writes (add false) or adds (add true) the images
// [lo, hi) of x (B, plane, C) into dst (B, C, plane).
func FromChannelsLast(dst, x []float32, c, plane int, add bool, lo, hi int) {
	for b := lo; b < hi; b++ {
		transpose(dst[b*c*plane:(b+1)*c*plane], x[b*c*plane:(b+1)*c*plane], plane, c, add)
	}
}

// transpose writes (or adds) the transpose of the rows×cols matrix src into
// dst (cols×rows), in blocks that stay in cache.
func transpose(dst, src []float32, rows, cols int, add bool) {
	const blk = 32
	for i0 := 0; i0 < rows; i0 += blk {
		i1 := min(rows, i0+blk)
		for j0 := 0; j0 < cols; j0 += blk {
			j1 := min(cols, j0+blk)
			for i := i0; i < i1; i++ {
				s := src[i*cols+j0 : i*cols+j1]
				if add {
					for j, v := range s {
						dst[(j0+j)*rows+i] += v
					}
				} else {
					for j, v := range s {
						dst[(j0+j)*rows+i] = v
					}
				}
			}
		}
	}
}
