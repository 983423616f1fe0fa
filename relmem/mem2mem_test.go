package relmem

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/gradcheck"
)

func TestPenaltyKnownMatrices(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    []float32
		b, r int
		want float64
	}{
		// Orthonormal rows (distinct one-hot rows): AAᵀ = I, P = 0.
		{"one-hot rows", []float32{1, 0, 0, 0, 0, 0, 1, 0}, 1, 2, 0},
		// Two equal uniform rows over L = 4: AAᵀ = ¼ everywhere, so
		// P = 2·(¼ − 1)² + 2·(¼)² = 1.25.
		{"equal uniform rows", []float32{.25, .25, .25, .25, .25, .25, .25, .25}, 1, 2, 1.25},
		// Two equal one-hot rows: AAᵀ = all ones, P = 2·0 + 2·1 = 2.
		{"equal one-hot rows", []float32{0, 1, 0, 0, 0, 1, 0, 0}, 1, 2, 2},
		// The batch mean of the first two cases.
		{"batch mean", []float32{1, 0, 0, 0, 0, 0, 1, 0, .25, .25, .25, .25, .25, .25, .25, .25}, 2, 2, 0.625},
	} {
		a := radgen.FromFloat32(tc.a, tc.b, tc.r, len(tc.a)/(tc.b*tc.r))
		got := float64(BankPenalty(radgen.NoGrad(), a).Data()[0])
		if math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("%s: P = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The bank's attention rows are distributions over the L states, and
// M^(e) = A H row by row.
func TestMem2MemBank(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	m := NewMem2Mem(3, 4, 5, rng)
	h := radgen.Zeros(2, 6, 4)
	for i := range h.Data() {
		h.Data()[i] = float32(rng.NormFloat64())
	}
	mem, a := m.Bank(radgen.NoGrad(), h)
	if got := mem.Shape(); got[0] != 2 || got[1] != 3 || got[2] != 4 {
		t.Fatalf("bank shape %v", got)
	}
	for b := range 2 {
		for k := range 3 {
			var sum float64
			want := make([]float64, 4)
			for j := range 6 {
				w := float64(a.Data()[(b*3+k)*6+j])
				sum += w
				for c := range 4 {
					want[c] += w * float64(h.Data()[(b*6+j)*4+c])
				}
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Fatalf("attention row (%d, %d) sums to %v", b, k, sum)
			}
			for c := range 4 {
				if got := float64(mem.Data()[(b*3+k)*4+c]); math.Abs(got-want[c]) > 1e-5 {
					t.Fatalf("M^(e)[%d,%d,%d] = %v, want %v", b, k, c, got, want[c])
				}
			}
		}
	}
}

// With the gate saturated open (z = 1) the write keeps the memory; shut
// (z = 0) it replaces every slot by u.
func TestMem2MemWriteGate(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	const d = 3
	m := NewMem2Mem(2, d, 4, rng)
	for _, l := range []*radgen.Linear{m.WriteH, m.WriteC, m.WriteM} {
		radgen.Fill(l.Weight, 0)
	}
	radgen.Fill(m.WriteH.Bias, 0)
	mem := radgen.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 1, 2, d)
	x := radgen.FromFloat32([]float32{1, 1, 1}, 1, d)
	c := radgen.FromFloat32([]float32{0, 0, 0}, 1, d)
	bias := m.WriteH.Bias.Data()
	for i := range d {
		bias[i], bias[d+i] = 40, 0.5 // z ≈ 1
	}
	got := m.Write(radgen.NoGrad(), mem, x, c).Data()
	for i, v := range mem.Data() {
		if math.Abs(float64(got[i]-v)) > 1e-6 {
			t.Fatalf("open gate: %v, want %v", got, mem.Data())
		}
	}
	for i := range d {
		bias[i] = -40 // z ≈ 0: M_k ← u = tanh(0.5)
	}
	got = m.Write(radgen.NoGrad(), mem, x, c).Data()
	for _, v := range got {
		if math.Abs(float64(v)-math.Tanh(0.5)) > 1e-6 {
			t.Fatalf("shut gate: %v, want tanh(0.5) everywhere", got)
		}
	}
}

// Forward equals the step-by-step composition of Context, Write and Read.
func TestMem2MemForwardMatchesSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const b, tt, l, d = 2, 4, 5, 6
	m := NewMem2Mem(3, d, 4, rng)
	x, h := gradcheck.Rand(rng, 1, b, tt, d).To32(), gradcheck.Rand(rng, 1, b, l, d).To32()
	g := radgen.NoGrad()
	init, _ := m.Bank(g, h)
	states, reads := m.Forward(g, x, h, init)
	c := m.Context(g, x, m.ContextKeys(g, h), h)
	mem := init
	for i := range tt {
		xi := g.Reshape(g.Slice(x, 1, i, i+1), b, d)
		ci := g.Reshape(g.Slice(c, 1, i, i+1), b, d)
		mem = m.Write(g, mem, xi, ci)
		rd := m.Read(g, mem, xi)
		for r := range b {
			for j := range 3 * d {
				if got, want := states.Data()[(r*tt+i)*3*d+j], mem.Data()[r*3*d+j]; math.Abs(float64(got-want)) > 1e-6 {
					t.Fatalf("state (%d, %d)[%d] = %v, want %v", r, i, j, got, want)
				}
			}
			for j := range d {
				if got, want := reads.Data()[(r*tt+i)*d+j], rd.Data()[r*d+j]; math.Abs(float64(got-want)) > 1e-6 {
					t.Fatalf("read (%d, %d)[%d] = %v, want %v", r, i, j, got, want)
				}
			}
		}
	}
}

func TestMem2MemGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	const b, tt, l, d = 2, 3, 4, 4
	m := NewMem2Mem(2, d, 3, rng)
	radgen.Promote64(m)
	x, h := gradcheck.Rand(rng, 1, b, tt, d), gradcheck.Rand(rng, 1, b, l, d)
	gradcheck.Check(t, "Mem2Mem bank, memory and read", 1e-6, func(g *radgen.Graph) *radgen.Tensor {
		init, _ := m.Bank(g, h)
		states, reads := m.Forward(g, x, h, init)
		return g.Concat(2, states, m.Augment(g, x, reads))
	}, x, h, m.BankW2.Weight, m.BankW1.Weight, m.CtxQ.Weight, m.CtxK.Weight, m.CtxV.Weight, m.ReadQ.Weight,
		m.ReadK.Weight, m.ReadV.Weight, m.Combine.Weight, m.WriteH.Weight, m.WriteH.Bias, m.WriteC.Weight, m.WriteM.Weight)
	gradcheck.Check(t, "Mem2Mem penalty", 1e-6, func(g *radgen.Graph) *radgen.Tensor {
		_, a := m.Bank(g, h)
		return BankPenalty(g, a)
	}, h, m.BankW2.Weight, m.BankW1.Weight)
}
