package mcln

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
)

// DefaultEps is R2Gen's eps, added to the standard deviation.
const DefaultEps = 1e-6

// LayerNorm is y = γ ⊙ (x − μ)/σ + β over the last dimension, with σ as
// Kind says (radgen.NormR2Gen by default). Parameters: gamma, beta.
type LayerNorm struct {
	Gamma, Beta *radgen.Tensor // (D): gamma and beta
	// Eps is added to the standard deviation (radgen.NormR2Gen) or to the
	// variance (radgen.NormStandard).
	Eps float64
	// Kind selects the normalisation; NewLayerNorm sets radgen.NormR2Gen.
	Kind radgen.NormKind
}

// NewLayerNorm returns R2Gen's LayerNorm of width d: γ = 1, β = 0, eps 1e-6.
func NewLayerNorm(d int) *LayerNorm {
	ln := &LayerNorm{Gamma: radgen.NewParam(d), Beta: radgen.NewParam(d), Eps: DefaultEps, Kind: radgen.NormR2Gen}
	radgen.Fill(ln.Gamma, 1)
	return ln
}

// Forward normalises x (…, D).
func (ln *LayerNorm) Forward(g *radgen.Graph, x *radgen.Tensor) *radgen.Tensor {
	return g.LayerNorm(x, ln.Gamma, ln.Beta, ln.Eps, ln.Kind)
}

// VisitParams implements radgen.Module.
func (ln *LayerNorm) VisitParams(visit func(string, *radgen.Tensor)) {
	visit("gamma", ln.Gamma)
	visit("beta", ln.Beta)
}

// MLP is the two-layer perceptron f_mlp of Eqs. 11 and 13:
// Linear(S·D_m → D) → ReLU → Linear(D → D), named .0 and .2 as in the
// reference's nn.Sequential.
type MLP struct {
	L0, L2 *radgen.Linear // .0 (S·D_m → D) and .2 (D → D)
}

// Forward maps memory (…, S·D_m) to (…, D).
func (m *MLP) Forward(g *radgen.Graph, x *radgen.Tensor) *radgen.Tensor {
	return m.L2.Forward(g, g.ReLU(m.L0.Forward(g, x)))
}

// VisitParams implements radgen.Module.
func (m *MLP) VisitParams(visit func(string, *radgen.Tensor)) {
	m.L0.VisitParams(radgen.Prefixed("0.", visit))
	m.L2.VisitParams(radgen.Prefixed("2.", visit))
}

// Conditional is the memory-driven conditional layer norm (MCLN). Given the
// relational memory M_t flattened to S·D_m values per position:
//
//	Δγ_t = f_mlp(M_t),  γ̂_t = γ + Δγ_t     (Eqs. 11, 12)
//	Δβ_t = f_mlp(M_t),  β̂_t = β + Δβ_t     (Eqs. 13, 14)
//	MCLN(r) = γ̂_t ⊙ (r − μ)/(std + eps) + β̂_t   (Eq. 15, v = std + eps as R2Gen's code)
//
// Parameter names follow R2Gen: gamma, beta, mlp_gamma.{0,2}, mlp_beta.{0,2}.
type Conditional struct {
	Gamma, Beta       *radgen.Tensor // (D): γ and β
	MLPGamma, MLPBeta *MLP           // f_mlp of Δγ and of Δβ
	Eps               float64        // added to the standard deviation; DefaultEps
}

// NewConditional returns an MCLN of width d conditioned on a memory of
// memWidth = slots·D_m values. As in R2Gen, the MLP weights are
// Xavier-uniform and their biases 0.1.
func NewConditional(d, memWidth int, rng *rand.Rand) *Conditional {
	mlp := func() *MLP {
		m := &MLP{L0: radgen.NewLinear(memWidth, d, true, rng), L2: radgen.NewLinear(d, d, true, rng)}
		for _, l := range []*radgen.Linear{m.L0, m.L2} {
			radgen.XavierUniform(l.Weight, rng)
			radgen.Fill(l.Bias, 0.1)
		}
		return m
	}
	c := &Conditional{Gamma: radgen.NewParam(d), Beta: radgen.NewParam(d), MLPGamma: mlp(), MLPBeta: mlp(), Eps: DefaultEps}
	radgen.Fill(c.Gamma, 1)
	return c
}

// Forward normalises x (B, T, D) conditioned on memory (B, T, S·D_m), one
// memory state per position (R2Gen Eq. 15, with Eqs. 11–14 inside). x and
// memory may also be (R, D) and (R, S·D_m), one memory state per row, as
// an incremental step has them; any other ranks, or row counts that
// differ, panic.
func (c *Conditional) Forward(g *radgen.Graph, x, memory *radgen.Tensor) *radgen.Tensor {
	if r := x.Rank(); (r != 2 && r != 3) || memory.Rank() != r || x.Dim(0) != memory.Dim(0) || (r == 3 && x.Dim(1) != memory.Dim(1)) {
		panic(fmt.Sprintf("mcln: conditional norm of %v over memory %v, want (B, T, D) and (B, T, S·D) or (R, D) and (R, S·D)", x.Shape(), memory.Shape()))
	}
	gamma, beta := c.Deltas(g, memory)
	return c.Apply(g, x, gamma, beta)
}

// Deltas returns γ̂ and β̂ (B, T, D) for a memory (B, T, S·D_m), Eqs. 11–14;
// decoders that reuse one memory across sublayers may compute them once.
func (c *Conditional) Deltas(g *radgen.Graph, memory *radgen.Tensor) (gammaHat, betaHat *radgen.Tensor) {
	gammaHat = g.Add(c.Gamma, c.MLPGamma.Forward(g, memory)) // Eqs. 11, 12
	betaHat = g.Add(c.Beta, c.MLPBeta.Forward(g, memory))    // Eqs. 13, 14
	return gammaHat, betaHat
}

// Apply normalises x with precomputed γ̂ and β̂ (Eq. 15).
func (c *Conditional) Apply(g *radgen.Graph, x, gammaHat, betaHat *radgen.Tensor) *radgen.Tensor {
	return g.LayerNorm(x, gammaHat, betaHat, c.Eps, radgen.NormR2Gen)
}

// VisitParams implements radgen.Module.
func (c *Conditional) VisitParams(visit func(string, *radgen.Tensor)) {
	visit("gamma", c.Gamma)
	visit("beta", c.Beta)
	c.MLPGamma.VisitParams(radgen.Prefixed("mlp_gamma.", visit))
	c.MLPBeta.VisitParams(radgen.Prefixed("mlp_beta.", visit))
}

var (
	_ radgen.Module = (*LayerNorm)(nil)
	_ radgen.Module = (*Conditional)(nil)
)
