package relmem

import (
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/gradcheck"
)

func TestInitMemory(t *testing.T) {
	for _, c := range []struct{ slots, d int }{{3, 8}, {4, 4}, {5, 4}} {
		r := New(c.slots, c.d, 2, 0, rand.New(rand.NewPCG(1, 1)))
		m := r.InitMemory(2)
		for b := 0; b < 2; b++ {
			for s := 0; s < c.slots; s++ {
				for j := 0; j < c.d; j++ {
					want := 0.0
					if s == j {
						want = 1
					}
					if got := m.At(b, s, j); got != want {
						t.Fatalf("slots %d, width %d: M0[%d,%d,%d] = %v, want %v", c.slots, c.d, b, s, j, got, want)
					}
				}
			}
		}
	}
}

// TestStepGates checks Eq. 10 on a memory whose gates are forced: with W
// and U zero and biases ±30, the input gate is shut and the forget gate
// open, so M_t = M_{t−1}; with the biases flipped, M_t = tanh(M̃).
func TestStepGates(t *testing.T) {
	r := New(2, 4, 2, 0, rand.New(rand.NewPCG(2, 2)))
	radgen.Fill(r.W.Weight, 0)
	radgen.Fill(r.U.Weight, 0)
	d := 4
	bias := func(in, forget float64) {
		b := r.W.Bias.Data()
		for j := 0; j < d; j++ {
			b[j], b[d+j] = float32(in), float32(forget)
		}
		radgen.Fill(r.U.Bias, 0)
	}
	g := radgen.NoGrad()
	m0 := r.InitMemory(1)
	y := radgen.FromFloat32([]float32{0.5, -1, 2, 0.25}, 1, 4)
	bias(-30, 30)
	got := g.Reshape(r.Step(g, y, m0), -1).Data()
	for i, v := range m0.Data() {
		if d := got[i] - v; d > 1e-6 || d < -1e-6 {
			t.Fatalf("closed input gate: M_t = %v, want M_0 = %v", got, m0.Data())
		}
	}
	bias(30, -30)
	got = r.Step(g, y, m0).Data()
	for _, v := range got {
		if v <= -1 || v >= 1 {
			t.Fatalf("open input gate: M_t = %v, want values of tanh", got)
		}
	}
}

func TestStepGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	r := New(2, 4, 2, 0, rng)
	radgen.Promote64(r)
	y := gradcheck.Rand(rng, 1, 2, 3, 4)
	m0 := r.InitMemory(2).To64()
	wrt := []*radgen.Tensor{y, r.W.Weight, r.U.Weight, r.MLP0.Weight, r.Attn.Linears[0].Weight, r.Attn.Linears[2].Bias}
	gradcheck.Check(t, "relational memory over 3 steps", 1e-6, func(g *radgen.Graph) *radgen.Tensor {
		return r.Forward(g, y, m0)
	}, wrt...)
}

// A step's rows are independent: each row of a batch steps to the same
// bits as that row stepped alone, whichever rows share its products.
func TestStepRowsIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	r := New(3, 32, 4, 0, rng)
	g := radgen.NoGrad()
	m := r.Step(g, gradcheck.Rand(rng, 1, 3, 32).To32(), r.InitMemory(3)) // a memory of 3 rows, not the identity
	y := gradcheck.Rand(rng, 1, 3, 32).To32()
	all := r.Step(g, y, m).Data()
	for row := range 3 {
		one := r.Step(radgen.NoGrad(), g.IndexSelect(y, 0, []int{row}), g.IndexSelect(m, 0, []int{row})).Data()
		for i, v := range one {
			if got := all[row*len(one)+i]; got != v {
				t.Fatalf("row %d value %d: %v in the batch, %v alone", row, i, got, v)
			}
		}
	}
}
