package radgen

import "github.com/radgen/radgen/internal/kernels"

// NormKind selects the layer-norm statistics.
type NormKind uint8

const (
	// NormR2Gen is R2Gen's LayerNorm: (x − μ)/(std + eps) with the unbiased
	// (n−1) standard deviation and eps added to the std, not the variance.
	NormR2Gen NormKind = NormKind(kernels.NormR2Gen)
	// NormStandard is torch.nn.LayerNorm: (x − μ)/sqrt(var + eps), biased var.
	NormStandard NormKind = NormKind(kernels.NormStandard)
)

// kernel returns the kernels' name of k.
func (k NormKind) kernel() kernels.NormKind { return kernels.NormKind(k) }

// Normalize returns x̂ = (x − μ)/σ over the last dimension, with σ as kind
// says.
func (g *Graph) Normalize(x *Tensor, eps float64, kind NormKind) *Tensor {
	if x.device != CPU {
		return devNormalize(g, x, eps, kind)
	}
	if x.Is64() {
		return normalize[float64](g, x, eps, kind)
	}
	return normalize[float32](g, x, eps, kind)
}

func normalize[T Float](g *Graph, x *Tensor, eps float64, kind NormKind) *Tensor {
	n := x.Dim(-1)
	out := g.empty(x, x.shape)
	inv := values[T](g.empty(x, []int{x.Len() / max(n, 1)})) // 1/σ per row, kept for the backward pass
	y := values[T](out)
	kernels.Normalize(y, inv, values[T](x), n, eps, kind.kernel())
	if g.needs(x) {
		g.push(out, func() {
			if out.grad != nil {
				kernels.NormalizeBackward(values[T](gradOf(x)), values[T](out.grad), y, inv, n, eps, kind.kernel())
			}
		})
	}
	return out
}

// LayerNorm returns gamma ⊙ x̂ + beta, x̂ = Normalize(x, eps, kind). gamma and
// beta broadcast against x: (D) for a plain layer norm, or one row per
// position for a conditional one (MCLN).
func (g *Graph) LayerNorm(x, gamma, beta *Tensor, eps float64, kind NormKind) *Tensor {
	return g.Add(g.Mul(g.Normalize(x, eps, kind), gamma), beta)
}
