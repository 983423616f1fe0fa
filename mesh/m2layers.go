package mesh

// The post-norm building blocks of the Meshed-Memory Transformer, mirroring
// aimagelab/meshed-memory-transformer models/transformer/utils.py
// (PositionWiseFeedForward) and models/transformer/attention.py
// (MultiHeadAttention, the post-LN wrapper). Parameter names equal that
// code's state_dict names.

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
)

// TorchLayerNormEps is torch.nn.LayerNorm's default eps, which M² keeps.
const TorchLayerNormEps = 1e-5

// LayerNorm is torch.nn.LayerNorm over the last dimension with M²'s
// parameter names (weight, bias):
//
//	y = weight ⊙ (x − μ)/sqrt(var + eps) + bias,
//
// with the biased variance and eps inside the square root (not R2Gen's
// LayerNorm, which divides by the unbiased std plus eps; see package mcln).
type LayerNorm struct {
	Weight, Bias *radgen.Tensor // (D)
	Eps          float64
}

// NewLayerNorm returns a LayerNorm of width d with weight 1, bias 0 and eps
// 1e-5, as torch initialises it.
func NewLayerNorm(d int) *LayerNorm {
	ln := &LayerNorm{Weight: radgen.NewParam(d), Bias: radgen.NewParam(d), Eps: TorchLayerNormEps}
	radgen.Fill(ln.Weight, 1)
	return ln
}

// Forward normalises x (…, D).
func (ln *LayerNorm) Forward(g *radgen.Graph, x *radgen.Tensor) *radgen.Tensor {
	return g.LayerNorm(x, ln.Weight, ln.Bias, ln.Eps, radgen.NormStandard)
}

// VisitParams implements radgen.Module.
func (ln *LayerNorm) VisitParams(visit func(string, *radgen.Tensor)) {
	visit("weight", ln.Weight)
	visit("bias", ln.Bias)
}

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
	Attention *ScaledDotProductAttention
	Norm      *LayerNorm
	Dropout   float64
}

// NewAttentionLayer returns the wrapper around att with a fresh LayerNorm
// of att's model width.
func NewAttentionLayer(att *ScaledDotProductAttention, dropout float64) *AttentionLayer {
	return &AttentionLayer{Attention: att, Norm: NewLayerNorm(att.Width()), Dropout: dropout}
}

// Forward attends queries (B, Tq, D) over keys and values (B, Tk, D) with
// a mask (zero = masked; see [ScaledDotProductAttention.Forward]) and
// returns (B, Tq, D).
func (l *AttentionLayer) Forward(g *radgen.Graph, queries, keys, values, mask *radgen.Tensor) *radgen.Tensor {
	return l.addNorm(g, queries, l.Attention.Forward(g, queries, keys, values, mask))
}

// Step is Forward for one new position per row ([IncrementalAttention]):
// LayerNorm(x + Dropout(Attention.Step(x))), x (R, D).
func (l *AttentionLayer) Step(g *radgen.Graph, x *radgen.Tensor, c *KVCache) *radgen.Tensor {
	return l.addNorm(g, x, l.Attention.Step(g, x, c))
}

// StepMasked is Step with a mask over each row's positions (see
// [ScaledDotProductAttention.StepMasked]).
func (l *AttentionLayer) StepMasked(g *radgen.Graph, x *radgen.Tensor, c *KVCache, mask *radgen.Tensor) *radgen.Tensor {
	return l.addNorm(g, x, l.Attention.StepMasked(g, x, c, mask))
}

// Project returns the attention's keys and values over a source (B, N, D)
// ([ScaledDotProductAttention.Project]).
func (l *AttentionLayer) Project(g *radgen.Graph, src *radgen.Tensor) *Source {
	return l.Attention.Project(g, src)
}

// ProjectMasked is Project with the source's mask
// ([ScaledDotProductAttention.ProjectMasked]).
func (l *AttentionLayer) ProjectMasked(g *radgen.Graph, src, mask *radgen.Tensor) *Source {
	return l.Attention.ProjectMasked(g, src, mask)
}

// Attend is Forward for one query per row over a projected source
// ([ScaledDotProductAttention.Attend]): LayerNorm(q + Dropout(C)), q
// (R, D). Over a source of L levels, whose results are L per row, each
// level's residual is the row's query: it returns (L·R, D), level by
// level, and the probabilities (L·R, h, N+m) if weights is true.
func (l *AttentionLayer) Attend(g *radgen.Graph, q *radgen.Tensor, src *Source, study []int, weights bool) (out, probs *radgen.Tensor) {
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
	Norm     *LayerNorm
	Dropout  float64
}

// NewPositionWiseFeedForward returns the sublayer of width d and inner
// width dff. Weights are Xavier-uniform and biases PyTorch's default, as
// M²'s Transformer.init_weights leaves them.
func NewPositionWiseFeedForward(d, dff int, dropout float64, rng *rand.Rand) *PositionWiseFeedForward {
	if d <= 0 || dff <= 0 {
		panic(fmt.Sprintf("mesh: feed-forward of widths %d, %d", d, dff))
	}
	f := &PositionWiseFeedForward{
		FC1:     radgen.NewLinear(d, dff, true, rng),
		FC2:     radgen.NewLinear(dff, d, true, rng),
		Norm:    NewLayerNorm(d),
		Dropout: dropout,
	}
	radgen.XavierUniform(f.FC1.Weight, rng)
	radgen.XavierUniform(f.FC2.Weight, rng)
	return f
}

// Forward maps x (…, D) → (…, D).
func (f *PositionWiseFeedForward) Forward(g *radgen.Graph, x *radgen.Tensor) *radgen.Tensor {
	return f.Norm.Forward(g, g.Add(x, g.Dropout(positionWise(g, x, f.FC1, f.FC2, f.Dropout), f.Dropout)))
}

// FeedForward is the position-wise network of a Transformer layer,
// w_2(Dropout(ReLU(w_1 x))) (Vaswani et al. Eq. 2; R2Gen's sublayer, M²'s
// F of Eq. 4, which PositionWiseFeedForward wraps in its AddNorm). Names:
// w_1.*, w_2.* (R2Gen's).
type FeedForward struct {
	W1, W2  *radgen.Linear // D → D_ff, D_ff → D
	Dropout float64
}

// NewFeedForward returns the network of width d and inner width dff, its
// weights Xavier-uniform and its biases PyTorch's default.
func NewFeedForward(d, dff int, dropout float64, rng *rand.Rand) *FeedForward {
	if d <= 0 || dff <= 0 {
		panic(fmt.Sprintf("mesh: feed-forward of widths %d, %d", d, dff))
	}
	f := &FeedForward{W1: radgen.NewLinear(d, dff, true, rng), W2: radgen.NewLinear(dff, d, true, rng), Dropout: dropout}
	radgen.XavierUniform(f.W1.Weight, rng)
	radgen.XavierUniform(f.W2.Weight, rng)
	return f
}

// Forward maps (…, D) → (…, D).
func (f *FeedForward) Forward(g *radgen.Graph, x *radgen.Tensor) *radgen.Tensor {
	return positionWise(g, x, f.W1, f.W2, f.Dropout)
}

// VisitParams implements radgen.Module.
func (f *FeedForward) VisitParams(visit func(string, *radgen.Tensor)) {
	f.W1.VisitParams(radgen.Prefixed("w_1.", visit))
	f.W2.VisitParams(radgen.Prefixed("w_2.", visit))
}

// positionWise is w2(Dropout(ReLU(w1 x))), the one body of FeedForward and
// PositionWiseFeedForward.
func positionWise(g *radgen.Graph, x *radgen.Tensor, w1, w2 *radgen.Linear, dropout float64) *radgen.Tensor {
	var h [1]*radgen.Tensor
	g.Linears(h[:], []*radgen.Tensor{x}, []*radgen.Linear{w1}, true) // ReLU(w1·x + b1), fused where the product is batched
	return w2.Forward(g, g.Dropout(h[0], dropout))
}

// VisitParams implements radgen.Module.
func (f *PositionWiseFeedForward) VisitParams(visit func(string, *radgen.Tensor)) {
	f.FC1.VisitParams(radgen.Prefixed("fc1.", visit))
	f.FC2.VisitParams(radgen.Prefixed("fc2.", visit))
	f.Norm.VisitParams(radgen.Prefixed("layer_norm.", visit))
}

var (
	_ radgen.Module        = (*LayerNorm)(nil)
	_ IncrementalAttention = (*AttentionLayer)(nil)
	_ radgen.Module        = (*PositionWiseFeedForward)(nil)
)
