package m2

// The post-norm building blocks of the Meshed-Memory Transformer, mirroring
// aimagelab/meshed-memory-transformer models/transformer/utils.py
// (PositionWiseFeedForward) and models/transformer/attention.py
// (MultiHeadAttention, the post-LN wrapper). Parameter names equal that
// code's state_dict names.

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mesh"
)

// AttentionLayer is M²'s MultiHeadAttention module: an attention operator
// wrapped in a residual connection and a post-norm (the AddNorm of Cornia
// et al. 2020, Eqs. 5 and 9):
//
//	out = LayerNorm(queries + Dropout(Attention(queries, keys, values))).
//
// The pre-norm "identity map reordering" variant of the published code is
// off in every released configuration and is not offered. Names:
// attention.*, layer_norm.*.
type AttentionLayer struct {
	Attention *mesh.ScaledDotProductAttention
	Norm      *mesh.LayerNorm
	Dropout   float64
}

// NewAttentionLayer returns the wrapper around att with a fresh LayerNorm
// of att's model width.
func NewAttentionLayer(att *mesh.ScaledDotProductAttention, dropout float64) *AttentionLayer {
	return &AttentionLayer{Attention: att, Norm: mesh.NewLayerNorm(att.Width()), Dropout: dropout}
}

// Forward attends queries (B, Tq, D) over keys and values (B, Tk, D) with
// a mask (zero = masked; see [mesh.ScaledDotProductAttention.Forward]) and
// returns (B, Tq, D).
func (l *AttentionLayer) Forward(g *radgen.Graph, queries, keys, values, mask *radgen.Tensor) *radgen.Tensor {
	return l.addNorm(g, queries, l.Attention.Forward(g, queries, keys, values, mask))
}

// Step is Forward for one new position per row ([mesh.IncrementalAttention]):
// LayerNorm(x + Dropout(Attention.Step(x))), x (R, D).
func (l *AttentionLayer) Step(g *radgen.Graph, x *radgen.Tensor, c *mesh.KVCache) *radgen.Tensor {
	return l.addNorm(g, x, l.Attention.Step(g, x, c))
}

// StepMasked is Step with a mask over each row's positions (see
// [mesh.ScaledDotProductAttention.StepMasked]).
func (l *AttentionLayer) StepMasked(g *radgen.Graph, x *radgen.Tensor, c *mesh.KVCache, mask *radgen.Tensor) *radgen.Tensor {
	return l.addNorm(g, x, l.Attention.StepMasked(g, x, c, mask))
}

// Project returns the attention's keys and values over a source (B, N, D)
// ([mesh.ScaledDotProductAttention.Project]).
func (l *AttentionLayer) Project(g *radgen.Graph, src *radgen.Tensor) *mesh.Source {
	return l.Attention.Project(g, src)
}

// ProjectMasked is Project with the source's mask
// ([mesh.ScaledDotProductAttention.ProjectMasked]).
func (l *AttentionLayer) ProjectMasked(g *radgen.Graph, src, mask *radgen.Tensor) *mesh.Source {
	return l.Attention.ProjectMasked(g, src, mask)
}

// Attend is Forward for one query per row over a projected source
// ([mesh.ScaledDotProductAttention.Attend]): LayerNorm(q + Dropout(C)), q
// (R, D). Over a source of L levels, whose results are L per row, each
// level's residual is the row's query: it returns (L·R, D), level by
// level, and the probabilities (L·R, h, N+m) if weights is true.
func (l *AttentionLayer) Attend(g *radgen.Graph, q *radgen.Tensor, src *mesh.Source, study []int, weights bool) (out, probs *radgen.Tensor) {
	c, probs := l.Attention.Attend(g, q, src, study, weights)
	r, d, lv := q.Dim(0), q.Dim(1), src.Levels()
	// (L, R, D) + (1, R, D): every level's residual is q.
	out = l.Norm.Forward(g, g.Add(g.Reshape(g.Dropout(c, l.Dropout), lv, r, d), g.Reshape(q, 1, r, d)))
	return g.Reshape(out, lv*r, d), probs
}

// addNorm is LayerNorm(x + Dropout(att)).
func (l *AttentionLayer) addNorm(g *radgen.Graph, x, att *radgen.Tensor) *radgen.Tensor {
	return l.Norm.Forward(g, g.Add(x, g.Dropout(att, l.Dropout)))
}

// VisitParams implements radgen.Module.
func (l *AttentionLayer) VisitParams(visit func(string, *radgen.Tensor)) {
	l.Attention.VisitParams(radgen.Prefixed("attention.", visit))
	l.Norm.VisitParams(radgen.Prefixed("layer_norm.", visit))
}

// PositionWiseFeedForward is the feed-forward sublayer F of Cornia et al.
// 2020, Eq. 4, F(X)_i = U σ(V X_i + b) + c, inside its AddNorm (Eqs. 5, 9)
// exactly as the published code applies it, with two dropouts:
//
//	out = LayerNorm(x + Dropout(fc2(Dropout(ReLU(fc1 x))))).
//
// Names: fc1.*, fc2.*, layer_norm.*.
type PositionWiseFeedForward struct {
	FC1, FC2 *radgen.Linear // D → D_ff, D_ff → D
	Norm     *mesh.LayerNorm
	Dropout  float64
}

// NewPositionWiseFeedForward returns the sublayer of width d and inner
// width dff. Weights are Xavier-uniform and biases PyTorch's default, as
// M²'s Transformer.init_weights leaves them.
func NewPositionWiseFeedForward(d, dff int, dropout float64, rng *rand.Rand) *PositionWiseFeedForward {
	if d <= 0 || dff <= 0 {
		panic(fmt.Sprintf("m2: feed-forward of widths %d, %d", d, dff))
	}
	f := &PositionWiseFeedForward{
		FC1:     radgen.NewLinear(d, dff, true, rng),
		FC2:     radgen.NewLinear(dff, d, true, rng),
		Norm:    mesh.NewLayerNorm(d),
		Dropout: dropout,
	}
	radgen.XavierUniform(f.FC1.Weight, rng)
	radgen.XavierUniform(f.FC2.Weight, rng)
	return f
}

// Forward maps x (…, D) → (…, D). F is mesh.FeedForward's, over fc1 and
// fc2.
func (f *PositionWiseFeedForward) Forward(g *radgen.Graph, x *radgen.Tensor) *radgen.Tensor {
	ff := mesh.FeedForward{W1: f.FC1, W2: f.FC2, Dropout: f.Dropout}
	return f.Norm.Forward(g, g.Add(x, g.Dropout(ff.Forward(g, x), f.Dropout)))
}

// VisitParams implements radgen.Module.
func (f *PositionWiseFeedForward) VisitParams(visit func(string, *radgen.Tensor)) {
	f.FC1.VisitParams(radgen.Prefixed("fc1.", visit))
	f.FC2.VisitParams(radgen.Prefixed("fc2.", visit))
	f.Norm.VisitParams(radgen.Prefixed("layer_norm.", visit))
}

var (
	_ mesh.IncrementalAttention = (*AttentionLayer)(nil)
	_ radgen.Module             = (*PositionWiseFeedForward)(nil)
)
