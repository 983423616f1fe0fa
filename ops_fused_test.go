package radgen

import (
	"math"
	"math/rand/v2"
	"testing"
)

// fusedCases are the cases of BatchNorm2dTrainAct: every combination of
// residual and ReLU, without affine parameters, and with x as its own
// residual (two gradients into one buffer).
func fusedCases(r *rand.Rand) []gradCase {
	act := func(res, relu, affine bool) func(g *Graph, in []*Tensor) *Tensor {
		return func(g *Graph, in []*Tensor) *Tensor {
			var w, b, rs *Tensor
			if affine {
				w, b = in[1], in[2]
			}
			if res {
				rs = in[len(in)-1]
			}
			y, _, _ := g.BatchNorm2dTrainAct(in[0], w, b, nil, nil, rs, relu, 1e-5, 0.1)
			return y
		}
	}
	return []gradCase{
		{"BatchNorm2dTrainAct", act(false, false, true), []*Tensor{rnd(r, 2, 3, 2, 3), rnd(r, 3), rnd(r, 3)}},
		{"BatchNorm2dTrainAct ReLU", act(false, true, true), []*Tensor{rnd(r, 2, 3, 3, 3), rnd(r, 3), rnd(r, 3)}},
		{"BatchNorm2dTrainAct residual", act(true, false, true), []*Tensor{rnd(r, 3, 2, 5), rnd(r, 2), rnd(r, 2), rnd(r, 3, 2, 5)}},
		{"BatchNorm2dTrainAct residual ReLU", act(true, true, true), []*Tensor{rnd(r, 2, 4, 2, 3), rnd(r, 4), rnd(r, 4), rnd(r, 2, 4, 2, 3)}},
		{"BatchNorm2dTrainAct ReLU no affine", act(false, true, false), []*Tensor{rnd(r, 2, 3, 7)}},
		{"BatchNorm2dTrainAct self residual", func(g *Graph, in []*Tensor) *Tensor {
			y, _, _ := g.BatchNorm2dTrainAct(in[0], in[1], in[2], nil, nil, in[0], true, 1e-5, 0.1)
			return y
		}, []*Tensor{rnd(r, 2, 3, 2, 3), rnd(r, 3), rnd(r, 3)}},
	}
}

func TestBatchNormActGradients(t *testing.T) {
	for _, c := range fusedCases(rand.New(rand.NewPCG(5, 6))) {
		gradCheck(t, c.name, c.f, c.in...)
	}
}

// TestBatchNormActMatchesPlain compares the fused op with its plain
// equivalent on the CPU in float32, on planes large enough that the
// channels are shared out between goroutines: the same values forward and
// in the running statistics, the gradients to rounding.
func TestBatchNormActMatchesPlain(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	rand32 := func(shape ...int) *Tensor {
		x := Zeros(shape...)
		for i := range x.Data() {
			x.Data()[i] = float32(3*r.Float64() - 1)
		}
		return x.SetRequiresGrad(true)
	}
	for _, relu := range []bool{false, true} {
		for _, withRes := range []bool{false, true} {
			x, w, b := rand32(3, 24, 20, 20), rand32(24), rand32(24)
			rm, rv := rand32(24), rand32(24)
			var res *Tensor
			if withRes {
				res = rand32(3, 24, 20, 20)
			}
			run := func(fused bool) (y, nm, nv *Tensor, grads []*Tensor) {
				ins := []*Tensor{x, w, b}
				if res != nil {
					ins = append(ins, res)
				}
				for _, in := range ins {
					in.ZeroGrad()
				}
				g := NewGraph()
				if fused {
					y, nm, nv = g.BatchNorm2dTrainAct(x, w, b, rm, rv, res, relu, 1e-5, 0.1)
				} else {
					y, nm, nv = g.BatchNorm2dTrain(x, w, b, rm, rv, 1e-5, 0.1)
					if res != nil {
						y = g.Add(y, res)
					}
					if relu {
						y = g.ReLU(y)
					}
				}
				wt := Zeros(y.Shape()...)
				for i := range wt.Data() {
					wt.Data()[i] = float32(math.Sin(float64(i)))
				}
				if err := g.Backward(g.Sum(g.Mul(y, wt))); err != nil {
					t.Fatal(err)
				}
				for _, in := range ins {
					grads = append(grads, in.Grad().Clone())
				}
				return y, nm, nv, grads
			}
			y0, m0, v0, g0 := run(false)
			y1, m1, v1, g1 := run(true)
			for i, v := range y0.Data() {
				if y1.Data()[i] != v {
					t.Fatalf("relu %v residual %v: y[%d] = %v, plain %v", relu, withRes, i, y1.Data()[i], v)
				}
			}
			if e := math.Max(relErr(m1.Float64s(), m0.Float64s()), relErr(v1.Float64s(), v0.Float64s())); e > 1e-7 {
				t.Errorf("relu %v residual %v: running statistics differ by %.3g", relu, withRes, e)
			}
			for i := range g0 {
				if e := relErr(g1[i].Float64s(), g0[i].Float64s()); e > 1e-5 {
					t.Errorf("relu %v residual %v: gradient %d differs by %.3g", relu, withRes, i, e)
				}
			}
		}
	}
}

// TestBatchNormActOnDevice runs the fused op on the test device (its plain
// equivalent there) and on the CPU from the same float32 inputs.
func TestBatchNormActOnDevice(t *testing.T) {
	dev := testDevice(t)
	const tol = 1e-5
	for _, c := range fusedCases(rand.New(rand.NewPCG(1, 2))) {
		run := func(d Device) (out *Tensor, grads []*Tensor) {
			in := make([]*Tensor, len(c.in))
			for i, x := range c.in {
				in[i] = x.To32().SetRequiresGrad(true).To(d)
			}
			g := NewGraph()
			out = c.f(g, in)
			w := Zeros(out.shape...)
			wr := rand.New(rand.NewPCG(7, 7))
			for i := range w.Data() {
				w.Data()[i] = float32(2*wr.Float64() - 1)
			}
			if err := g.Backward(g.Sum(g.Mul(out, w.To(d)))); err != nil {
				t.Fatalf("%s on %v: %v", c.name, d, err)
			}
			for _, x := range in {
				if x.Grad() == nil || x.Grad().Device() != d {
					t.Fatalf("%s on %v: no gradient there", c.name, d)
				}
				grads = append(grads, x.Grad())
			}
			return out, grads
		}
		wantOut, wantGrads := run(CPU)
		gotOut, gotGrads := run(dev)
		e := relErr(gotOut.Float64s(), wantOut.Float64s())
		eg := 0.0
		for i := range wantGrads {
			eg = math.Max(eg, relErr(gotGrads[i].Float64s(), wantGrads[i].Float64s()))
		}
		t.Logf("%-36s on %v: forward %.2g, gradients %.2g", c.name, dev, e, eg)
		if e > tol || eg > tol {
			t.Errorf("%s on %v: relative error forward %.3g, gradients %.3g (tolerance %g)", c.name, dev, e, eg, tol)
		}
	}
}
