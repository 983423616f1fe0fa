package radgen

import (
	"github.com/radgen/radgen/internal/f32"
	"github.com/radgen/radgen/internal/kernels"
)

// The CPU's float32 convolution on channels-last activations, which the
// engine runs for the convolutions it defers (ops_conv_infer.go). An
// activation is (B, H, W, C): row b·H·W + y·W + x of a (B·H·W, C) matrix.
// A 1×1, stride-1 convolution is then the product of that matrix with the
// weight (Cin, Cout), with no copy at all, and any other the product of
// its window matrix (kernels.Im2colNHWC, (B·Ho·Wo, KH·KW·Cin)) with the
// weight laid out tap-major, (KH·KW·Cin, Cout); the product is channels
// last again, so layers chain without transposes, and the images of a
// batch share every product (two IU X-Ray views of a 7×7 grid are 98
// rows). The weights are packed once, in the layout the GEMM micro-kernels
// read (f32.PackB); each product applies the bias and the ReLU to its
// tiles in registers (f32.GemmPacked's epilogue), so that no pass over
// memory remains for them, and starts from the residual, copied into each
// block of the result just before the kernels add onto it
// (f32.GemmPackedAdd). A 3×3, stride-1 convolution runs as Winograd's
// F(2×2, 3×3) instead (f32.WinogradWeights, 2.25 times fewer
// multiplications). Temporaries (window matrices, Winograd's transforms)
// are the package's scratch buffers, kept by size class.

// packedConv is a convolution's weight packed for the CPU's float32
// products, with its bias.
type packedConv struct {
	w    *f32.PackedB      // (KH·KW·Cin, Cout), rows tap-major: (ky·KW + kx)·Cin + c
	wino *[16]*f32.PackedB // Winograd's U_ξ (Cin, Cout), instead of w
	bias []float32         // (Cout), nil for none
}

// winogradPacked reports whether the CPU's float32 engine runs a
// convolution of window g on channels-last values by Winograd's
// F(2×2, 3×3): a 3×3, stride-1, padding-1, undilated window.
func winogradPacked(g kernels.ConvGeom) bool {
	return g.KH == 3 && g.KW == 3 && g.StrideH == 1 && g.StrideW == 1 && g.PadH == 1 && g.PadW == 1 && g.DilH == 1 && g.DilW == 1
}

// packConv lays w (Cout, Cin, KH, KW) out for the CPU's float32 products
// of window g; bias (Cout, nil for none) is kept, not copied.
func packConv(w, bias []float32, cout, cin int, g kernels.ConvGeom) *packedConv {
	pc := &packedConv{bias: bias}
	if winogradPacked(g) {
		w64 := make([]float64, len(w)) // the transform runs in float64
		for i, v := range w {
			w64[i] = float64(v)
		}
		u := f32.WinogradWeights(w64, cout, cin)
		pc.wino = &u
		return pc
	}
	taps := g.KH * g.KW
	k := taps * cin
	wt := make([]float32, k*cout) // (KH·KW·Cin, Cout)
	for o := range cout {
		for ci := range cin {
			for t := range taps {
				wt[(t*cin+ci)*cout+o] = w[(o*cin+ci)*taps+t]
			}
		}
	}
	pc.w = f32.PackB(false, k, cout, wt, cout)
	return pc
}

// apply writes y = f(conv(x) + bias + res) for x (B, H, W, Cin), channels
// last, into y (B, Ho, Wo, Cout), f the ReLU or the identity, res (y's
// shape) nil for none.
func (pc *packedConv) apply(y, x, res []float32, s convShape, relu bool) {
	g := s.geo
	bsz, h, w, cin, cout := s.batch, g.H, g.W, s.cin, s.cout
	if pc.wino != nil {
		nt := f32.WinogradTiles(bsz, h, w)
		v, m := scratch[float32](16*nt*cin), scratch[float32](16*nt*cout) // V (16, T, Cin), M (16, T, Cout)
		defer release(v)
		defer release(m)
		channelChunks(nt, 16*cin, func(lo, hi int) { f32.WinogradInput(v, x, bsz, h, w, cin, lo, hi) })
		f32.GemmPackedBatch(nt, v, cin, nt*cin, pc.wino[:], m, cout, nt*cout)
		channelChunks(nt, 16*cout, func(lo, hi int) {
			if res != nil {
				f32.WinogradOutputAdd(y, res, m, bsz, h, w, cout, pc.bias, relu, lo, hi)
			} else {
				f32.WinogradOutput(y, m, bsz, h, w, cout, pc.bias, 0, relu, lo, hi)
			}
		})
		return
	}
	ho, wo := g.OutH(), g.OutW()
	rows := bsz * ho * wo
	a, lda := x, cin
	if !g.Pointwise() {
		k := g.KH * g.KW * cin
		col := scratch[float32](rows * k)
		defer release(col)
		channelChunks(bsz*ho, wo*k, func(lo, hi int) { kernels.Im2colNHWC(col, x, cin, g, lo, hi) })
		a, lda = col, k
	}
	if res != nil {
		f32.GemmPackedAdd(rows, a, lda, pc.w, res, cout, y[:rows*cout], cout, pc.bias, relu)
	} else {
		f32.GemmPacked(rows, a, lda, pc.w, 0, y[:rows*cout], cout, pc.bias, relu)
	}
}
