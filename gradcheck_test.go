package radgen

import (
	"math"
	"math/rand/v2"
	"testing"
)

// rnd returns a float64 tensor with values in (−1, 1) that requires gradients.
func rnd(rng *rand.Rand, shape ...int) *Tensor {
	t := Zeros64(shape...).SetRequiresGrad(true)
	for i := range t.Data64() {
		t.Data64()[i] = 2*rng.Float64() - 1
	}
	return t
}

// gradCheck compares the gradients of L = Σ w ⊙ f(inputs) (w fixed random
// weights) with central finite differences, in float64.
func gradCheck(t *testing.T, name string, f func(g *Graph, in []*Tensor) *Tensor, inputs ...*Tensor) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	var w *Tensor
	loss := func(g *Graph) *Tensor {
		out := f(g, inputs)
		if w == nil {
			w = Zeros64(out.shape...)
			for i := range w.Data64() {
				w.Data64()[i] = 2*rng.Float64() - 1
			}
		}
		return g.Sum(g.Mul(out, w))
	}
	for _, in := range inputs {
		in.ZeroGrad()
	}
	g := NewGraph()
	l := loss(g)
	if err := g.Backward(l); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	const h = 1e-6
	for k, in := range inputs {
		if !in.requiresGrad {
			continue
		}
		if in.grad == nil {
			t.Errorf("%s: input %d got no gradient", name, k)
			continue
		}
		x := in.Data64()
		var worst float64
		for i := range x {
			orig := x[i]
			x[i] = orig + h
			lp := loss(NoGrad()).Data64()[0]
			x[i] = orig - h
			lm := loss(NoGrad()).Data64()[0]
			x[i] = orig
			num := (lp - lm) / (2 * h)
			got := in.grad.Data64()[i]
			err := math.Abs(num-got) / math.Max(1, math.Abs(num))
			worst = math.Max(worst, err)
		}
		if worst > 1e-6 {
			t.Errorf("%s: input %d: max relative gradient error %.3g", name, k, worst)
		}
	}
}

// gradCase is an op (or a few) whose gradients are checked: by finite
// differences in float64 here, and against the CPU on every device
// (device_test.go).
type gradCase struct {
	name string
	f    func(g *Graph, in []*Tensor) *Tensor
	in   []*Tensor
}

// sameKind returns t with ref's dtype on ref's device (masks built inside
// a case).
func sameKind(ref, t *Tensor) *Tensor {
	if ref.Is64() {
		return t.To64()
	}
	return t.To32().To(ref.Device())
}

// gradCases returns the cases with float64 inputs drawn from r.
func gradCases(r *rand.Rand) []gradCase {
	return []gradCase{
		{"Add broadcast", func(g *Graph, in []*Tensor) *Tensor { return g.Add(in[0], in[1]) }, []*Tensor{rnd(r, 2, 3, 4), rnd(r, 4)}},
		{"Add middle broadcast", func(g *Graph, in []*Tensor) *Tensor { return g.Add(in[0], in[1]) }, []*Tensor{rnd(r, 2, 3, 4), rnd(r, 2, 1, 4)}},
		{"Sub", func(g *Graph, in []*Tensor) *Tensor { return g.Sub(in[0], in[1]) }, []*Tensor{rnd(r, 3, 1), rnd(r, 1, 5)}},
		{"Mul broadcast", func(g *Graph, in []*Tensor) *Tensor { return g.Mul(in[0], in[1]) }, []*Tensor{rnd(r, 2, 3, 4), rnd(r, 3, 1)}},
		{"Mul self", func(g *Graph, in []*Tensor) *Tensor { return g.Mul(in[0], in[0]) }, []*Tensor{rnd(r, 5)}},
		{"Scale", func(g *Graph, in []*Tensor) *Tensor { return g.Scale(in[0], -2.5) }, []*Tensor{rnd(r, 3, 2)}},
		{"ReLU", func(g *Graph, in []*Tensor) *Tensor { return g.ReLU(in[0]) }, []*Tensor{rnd(r, 4, 5)}},
		{"Tanh", func(g *Graph, in []*Tensor) *Tensor { return g.Tanh(in[0]) }, []*Tensor{rnd(r, 4, 5)}},
		{"Sigmoid", func(g *Graph, in []*Tensor) *Tensor { return g.Sigmoid(in[0]) }, []*Tensor{rnd(r, 4, 5)}},
		{"Softmax", func(g *Graph, in []*Tensor) *Tensor { return g.Softmax(in[0]) }, []*Tensor{rnd(r, 3, 6)}},
		{"LogSoftmax", func(g *Graph, in []*Tensor) *Tensor { return g.LogSoftmax(in[0]) }, []*Tensor{rnd(r, 3, 6)}},
		{"MaskedFill+Softmax", func(g *Graph, in []*Tensor) *Tensor {
			mask := sameKind(in[0], FromFloat64([]float64{1, 1, 0, 1, 0, 0}, 1, 6))
			return g.Softmax(g.MaskedFill(in[0], mask, -1e9))
		}, []*Tensor{rnd(r, 3, 6)}},
		{"Normalize R2Gen", func(g *Graph, in []*Tensor) *Tensor { return g.Normalize(in[0], 1e-6, NormR2Gen) }, []*Tensor{rnd(r, 3, 7)}},
		{"Normalize standard", func(g *Graph, in []*Tensor) *Tensor { return g.Normalize(in[0], 1e-5, NormStandard) }, []*Tensor{rnd(r, 3, 7)}},
		{"LayerNorm conditional", func(g *Graph, in []*Tensor) *Tensor {
			return g.LayerNorm(in[0], in[1], in[2], 1e-6, NormR2Gen)
		}, []*Tensor{rnd(r, 2, 3, 5), rnd(r, 2, 3, 5), rnd(r, 5)}},
		{"MatMul batched", func(g *Graph, in []*Tensor) *Tensor { return g.MatMul(in[0], in[1], false) }, []*Tensor{rnd(r, 2, 3, 4), rnd(r, 2, 4, 5)}},
		{"MatMul batched transB", func(g *Graph, in []*Tensor) *Tensor { return g.MatMul(in[0], in[1], true) }, []*Tensor{rnd(r, 2, 3, 4), rnd(r, 2, 5, 4)}},
		{"MatMul shared", func(g *Graph, in []*Tensor) *Tensor { return g.MatMul(in[0], in[1], false) }, []*Tensor{rnd(r, 2, 3, 4), rnd(r, 4, 5)}},
		{"MatMul shared transB", func(g *Graph, in []*Tensor) *Tensor { return g.MatMul(in[0], in[1], true) }, []*Tensor{rnd(r, 2, 3, 4), rnd(r, 5, 4)}},
		{"Linear", func(g *Graph, in []*Tensor) *Tensor { return g.Linear(in[0], in[1], in[2]) }, []*Tensor{rnd(r, 2, 3, 4), rnd(r, 5, 4), rnd(r, 5)}},
		{"Linear no bias", func(g *Graph, in []*Tensor) *Tensor { return g.Linear(in[0], in[1], nil) }, []*Tensor{rnd(r, 3, 4), rnd(r, 2, 4)}},
		{"Reshape", func(g *Graph, in []*Tensor) *Tensor { return g.Tanh(g.Reshape(in[0], 3, -1)) }, []*Tensor{rnd(r, 2, 3, 2)}},
		{"Permute", func(g *Graph, in []*Tensor) *Tensor { return g.Permute(in[0], 2, 0, 1) }, []*Tensor{rnd(r, 2, 3, 4)}},
		{"Transpose", func(g *Graph, in []*Tensor) *Tensor { return g.Transpose(in[0], 1, 2) }, []*Tensor{rnd(r, 2, 3, 4)}},
		{"Concat", func(g *Graph, in []*Tensor) *Tensor { return g.Concat(1, in[0], in[1]) }, []*Tensor{rnd(r, 2, 3, 4), rnd(r, 2, 1, 4)}},
		{"Split", func(g *Graph, in []*Tensor) *Tensor {
			p := g.Split(in[0], -1, 2, 3)
			return g.Mul(p[0], g.Slice(p[1], -1, 1, 3))
		}, []*Tensor{rnd(r, 3, 5)}},
		{"IndexSelect", func(g *Graph, in []*Tensor) *Tensor { return g.IndexSelect(in[0], 1, []int{2, 0, 2, 1}) }, []*Tensor{rnd(r, 2, 3, 2)}},
		{"Rows", func(g *Graph, in []*Tensor) *Tensor {
			// Appends on either side of a growth (room for 8 rows, then
			// 38), views and gathers in between, an input appended twice,
			// pieces of rows gathered, and a reset whose appends overwrite
			// what earlier views show.
			var r Rows
			r.Append(g, in[0])
			r.Append(g, in[1])
			a := g.IndexSelect(r.View(g), 0, []int{5, 0, 2, 2})
			r.Append(g, in[2])
			r.Append(g, in[0])
			b := g.Tanh(r.View(g))
			// Row i of the view (11, 3) is pieces 3i..3i+2 of (33, 1).
			e := g.Reshape(r.Gather(g, []int{31, 0, 17, 17, 5, 32}, 3), 2, 3)
			r.Reset()
			r.Append(g, in[2])
			c := g.Mul(r.View(g), in[2])
			return g.Concat(0, a, b, e, c)
		}, []*Tensor{rnd(r, 1, 3), rnd(r, 5, 3), rnd(r, 4, 3)}},
		{"Embedding", func(g *Graph, in []*Tensor) *Tensor { return g.Embedding(in[0], []int{3, 1, 3, 0}, 2, 2) }, []*Tensor{rnd(r, 4, 3)}},
		{"PickLast", func(g *Graph, in []*Tensor) *Tensor { return g.PickLast(g.LogSoftmax(in[0]), []int{1, 0, 4}) }, []*Tensor{rnd(r, 3, 5)}},
		{"Sum", func(g *Graph, in []*Tensor) *Tensor { return g.Sum(in[0]) }, []*Tensor{rnd(r, 3, 5)}},
		{"LayerNorm standard", func(g *Graph, in []*Tensor) *Tensor {
			return g.LayerNorm(in[0], in[1], in[2], 1e-5, NormStandard)
		}, []*Tensor{rnd(r, 4, 6), rnd(r, 6), rnd(r, 6)}},
		{"Dropout", func(g *Graph, in []*Tensor) *Tensor {
			g.train, g.rng = true, rand.New(rand.NewPCG(5, 5)) // same mask on every call
			return g.Dropout(in[0], 0.3)
		}, []*Tensor{rnd(r, 7, 5)}},
		{"Attention with padding mask", func(g *Graph, in []*Tensor) *Tensor {
			// R2Gen's scaled dot-product attention: scores masked with
			// −1e9 where the key is padding, softmax, then ·V.
			mask := sameKind(in[0], FromFloat64([]float64{1, 1, 1, 0, 1, 1, 0, 0}, 2, 1, 1, 4))
			s := g.Scale(g.MatMul(in[0], in[1], true), 0.5)
			return g.MatMul(g.Softmax(g.MaskedFill(s, mask, -1e9)), in[2], false)
		}, []*Tensor{rnd(r, 2, 2, 3, 4), rnd(r, 2, 2, 4, 4), rnd(r, 2, 2, 4, 4)}},
		{"Conv2d 3x3 stride 2 padded", func(g *Graph, in []*Tensor) *Tensor {
			return g.Conv2d(in[0], in[1], in[2], Conv2dParams{Stride: [2]int{2, 1}, Padding: [2]int{1, 1}})
		}, []*Tensor{rnd(r, 2, 3, 5, 4), rnd(r, 4, 3, 3, 3), rnd(r, 4)}},
		{"Conv2d 1x1 dilated 2x2", func(g *Graph, in []*Tensor) *Tensor {
			return g.Conv2d(g.Conv2d(in[0], in[1], nil, ConvSquare(1, 0)), in[2], nil, Conv2dParams{Dilation: [2]int{2, 2}, Padding: [2]int{1, 0}})
		}, []*Tensor{rnd(r, 2, 3, 4, 5), rnd(r, 2, 3, 1, 1), rnd(r, 3, 2, 2, 2)}},
		{"GlobalAvgPool2d", func(g *Graph, in []*Tensor) *Tensor { return g.GlobalAvgPool2d(in[0]) }, []*Tensor{rnd(r, 2, 3, 4, 5)}},
		{"BatchNorm2d eval", func(g *Graph, in []*Tensor) *Tensor {
			half := sameKind(in[0], FromFloat64([]float64{0.5}, 1))
			variance := g.Add(g.Mul(in[4], in[4]), half) // positive
			return g.BatchNorm2d(in[0], in[1], in[2], in[3], variance, 1e-5)
		}, []*Tensor{rnd(r, 2, 3, 2, 3), rnd(r, 3), rnd(r, 3), rnd(r, 3), rnd(r, 3)}},
		{"BatchNorm2dTrain", func(g *Graph, in []*Tensor) *Tensor {
			y, _, _ := g.BatchNorm2dTrain(in[0], in[1], in[2], nil, nil, 1e-5, 0.1)
			return y
		}, []*Tensor{rnd(r, 2, 3, 2, 3), rnd(r, 3), rnd(r, 3)}},
		{"BatchNorm2dTrain without affine", func(g *Graph, in []*Tensor) *Tensor {
			y, _, _ := g.BatchNorm2dTrain(in[0], nil, nil, nil, nil, 1e-5, 0.1)
			return g.Mul(y, y)
		}, []*Tensor{rnd(r, 3, 2, 4)}},
		{"MaxPool2d 3x3 stride 2 padded", func(g *Graph, in []*Tensor) *Tensor {
			return g.MaxPool2d(in[0], PoolSquare(3, 2, 1))
		}, []*Tensor{rnd(r, 2, 2, 5, 6)}},
		{"Masked NLL", func(g *Graph, in []*Tensor) *Tensor {
			// R2Gen's language-model criterion: −Σ mask·log p(target) / Σ mask.
			mask := sameKind(in[0], FromFloat64([]float64{1, 1, 1, 0, 1, 0}, 6))
			lp := g.PickLast(g.LogSoftmax(g.Reshape(in[0], 6, 5)), []int{1, 4, 0, 2, 3, 3})
			return g.Scale(g.Sum(g.Mul(lp, mask)), -1.0/4)
		}, []*Tensor{rnd(r, 2, 3, 5)}},
	}
}

func TestGradients(t *testing.T) {
	for _, c := range gradCases(rand.New(rand.NewPCG(1, 2))) {
		gradCheck(t, c.name, c.f, c.in...)
	}
}

func TestDropout(t *testing.T) {
	x := FromFloat32(make([]float32, 10000), 10000)
	Fill(x, 1)
	if y := NoGrad().Dropout(x, 0.1); y != x {
		t.Error("eval-mode dropout is not the identity")
	}
	a := NoGrad(Train(3)).Dropout(x, 0.25)
	b := NoGrad(Train(3)).Dropout(x, 0.25)
	zeros := 0
	for i, v := range a.Data() {
		if v != b.Data()[i] {
			t.Fatal("same seed, different masks")
		}
		switch v {
		case 0:
			zeros++
		case 1 / 0.75:
		default:
			t.Fatalf("kept value %v, want %v", v, 1/0.75)
		}
	}
	if zeros < 2300 || zeros > 2700 {
		t.Errorf("%d of 10000 dropped at p=0.25", zeros)
	}
	// Gradient flows through the kept elements only, scaled.
	w := rnd(rand.New(rand.NewPCG(1, 1)), 50)
	gradCheck(t, "Dropout", func(g *Graph, in []*Tensor) *Tensor {
		g.train, g.rng = true, rand.New(rand.NewPCG(5, 5)) // same mask on every call
		return g.Dropout(in[0], 0.3)
	}, w)
}

func TestNormalizeValues(t *testing.T) {
	// R2Gen: unbiased std, eps on the std. x = [1,2,3,4]: mean 2.5,
	// std = sqrt(5/3).
	x := FromFloat64([]float64{1, 2, 3, 4}, 1, 4)
	y := NoGrad().Normalize(x, 1e-6, NormR2Gen).Data64()
	s := math.Sqrt(5.0/3) + 1e-6
	for i, v := range []float64{-1.5, -0.5, 0.5, 1.5} {
		if math.Abs(y[i]-v/s) > 1e-12 {
			t.Errorf("R2Gen[%d] = %v, want %v", i, y[i], v/s)
		}
	}
	y = NoGrad().Normalize(x, 1e-5, NormStandard).Data64()
	s = math.Sqrt(1.25 + 1e-5)
	for i, v := range []float64{-1.5, -0.5, 0.5, 1.5} {
		if math.Abs(y[i]-v/s) > 1e-12 {
			t.Errorf("standard[%d] = %v, want %v", i, y[i], v/s)
		}
	}
}

func TestMaskedSoftmaxUniformWhenAllMasked(t *testing.T) {
	x := FromFloat32([]float32{3, -1, 2}, 1, 3)
	m := FromFloat32([]float32{0, 0, 0}, 1, 3)
	y := NoGrad().Softmax(NoGrad().MaskedFill(x, m, -1e9)).Data()
	for _, v := range y {
		if math.Abs(float64(v)-1.0/3) > 1e-6 {
			t.Fatalf("fully masked row = %v, want uniform", y)
		}
	}
}

func TestMatMulValues(t *testing.T) {
	a := FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := FromFloat32([]float32{7, 8, 9, 10, 11, 12}, 3, 2)
	got := NoGrad().MatMul(a, b, false).Data()
	want := []float32{58, 64, 139, 154}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("MatMul = %v, want %v", got, want)
		}
	}
}

// The cached host slice and the Dense share one array.
func TestHostSliceIsTheDenseBacking(t *testing.T) {
	x := Zeros(2, 3)
	x.Data()[4] = 7
	if got := x.Dense().Data().([]float32)[4]; got != 7 {
		t.Fatalf("Dense sees %v, want 7", got)
	}
	y := Zeros64(3)
	y.Data64()[1] = 2
	if got := y.Dense().Data().([]float64)[1]; got != 2 {
		t.Fatalf("Dense sees %v, want 2", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = x.Data() }); n != 0 {
		t.Errorf("Data allocates %v times", n)
	}
}
