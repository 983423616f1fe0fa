package mcln

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/gradcheck"
)

// With zero MLP output weights the MCLN reduces to γ ⊙ x̂ + β + the second
// layers' biases (0.1 each at initialisation): Eqs. 11–15.
func TestConditionalReducesToLayerNorm(t *testing.T) {
	c := NewConditional(4, 6, rand.New(rand.NewPCG(1, 1)))
	radgen.Fill(c.MLPGamma.L2.Weight, 0)
	radgen.Fill(c.MLPBeta.L2.Weight, 0)
	x := radgen.FromFloat32([]float32{1, 2, 3, 4}, 1, 1, 4)
	mem := radgen.FromFloat32([]float32{5, -4, 3, 2, 1, 0}, 1, 1, 6)
	got := c.Forward(radgen.NoGrad(), x, mem).Data()
	std := math.Sqrt(5.0 / 3)
	for i, v := range []float64{-1.5, -0.5, 0.5, 1.5} {
		want := 1.1*v/(std+1e-6) + 0.1
		if math.Abs(float64(got[i])-want) > 1e-5 {
			t.Fatalf("MCLN[%d] = %v, want %v", i, got[i], want)
		}
	}
}

func TestGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	c := NewConditional(5, 6, rng)
	radgen.Promote64(c)
	x := gradcheck.Rand(rng, 1, 2, 3, 5)
	mem := gradcheck.Rand(rng, 1, 2, 3, 6)
	gradcheck.Check(t, "MCLN", 1e-6, func(g *radgen.Graph) *radgen.Tensor { return c.Forward(g, x, mem) },
		x, mem, c.Gamma, c.Beta, c.MLPGamma.L0.Weight, c.MLPBeta.L2.Weight, c.MLPBeta.L0.Bias)
	ln := NewLayerNorm(5)
	radgen.Promote64(ln)
	gradcheck.Check(t, "LayerNorm", 1e-6, func(g *radgen.Graph) *radgen.Tensor { return ln.Forward(g, x) }, x, ln.Gamma, ln.Beta)
}

// Deltas issued for every norm of a decoder, from one memory, and read
// in any order, with the caller's own products between the reads, equal
// each norm's own computed alone, for every row count a decoding uses and
// beyond the products the engine defers.
func TestDeltasOfManyNorms(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2)))
	rng := rand.New(rand.NewPCG(2, 3))
	var norms []*Conditional
	for range 4 {
		norms = append(norms, NewConditional(256, 768, rng))
	}
	side := radgen.NewLinear(768, 512, true, rng)
	g := radgen.NoGrad()
	gammas, betas := make([]*radgen.Tensor, len(norms)), make([]*radgen.Tensor, len(norms))
	for round, rows := range []int{1, 3, 7, 60, 3} {
		mem := radgen.Zeros(rows, 768)
		radgen.Uniform(mem, rng, 1)
		for i, c := range norms {
			gammas[i], betas[i] = c.Deltas(g, mem)
		}
		order := []int{0, 1, 2, 3}
		if round%2 == 1 {
			order = []int{3, 1, 0, 2}
		}
		for _, i := range order {
			side.Forward(g, mem) // the caller's own products meanwhile
			wantG, wantB := norms[i].Deltas(radgen.NoGrad(), mem)
			sameBits(t, rows, i, gammas[i], wantG)
			sameBits(t, rows, i, betas[i], wantB)
			if round == 2 && i == 1 {
				break // the next round's products wait for the rest
			}
		}
	}
}

// Deltas of a memory that is itself a pending product read it once it is
// computed.
func TestDeltasOfPendingMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 7))
	var norms []*Conditional
	for range 3 {
		norms = append(norms, NewConditional(256, 768, rng))
	}
	project := radgen.NewLinear(512, 768, true, rng)
	x := radgen.Zeros(3, 512)
	radgen.Uniform(x, rng, 1)
	g := radgen.NoGrad()
	gammas, betas := make([]*radgen.Tensor, len(norms)), make([]*radgen.Tensor, len(norms))
	mem := project.Forward(g, x)
	for i, c := range norms {
		gammas[i], betas[i] = c.Deltas(g, mem)
	}
	want := project.Forward(radgen.NoGrad(), x)
	for i, c := range norms {
		wantG, wantB := c.Deltas(radgen.NoGrad(), want)
		sameBits(t, 3, i, gammas[i], wantG)
		sameBits(t, 3, i, betas[i], wantB)
	}
}

// sameBits fails unless got and want hold the same float32 values.
func sameBits(t *testing.T, rows, norm int, got, want *radgen.Tensor) {
	t.Helper()
	for j, v := range want.Data() {
		if got.Data()[j] != v {
			t.Fatalf("%d rows, norm %d: value %d = %v, want %v", rows, norm, j, got.Data()[j], v)
		}
	}
}
