package radgen

import (
	"fmt"
	"slices"

	"github.com/radgen/radgen/internal/accel"
	"github.com/radgen/radgen/internal/f32"
	"github.com/radgen/radgen/internal/kernels"
)

// Inference on channels-last activations: a convolution prepared once
// (PreparedConv2d) and a max pool (MaxPool2dNHWC), optional fused ops whose
// docs give their plain equivalents. An activation is (B, H, W, C): row
// b·H·W + y·W + x of a (B·H·W, C) matrix. On the CPU in float32 a 1×1,
// stride-1 convolution is then the product of that matrix with the weight
// (Cin, Cout), with no copy at all, and any other the product of its window
// matrix (kernels.Im2colNHWC, (B·Ho·Wo, KH·KW·Cin)) with the weight laid out
// tap-major, (KH·KW·Cin, Cout); the product is channels last again, so
// layers chain without transposes, and the images of a batch share every
// product (two IU X-Ray views of a 7×7 grid are 98 rows). The weights are
// packed once, in the layout the GEMM micro-kernels read (f32.PackB); each
// product applies the bias and the ReLU to its tiles in registers
// (f32.GemmPacked's epilogue), so that no pass over memory remains for
// them, and starts from the shortcut, copied into each block of the result
// just before the kernels add onto it (f32.GemmPackedAdd). A 3×3,
// stride-1 convolution runs as Winograd's F(2×2, 3×3) instead
// (f32.WinogradWeights, 2.25 times fewer multiplications). Temporaries
// (window matrices, Winograd's transforms) are the package's scratch
// buffers, kept by size class. Every other engine runs the plain equivalent's primitives.

// PreparedConv2d is a convolution prepared once for inference on
// channels-last activations: its weight and bias read when it is made
// (PrepareConv2d), and on the CPU in float32 laid out for the engine's
// fused products. It is read-only and safe for concurrent use.
type PreparedConv2d struct {
	cout, cin, kh, kw int
	p                 Conv2dParams
	device            Device
	is64              bool

	// The CPU's float32 engine: the weight packed for the products.
	packed *packedConv
	// Every other engine: copies of the weight and bias (nil for none)
	// for the plain equivalent's primitives.
	weight, bias *Tensor
}

// packedConv is a convolution packed for the CPU's float32 products.
type packedConv struct {
	w    *f32.PackedB      // (KH·KW·Cin, Cout), rows tap-major: (ky·KW + kx)·Cin + c
	wino *[16]*f32.PackedB // Winograd's U_ξ (Cin, Cout), instead of w
	bias []float32         // (Cout), nil for none
}

// PrepareConv2d returns the convolution of Conv2d by weight
// (Cout, Cin, KH, KW) plus bias (Cout) (nil for none) with geometry p,
// prepared for channels-last inputs of weight's element type on weight's
// device (see PreparedConv2d.Forward). It reads weight and bias now: later
// changes to them are not seen. It panics, with a message prefixed
// "radgen: ", on bad shapes or parameters, or operands on different
// devices.
func PrepareConv2d(weight, bias *Tensor, p Conv2dParams) *PreparedConv2d {
	pr := primsOf("PrepareConv2d", weight, bias)
	if weight.Rank() != 4 {
		panic(fmt.Sprintf("radgen: PrepareConv2d weight %v, want (Cout, Cin, KH, KW)", weight.shape))
	}
	if bias != nil && (bias.Rank() != 1 || bias.Dim(0) != weight.Dim(0)) {
		panic(fmt.Sprintf("radgen: PrepareConv2d bias %v for weight %v", bias.shape, weight.shape))
	}
	c := &PreparedConv2d{cout: weight.Dim(0), cin: weight.Dim(1), kh: weight.Dim(2), kw: weight.Dim(3),
		p: p, device: weight.device, is64: weight.Is64()}
	p.geom(0, 0, c.kh, c.kw) // checks p
	if _, ok := pr.(cpuPrims[float32]); ok {
		c.packed = c.pack(weight.Data(), bias)
		return c
	}
	c.weight = weight.Clone()
	if bias != nil {
		c.bias = bias.Clone()
	}
	return c
}

// winograd reports whether the CPU's float32 engine runs c by Winograd's
// F(2×2, 3×3): a 3×3, stride-1, padding-1, undilated window.
func (c *PreparedConv2d) winograd() bool {
	g := c.p.geom(0, 0, c.kh, c.kw)
	return g.KH == 3 && g.KW == 3 && g.StrideH == 1 && g.StrideW == 1 && g.PadH == 1 && g.PadW == 1 && g.DilH == 1 && g.DilW == 1
}

// pack lays w (Cout, Cin, KH, KW) out for the CPU's float32 products.
func (c *PreparedConv2d) pack(w []float32, bias *Tensor) *packedConv {
	pc := &packedConv{}
	if bias != nil {
		pc.bias = slices.Clone(bias.Data())
	}
	if c.winograd() {
		w64 := make([]float64, len(w)) // the transform runs in float64
		for i, v := range w {
			w64[i] = float64(v)
		}
		u := f32.WinogradWeights(w64, c.cout, c.cin)
		pc.wino = &u
		return pc
	}
	taps := c.kh * c.kw
	k := taps * c.cin
	wt := make([]float32, k*c.cout) // (KH·KW·Cin, Cout)
	for o := range c.cout {
		for ci := range c.cin {
			for t := range taps {
				wt[(t*c.cin+ci)*c.cout+o] = w[(o*c.cin+ci)*taps+t]
			}
		}
	}
	pc.w = f32.PackB(false, k, c.cout, wt, c.cout)
	return pc
}

// Forward returns the convolution of x (B, H, W, Cin), channels last, plus
// the bias, plus shortcut (B, Ho, Wo, Cout) (nil for none), through the ReLU
// if relu: (B, Ho, Wo, Cout), channels last. Its plain equivalent, with
// weight, bias and p those c was prepared from, is
//
//	y := g.Permute(g.Conv2d(g.Permute(x, 0, 3, 1, 2), weight, bias, p), 0, 2, 3, 1)
//	if shortcut != nil {
//		y = g.Add(y, shortcut)
//	}
//	if relu {
//		y = g.ReLU(y)
//	}
//
// with the same values up to rounding: on the CPU in float32 it is one
// fused product (see the file comment), with 3×3, stride-1 windows by
// Winograd's F(2×2, 3×3), whose error stays within a few times that of the
// direct product; every other engine runs the plain equivalent's
// primitives. The result comes from g's arena where it has one (see
// Graph.SetArena).
//
// It is for inference and records no backward pass: on a graph that
// records gradients of x or shortcut it panics (use the plain equivalent
// there), as it does, with a message prefixed "radgen: ", on bad shapes or
// operands on another device or of another element type than c's.
func (c *PreparedConv2d) Forward(g *Graph, x, shortcut *Tensor, relu bool) *Tensor {
	const op = "PreparedConv2d.Forward"
	pr := primsOf(op, x, shortcut)
	if x.device != c.device || x.Is64() != c.is64 {
		panic(fmt.Sprintf("radgen: %s of %v by a convolution prepared for %s on %v", op, x, c.dtypeName(), c.device))
	}
	if x.Rank() != 4 || x.Dim(3) != c.cin {
		panic(fmt.Sprintf("radgen: %s of %v for %d input channels, want (B, H, W, %d)", op, x.shape, c.cin, c.cin))
	}
	if g.needs(x, shortcut) {
		panic("radgen: " + op + " records no backward pass: use its plain equivalent on a graph that records gradients")
	}
	s := convShape{batch: x.Dim(0), cin: c.cin, cout: c.cout}
	s.geo = c.p.geom(x.Dim(1), x.Dim(2), c.kh, c.kw)
	ho, wo := s.geo.OutH(), s.geo.OutW()
	if ho == 0 || wo == 0 {
		panic(fmt.Sprintf("radgen: %s window %dx%d %+v does not fit input %v", op, c.kh, c.kw, c.p, x.shape))
	}
	var shapeBuf [4]int // on the stack: the result copies it
	shape := append(shapeBuf[:0], s.batch, ho, wo, c.cout)
	if shortcut != nil && !slices.Equal(shortcut.shape, shape) {
		panic(fmt.Sprintf("radgen: %s shortcut %v for output %v", op, shortcut.shape, slices.Clone(shape)))
	}
	out := g.empty(x, shape)
	if _, ok := pr.(cpuPrims[float32]); ok {
		var res []float32
		if shortcut != nil {
			res = shortcut.Data()
		}
		c.packed.apply(out.Data(), x.Data(), res, s, relu)
	} else {
		c.plain(pr, out, x, shortcut, s, relu)
	}
	keep(x, shortcut, out)
	return out
}

func (c *PreparedConv2d) dtypeName() string {
	if c.is64 {
		return "float64"
	}
	return "float32"
}

// plain runs Forward's plain equivalent on pr's primitives: the input to
// channels first, the convolution with its bias, the result to channels
// last in out, then the shortcut's sum and the ReLU in place.
func (c *PreparedConv2d) plain(pr prims, out, x, shortcut *Tensor, s convShape, relu bool) {
	ho, wo := s.geo.OutH(), s.geo.OutW()
	xt := temporary(x, []int{s.batch, s.cin, s.geo.H, s.geo.W})
	pr.permute(xt.at(0), x.at(0), permutation(x.shape, []int{0, 3, 1, 2}))
	yt := temporary(x, []int{s.batch, s.cout, ho, wo})
	pr.conv2d(yt.at(0), xt.at(0), c.weight.at(0), optionalAt(c.bias), s, false)
	pr.permute(out.at(0), yt.at(0), permutation(yt.shape, []int{0, 2, 3, 1}))
	n := out.Len()
	if shortcut != nil {
		pr.binary(accel.OpAdd, out.at(0), out.at(0), shortcut.at(0), newLayout(out.shape, nil, nil), 0)
	}
	if relu {
		pr.activation(accel.ActReLU, out.at(0), out.at(0), n)
	}
	keep(xt, yt, c.weight, c.bias, x, shortcut, out)
}

// temporary returns a tensor of shape, with arbitrary values, of t's
// element type on t's device, outside any arena.
func temporary(t *Tensor, shape []int) *Tensor {
	if t.device != CPU {
		return devNew(t, shape)
	}
	return like(t, shape)
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

// MaxPool2dNHWC is MaxPool2d on channels-last images x (B, H, W, C): the
// maximum of each window, (B, Ho, Wo, C). Its plain equivalent, which it
// runs on a device and on a graph that records x's gradient, is
//
//	g.Permute(g.MaxPool2d(g.Permute(x, 0, 3, 1, 2), p), 0, 2, 3, 1)
//
// with the same values: padding never wins and NaN propagates. On the CPU
// it reads the windows where they are, on every core.
func (g *Graph) MaxPool2dNHWC(x *Tensor, p Pool2dParams) *Tensor {
	if x.Rank() != 4 {
		panic(fmt.Sprintf("radgen: MaxPool2dNHWC of %v, want (B, H, W, C)", x.shape))
	}
	pr := primsOf("MaxPool2dNHWC", x)
	_, f32ok := pr.(cpuPrims[float32])
	_, f64ok := pr.(cpuPrims[float64])
	if !f32ok && !f64ok || g.needs(x) {
		return g.Permute(g.MaxPool2d(g.Permute(x, 0, 3, 1, 2), p), 0, 2, 3, 1)
	}
	geo := poolGeom(p, x.Dim(1), x.Dim(2), x.shape)
	bsz, c, ho, wo := x.Dim(0), x.Dim(3), geo.OutH(), geo.OutW()
	var shapeBuf [4]int
	out := g.empty(x, append(shapeBuf[:0], bsz, ho, wo, c))
	if f32ok {
		channelChunks(bsz*ho, wo*c*geo.KH*geo.KW, func(lo, hi int) { kernels.MaxPoolNHWC(out.Data(), x.Data(), c, geo, lo, hi) })
	} else {
		channelChunks(bsz*ho, wo*c*geo.KH*geo.KW, func(lo, hi int) { kernels.MaxPoolNHWC(out.Data64(), x.Data64(), c, geo, lo, hi) })
	}
	keep(x, out)
	return out
}

// poolGeom returns the window of MaxPool2d with parameters p on h×w planes,
// panicking as MaxPool2d does on parameters it refuses.
func poolGeom(p Pool2dParams, h, w int, shape []int) kernels.ConvGeom {
	stride := p.Stride
	for i := range stride {
		if stride[i] == 0 {
			stride[i] = p.Kernel[i]
		}
	}
	cp := Conv2dParams{Stride: stride, Padding: p.Padding, Dilation: p.Dilation}
	geo := cp.geom(h, w, p.Kernel[0], p.Kernel[1])
	if 2*geo.PadH > geo.DilH*(geo.KH-1)+1 || 2*geo.PadW > geo.DilW*(geo.KW-1)+1 {
		panic(fmt.Sprintf("radgen: MaxPool2dNHWC padding %v exceeds half the window %v", p.Padding, p.Kernel))
	}
	if geo.OutH() == 0 || geo.OutW() == 0 {
		panic(fmt.Sprintf("radgen: MaxPool2dNHWC window %+v does not fit input %v", p, shape))
	}
	return geo
}
