package mesh

// The sublayers around the attention modules in their Transformer layers:
// torch's LayerNorm, as M² and METransformer use it, and the position-wise
// feed-forward network (Vaswani et al. 2017, Eq. 2), as R2Gen's layers use
// it and M²'s wrap it (memtrans/m2's PositionWiseFeedForward).

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

// FeedForward is the position-wise network of a Transformer layer,
// w_2(Dropout(ReLU(w_1 x))) (Vaswani et al. Eq. 2; R2Gen's sublayer, and
// M²'s F of Eq. 4, which memtrans/m2's PositionWiseFeedForward wraps in its
// AddNorm). Names: w_1.*, w_2.* (R2Gen's).
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
	h := g.ReLU(f.W1.Forward(g, x))
	return f.W2.Forward(g, g.Dropout(h, f.Dropout))
}

// VisitParams implements radgen.Module.
func (f *FeedForward) VisitParams(visit func(string, *radgen.Tensor)) {
	f.W1.VisitParams(radgen.Prefixed("w_1.", visit))
	f.W2.VisitParams(radgen.Prefixed("w_2.", visit))
}

var (
	_ radgen.Module = (*LayerNorm)(nil)
	_ radgen.Module = (*FeedForward)(nil)
)
