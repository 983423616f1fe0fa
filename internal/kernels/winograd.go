package kernels

import "github.com/radgen/radgen/internal/f32"

// Winograd's F(2×2, 3×3) for the 3×3, stride-1, padding-1 convolutions of
// images laid out channels first (B, C, H, W), as the graph's tensors are,
// on internal/f32's channels-last transforms and products (see
// internal/f32/winograd.go for the algorithm): the images are transposed
// to channels last, transformed into 16 matrices V_ξ (T, Cin) over the T
// tiles, multiplied by the transformed filters U_ξ (Cin, Cout), and the
// 16 products M_ξ (T, Cout) transformed back and transposed to channels
// first. float32 only. The weight's gradient by the same algorithm, which
// works channels first throughout, is in winograd_grad.go.

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
