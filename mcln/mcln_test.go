package mcln

import (
	"math"
	"math/rand/v2"
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

// A Group's batched deltas equal each norm's own, for every row count the
// decoding uses and beyond the batched products' limit.
func TestGroupMatchesDeltas(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	norms := []*Conditional{NewConditional(12, 20, rng), NewConditional(12, 20, rng), NewConditional(12, 20, rng)}
	gr := NewGroup(norms...)
	for _, rows := range []int{1, 3, 7, 60} {
		mem := radgen.Zeros(rows, 20)
		radgen.Uniform(mem, rng, 1)
		g := radgen.NoGrad()
		gammas, betas := gr.Deltas(g, mem)
		for i, c := range norms {
			wantG, wantB := c.Deltas(g, mem)
			for _, pair := range [][2]*radgen.Tensor{{gammas[i], wantG}, {betas[i], wantB}} {
				for j, v := range pair[1].Data() {
					if d := math.Abs(float64(pair[0].Data()[j] - v)); d > 1e-5*(1+math.Abs(float64(v))) {
						t.Fatalf("%d rows, norm %d: value %d = %v, want %v", rows, i, j, pair[0].Data()[j], v)
					}
				}
			}
		}
	}
}

// Started in the background, a Group gives the norms' own deltas norm by
// norm, whatever the caller does between Start and Ready, and a Start
// before the last Ready finishes the earlier products first.
func TestGroupStartReady(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	var norms []*Conditional
	for range 4 {
		norms = append(norms, NewConditional(256, 768, rng))
	}
	gr := NewGroup(norms...)
	g := radgen.NoGrad()
	side := radgen.NewLinear(768, 512, true, rng)
	check := func(mem *radgen.Tensor, i int, gamma, beta *radgen.Tensor) {
		t.Helper()
		wantG, wantB := norms[i].Deltas(radgen.NoGrad(), mem)
		for _, pair := range [][2]*radgen.Tensor{{gamma, wantG}, {beta, wantB}} {
			for j, v := range pair[1].Data() {
				if d := math.Abs(float64(pair[0].Data()[j] - v)); d > 1e-5*(1+math.Abs(float64(v))) {
					t.Fatalf("norm %d: value %d = %v, want %v", i, j, pair[0].Data()[j], v)
				}
			}
		}
	}
	for round := range 4 {
		mem := radgen.Zeros(3, 768)
		radgen.Uniform(mem, rng, 1)
		gr.Start(g, mem)
		for n := 1; n <= len(norms); n++ {
			side.Forward(g, mem) // the caller's own products meanwhile
			gammas, betas := gr.Ready(n)
			if len(gammas) != n || len(betas) != n {
				t.Fatalf("Ready(%d): %d and %d deltas", n, len(gammas), len(betas))
			}
			check(mem, n-1, gammas[n-1], betas[n-1])
			if round%2 == 1 && n == 2 {
				break // the next Start finishes these products
			}
		}
	}
	gammas, betas := gr.Ready(len(norms))
	if len(gammas) != len(norms) || len(betas) != len(norms) {
		t.Fatalf("%d and %d deltas after the last Ready", len(gammas), len(betas))
	}
}

// Added to a batch after a stage of the caller's that computes the memory
// itself, a Group's products read that stage's results: its first stage
// is a stage of its own, and its deltas are the norms' own.
func TestGroupAddAfterStage(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 7))
	var norms []*Conditional
	for range 3 {
		norms = append(norms, NewConditional(256, 768, rng))
	}
	gr := NewGroup(norms...)
	project := radgen.NewLinear(512, 768, true, rng)
	x := radgen.Zeros(3, 512)
	radgen.Uniform(x, rng, 1)
	g := radgen.NoGrad()
	b := g.Batch()
	var mem [1]*radgen.Tensor
	b.Linears(mem[:], []*radgen.Tensor{x}, []*radgen.Linear{project}, false)
	gr.Add(g, b, mem[0])
	if got, want := b.Stages(), 1+len(norms)+1; got != want {
		t.Fatalf("%d stages, want %d", got, want)
	}
	b.Start()
	gammas, betas := gr.Ready(len(norms))
	b.Finish()
	want := project.Forward(radgen.NoGrad(), x)
	for i, c := range norms {
		wantG, wantB := c.Deltas(radgen.NoGrad(), want)
		for _, pair := range [][2]*radgen.Tensor{{gammas[i], wantG}, {betas[i], wantB}} {
			for j, v := range pair[1].Data() {
				if d := math.Abs(float64(pair[0].Data()[j] - v)); d > 1e-5*(1+math.Abs(float64(v))) {
					t.Fatalf("norm %d: value %d = %v, want %v", i, j, pair[0].Data()[j], v)
				}
			}
		}
	}
}
