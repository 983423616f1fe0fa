package radgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// preparedCase is a convolution of PreparedConv2d's tests.
type preparedCase struct {
	name                string
	b, h, w, cin, cout  int
	k, stride, pad, dil int
}

var preparedCases = []preparedCase{
	{"1x1", 2, 7, 5, 16, 24, 1, 1, 0, 1},
	{"1x1 large", 2, 56, 56, 64, 64, 1, 1, 0, 1}, // products shared out between goroutines
	{"1x1 stride 2", 2, 7, 6, 16, 24, 1, 2, 0, 1},
	{"3x3 stride 1 (Winograd)", 2, 9, 7, 12, 20, 3, 1, 1, 1}, // odd planes: border tiles
	{"3x3 stride 1 large (Winograd)", 2, 28, 28, 32, 48, 3, 1, 1, 1},
	{"3x3 stride 2", 2, 9, 8, 12, 20, 3, 2, 1, 1},
	{"7x7 stride 2 (stem)", 2, 23, 19, 3, 16, 7, 2, 3, 1},
	{"3x3 dilation 2", 1, 9, 9, 4, 8, 3, 1, 0, 2},
}

func (c preparedCase) params() Conv2dParams {
	p := ConvSquare(c.stride, c.pad)
	p.Dilation = [2]int{c.dil, c.dil}
	return p
}

// operands returns, in float64, x (B, H, W, Cin), the weight, the bias and a
// shortcut of the output's shape.
func (c preparedCase) operands(rng *rand.Rand) (x, w, bias, sc *Tensor) {
	p := c.params()
	geo := p.geom(c.h, c.w, c.k, c.k)
	normal := func(scale float64, shape ...int) *Tensor {
		t := Zeros64(shape...)
		for i := range t.Data64() {
			t.Data64()[i] = scale * rng.NormFloat64()
		}
		return t
	}
	x = normal(1, c.b, c.h, c.w, c.cin)
	w = normal(1/math.Sqrt(float64(c.cin*c.k*c.k)), c.cout, c.cin, c.k, c.k)
	bias = normal(0.1, c.cout)
	sc = normal(1, c.b, geo.OutH(), geo.OutW(), c.cout)
	return x, w, bias, sc
}

// plainPrepared is PreparedConv2d.Forward's plain equivalent, as its doc
// gives it.
func plainPrepared(g *Graph, x, weight, bias, shortcut *Tensor, p Conv2dParams, relu bool) *Tensor {
	y := g.Permute(g.Conv2d(g.Permute(x, 0, 3, 1, 2), weight, bias, p), 0, 2, 3, 1)
	if shortcut != nil {
		y = g.Add(y, shortcut)
	}
	if relu {
		y = g.ReLU(y)
	}
	return y
}

// TestPreparedConv2d compares PreparedConv2d.Forward with its plain
// equivalent in float64 on the CPU (the reference), on the CPU in float32
// (the fused products, Winograd for 3×3 stride 1) and on the test device
// (the plain equivalent's primitives), with and without a shortcut and the
// ReLU; in float64 on the CPU it must equal the plain equivalent bit for
// bit, and from an arena the same as without. Tolerances: relative error
// (max |Δ| / max(1, max |ref|)) 2e-6 in float32 on either engine;
// measured on this project's machine at most about 6e-7.
func TestPreparedConv2d(t *testing.T) {
	dev := testDevice(t)
	rng := rand.New(rand.NewPCG(3, 30))
	const tol = 2e-6
	for _, c := range preparedCases {
		if testing.Short() && c.b*c.h*c.w > 2000 {
			continue // the large cases (products shared out between goroutines) run without -short
		}
		x, w, bias, sc := c.operands(rng)
		p := c.params()
		c64 := PrepareConv2d(w, bias, p)
		c32 := PrepareConv2d(w.To32(), bias.To32(), p)
		cdev := PrepareConv2d(w.To32().To(dev), bias.To32().To(dev), p)
		worst32, worstDev := 0.0, 0.0
		for _, withSC := range []bool{false, true} {
			for _, relu := range []bool{false, true} {
				var s64, s32, sdev *Tensor
				if withSC {
					s64, s32, sdev = sc, sc.To32(), sc.To32().To(dev)
				}
				want := plainPrepared(NoGrad(), x, w, bias, s64, p, relu)
				if got := c64.Forward(NoGrad(), x, s64, relu); !slices.Equal(got.Data64(), want.Data64()) || !slices.Equal(got.Shape(), want.Shape()) {
					t.Errorf("%s shortcut=%v relu=%v: float64 differs from the plain equivalent", c.name, withSC, relu)
				}
				got32 := c32.Forward(NoGrad(), x.To32(), s32, relu)
				if !slices.Equal(got32.Shape(), want.Shape()) {
					t.Fatalf("%s: shape %v, want %v", c.name, got32.Shape(), want.Shape())
				}
				e32 := relErr(got32.Float64s(), want.Data64())
				ga := NoGrad()
				ga.SetArena(NewArena())
				if fromArena := c32.Forward(ga, x.To32(), s32, relu); !slices.Equal(fromArena.Data(), got32.Data()) {
					t.Errorf("%s shortcut=%v relu=%v: from an arena differs", c.name, withSC, relu)
				}
				gotDev := cdev.Forward(NoGrad(), x.To32().To(dev), sdev, relu)
				if gotDev.Device() != dev {
					t.Fatalf("%s: result on %v, want %v", c.name, gotDev.Device(), dev)
				}
				eDev := relErr(gotDev.Float64s(), want.Data64())
				if e32 > tol || eDev > tol {
					t.Errorf("%s shortcut=%v relu=%v: relative error cpu float32 %.3g, %v %.3g (tolerance %g)", c.name, withSC, relu, e32, dev, eDev, tol)
				}
				worst32, worstDev = max(worst32, e32), max(worstDev, eDev)
			}
		}
		t.Logf("%-30s cpu float32 %.2g, %v %.2g", c.name, worst32, dev, worstDev)
	}
}

// TestPreparedConv2dEmpty runs a batch of no images.
func TestPreparedConv2dEmpty(t *testing.T) {
	c := PrepareConv2d(Zeros(4, 3, 3, 3), Zeros(4), ConvSquare(1, 1))
	if y := c.Forward(NoGrad(), Zeros(0, 5, 5, 3), Zeros(0, 5, 5, 4), true); !slices.Equal(y.Shape(), []int{0, 5, 5, 4}) {
		t.Errorf("shape %v", y.Shape())
	}
}

func TestPreparedConv2dPanics(t *testing.T) {
	dev := testDevice(t)
	c := PrepareConv2d(Zeros(4, 3, 1, 1), nil, Conv2dParams{})
	x := Zeros(1, 2, 2, 3)
	expectPanic(t, "radgen: PreparedConv2d.Forward records no backward pass", func() {
		c.Forward(NewGraph(), x.Clone().SetRequiresGrad(true), nil, false)
	})
	expectPanic(t, "radgen: PreparedConv2d.Forward of [1 2 2 4] for 3 input channels", func() {
		c.Forward(NoGrad(), Zeros(1, 2, 2, 4), nil, false)
	})
	expectPanic(t, "radgen: PreparedConv2d.Forward shortcut [1 2 2 3] for output [1 2 2 4]", func() {
		c.Forward(NoGrad(), x, Zeros(1, 2, 2, 3), false)
	})
	expectPanic(t, "prepared for float32 on cpu", func() { c.Forward(NoGrad(), Zeros64(1, 2, 2, 3), nil, false) })
	expectPanic(t, "prepared for float32 on cpu", func() { c.Forward(NoGrad(), x.To(dev), nil, false) })
	expectPanic(t, "radgen: PreparedConv2d.Forward window 3x3", func() {
		PrepareConv2d(Zeros(4, 3, 3, 3), nil, Conv2dParams{}).Forward(NoGrad(), Zeros(1, 2, 2, 3), nil, false)
	})
	expectPanic(t, "radgen: PrepareConv2d weight [4 3]", func() { PrepareConv2d(Zeros(4, 3), nil, Conv2dParams{}) })
	expectPanic(t, "radgen: PrepareConv2d bias [3]", func() { PrepareConv2d(Zeros(4, 3, 1, 1), Zeros(3), Conv2dParams{}) })
	expectPanic(t, "radgen: invalid convolution parameters", func() { PrepareConv2d(Zeros(4, 3, 1, 1), nil, ConvSquare(-1, 0)) })
	expectPanic(t, "radgen: PrepareConv2d: operands on cpu and "+dev.String(), func() {
		PrepareConv2d(Zeros(4, 3, 1, 1), Zeros(4).To(dev), Conv2dParams{})
	})
	// A graph that records, with operands that need no gradient, runs it.
	if y := c.Forward(NewGraph(), x, nil, false); y.RequiresGrad() {
		t.Error("the result requires gradients")
	}
}

// TestMaxPool2dNHWC compares MaxPool2dNHWC with its plain equivalent on the
// CPU in float32 and float64 and on the test device, bit for bit, with
// NaNs and padding, and the gradient of a recording graph (the plain
// equivalent's).
func TestMaxPool2dNHWC(t *testing.T) {
	dev := testDevice(t)
	rng := rand.New(rand.NewPCG(5, 50))
	x := Zeros64(2, 9, 7, 5)
	for i := range x.Data64() {
		x.Data64()[i] = rng.NormFloat64()
	}
	x.Data64()[17] = math.NaN()
	plain := func(g *Graph, x *Tensor, p Pool2dParams) *Tensor {
		return g.Permute(g.MaxPool2d(g.Permute(x, 0, 3, 1, 2), p), 0, 2, 3, 1)
	}
	same := func(a, b []float64) bool {
		return slices.EqualFunc(a, b, func(u, v float64) bool { return u == v || math.IsNaN(u) && math.IsNaN(v) })
	}
	for _, p := range []Pool2dParams{PoolSquare(3, 2, 1), PoolSquare(2, 0, 0), {Kernel: [2]int{3, 2}, Stride: [2]int{1, 2}, Padding: [2]int{1, 1}, Dilation: [2]int{2, 1}}} {
		for _, in := range []*Tensor{x, x.To32(), x.To32().To(dev)} {
			got := NoGrad().MaxPool2dNHWC(in, p)
			want := plain(NoGrad(), in, p)
			if !slices.Equal(got.Shape(), want.Shape()) || !same(got.Float64s(), want.Float64s()) {
				t.Errorf("%+v on %v: differs from the plain equivalent", p, in)
			}
		}
	}
	// Recording: the plain equivalent's gradient.
	grad := func(pool func(*Graph, *Tensor) *Tensor) []float64 {
		xs := x.To32()
		xs.Data()[17] = 0
		xs.SetRequiresGrad(true)
		g := NewGraph()
		if err := g.Backward(g.Sum(pool(g, xs))); err != nil {
			t.Fatal(err)
		}
		return xs.Grad().Float64s()
	}
	p := PoolSquare(3, 2, 1)
	if !slices.Equal(grad(func(g *Graph, x *Tensor) *Tensor { return g.MaxPool2dNHWC(x, p) }),
		grad(func(g *Graph, x *Tensor) *Tensor { return plain(g, x, p) })) {
		t.Error("gradient differs from the plain equivalent's")
	}
	expectPanic(t, "radgen: MaxPool2dNHWC of [2 3]", func() { NoGrad().MaxPool2dNHWC(Zeros(2, 3), p) })
	expectPanic(t, "radgen: MaxPool2dNHWC padding", func() { NoGrad().MaxPool2dNHWC(Zeros(1, 4, 4, 1), PoolSquare(2, 1, 2)) })
	expectPanic(t, "radgen: MaxPool2dNHWC window", func() { NoGrad().MaxPool2dNHWC(Zeros(1, 2, 2, 1), PoolSquare(3, 1, 0)) })
}

// TestScratchBuffers checks the size classes of the package's temporaries:
// each buffer has the length asked for, a capacity of the next power of
// two, and comes back for a request of its class; a buffer given back
// with another capacity goes to the class it covers whole.
func TestScratchBuffers(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 5, 1000, 1024, 1025, 3 << 20} {
		b := scratch[float32](n)
		c := cap(b)
		if len(b) != n || c < max(n, 1) || c&(c-1) != 0 || c >= 2*max(n, 1) {
			t.Errorf("scratch(%d): len %d cap %d", n, len(b), c)
		}
		release(b)
	}
	if sizeClass(1) != 0 || sizeClass(2) != 1 || sizeClass(3) != 2 || sizeClass(1024) != 10 || sizeClass(1025) != 11 {
		t.Error("sizeClass")
	}
	release(make([]float64, 1000)) // class 9 (at least 512), not 10
	if b := scratch[float64](1024); cap(b) < 1024 {
		t.Fatalf("scratch(1024) of capacity %d", cap(b))
	}
}
