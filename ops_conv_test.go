package radgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// positive returns a float64 tensor with values in (lo, lo+1) that requires
// gradients (variances must stay positive under finite differences).
func positive(rng *rand.Rand, lo float64, shape ...int) *Tensor {
	t := Zeros64(shape...).SetRequiresGrad(true)
	for i := range t.Data64() {
		t.Data64()[i] = lo + rng.Float64()
	}
	return t
}

func TestConvGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	conv := func(p Conv2dParams) func(g *Graph, in []*Tensor) *Tensor {
		return func(g *Graph, in []*Tensor) *Tensor {
			var b *Tensor
			if len(in) > 2 {
				b = in[2]
			}
			return g.Conv2d(in[0], in[1], b, p)
		}
	}
	cases := []struct {
		name string
		f    func(g *Graph, in []*Tensor) *Tensor
		in   []*Tensor
	}{
		{"Conv2d 3x3 s1 p1 bias", conv(ConvSquare(1, 1)), []*Tensor{rnd(r, 2, 3, 5, 5), rnd(r, 4, 3, 3, 3), rnd(r, 4)}},
		{"Conv2d 3x3 s2 p1", conv(ConvSquare(2, 1)), []*Tensor{rnd(r, 2, 2, 6, 5), rnd(r, 3, 2, 3, 3)}},
		{"Conv2d 7x7 s2 p3 (stem)", conv(ConvSquare(2, 3)), []*Tensor{rnd(r, 1, 2, 9, 8), rnd(r, 2, 2, 7, 7)}},
		{"Conv2d 1x1 pointwise bias", conv(Conv2dParams{}), []*Tensor{rnd(r, 2, 3, 4, 3), rnd(r, 5, 3, 1, 1), rnd(r, 5)}},
		{"Conv2d 1x1 direct (one image)", conv(Conv2dParams{}), []*Tensor{rnd(r, 1, 3, 4, 3), rnd(r, 2, 3, 1, 1), rnd(r, 2)}},
		{"Conv2d 1x1 s2 (downsample)", conv(ConvSquare(2, 0)), []*Tensor{rnd(r, 2, 3, 5, 5), rnd(r, 4, 3, 1, 1)}},
		{"Conv2d 2x3 s(2,1) p(0,2) d(1,2)", conv(Conv2dParams{Stride: [2]int{2, 1}, Padding: [2]int{0, 2}, Dilation: [2]int{1, 2}}),
			[]*Tensor{rnd(r, 2, 2, 5, 6), rnd(r, 3, 2, 2, 3), rnd(r, 3)}},
		{"Conv2d dilated 3x3 d2 p2", conv(Conv2dParams{Padding: [2]int{2, 2}, Dilation: [2]int{2, 2}}), []*Tensor{rnd(r, 1, 2, 5, 5), rnd(r, 2, 2, 3, 3)}},
		{"BatchNorm2d eval", func(g *Graph, in []*Tensor) *Tensor {
			return g.BatchNorm2d(in[0], in[1], in[2], in[3], in[4], 1e-5)
		}, []*Tensor{rnd(r, 2, 3, 2, 2), rnd(r, 3), rnd(r, 3), rnd(r, 3), positive(r, 0.5, 3)}},
		{"BatchNorm2d eval no affine", func(g *Graph, in []*Tensor) *Tensor {
			return g.BatchNorm2d(in[0], nil, nil, in[1], in[2], 1e-5)
		}, []*Tensor{rnd(r, 2, 3, 3), rnd(r, 3), positive(r, 0.5, 3)}},
		{"BatchNorm2dTrain", func(g *Graph, in []*Tensor) *Tensor {
			y, _, _ := g.BatchNorm2dTrain(in[0], in[1], in[2], nil, nil, 1e-5, 0.1)
			return y
		}, []*Tensor{rnd(r, 3, 2, 2, 3), rnd(r, 2), rnd(r, 2)}},
		{"BatchNorm2dTrain no affine", func(g *Graph, in []*Tensor) *Tensor {
			y, _, _ := g.BatchNorm2dTrain(in[0], nil, nil, nil, nil, 1e-5, 0.1)
			return y
		}, []*Tensor{rnd(r, 2, 3, 2, 2)}},
		{"MaxPool2d 3 s2 p1 (ResNet)", func(g *Graph, in []*Tensor) *Tensor { return g.MaxPool2d(in[0], PoolSquare(3, 2, 1)) }, []*Tensor{rnd(r, 2, 2, 7, 6)}},
		{"MaxPool2d 2 default stride", func(g *Graph, in []*Tensor) *Tensor {
			return g.MaxPool2d(in[0], Pool2dParams{Kernel: [2]int{2, 2}})
		}, []*Tensor{rnd(r, 1, 3, 5, 4)}},
		{"MaxPool2d 3x2 s(1,2) d(2,1)", func(g *Graph, in []*Tensor) *Tensor {
			return g.MaxPool2d(in[0], Pool2dParams{Kernel: [2]int{3, 2}, Stride: [2]int{1, 2}, Padding: [2]int{1, 1}, Dilation: [2]int{2, 1}})
		}, []*Tensor{rnd(r, 1, 2, 6, 5)}},
		{"GlobalAvgPool2d", func(g *Graph, in []*Tensor) *Tensor { return g.GlobalAvgPool2d(in[0]) }, []*Tensor{rnd(r, 2, 3, 3, 2)}},
		{"Conv+BN+ReLU+MaxPool chain", func(g *Graph, in []*Tensor) *Tensor {
			y := g.Conv2d(in[0], in[1], nil, ConvSquare(2, 1))
			y, _, _ = g.BatchNorm2dTrain(y, in[2], in[3], nil, nil, 1e-5, 0.1)
			return g.GlobalAvgPool2d(g.MaxPool2d(g.Tanh(y), PoolSquare(3, 2, 1)))
		}, []*Tensor{rnd(r, 2, 2, 7, 7), rnd(r, 3, 2, 3, 3), rnd(r, 3), rnd(r, 3)}},
	}
	for _, c := range cases {
		gradCheck(t, c.name, c.f, c.in...)
	}
}

// naiveConv is the defining loop of torch's conv2d, in float64.
func naiveConv(x, w, b []float64, batch, cin, h, wd, cout, kh, kw int, p Conv2dParams) ([]float64, int, int) {
	sh, sw := orOne(p.Stride[0]), orOne(p.Stride[1])
	dh, dw := orOne(p.Dilation[0]), orOne(p.Dilation[1])
	ph, pw := p.Padding[0], p.Padding[1]
	ho := (h+2*ph-dh*(kh-1)-1)/sh + 1
	wo := (wd+2*pw-dw*(kw-1)-1)/sw + 1
	out := make([]float64, batch*cout*ho*wo)
	for n := 0; n < batch; n++ {
		for o := 0; o < cout; o++ {
			for i := 0; i < ho; i++ {
				for j := 0; j < wo; j++ {
					s := 0.0
					if b != nil {
						s = b[o]
					}
					for c := 0; c < cin; c++ {
						for ky := 0; ky < kh; ky++ {
							for kx := 0; kx < kw; kx++ {
								iy, ix := i*sh-ph+ky*dh, j*sw-pw+kx*dw
								if iy < 0 || iy >= h || ix < 0 || ix >= wd {
									continue
								}
								s += w[((o*cin+c)*kh+ky)*kw+kx] * x[((n*cin+c)*h+iy)*wd+ix]
							}
						}
					}
					out[((n*cout+o)*ho+i)*wo+j] = s
				}
			}
		}
	}
	return out, ho, wo
}

func TestConv2dMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	cases := []struct {
		batch, cin, h, w, cout, kh, kw int
		p                              Conv2dParams
		bias                           bool
	}{
		{2, 3, 224 / 8, 224 / 8, 8, 7, 7, ConvSquare(2, 3), false},
		{3, 4, 9, 7, 5, 3, 3, ConvSquare(1, 1), true},
		{2, 4, 9, 7, 5, 3, 3, ConvSquare(2, 1), false},
		{2, 6, 7, 7, 3, 1, 1, Conv2dParams{}, true},
		{2, 6, 7, 7, 3, 1, 1, ConvSquare(2, 0), false},
		{1, 2, 5, 8, 3, 2, 4, Conv2dParams{Stride: [2]int{3, 2}, Padding: [2]int{2, 0}, Dilation: [2]int{1, 2}}, true},
		{2, 3, 32, 33, 4, 1, 1, Conv2dParams{}, true},  // pointwise on large planes: direct
		{1, 1, 3, 3, 1, 3, 3, ConvSquare(1, 0), false}, // one output pixel
		{1, 2, 2, 2, 2, 1, 1, ConvSquare(1, 2), true},  // padding larger than the window
	}
	for _, c := range cases {
		name := fmt.Sprintf("%dx%dx%dx%d*%dx%dx%d %+v", c.batch, c.cin, c.h, c.w, c.cout, c.kh, c.kw, c.p)
		x := make([]float64, c.batch*c.cin*c.h*c.w)
		w := make([]float64, c.cout*c.cin*c.kh*c.kw)
		var b []float64
		for i := range x {
			x[i] = r.NormFloat64()
		}
		for i := range w {
			w[i] = r.NormFloat64()
		}
		if c.bias {
			b = make([]float64, c.cout)
			for i := range b {
				b[i] = r.NormFloat64()
			}
		}
		want, ho, wo := naiveConv(x, w, b, c.batch, c.cin, c.h, c.w, c.cout, c.kh, c.kw, c.p)
		var bt *Tensor
		if b != nil {
			bt = FromFloat64(b, c.cout)
		}
		got := NoGrad().Conv2d(FromFloat64(x, c.batch, c.cin, c.h, c.w), FromFloat64(w, c.cout, c.cin, c.kh, c.kw), bt, c.p)
		if !slices.Equal(got.Shape(), []int{c.batch, c.cout, ho, wo}) {
			t.Fatalf("%s: shape %v, want %v", name, got.Shape(), []int{c.batch, c.cout, ho, wo})
		}
		for i, v := range got.Data64() {
			if math.Abs(v-want[i]) > 1e-10 {
				t.Fatalf("%s: float64 element %d = %v, want %v", name, i, v, want[i])
			}
		}
		// The float32 path runs on internal/f32.
		if bt != nil {
			bt = bt.To32()
		}
		got32 := NoGrad().Conv2d(FromFloat64(x, c.batch, c.cin, c.h, c.w).To32(), FromFloat64(w, c.cout, c.cin, c.kh, c.kw).To32(), bt, c.p)
		for i, v := range got32.Data() {
			if math.Abs(float64(v)-want[i]) > 1e-4*(1+math.Abs(want[i])) {
				t.Fatalf("%s: float32 element %d = %v, want %v", name, i, v, want[i])
			}
		}
	}
}

func TestConv2dColumnBudget(t *testing.T) {
	// Enough images that im2col runs in several groups.
	r := rand.New(rand.NewPCG(5, 1))
	batch, cin, h, w := 5, 64, 40, 40
	k := cin * 9
	if per := k * h * w; colBudget/per >= batch {
		t.Fatalf("test shape does not exceed the column budget (%d per image)", per)
	}
	x := rnd(r, batch, cin, h, w)
	wt := rnd(r, 2, cin, 3, 3)
	got := NoGrad().Conv2d(x, wt, nil, ConvSquare(1, 1)).Data64()
	want, _, _ := naiveConv(x.Data64(), wt.Data64(), nil, batch, cin, h, w, 2, 3, 3, ConvSquare(1, 1))
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("element %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestBatchNorm2dEvalValues(t *testing.T) {
	// One channel: x = 3, mean 1, var 3, eps 1 → (3−1)/2 = 1; ·w 2 + b 0.5.
	x := FromFloat32([]float32{3, -1, 3, 1}, 2, 1, 2)
	y := NoGrad().BatchNorm2d(x, FromFloat32([]float32{2}, 1), FromFloat32([]float32{0.5}, 1),
		FromFloat32([]float32{1}, 1), FromFloat32([]float32{3}, 1), 1).Data()
	want := []float32{2.5, -1.5, 2.5, 0.5}
	for i := range want {
		if math.Abs(float64(y[i]-want[i])) > 1e-6 {
			t.Fatalf("BatchNorm2d = %v, want %v", y, want)
		}
	}
}

func TestBatchNorm2dTrainStatistics(t *testing.T) {
	// Channel 0 holds 1..4, channel 1 holds 10 four times.
	x := FromFloat64([]float64{1, 2, 10, 10, 3, 4, 10, 10}, 2, 2, 2)
	rm := FromFloat64([]float64{0, 1}, 2)
	rv := FromFloat64([]float64{1, 1}, 2)
	y, nm, nv := NoGrad().BatchNorm2dTrain(x, nil, nil, rm, rv, 0, 0.1)
	// Channel 0: μ 2.5, biased var 1.25, unbiased 5/3.
	s := math.Sqrt(1.25)
	wantY := []float64{-1.5 / s, -0.5 / s, 0, 0, 0.5 / s, 1.5 / s, 0, 0}
	for i, v := range y.Data64() {
		if math.Abs(v-wantY[i]) > 1e-12 && !(wantY[i] == 0 && math.IsNaN(v)) {
			t.Fatalf("y = %v, want %v", y.Data64(), wantY)
		}
	}
	wantM := []float64{0.9*0 + 0.1*2.5, 0.9*1 + 0.1*10}
	wantV := []float64{0.9*1 + 0.1*5.0/3, 0.9 * 1}
	for i := range 2 {
		if math.Abs(nm.Data64()[i]-wantM[i]) > 1e-12 || math.Abs(nv.Data64()[i]-wantV[i]) > 1e-12 {
			t.Fatalf("running stats %v %v, want %v %v", nm.Data64(), nv.Data64(), wantM, wantV)
		}
	}
	if rm.Data64()[0] != 0 || rv.Data64()[0] != 1 {
		t.Error("BatchNorm2dTrain modified its inputs")
	}
}

func TestBatchNorm2dTrainSingleSamplePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for one value per channel")
		}
	}()
	NoGrad().BatchNorm2dTrain(Zeros(1, 3, 1, 1), nil, nil, nil, nil, 1e-5, 0.1)
}

func TestMaxPool2dValues(t *testing.T) {
	// All negative: the −∞ padding must never win.
	x := FromFloat32([]float32{
		-1, -2, -3, -4,
		-5, -6, -7, -8,
		-9, -10, -11, -12,
		-13, -14, -15, -16,
	}, 1, 1, 4, 4)
	y := NoGrad().MaxPool2d(x, PoolSquare(3, 2, 1))
	if !slices.Equal(y.Shape(), []int{1, 1, 2, 2}) {
		t.Fatalf("shape %v", y.Shape())
	}
	want := []float32{-1, -2, -5, -6}
	for i, v := range y.Data() {
		if v != want[i] {
			t.Fatalf("MaxPool2d = %v, want %v", y.Data(), want)
		}
	}
	// ResNet stem: 112 → 56.
	if s := NoGrad().MaxPool2d(Zeros(1, 2, 112, 112), PoolSquare(3, 2, 1)).Shape(); !slices.Equal(s, []int{1, 2, 56, 56}) {
		t.Errorf("112² pooled to %v", s)
	}
	// NaN propagates.
	x.Data()[5] = float32(math.NaN())
	if v := NoGrad().MaxPool2d(x, PoolSquare(3, 2, 1)).Data()[0]; !math.IsNaN(float64(v)) {
		t.Errorf("NaN in window pooled to %v", v)
	}
}

func TestGlobalAvgPool2dValues(t *testing.T) {
	x := FromFloat32([]float32{1, 2, 3, 4, 10, 20, 30, 40}, 1, 2, 2, 2)
	y := NoGrad().GlobalAvgPool2d(x)
	if !slices.Equal(y.Shape(), []int{1, 2}) || y.Data()[0] != 2.5 || y.Data()[1] != 25 {
		t.Fatalf("GlobalAvgPool2d = %v %v", y.Shape(), y.Data())
	}
}

func TestConvPanics(t *testing.T) {
	cases := map[string]func(){
		"channels":        func() { NoGrad().Conv2d(Zeros(1, 3, 4, 4), Zeros(2, 2, 3, 3), nil, Conv2dParams{}) },
		"window too big":  func() { NoGrad().Conv2d(Zeros(1, 1, 2, 2), Zeros(1, 1, 3, 3), nil, Conv2dParams{}) },
		"bias":            func() { NoGrad().Conv2d(Zeros(1, 1, 4, 4), Zeros(2, 1, 3, 3), Zeros(3), Conv2dParams{}) },
		"negative stride": func() { NoGrad().Conv2d(Zeros(1, 1, 4, 4), Zeros(1, 1, 1, 1), nil, ConvSquare(-1, 0)) },
		"pool padding":    func() { NoGrad().MaxPool2d(Zeros(1, 1, 4, 4), PoolSquare(3, 1, 2)) },
		"bn channels":     func() { NoGrad().BatchNorm2d(Zeros(1, 3, 2, 2), nil, nil, Zeros(2), Zeros(2), 1e-5) },
	}
	for name, f := range cases {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Errorf("%s: no panic", name)
				} else if s, ok := r.(string); !ok || len(s) < 8 || s[:8] != "radgen: " && s[:9] != "kernels: " {
					t.Errorf("%s: panic %v without package prefix", name, r)
				}
			}()
			f()
		}()
	}
}
