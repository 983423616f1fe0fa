package radgen

import "math/rand/v2"

// Linear is torch.nn.Linear: y = x·Wᵀ + b, with W [out, in] named "weight"
// and b [out] named "bias".
type Linear struct {
	Weight *Tensor // [out, in]
	Bias   *Tensor // [out], or nil
}

// NewLinear returns a Linear with PyTorch's default initialisation drawn
// from rng; bias false leaves it without a bias.
func NewLinear(in, out int, bias bool, rng *rand.Rand) *Linear {
	l := &Linear{Weight: NewParam(out, in)}
	if bias {
		l.Bias = NewParam(out)
	}
	KaimingUniformLinear(l.Weight, l.Bias, rng)
	return l
}

// Forward applies the layer to x [..., in] → [..., out].
func (l *Linear) Forward(g *Graph, x *Tensor) *Tensor { return g.Linear(x, l.Weight, l.Bias) }

// VisitParams implements Module.
func (l *Linear) VisitParams(visit func(string, *Tensor)) {
	visit("weight", l.Weight)
	if l.Bias != nil {
		visit("bias", l.Bias)
	}
}

var _ Module = (*Linear)(nil)
