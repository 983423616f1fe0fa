// Package gradcheck compares the gradients that radgen's autodiff computes
// with central finite differences, in float64. Module tests use it after
// radgen.Promote64.
package gradcheck

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
)

// Check builds L = Σ w ⊙ f(g) with fixed random weights w, backpropagates,
// and compares the gradient of every tensor in wrt with central differences
// (step h = 1e-6). It fails t when a relative error exceeds tol.
func Check(t *testing.T, name string, tol float64, f func(g *radgen.Graph) *radgen.Tensor, wrt ...*radgen.Tensor) {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 13))
	var w *radgen.Tensor
	loss := func(g *radgen.Graph) *radgen.Tensor {
		out := f(g)
		if !out.Is64() {
			t.Fatalf("%s: output is float32; promote the module with radgen.Promote64", name)
		}
		if w == nil {
			w = radgen.Zeros64(out.Shape()...)
			for i := range w.Data64() {
				w.Data64()[i] = 2*rng.Float64() - 1
			}
		}
		return g.Sum(g.Mul(out, w))
	}
	for _, x := range wrt {
		x.ZeroGrad()
		x.SetRequiresGrad(true)
	}
	g := radgen.NewGraph()
	if err := g.Backward(loss(g)); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	const h = 1e-6
	for k, x := range wrt {
		if x.Grad() == nil {
			t.Errorf("%s: tensor %d got no gradient", name, k)
			continue
		}
		data, grad := x.Data64(), x.Grad().Data64()
		var worst float64
		for i := range data {
			orig := data[i]
			data[i] = orig + h
			lp := loss(radgen.NoGrad()).Data64()[0]
			data[i] = orig - h
			lm := loss(radgen.NoGrad()).Data64()[0]
			data[i] = orig
			num := (lp - lm) / (2 * h)
			worst = math.Max(worst, math.Abs(num-grad[i])/math.Max(1, math.Abs(num)))
		}
		if worst > tol {
			t.Errorf("%s: tensor %d: max relative gradient error %.3g > %.3g", name, k, worst, tol)
		}
	}
}

// Rand returns a float64 tensor of the given shape with values in (−s, s).
func Rand(rng *rand.Rand, s float64, shape ...int) *radgen.Tensor {
	x := radgen.Zeros64(shape...)
	for i := range x.Data64() {
		x.Data64()[i] = (2*rng.Float64() - 1) * s
	}
	return x
}
