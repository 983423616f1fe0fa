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
	att := l.Attention.Forward(g, queries, keys, values, mask)
	return l.Norm.Forward(g, g.Add(queries, g.Dropout(att, l.Dropout)))
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
	h := g.Dropout(g.ReLU(f.FC1.Forward(g, x)), f.Dropout)
	return f.Norm.Forward(g, g.Add(x, g.Dropout(f.FC2.Forward(g, h), f.Dropout)))
}

// VisitParams implements radgen.Module.
func (f *PositionWiseFeedForward) VisitParams(visit func(string, *radgen.Tensor)) {
	f.FC1.VisitParams(radgen.Prefixed("fc1.", visit))
	f.FC2.VisitParams(radgen.Prefixed("fc2.", visit))
	f.Norm.VisitParams(radgen.Prefixed("layer_norm.", visit))
}

var (
	_ radgen.Module = (*LayerNorm)(nil)
	_ radgen.Module = (*AttentionLayer)(nil)
	_ radgen.Module = (*PositionWiseFeedForward)(nil)
)
