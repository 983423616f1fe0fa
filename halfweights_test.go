package radgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestHalfWeightsLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []struct{ rows, in, out int }{{1, 8, 4}, {3, 37, 13}, {5, 512, 96}, {48, 64, 761}} {
		w, bias, x := Zeros(size.out, size.in), Zeros(size.out), Zeros(size.rows, size.in)
		Uniform(w, r, 0.5)
		Uniform(bias, r, 0.5)
		Uniform(x, r, 1)
		hw := w.ToHalf()
		if !hw.IsHalf() || w.IsHalf() {
			t.Fatal("IsHalf wrong")
		}
		if !strings.Contains(hw.String(), "float16") {
			t.Errorf("String() = %q", hw.String())
		}
		// The stored values are w's rounded to binary16: a relative error
		// of at most 2⁻¹¹, or half the subnormal spacing 2⁻²⁴ below 2⁻¹⁴.
		wide := hw.To32()
		for i, v := range w.Data() {
			if d := math.Abs(float64(wide.Data()[i] - v)); d > max(math.Abs(float64(v))*0x1p-11, 0x1p-25) {
				t.Fatalf("value %d: %v stored as %v", i, v, wide.Data()[i])
			}
		}
		g := NoGrad()
		got := g.Linear(x, hw, bias)
		want := g.Linear(x, wide, bias)
		if !slices.Equal(got.Shape(), want.Shape()) {
			t.Fatalf("shape %v, want %v", got.Shape(), want.Shape())
		}
		for i, v := range want.Data() {
			if d := math.Abs(float64(got.Data()[i] - v)); d > 1e-5*(1+math.Abs(float64(v))) {
				t.Fatalf("%v: y[%d] = %v, want %v (float32 product of the widened weights)", size, i, got.Data()[i], v)
			}
		}
		// Through SubstituteWeights, the graph reads hw in place of w.
		sub := NoGrad(SubstituteWeights(map[*Tensor]*Tensor{w: hw})).Linear(x, w, bias)
		for i, v := range got.Data() {
			if sub.Data()[i] != v {
				t.Fatalf("substituted y[%d] = %v, direct %v", i, sub.Data()[i], v)
			}
		}
	}
}

func TestHalfWeightsRefusals(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	w, x := Zeros(4, 8), Zeros(2, 8)
	Uniform(w, r, 1)
	Uniform(x, r, 1)
	hw := w.ToHalf()
	x.SetRequiresGrad(true)
	for name, f := range map[string]func(){
		"recording":   func() { NewGraph().Linear(x, hw, nil) },
		"data":        func() { hw.Data() },
		"vector":      func() { Zeros(4).ToHalf() },
		"float64":     func() { Zeros64(2, 2).ToHalf() },
		"twice":       func() { hw.ToHalf() },
		"input width": func() { NoGrad().Linear(Zeros(2, 7), hw, nil) },
	} {
		func() {
			defer func() {
				p := recover()
				if p == nil {
					t.Errorf("%s: no panic", name)
				} else if s, _ := p.(string); !strings.HasPrefix(s, "radgen: ") {
					t.Errorf("%s: panic %v without the package prefix", name, p)
				}
			}()
			f()
		}()
	}
}

// Deferred products of float32 and half-precision weights, batched
// together, give the bits each gives computed alone, with its ReLU.
func TestDeferredHalfWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	newLinear := func(in, out int) *Linear {
		l := NewLinear(in, out, true, r)
		Uniform(l.Bias, r, 0.5)
		return l
	}
	ls := []*Linear{newLinear(40, 24), newLinear(40, 13), newLinear(16, 40), NewLinear(16, 5, false, r)}
	mem, h := Zeros(3, 40), Zeros(3, 16)
	Uniform(mem, r, 1)
	Uniform(h, r, 1)
	xs := []*Tensor{mem, mem, h, h}
	stored := map[*Tensor]*Tensor{ls[1].Weight: ls[1].Weight.ToHalf(), ls[2].Weight: ls[2].Weight.ToHalf()}
	for _, relu := range []bool{false, true} {
		g := NoGrad(SubstituteWeights(stored))
		out := make([]*Tensor, len(ls))
		for i, l := range ls {
			out[i] = l.Forward(g, xs[i])
			if relu {
				out[i] = g.ReLU(out[i])
			}
		}
		for i, l := range ls {
			one := NoGrad(SubstituteWeights(stored))
			want := atOnce(l.Forward(one, xs[i]))
			if relu {
				want = one.ReLU(want)
			}
			if !slices.Equal(out[i].Shape(), want.Shape()) {
				t.Fatalf("map %d: shape %v, want %v", i, out[i].Shape(), want.Shape())
			}
			sameValues(t, "half", out[i], want)
			exact := NewGraph().Linear(xs[i], l.Weight, l.Bias)
			for j, v := range exact.Data() {
				if relu {
					v = max(v, 0)
				}
				if d := math.Abs(float64(out[i].Data()[j] - v)); d > 2e-3*(1+math.Abs(float64(v))) {
					t.Fatalf("relu=%v: map %d: y[%d] = %v, float32 %v", relu, i, j, out[i].Data()[j], v)
				}
			}
		}
	}
}
