package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// geoms is a sweep of convolution geometries: ResNet's, odd sizes,
// rectangular windows, dilation, padding wider than the window.
func geoms() []ConvGeom {
	var out []ConvGeom
	for _, g := range []ConvGeom{
		{H: 14, W: 14, KH: 7, KW: 7, StrideH: 2, StrideW: 2, PadH: 3, PadW: 3},
		{H: 7, W: 7, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadH: 1, PadW: 1},
		{H: 7, W: 6, KH: 3, KW: 3, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1},
		{H: 5, W: 5, KH: 1, KW: 1, StrideH: 2, StrideW: 2},
		{H: 1, W: 1, KH: 1, KW: 1, StrideH: 1, StrideW: 1},
		{H: 6, W: 9, KH: 2, KW: 3, StrideH: 3, StrideW: 2, PadH: 0, PadW: 2, DilH: 1, DilW: 2},
		{H: 4, W: 4, KH: 3, KW: 3, StrideH: 1, StrideW: 3, PadH: 4, PadW: 4, DilH: 2, DilW: 1},
		{H: 3, W: 8, KH: 1, KW: 4, StrideH: 1, StrideW: 1, PadH: 2, PadW: 0},
	} {
		if g.DilH == 0 {
			g.DilH, g.DilW = 1, 1
		}
		out = append(out, g)
	}
	return out
}

// at returns x[c][iy][ix] or 0 in the padding.
func at(x []float64, g ConvGeom, c, iy, ix int) float64 {
	if iy < 0 || iy >= g.H || ix < 0 || ix >= g.W {
		return 0
	}
	return x[(c*g.H+iy)*g.W+ix]
}

func TestIm2colDefinitionAndGuards(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	const c = 2
	for _, g := range geoms() {
		g.Check()
		ho, wo := g.OutH(), g.OutW()
		n := ho * wo
		x := make([]float64, c*g.H*g.W)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		// Row stride n+3 with a NaN guard band after each row.
		ld := n + 3
		rows := c * g.KH * g.KW
		dst := make([]float64, rows*ld)
		for i := range dst {
			dst[i] = math.NaN()
		}
		Im2col(dst, ld, x, c, g)
		for ch := range c {
			for ky := range g.KH {
				for kx := range g.KW {
					r := (ch*g.KH+ky)*g.KW + kx
					for oy := range ho {
						for ox := range wo {
							want := at(x, g, ch, oy*g.StrideH-g.PadH+ky*g.DilH, ox*g.StrideW-g.PadW+kx*g.DilW)
							if got := dst[r*ld+oy*wo+ox]; got != want {
								t.Fatalf("%+v: col[%d][%d] = %v, want %v", g, r, oy*wo+ox, got, want)
							}
						}
					}
					for j := n; j < ld; j++ {
						if !math.IsNaN(dst[r*ld+j]) {
							t.Fatalf("%+v: Im2col wrote the guard band of row %d", g, r)
						}
					}
				}
			}
		}
	}
}

// toNHWC returns the images x (B, C, H, W) channels last, (B, H, W, C).
func toNHWC(x []float64, b, c, h, w int) []float64 {
	out := make([]float64, len(x))
	for bi := range b {
		for ch := range c {
			for i := range h * w {
				out[(bi*h*w+i)*c+ch] = x[(bi*c+ch)*h*w+i]
			}
		}
	}
	return out
}

// TestIm2colNHWC checks the channels-last unfolding against Im2col over the
// geometries and two images, filling the rows in two ranges.
func TestIm2colNHWC(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const b, c = 2, 3
	for _, g := range geoms() {
		ho, wo := g.OutH(), g.OutW()
		n, k := ho*wo, c*g.KH*g.KW
		x := make([]float64, b*c*g.H*g.W)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		dst := make([]float64, b*n*k+5)
		for i := range dst {
			dst[i] = math.NaN()
		}
		xl := toNHWC(x, b, c, g.H, g.W)
		Im2colNHWC(dst, xl, c, g, 0, b*ho/2)
		Im2colNHWC(dst, xl, c, g, b*ho/2, b*ho)
		for bi := range b {
			col := make([]float64, k*n)
			Im2col(col, n, x[bi*c*g.H*g.W:], c, g)
			for ch := range c {
				for tap := range g.KH * g.KW {
					for p := range n {
						want := col[(ch*g.KH*g.KW+tap)*n+p]
						if got := dst[(bi*n+p)*k+tap*c+ch]; got != want {
							t.Fatalf("%+v: image %d pixel %d tap %d channel %d: %v, want %v", g, bi, p, tap, ch, got, want)
						}
					}
				}
			}
		}
		for _, v := range dst[b*n*k:] {
			if !math.IsNaN(v) {
				t.Fatalf("%+v: Im2colNHWC wrote past the matrix", g)
			}
		}
	}
}

// TestMaxPoolNHWC checks the channels-last pooling against MaxPool, with a
// NaN that must propagate.
func TestMaxPoolNHWC(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	const b, c = 2, 5
	for _, g := range geoms() {
		if 2*g.PadH > g.DilH*(g.KH-1)+1 || 2*g.PadW > g.DilW*(g.KW-1)+1 {
			continue // MaxPool2d refuses such padding
		}
		ho, wo := g.OutH(), g.OutW()
		x := make([]float64, b*c*g.H*g.W)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		x[len(x)/2] = math.NaN()
		want := make([]float64, b*c*ho*wo)
		MaxPool(want, make([]int32, len(want)), x, b*c, g)
		got := make([]float64, len(want))
		MaxPoolNHWC(got, toNHWC(x, b, c, g.H, g.W), c, g, 0, b*ho)
		wl := toNHWC(want, b, c, ho, wo)
		for i := range wl {
			if got[i] != wl[i] && !(math.IsNaN(got[i]) && math.IsNaN(wl[i])) {
				t.Fatalf("%+v: [%d] = %v, want %v", g, i, got[i], wl[i])
			}
		}
	}
}

// TestCol2imIsAdjoint checks ⟨Im2col(x), y⟩ = ⟨x, Col2im(y)⟩.
func TestCol2imIsAdjoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	const c = 3
	for _, g := range geoms() {
		n := g.OutH() * g.OutW()
		ld := n + 1
		rows := c * g.KH * g.KW
		x := make([]float64, c*g.H*g.W)
		y := make([]float64, rows*ld)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		for i := range y {
			y[i] = rng.NormFloat64()
		}
		col := make([]float64, rows*ld)
		Im2col(col, ld, x, c, g)
		dx := make([]float64, len(x))
		Col2im(dx, y, ld, c, g)
		var lhs, rhs float64
		for r := range rows {
			for j := range n {
				lhs += col[r*ld+j] * y[r*ld+j]
			}
		}
		for i := range x {
			rhs += x[i] * dx[i]
		}
		if math.Abs(lhs-rhs) > 1e-10*(1+math.Abs(lhs)) {
			t.Errorf("%+v: ⟨im2col x, y⟩ = %v, ⟨x, col2im y⟩ = %v", g, lhs, rhs)
		}
	}
}

func TestOutSize(t *testing.T) {
	for _, c := range []struct {
		g      ConvGeom
		ho, wo int
	}{
		{ConvGeom{H: 224, W: 224, KH: 7, KW: 7, StrideH: 2, StrideW: 2, PadH: 3, PadW: 3, DilH: 1, DilW: 1}, 112, 112},
		{ConvGeom{H: 112, W: 112, KH: 3, KW: 3, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, DilH: 1, DilW: 1}, 56, 56},
		{ConvGeom{H: 7, W: 7, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadH: 0, PadW: 0, DilH: 3, DilW: 3}, 1, 1},
		{ConvGeom{H: 2, W: 7, KH: 3, KW: 3, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, 0, 5},
	} {
		if ho, wo := c.g.OutH(), c.g.OutW(); ho != c.ho || wo != c.wo {
			t.Errorf("%+v: %dx%d, want %dx%d", c.g, ho, wo, c.ho, c.wo)
		}
	}
}

func TestMaxPoolTiesAndPadding(t *testing.T) {
	// Ties go to the first maximum in row-major order, as in torch.
	x := []float32{
		5, 1, 5,
		0, 5, 2,
		5, 3, 4,
	}
	g := ConvGeom{H: 3, W: 3, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadH: 1, PadW: 1, DilH: 1, DilW: 1}
	y := make([]float32, 9)
	arg := make([]int32, 9)
	MaxPool(y, arg, x, 1, g)
	wantArg := []int32{0, 0, 2, 0, 0, 2, 4, 4, 4}
	for i := range wantArg {
		if y[i] != 5 || arg[i] != wantArg[i] {
			t.Fatalf("MaxPool = %v %v, want all 5 at %v", y, arg, wantArg)
		}
	}
	dx := make([]float32, 9)
	dy := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1}
	MaxPoolBackward(dx, dy, arg, 1, 9, 9)
	if dx[0] != 4 || dx[2] != 2 || dx[4] != 3 || dx[6] != 0 {
		t.Errorf("MaxPoolBackward = %v", dx)
	}
}

func TestChannelKernels(t *testing.T) {
	// x (B=2, C=2, plane=2).
	x := []float64{1, 3, 10, 10, 5, 7, 10, 30}
	mean, variance := make([]float64, 2), make([]float64, 2)
	ChannelStats(mean, variance, x, 2, 2)
	if mean[0] != 4 || variance[0] != 5 || mean[1] != 15 || variance[1] != 75 {
		t.Errorf("ChannelStats: mean %v var %v", mean, variance)
	}
	sdy, sdyx := make([]float64, 2), make([]float64, 2)
	dy := []float64{1, 1, 1, 1, 2, 2, 2, 2}
	ChannelSums(sdy, sdyx, dy, x, 2, 2)
	if sdy[0] != 6 || sdyx[0] != 1+3+10+14 || sdy[1] != 6 || sdyx[1] != 20+80 {
		t.Errorf("ChannelSums: %v %v", sdy, sdyx)
	}
	dst := make([]float64, 8)
	ChannelAffine(dst, x, []float64{2, 0.5}, nil, 2, 2)
	want := []float64{2, 6, 5, 5, 10, 14, 5, 15}
	for i := range want {
		if dst[i] != want[i] {
			t.Fatalf("ChannelAffine = %v, want %v", dst, want)
		}
	}
	avg := make([]float64, 4)
	AvgPlanes(avg, x, 2)
	if fmt.Sprint(avg) != "[2 10 6 20]" {
		t.Errorf("AvgPlanes = %v", avg)
	}
}

func BenchmarkIm2col(b *testing.B) {
	// ResNet layer1's 3×3 convolution: 64 channels of 56×56.
	g := ConvGeom{H: 56, W: 56, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadH: 1, PadW: 1, DilH: 1, DilW: 1}
	x := make([]float32, 64*56*56)
	dst := make([]float32, 64*9*56*56)
	b.SetBytes(int64(4 * len(dst)))
	for range b.N {
		Im2col(dst, 56*56, x, 64, g)
	}
}
