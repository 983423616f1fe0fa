package mesh

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/radgen/radgen"
)

// MultiHeadAttention is scaled dot-product attention over h heads
// (Vaswani et al. 2017, Eq. 1 and the multi-head projection):
//
//	Attention(Q, K, V) = softmax(QKᵀ/√d_k)V,  d_k = D/h,
//
// with four D×D projections named as R2Gen's state_dict:
// linears.0 (query), linears.1 (key), linears.2 (value), linears.3 (output).
// Masked scores are set to −1e9 (not −∞) before the softmax, as R2Gen does,
// and dropout is applied to the attention probabilities in training.
type MultiHeadAttention struct {
	Heads   int               // h; the width D must be a multiple of it
	Dropout float64           // on the attention probabilities, in training
	Linears [4]*radgen.Linear // query, key, value, output; each D×D with bias
}

// NewMultiHeadAttention returns attention of width d over heads heads with
// Xavier-uniform weights (R2Gen's make_model re-initialises every matrix
// this way) and PyTorch-default biases.
func NewMultiHeadAttention(d, heads int, dropout float64, rng *rand.Rand) *MultiHeadAttention {
	if heads <= 0 || d%heads != 0 {
		panic(fmt.Sprintf("mesh: width %d is not divisible by %d heads", d, heads))
	}
	m := &MultiHeadAttention{Heads: heads, Dropout: dropout}
	for i := range m.Linears {
		m.Linears[i] = radgen.NewLinear(d, d, true, rng)
		radgen.XavierUniform(m.Linears[i].Weight, rng)
	}
	return m
}

// VisitParams implements radgen.Module.
func (m *MultiHeadAttention) VisitParams(visit func(string, *radgen.Tensor)) {
	for i, l := range m.Linears {
		l.VisitParams(radgen.Prefixed(fmt.Sprintf("linears.%d.", i), visit))
	}
}

// Width returns D.
func (m *MultiHeadAttention) Width() int { return m.Linears[0].Weight.Dim(0) }

// Forward attends queries q (B, Tq, D) over keys k and values v (B, Tk, D).
// mask, if not nil, broadcasts to (B, Tq, Tk) — for example (B, 1, Tk) or
// (B, Tq, Tq), or (B|1, 1, Tq|1, Tk) with a unit dimension for the heads —
// and zero entries are masked out. The result is (B, Tq, D).
func (m *MultiHeadAttention) Forward(g *radgen.Graph, q, k, v, mask *radgen.Tensor) *radgen.Tensor {
	out, _ := m.forward(g, q, k, v, mask, false)
	return out
}

// ForwardWithWeights is Forward that also returns the attention
// probabilities (B, h, Tq, Tk), for attention maps.
func (m *MultiHeadAttention) ForwardWithWeights(g *radgen.Graph, q, k, v, mask *radgen.Tensor) (out, weights *radgen.Tensor) {
	return m.forward(g, q, k, v, mask, true)
}

func (m *MultiHeadAttention) forward(g *radgen.Graph, q, k, v, mask *radgen.Tensor, keep bool) (*radgen.Tensor, *radgen.Tensor) {
	if q.Rank() != 3 || k.Rank() != 3 || v.Rank() != 3 {
		panic(fmt.Sprintf("mesh: attention wants (B, T, D) inputs, got %v %v %v", q.Shape(), k.Shape(), v.Shape()))
	}
	return m.attendProjected(g, m.Linears[0].Forward(g, q), m.Linears[1].Forward(g, k), m.Linears[2].Forward(g, v), mask, keep)
}

// attendProjected is the attention of projected queries qp (B, Tq, D) over
// projected keys kp and values vp (B, Tk, D): the heads split, then
// [MultiHeadAttention.attendHeads].
func (m *MultiHeadAttention) attendProjected(g *radgen.Graph, qp, kp, vp, mask *radgen.Tensor, keep bool) (*radgen.Tensor, *radgen.Tensor) {
	return m.attendHeads(g, m.heads(g, qp), m.heads(g, kp), m.heads(g, vp), mask, keep)
}

// heads splits x (B, T, D) into heads, (B, h, T, d_k).
func (m *MultiHeadAttention) heads(g *radgen.Graph, x *radgen.Tensor) *radgen.Tensor {
	b, t, d := x.Dim(0), x.Dim(1), x.Dim(2)
	return g.Permute(g.Reshape(x, b, t, m.Heads, d/m.Heads), 0, 2, 1, 3)
}

// attendHeads is the attention of queries qh (B, h, Tq, d_k) over keys kh
// and values vh (B, h, Tk, d_k), projected and split into heads, followed
// by the output projection: the one place Eq. 1 is written, for Forward
// and for the incremental steps ([MultiHeadAttention.Step],
// [MultiHeadAttention.Attend]), which split a source or a cache into heads
// once rather than at every step.
func (m *MultiHeadAttention) attendHeads(g *radgen.Graph, qh, kh, vh, mask *radgen.Tensor, keep bool) (*radgen.Tensor, *radgen.Tensor) {
	if mask != nil {
		mask = headsMask(g, mask)
	}
	ctx, p := scaledDotProduct(g, qh, kh, vh, mask, m.Dropout)
	out := m.Linears[3].Forward(g, ctx)
	if keep {
		return out, p
	}
	return out, nil
}

// headsMask returns an attention mask (B|1, Tq|1, Tk) as (B|1, 1, Tq|1,
// Tk), to broadcast over the heads; a mask that has the heads' unit
// dimension already is returned as it is.
func headsMask(g *radgen.Graph, mask *radgen.Tensor) *radgen.Tensor {
	switch ms := mask.Shape(); {
	case len(ms) == 3:
		return g.Reshape(mask, ms[0], 1, ms[1], ms[2])
	case len(ms) == 4 && ms[1] == 1:
		return mask
	default:
		panic(fmt.Sprintf("mesh: attention mask must be (B|1, Tq|1, Tk) or (B|1, 1, Tq|1, Tk), got %v", ms))
	}
}

// maskedScore is the attention score of a masked key: −1e9, not −∞, as
// R2Gen fills. A masked key's weight is exactly 0 as with −∞ (exp
// underflows in float32 and float64), and a query whose every key is
// masked attends uniformly instead of giving NaN.
const maskedScore = -1e9

// scaledDotProduct is the attention of every package module, written once
// (Vaswani et al. Eq. 1; M²'s Eq. 1 over keys and values that include its
// memory slots): softmax(QKᵀ/√d_k)·V over queries qh (B, h, Tq, d_k), keys
// kh (B, h, Tk, d_k) and values vh (B, h, Tk, d_v), with mask (broadcast
// to (B, h, Tq, Tk), zero = masked) or nil and dropout p on the
// probabilities. It returns the heads concatenated, (B, Tq, h·d_v), and the
// probabilities (B, h, Tq, Tk).
func scaledDotProduct(g *radgen.Graph, qh, kh, vh, mask *radgen.Tensor, dropout float64) (ctx, probs *radgen.Tensor) {
	b, h, tq, dk, dv := qh.Dim(0), qh.Dim(1), qh.Dim(2), qh.Dim(3), vh.Dim(3)
	scores := g.Scale(g.MatMul(qh, kh, true), 1/math.Sqrt(float64(dk))) // QKᵀ/√d_k
	if mask != nil {
		scores = g.MaskedFill(scores, mask, maskedScore)
	}
	probs = g.Softmax(scores)
	ctx = g.MatMul(g.Dropout(probs, dropout), vh, false)             // (B, h, Tq, d_v)
	return g.Reshape(g.Permute(ctx, 0, 2, 1, 3), b, tq, h*dv), probs // heads concatenated
}

var _ radgen.Module = (*MultiHeadAttention)(nil)
