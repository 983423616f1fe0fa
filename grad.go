package radgen

import (
	"fmt"
	"slices"
)

// SetGrad replaces t's accumulated gradient with g (not copied); a nil g
// drops it, as ZeroGrad does. Optimiser tests use it to inject reference
// gradients, and data-parallel trainers to install reduced ones.
//
// SetGrad panics if g's shape, dtype or device differs from t's.
func (t *Tensor) SetGrad(g *Tensor) {
	if g == nil {
		t.grad = nil
		return
	}
	if !slices.Equal(g.shape, t.shape) {
		panic(fmt.Sprintf("radgen: SetGrad of shape %v on a tensor of shape %v", g.shape, t.shape))
	}
	if g.Is64() != t.Is64() {
		panic(fmt.Sprintf("radgen: SetGrad of %v on a tensor of %v", g.dtype(), t.dtype()))
	}
	if g.device != t.device {
		panic(fmt.Sprintf("radgen: SetGrad of a tensor on %v on a tensor on %v", g.device, t.device))
	}
	t.grad = g
}
