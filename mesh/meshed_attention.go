package mesh

// M²'s meshed cross-attention (Cornia et al. 2020, §3.2, Eqs. 6–8): a
// decoder's queries attend every encoder level through one cross-attention,
// and learned sigmoid gates weigh each level's result. Mirrors the
// published MeshedDecoderLayer (models/transformer/decoders.py), whose
// parameter names it keeps.

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/radgen/radgen"
)

// MeshedCrossAttention is the meshed attention operator M_mesh of Cornia et
// al. 2020:
//
//	M_mesh(X̃, Y) = Σ_i α_i ⊙ C(X̃ⁱ, Y) / √N                          (Eq. 6)
//	C(X̃ⁱ, Y)     = Attention(W_q Y, W_k X̃ⁱ, W_v X̃ⁱ)                 (Eq. 7)
//	α_i          = σ(W_i [Y; C(X̃ⁱ, Y)] + b_i),  i = 1..N              (Eq. 8)
//
// over N encoder levels X̃ⁱ. One cross-attention C serves every level; it
// may be any [IncrementalAttention], wrapped as its model needs (M² wraps
// it in a residual connection and a LayerNorm, so that C_i is the AddNorm
// of Eq. 9 and the gates read it). The published code divides by
// np.sqrt(3) for its three levels; this is √N, the same for N = 3.
//
// Names, those of the published decoder layer: enc_att.* (the
// cross-attention) and fc_alpha1.* … fc_alphaN.* (the gates).
type MeshedCrossAttention struct {
	Attention IncrementalAttention // C, shared by every level
	Gates     []*radgen.Linear     // W_i, b_i: 2D → D, one per level
}

// NewMeshedCrossAttention returns the operator over levels encoder levels
// of width d around the cross-attention att, with Xavier-uniform gate
// weights and zero gate biases (M²'s initialisation: the published code
// zeroes the fc_alpha biases and re-initialises every matrix).
func NewMeshedCrossAttention(att IncrementalAttention, d, levels int, rng *rand.Rand) *MeshedCrossAttention {
	if levels <= 0 || d <= 0 {
		panic(fmt.Sprintf("mesh: meshed cross-attention of width %d over %d levels", d, levels))
	}
	m := &MeshedCrossAttention{Attention: att}
	for range levels {
		a := radgen.NewLinear(2*d, d, true, rng)
		radgen.XavierUniform(a.Weight, rng)
		radgen.Fill(a.Bias, 0)
		m.Gates = append(m.Gates, a)
	}
	return m
}

// Levels returns N, the encoder levels the operator reads.
func (m *MeshedCrossAttention) Levels() int { return len(m.Gates) }

// VisitParams implements radgen.Module: enc_att.*, then fc_alpha1.* …
// fc_alphaN.*.
func (m *MeshedCrossAttention) VisitParams(visit func(string, *radgen.Tensor)) {
	m.Attention.VisitParams(radgen.Prefixed("enc_att.", visit))
	m.VisitGates(visit)
}

// VisitGates visits the gates alone, fc_alpha1.* … fc_alphaN.*: for a
// layer that lists its parameters in the published order, where other
// sublayers come between the cross-attention and the gates.
func (m *MeshedCrossAttention) VisitGates(visit func(string, *radgen.Tensor)) {
	for i, a := range m.Gates {
		a.VisitParams(radgen.Prefixed(fmt.Sprintf("fc_alpha%d.", i+1), visit))
	}
}

// Forward is M_mesh for queries y (B, T, D) over the encoder levels
// levels (B, N, R, D) with the encoder mask (B|1, 1, 1, R), zero = masked,
// or nil. pad (B, T, 1), 1 at real tokens and 0 at padding, or nil,
// multiplies each level's C(X̃ⁱ, y) before its gate reads it and the
// result, as the published code's mask_pad does. It returns (B, T, D).
func (m *MeshedCrossAttention) Forward(g *radgen.Graph, y, levels, mask, pad *radgen.Tensor) *radgen.Tensor {
	n := m.Levels()
	if levels.Rank() != 4 || levels.Dim(1) != n || levels.Dim(0) != y.Dim(0) {
		panic(fmt.Sprintf("mesh: meshed attention of %d levels over encoder output %v for queries %v", n, levels.Shape(), y.Shape()))
	}
	cs := make([]*radgen.Tensor, n)
	for i := range n {
		x := g.Reshape(g.Slice(levels, 1, i, i+1), levels.Dim(0), levels.Dim(2), levels.Dim(3))
		c := m.Attention.Forward(g, y, x, x, mask) // C(X̃ⁱ, Y) (Eq. 7)
		if pad != nil {
			c = g.Mul(c, pad)
		}
		cs[i] = c
	}
	out := m.Combine(g, y, cs)
	if pad != nil {
		out = g.Mul(out, pad)
	}
	return out
}

// Combine is Eq. 6 given the queries y (B, T, D) and the cross-attention
// results cs[i] = C(X̃ⁱ, y) (B, T, D): Σ_i σ(W_i [y; cs[i]] + b_i) ⊙ cs[i] / √N,
// the gates by Eq. 8.
func (m *MeshedCrossAttention) Combine(g *radgen.Graph, y *radgen.Tensor, cs []*radgen.Tensor) *radgen.Tensor {
	if len(cs) != len(m.Gates) {
		panic(fmt.Sprintf("mesh: %d cross-attention results for %d gates", len(cs), len(m.Gates)))
	}
	var sum *radgen.Tensor
	for i, c := range cs {
		alpha := g.Sigmoid(m.Gates[i].Forward(g, g.Concat(2, y, c))) // α_i (Eq. 8)
		term := g.Mul(c, alpha)
		if sum == nil {
			sum = term
		} else {
			sum = g.Add(sum, term)
		}
	}
	return g.Scale(sum, 1/math.Sqrt(float64(len(cs))))
}

// Project returns the cross-attention's keys and values over the encoder
// levels (B, N, R, D) with the encoder mask (B|1, 1, 1, R), zero = masked,
// or nil: one [Source] of N levels per study, for [MeshedCrossAttention.Step].
// The levels are projected in one product, level-major (level i of study
// b at i·B + b), so that a step attends every level in one product too.
func (m *MeshedCrossAttention) Project(g *radgen.Graph, levels, mask *radgen.Tensor) *Source {
	n := m.Levels()
	if levels.Rank() != 4 || levels.Dim(1) != n {
		panic(fmt.Sprintf("mesh: meshed attention of %d levels over encoder output %v", n, levels.Shape()))
	}
	b, r, d := levels.Dim(0), levels.Dim(2), levels.Dim(3)
	if mask != nil && mask.Dim(0) > 1 {
		idx := make([]int, n*b) // (B, 1, 1, R) → (N·B, 1, 1, R)
		for i := range idx {
			idx[i] = i % b
		}
		mask = g.IndexSelect(mask, 0, idx)
	}
	if n > 1 {
		levels = g.Permute(levels, 1, 0, 2, 3) // (N, B, R, D)
	}
	s := *m.Attention.ProjectMasked(g, g.Reshape(levels, n*b, r, d), mask)
	s.levels = n
	return &s
}

// Step is Forward for one query per row: y (R, D) holds each row's query,
// src the levels projected once ([MeshedCrossAttention.Project]), which
// row i reads at study study[i], and pad (R, 1), 1 at real tokens and 0 at
// padding, may be nil. Every level is attended in one product. It returns
// (R, D) and, if weights is true, the cross-attention probabilities
// (R, N, h, N') of every level and head.
func (m *MeshedCrossAttention) Step(g *radgen.Graph, y, pad *radgen.Tensor, src *Source, study []int, weights bool) (out, probs *radgen.Tensor) {
	n := m.Levels()
	if y.Rank() != 2 || src.Levels() != n {
		panic(fmt.Sprintf("mesh: meshed attention step of %v queries over a source of %d levels for %d gates", y.Shape(), src.Levels(), n))
	}
	r, d := y.Dim(0), y.Dim(1)
	// Query l·R + k is row k over level l (see Source.attend).
	c, p := m.Attention.Attend(g, y, src, study, weights)
	c = g.Reshape(c, n, r, d)
	var pad3 *radgen.Tensor
	if pad != nil {
		c = g.Mul(c, g.Reshape(pad, 1, r, 1))
		pad3 = g.Reshape(pad, r, 1, 1)
	}
	cs := make([]*radgen.Tensor, n)
	for i := range n {
		ci := c
		if n > 1 {
			ci = g.Slice(c, 0, i, i+1)
		}
		cs[i] = g.Reshape(ci, r, 1, d)
	}
	out = m.Combine(g, g.Reshape(y, r, 1, d), cs)
	if pad3 != nil {
		out = g.Mul(out, pad3)
	}
	if p != nil { // (N·R, h, N') in query order → (R, N, h, N')
		h, w := p.Dim(1), p.Dim(2)
		p = g.Reshape(g.Permute(g.Reshape(p, n, r, h*w), 1, 0, 2), r, n, h, w)
	}
	return g.Reshape(out, r, d), p
}

var _ radgen.Module = (*MeshedCrossAttention)(nil)
