package mesh

// M²'s scaled dot-product attention, with and without memory slots
// (Cornia et al. 2020, Eqs. 1–3). Mirrors aimagelab/meshed-memory-transformer
// models/transformer/attention.py (ScaledDotProductAttention,
// ScaledDotProductAttentionMemory).

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/radgen/radgen"
)

// ScaledDotProductAttention is M²'s multi-head attention operator
// (Cornia et al. 2020, Eqs. 1–2; with memory slots, Eq. 3):
//
//	Attention(Q, K, V) = softmax(QKᵀ/√d_k) V                         (Eq. 1)
//	M_mem(X) = Attention(W_q X, [W_k X, M_k], [W_v X, M_v])         (Eq. 3)
//
// over h heads of widths d_k (queries, keys) and d_v (values), with
// projections fc_q, fc_k, fc_v (D → h·d_k, h·d_k, h·d_v) and fc_o
// (h·d_v → D).
//
// With MemK and MemV set (memory-augmented attention) the learnable slots,
// (1, m, h·d_k) and (1, m, h·d_v), are appended to the projected keys and
// values, after fc_k and fc_v and never through them, and split into heads
// with the same reshape, so each head owns a d_k (d_v) slice of every slot.
// As in the published code they enter scaled: √d_k·M_k and √m·M_v. The
// mask never covers the slots.
//
// Masks follow the package's one convention, MultiHeadAttention's: zero
// means masked, nonzero attend (the published M² code's boolean masks are
// the opposite, True = masked; the goldens' are inverted when compared).
// Masked logits are set to −1e9: a masked key's weight is exactly 0, as
// with the published code's −∞, and a query whose every key is masked
// attends uniformly instead of yielding NaN. There is no dropout on the
// attention probabilities.
type ScaledDotProductAttention struct {
	Heads, DK, DV      int            // h, d_k and d_v
	FCQ, FCK, FCV, FCO *radgen.Linear // fc_q, fc_k, fc_v (D → h·d_k, h·d_v), fc_o (h·d_v → D)
	MemK, MemV         *radgen.Tensor // (1, m, h·d_k), (1, m, h·d_v); nil without memory
}

// NewScaledDotProductAttention returns attention of model width d with h
// heads of widths dk, dv: Xavier-uniform weights and zero biases, as M²
// initialises it.
func NewScaledDotProductAttention(d, dk, dv, h int, rng *rand.Rand) *ScaledDotProductAttention {
	if d <= 0 || dk <= 0 || dv <= 0 || h <= 0 {
		panic(fmt.Sprintf("mesh: attention of width %d with %d heads of %d/%d", d, h, dk, dv))
	}
	a := &ScaledDotProductAttention{Heads: h, DK: dk, DV: dv}
	mk := func(in, out int) *radgen.Linear {
		l := radgen.NewLinear(in, out, true, rng)
		radgen.XavierUniform(l.Weight, rng)
		radgen.Fill(l.Bias, 0)
		return l
	}
	a.FCQ, a.FCK, a.FCV, a.FCO = mk(d, h*dk), mk(d, h*dk), mk(d, h*dv), mk(h*dv, d)
	return a
}

// NewMemoryAttention returns memory-augmented attention (Eq. 3) with m
// slots. The published code draws the slots from N(0, 1/d_k) and N(0, 1/m)
// but its Transformer.init_weights then re-initialises every parameter of
// more than one dimension with xavier_uniform_, slots included; the slots
// here get that effective Xavier-uniform initialisation.
func NewMemoryAttention(d, dk, dv, h, m int, rng *rand.Rand) *ScaledDotProductAttention {
	if m <= 0 {
		panic(fmt.Sprintf("mesh: memory attention with %d slots", m))
	}
	a := NewScaledDotProductAttention(d, dk, dv, h, rng)
	a.MemK, a.MemV = radgen.NewParam(1, m, h*dk), radgen.NewParam(1, m, h*dv)
	radgen.XavierUniform(a.MemK, rng)
	radgen.XavierUniform(a.MemV, rng)
	return a
}

// Width returns the model width D.
func (a *ScaledDotProductAttention) Width() int { return a.FCQ.Weight.Dim(1) }

// Slots returns the number of memory slots m (0 without memory).
func (a *ScaledDotProductAttention) Slots() int {
	if a.MemK == nil {
		return 0
	}
	return a.MemK.Dim(1)
}

// VisitParams implements radgen.Module: m_k, m_v (with memory), then
// fc_q, fc_k, fc_v, fc_o.
func (a *ScaledDotProductAttention) VisitParams(visit func(string, *radgen.Tensor)) {
	if a.MemK != nil {
		visit("m_k", a.MemK)
		visit("m_v", a.MemV)
	}
	a.FCQ.VisitParams(radgen.Prefixed("fc_q.", visit))
	a.FCK.VisitParams(radgen.Prefixed("fc_k.", visit))
	a.FCV.VisitParams(radgen.Prefixed("fc_v.", visit))
	a.FCO.VisitParams(radgen.Prefixed("fc_o.", visit))
}

// memoryScales returns the factors the slots are multiplied by before use:
// √d_k for M_k and √m for M_v (attention.py, ScaledDotProductAttentionMemory).
func (a *ScaledDotProductAttention) memoryScales() (keys, values float64) {
	return math.Sqrt(float64(a.DK)), math.Sqrt(float64(a.Slots()))
}

// Forward attends queries (B, Tq, D) over keys and values (B, Tk, D) and
// returns (B, Tq, D). mask, if not nil, is (B|1, 1, Tq|1, Tk), as M²'s code
// writes it, or (B|1, Tq|1, Tk), with zero entries masked (M²'s False); it
// covers the Tk real keys only.
func (a *ScaledDotProductAttention) Forward(g *radgen.Graph, queries, keys, values, mask *radgen.Tensor) *radgen.Tensor {
	out, _ := a.forward(g, queries, keys, values, mask, false)
	return out
}

// ForwardWithWeights is Forward that also returns the attention
// probabilities (B, h, Tq, Tk+m), memory slots last.
func (a *ScaledDotProductAttention) ForwardWithWeights(g *radgen.Graph, queries, keys, values, mask *radgen.Tensor) (out, weights *radgen.Tensor) {
	return a.forward(g, queries, keys, values, mask, true)
}

func (a *ScaledDotProductAttention) forward(g *radgen.Graph, queries, keys, values, mask *radgen.Tensor, keep bool) (*radgen.Tensor, *radgen.Tensor) {
	if queries.Rank() != 3 || keys.Rank() != 3 || values.Rank() != 3 ||
		keys.Dim(0) != queries.Dim(0) || values.Dim(0) != queries.Dim(0) || keys.Dim(1) != values.Dim(1) {
		panic(fmt.Sprintf("mesh: attention wants (B, T, D) inputs, got %v %v %v", queries.Shape(), keys.Shape(), values.Shape()))
	}
	b, nq, nk := queries.Dim(0), queries.Dim(1), keys.Dim(1)
	q := a.FCQ.Forward(g, queries)
	k, v := a.withSlots(g, a.FCK.Forward(g, keys), a.FCV.Forward(g, values))
	var unmasked *radgen.Tensor
	if mask != nil {
		unmasked = keepMask(mask, b, nq, nk, a.Slots(), queries.Device())
	}
	return a.attendSplit(g, q, a.heads(g, k, a.DK), a.heads(g, v, a.DV), unmasked, keep)
}

// withSlots appends the memory slots, if any, to projected keys k
// (B, Tk, h·d_k) and values v (B, Tk, h·d_v): K = [W_k X, M_k] and
// V = [W_v X, M_v] (Eq. 3), (B, Tk+m, ·).
func (a *ScaledDotProductAttention) withSlots(g *radgen.Graph, k, v *radgen.Tensor) (*radgen.Tensor, *radgen.Tensor) {
	if a.Slots() == 0 {
		return k, v
	}
	sk, sv := a.memoryScales()
	rows := make([]int, k.Dim(0)) // expand the (1, m, ·) slots over the batch
	mk := g.IndexSelect(g.Scale(a.MemK, sk), 0, rows)
	mv := g.IndexSelect(g.Scale(a.MemV, sv), 0, rows)
	return g.Concat(1, k, mk), g.Concat(1, v, mv)
}

// heads splits x (B, T, h·d) into heads of width d, (B, h, T, d).
func (a *ScaledDotProductAttention) heads(g *radgen.Graph, x *radgen.Tensor, d int) *radgen.Tensor {
	return g.Permute(g.Reshape(x, x.Dim(0), x.Dim(1), a.Heads, d), 0, 2, 1, 3)
}

// attendSplit is the attention of projected queries qp (B, Tq, h·d_k)
// over projected keys kh (B, h, Tk', d_k) and values vh (B, h, Tk', d_v),
// memory slots included and split into heads ([ScaledDotProductAttention.heads]),
// followed by fc_o: the one place Eq. 1 is written, for Forward and for
// the incremental steps ([ScaledDotProductAttention.Step],
// [ScaledDotProductAttention.Attend]). unmasked, if not nil, is a
// radgen.MaskedFill mask (B|1, 1, Tq|1, Tk'), zero = masked (see
// keepMask). It returns (B, Tq, D) and, if keep is true, the
// probabilities (B, h, Tq, Tk').
func (a *ScaledDotProductAttention) attendSplit(g *radgen.Graph, qp, kh, vh, unmasked *radgen.Tensor, keep bool) (*radgen.Tensor, *radgen.Tensor) {
	ctx, p := scaledDotProduct(g, a.heads(g, qp, a.DK), kh, vh, unmasked, 0) // Eq. 1 over keys and slots
	out := a.FCO.Forward(g, ctx)
	if keep {
		return out, p
	}
	return out, nil
}

// keepMask extends a mask (B|1, 1, Tq|1, Tk) or (B|1, Tq|1, Tk), zero =
// masked, to a radgen.MaskedFill mask over (B|1, 1, Tq|1, Tk+m) whose m
// memory columns are never masked. It is built on the host and lives on
// dev.
func keepMask(mask *radgen.Tensor, b, nq, nk, m int, dev radgen.Device) *radgen.Tensor {
	s := mask.Shape()
	if len(s) == 3 {
		s = []int{s[0], 1, s[1], s[2]}
	}
	if len(s) != 4 || (s[0] != b && s[0] != 1) || s[1] != 1 || (s[2] != nq && s[2] != 1) || s[3] != nk {
		panic(fmt.Sprintf("mesh: attention mask %v, want (%d|1, 1, %d|1, %d)", mask.Shape(), b, nq, nk))
	}
	src := mask.Float64s()
	rows := s[0] * s[2]
	out := radgen.Zeros(s[0], 1, s[2], nk+m)
	dst := out.Data()
	for r := range rows {
		for j := range nk {
			if src[r*nk+j] != 0 {
				dst[r*(nk+m)+j] = 1
			}
		}
		for j := nk; j < nk+m; j++ {
			dst[r*(nk+m)+j] = 1
		}
	}
	return out.To(dev)
}

var _ radgen.Module = (*ScaledDotProductAttention)(nil)
