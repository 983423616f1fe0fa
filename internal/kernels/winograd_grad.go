package kernels

import "github.com/radgen/radgen/internal/f32"

// The weight's gradient of a 3×3, stride-1, padding-1 convolution by the
// transforms of Winograd's F(2×2, 3×3) (winograd.go). For one tile, the
// 2×2 output Y = Aᵀ·[(G·g·Gᵀ) ⊙ (Bᵀ·d·B)]·A is bilinear in the filter g
// and the 4×4 input patch d, so for the tile's output gradient dY
//
//	Σ_ab dY[a][b]·Y[a][b] = Σ_ij (A·dY·Aᵀ)[i][j]·(G·g·Gᵀ)[i][j]·(Bᵀ·d·B)[i][j]
//	                      = Σ_kl g[k][l]·(Gᵀ·[(A·dY·Aᵀ) ⊙ (Bᵀ·d·B)]·G)[k][l],
//
// while, Y being the correlation of d with g, the left side is also
// Σ_kl g[k][l]·Σ_ab dY[a][b]·d[a+k][b+l]. Both hold for every g, so the
// tile's share of the weight's gradient, the correlation of d with dY, is
//
//	dW = Gᵀ·[(A·dY·Aᵀ) ⊙ (Bᵀ·d·B)]·G,   A = [1 0; 1 1; 1 −1; 0 −1] (4×2),
//
// exactly in exact arithmetic: Winograd's F(3×3, 2×2) for the correlation
// of the input with the output's gradient, F(2×2, 3×3)'s matrices in
// exchanged roles. Summed over the tiles t (of every image) and the
// channels, with Ŷ_ξ (Cout, T) the transformed output-gradient tiles and
// V_ξ (Cin, T) the transformed input tiles, ξ = 4i + j, the sums are 16
// matrix products
//
//	M_ξ (Cout, Cin) = Ŷ_ξ·V_ξᵀ,   dW[o][c] = Gᵀ·M[o][c]·G,
//
// 16 multiplications per tile and channel pair where the product with the
// column matrix takes 36 (2.25 times fewer). Output positions past an odd
// edge have no gradient (their dY is zero) and input positions past the
// edges are the padding's zeros. The transforms are additions, negations
// and exact halvings, so the error is that of the sums over the tiles, of
// terms a few times the size of the direct ones.
//
// Ŷ and V are laid out channels first (a row of T tiles per channel), as
// the graph's tensors are: they are transformed plane by plane without a
// transpose, and the products read both in rows.

// WinogradGradStride is the distance, in values, between the 16 matrices
// of rows×t transformed tiles in the layout of WinogradInputPlane and
// WinogradGradPlane: rows·t rounded up to 1024, plus 16, so that the 16
// matrices, which the transforms write together, start one cache line
// apart in the cache's sets rather than all in the same ones.
func WinogradGradStride(rows, t int) int { return (rows*t+1023)&^1023 + 16 }

// WinogradInputPlane writes the transformed tiles V_ξ = (Bᵀ·d·B)[i][j] of
// the plane x (h×w) to v[ξ·ds + t], t = ty·⌈w/2⌉ + tx the tile covering
// output rows 2ty, 2ty+1 and columns 2tx, 2tx+1 (reading input rows
// 2ty−1 … 2ty+2 and columns 2tx−1 … 2tx+2, zero outside). The rows of
// Bᵀ·d are d0 − d2, d1 + d2, d2 − d1 and d1 − d3, and each row (a, b, c, d)
// times B is (a − c, b + c, c − b, b − d); a tile's last two columns are
// the next one's first two. zero holds at least w values, which it clears.
func WinogradInputPlane(v []float32, ds int, x []float32, h, w int, zero []float32) {
	th, tw := (h+1)/2, (w+1)/2
	if len(x) < h*w || len(zero) < w || th*tw > 0 && len(v) < 15*ds+th*tw {
		panic("kernels: WinogradInputPlane buffer too short")
	}
	zero = zero[:w]
	clear(zero)
	row := func(y int) []float32 {
		if y < 0 || y >= h {
			return zero
		}
		return x[y*w : (y+1)*w]
	}
	full := (w - 1) / 2 // the tiles whose four columns are all inside
	var st [16][stage]float32
	j, at := 0, 0 // the staged tiles, and where they go
	for ty := range th {
		d0, d1, d2, d3 := row(2*ty-1), row(2*ty), row(2*ty+1), row(2*ty+2)
		// Columns 2tx−1 (a) and 2tx (b) of each row of Bᵀ·d; column −1 is
		// the padding.
		var a0, a1, a2, a3 float32
		b0, b1, b2, b3 := d0[0]-d2[0], d1[0]+d2[0], d2[0]-d1[0], d1[0]-d3[0]
		for tx := range tw {
			var c0, c1, c2, c3, e0, e1, e2, e3 float32 // columns 2tx+1, 2tx+2
			if k := 2*tx + 1; tx < full {
				c0, c1, c2, c3 = d0[k]-d2[k], d1[k]+d2[k], d2[k]-d1[k], d1[k]-d3[k]
				k++
				e0, e1, e2, e3 = d0[k]-d2[k], d1[k]+d2[k], d2[k]-d1[k], d1[k]-d3[k]
			} else if k < w {
				c0, c1, c2, c3 = d0[k]-d2[k], d1[k]+d2[k], d2[k]-d1[k], d1[k]-d3[k]
			}
			j &= stage - 1
			st[0][j], st[1][j], st[2][j], st[3][j] = a0-c0, b0+c0, c0-b0, b0-e0
			st[4][j], st[5][j], st[6][j], st[7][j] = a1-c1, b1+c1, c1-b1, b1-e1
			st[8][j], st[9][j], st[10][j], st[11][j] = a2-c2, b2+c2, c2-b2, b2-e2
			st[12][j], st[13][j], st[14][j], st[15][j] = a3-c3, b3+c3, c3-b3, b3-e3
			a0, a1, a2, a3, b0, b1, b2, b3 = c0, c1, c2, c3, e0, e1, e2, e3
			if j++; j == stage {
				unstage(v, ds, at, &st, j)
				j, at = 0, at+stage
			}
		}
	}
	unstage(v, ds, at, &st, j)
}

// stage is the number of tiles (of a plane, across its rows) that the
// plane transforms compute into a buffer on the stack before copying them
// out: stores at fixed offsets from one base, then 16 runs copied, cost
// less than stores through 16 slices.
const stage = 64

// unstage copies the first n values of each row ξ of st to v[ξ·ds + at].
func unstage(v []float32, ds, at int, st *[16][stage]float32, n int) {
	for xi := range st {
		copy(v[xi*ds+at:][:n], st[xi][:n])
	}
}

// WinogradGradPlane writes the transformed output-gradient tiles
// Ŷ_ξ = (A·dY·Aᵀ)[i][j] of the plane dy (h×w) to v[ξ·ds + t], the tiles
// numbered as WinogradInputPlane's, dY zero past an odd edge. With the
// tile [p q; r s], the rows of A·dY are (p, q), (p + r, q + s),
// (p − r, q − s) and (−r, −s), and each row (u, v) times Aᵀ is
// (u, u + v, u − v, −v). zero holds at least w values, which it clears.
func WinogradGradPlane(v []float32, ds int, dy []float32, h, w int, zero []float32) {
	th, tw := (h+1)/2, (w+1)/2
	if len(dy) < h*w || len(zero) < w || th*tw > 0 && len(v) < 15*ds+th*tw {
		panic("kernels: WinogradGradPlane buffer too short")
	}
	zero = zero[:w]
	clear(zero)
	full := w / 2 // the tiles with both columns inside
	var st [16][stage]float32
	j, at := 0, 0 // the staged tiles, and where they go
	for ty := range th {
		r0, r1 := dy[2*ty*w:(2*ty+1)*w], zero
		if 2*ty+1 < h {
			r1 = dy[(2*ty+1)*w : (2*ty+2)*w]
		}
		for tx := range tw {
			k := 2 * tx
			p, r := r0[k], r1[k]
			var q, s float32
			if tx < full {
				q, s = r0[k+1], r1[k+1]
			}
			u1, v1, u2, v2 := p+r, q+s, p-r, q-s
			j &= stage - 1
			st[0][j], st[1][j], st[2][j], st[3][j] = p, p+q, p-q, -q
			st[4][j], st[5][j], st[6][j], st[7][j] = u1, u1+v1, u1-v1, -v1
			st[8][j], st[9][j], st[10][j], st[11][j] = u2, u2+v2, u2-v2, -v2
			st[12][j], st[13][j], st[14][j], st[15][j] = -r, -r-s, s-r, s
			if j++; j == stage {
				unstage(v, ds, at, &st, j)
				j, at = 0, at+stage
			}
		}
	}
	unstage(v, ds, at, &st, j)
}

// WinogradGradProducts computes the 16 sums M_ξ = Ŷ_ξ·V_ξᵀ over the t
// tiles of the transformed output gradient vy (16, Cout, T) and the
// transformed input vx (16, Cin, T), whose matrices lie
// WinogradGradStride(cout, t) and WinogradGradStride(cin, t) apart, into
// m (16, Cout, Cin), with the stride WinogradFilterStride(cin, cout)
// between the matrices, adding to m's values when add is set. Each sum
// runs over the tiles in the same order whatever the number of goroutines.
func WinogradGradProducts(m, vy, vx []float32, t, cin, cout int, add bool) {
	var beta float32
	if add {
		beta = 1
	}
	f32.GemmStrided(false, true, 16, cout, cin, t, 1, vy, t, WinogradGradStride(cout, t), vx, t, WinogradGradStride(cin, t),
		beta, m, cin, WinogradFilterStride(cin, cout))
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
	var st [16][stage]float32
	for o := lo; o < hi; o++ {
		dwo := dw[o*cin*9:][:cin*9]
		for c0 := 0; c0 < cin; c0 += stage {
			n := min(stage, cin-c0)
			for xi := range st { // M_ξ[o][c0 …]
				copy(st[xi][:n], m[xi*ps+o*cin+c0:][:n])
			}
			for j := range n {
				f := (*[9]float32)(dwo[(c0+j)*9:])
				j &= stage - 1
				// Gᵀ·M: the columns, then each row of the result times G.
				r00, r10, r20 := winoCol(st[0][j], st[4][j], st[8][j], st[12][j])
				r01, r11, r21 := winoCol(st[1][j], st[5][j], st[9][j], st[13][j])
				r02, r12, r22 := winoCol(st[2][j], st[6][j], st[10][j], st[14][j])
				r03, r13, r23 := winoCol(st[3][j], st[7][j], st[11][j], st[15][j])
				a, b, c := winoCol(r00, r01, r02, r03)
				f[0], f[1], f[2] = f[0]+a, f[1]+b, f[2]+c
				a, b, c = winoCol(r10, r11, r12, r13)
				f[3], f[4], f[5] = f[3]+a, f[4]+b, f[5]+c
				a, b, c = winoCol(r20, r21, r22, r23)
				f[6], f[7], f[8] = f[6]+a, f[7]+b, f[8]+c
			}
		}
	}
}

// winoCol returns Gᵀ·(a, b, c, d): a + ½(b + c), ½(b − c), ½(b + c) + d.
func winoCol(a, b, c, d float32) (float32, float32, float32) {
	s := 0.5 * (b + c)
	return a + s, 0.5 * (b - c), s + d
}
