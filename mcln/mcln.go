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
	Gamma, Beta *radgen.Tensor // (D)
	Eps         float64
	Kind        radgen.NormKind
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
	L0, L2 *radgen.Linear
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
	Gamma, Beta       *radgen.Tensor // (D)
	MLPGamma, MLPBeta *MLP
	Eps               float64
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
// memory state per position.
func (c *Conditional) Forward(g *radgen.Graph, x, memory *radgen.Tensor) *radgen.Tensor {
	gamma, beta := c.Deltas(g, memory)
	return c.Apply(g, x, gamma, beta)
}

// Deltas returns γ̂ and β̂ (B, T, D) for a memory (B, T, S·D_m); decoders
// that reuse one memory across sublayers may compute them once.
func (c *Conditional) Deltas(g *radgen.Graph, memory *radgen.Tensor) (gammaHat, betaHat *radgen.Tensor) {
	return c.modulate(g, c.MLPGamma.Forward(g, memory), c.MLPBeta.Forward(g, memory))
}

// modulate returns γ̂ and β̂ from the outputs of the γ and β MLPs.
func (c *Conditional) modulate(g *radgen.Graph, dGamma, dBeta *radgen.Tensor) (gammaHat, betaHat *radgen.Tensor) {
	return g.Add(dGamma, c.Gamma), g.Add(dBeta, c.Beta) // Eqs. 11–12, 13–14
}

// Apply normalises x with precomputed γ̂ and β̂ (Eq. 15).
func (c *Conditional) Apply(g *radgen.Graph, x, gammaHat, betaHat *radgen.Tensor) *radgen.Tensor {
	return g.LayerNorm(x, gammaHat, betaHat, c.Eps, radgen.NormR2Gen)
}

// Group computes γ̂ and β̂ (Eqs. 11–14) of several conditional norms that
// read one memory — every sublayer norm of a decoder, whose memory changes
// once per position — as one batch of products (radgen.Batch), instead of
// four separate products per norm: the first layers of the first norm's γ
// and β MLPs, then one stage per norm with its second layers beside the
// next norm's first layers, which read only the memory. So the goroutines
// that compute the batch meet at one stage's end per norm, not two. The
// batch may run beside the caller (Start, Ready): a decoder needs the
// norms of its first layer first, and the products of the later layers'
// norms, which stream most of a decoding step's weights, then overlap the
// first layers' work. A Group belongs to one goroutine.
type Group struct {
	norms         []*Conditional
	first, second []*radgen.Linear // γ's and β's MLP layers, norm by norm
	ins, hidden   []*radgen.Tensor
	out           []*radgen.Tensor
	gammas, betas []*radgen.Tensor

	g      *radgen.Graph
	batch  *radgen.Batch // the products in flight, from Start to the last Ready
	stage0 int           // the batch's stage of the group's first
	owned  bool          // Start made the batch: the last Ready finishes it
	ready  int           // norms whose γ̂ and β̂ Ready has made
}

// NewGroup returns the group of norms.
func NewGroup(norms ...*Conditional) *Group {
	gr := &Group{norms: norms}
	for _, c := range norms {
		gr.first = append(gr.first, c.MLPGamma.L0, c.MLPBeta.L0)
		gr.second = append(gr.second, c.MLPGamma.L2, c.MLPBeta.L2)
	}
	n := 2 * len(norms)
	gr.ins, gr.hidden, gr.out = make([]*radgen.Tensor, n), make([]*radgen.Tensor, n), make([]*radgen.Tensor, n)
	gr.gammas, gr.betas = make([]*radgen.Tensor, len(norms)), make([]*radgen.Tensor, len(norms))
	return gr
}

// Len returns the number of norms of the group.
func (gr *Group) Len() int { return len(gr.norms) }

// Deltas returns γ̂ and β̂ (…, D) of every norm of the group, in order, for
// a memory (…, S·D_m), as each norm's Deltas would: Start, then Ready of
// every norm. The slices are the group's own: the next call overwrites
// them.
func (gr *Group) Deltas(g *radgen.Graph, memory *radgen.Tensor) (gammas, betas []*radgen.Tensor) {
	gr.Start(g, memory)
	return gr.Ready(len(gr.norms))
}

// Start begins computing γ̂ and β̂ of every norm of the group for a memory
// (…, S·D_m), norm after norm in the group's order, beside the calling
// goroutine (on the CPU; elsewhere at once), and returns. Ready returns
// them; the caller may use g for other work meanwhile. A Start that
// follows one whose norms Ready has not all returned waits for those
// first.
func (gr *Group) Start(g *radgen.Graph, memory *radgen.Tensor) {
	gr.Add(g, g.Batch(), memory)
	gr.owned = true
	gr.batch.Start()
}

// Add is Start in a batch of the caller's: it adds the group's products
// for a memory to b, as Len+1 stages, norm after norm, after b's stages so
// far. The caller may add stages of its own after them (products that run
// once the group's are done), starts b before the first Ready, and
// finishes b after the last.
func (gr *Group) Add(g *radgen.Graph, b *radgen.Batch, memory *radgen.Tensor) {
	if gr.batch != nil {
		gr.Ready(len(gr.norms))
	}
	for i := range gr.ins {
		gr.ins[i] = memory
	}
	gr.g, gr.batch, gr.stage0, gr.owned, gr.ready = g, b, b.Stages(), false, 0
	if len(gr.ins) == 0 {
		return
	}
	// The group's first stage, a stage of its own (the memory may be a
	// result of b's last stage), holds ReLU(L0(M)) of the first norm's γ
	// and β MLPs; each next one the second layers of a norm and the first
	// layers of the norm after it.
	b.Linears(gr.hidden[:2], gr.ins[:2], gr.first[:2], true)
	for i := 2; i <= len(gr.ins); i += 2 {
		b.Linears(gr.out[i-2:i], gr.hidden[i-2:i], gr.second[i-2:i], false)
		if i < len(gr.ins) {
			b.LinearsBeside(gr.hidden[i:i+2], gr.ins[i:i+2], gr.first[i:i+2], true)
		}
	}
}

// Ready returns γ̂ and β̂ of the group's first n norms, in order, once
// Start's products for them are done, computing what is left of those on
// the calling goroutine. Once n is the group's length, the group's
// products are all done, and the next Start may follow. The slices are
// the group's own.
func (gr *Group) Ready(n int) (gammas, betas []*radgen.Tensor) {
	if n < 0 || n > len(gr.norms) {
		panic(fmt.Sprintf("mcln: Ready(%d) of a group of %d norms", n, len(gr.norms)))
	}
	if gr.batch == nil {
		if n > gr.ready {
			panic(fmt.Sprintf("mcln: Ready(%d) of a group not started", n))
		}
		return gr.gammas[:n], gr.betas[:n]
	}
	if n > gr.ready {
		gr.batch.Wait(gr.stage0 + n + 1) // norm n−1's second layers are in stage n
		for i := gr.ready; i < n; i++ {
			gr.gammas[i], gr.betas[i] = gr.norms[i].modulate(gr.g, gr.out[2*i], gr.out[2*i+1])
		}
		gr.ready = n
	}
	if n == len(gr.norms) {
		if gr.owned {
			gr.batch.Finish()
		}
		gr.batch, gr.g = nil, nil
		clear(gr.ins)
		clear(gr.hidden)
		clear(gr.out)
	}
	return gr.gammas[:n], gr.betas[:n]
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
