package accel

import "github.com/radgen/radgen/internal/kernels"

// AdamConsts are one parameter's scalars for an Adam step (see
// [kernels.AdamConsts]).
type AdamConsts = kernels.AdamConsts

// Optimizer is the part of an engine that updates parameters in place.
type Optimizer interface {
	// AdamStep applies one Adam (AMSGrad when k.AMSGrad) update to n
	// parameters p with gradients g and moments m, v (and vmax with
	// AMSGrad; ignored otherwise), rounding for rounding as the host's
	// [kernels.Adam].
	AdamStep(p, g, m, v, vmax Ptr, n int, k AdamConsts) error
	// Clamp sets each of n floats at dst to min(max(x, −c), c) (NaN stays
	// NaN), as torch.nn.utils.clip_grad_value_ does.
	Clamp(dst Ptr, c float32, n int) error
}

// AdamStep implements Optimizer.
func (h *Host) AdamStep(p, g, m, v, vmax Ptr, n int, k AdamConsts) error {
	var vm []float32
	if k.AMSGrad {
		vm = h.view(vmax, n)
	}
	kernels.Adam(&k, h.view(p, n), h.view(g, n), h.view(m, n), h.view(v, n), vm)
	return nil
}

// Clamp implements Optimizer.
func (h *Host) Clamp(dst Ptr, c float32, n int) error {
	CPU[float32]{}.Clamp(h.view(dst, n), c)
	return nil
}
