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

// Normalize returns x̂ = (x − μ)/σ over the last dimension, with σ as kind
// says.
func (g *Graph) Normalize(x *Tensor, eps float64, kind NormKind) *Tensor {
	p := primsOf("Normalize", x)
	cols := x.Dim(-1)
	rows := x.Len() / max(cols, 1)
	out := g.empty(x, x.shape)
	inv := g.empty(x, []int{rows}) // 1/σ per row, kept for the backward pass
	p.normalize(out.at(0), inv.at(0), x.at(0), rows, cols, eps, kind)
	keep(x, out, inv)
	if g.needs(x) {
		g.push(out, func() {
			if out.grad != nil {
				p.normalizeBackward(gradOf(x).at(0), out.grad.at(0), out.at(0), inv.at(0), rows, cols, eps, kind)
				keep(x.grad, out.grad, out, inv)
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
