package optim

import (
	"fmt"
	"math"

	"github.com/radgen/radgen"
)

// ClipGradValue clamps every element of every gradient to [−clip, clip] in
// place, as torch.nn.utils.clip_grad_value_ does (for float32 gradients the
// bound is rounded to float32; NaN stays NaN). Tensors without a gradient
// are skipped; a gradient on a device is clamped there by its engine.
// R2Gen clips at 0.1 before every optimiser step. It panics if clip is
// negative or NaN.
func ClipGradValue(params []radgen.Named, clip float64) {
	if !(clip >= 0) {
		panic(fmt.Sprintf("optim: ClipGradValue with bound %v", clip))
	}
	for _, p := range params {
		if g := p.Tensor.Grad(); g != nil {
			g.ClampInPlace(clip)
		}
	}
}

// ClipGradNorm rescales the gradients so that their global norm is at most
// maxNorm, as torch.nn.utils.clip_grad_norm_ does, and returns the global
// norm before clipping. normType is the p of the p-norm (any p > 0; 2 is
// the usual choice), or math.Inf(1) for the largest absolute value. The
// global norm is the p-norm of the per-tensor p-norms; every gradient is
// multiplied by
//
//	min(1, maxNorm / (norm + 1e-6))
//
// computed in float32 as torch does when the gradients are float32 (in
// float64 if any is float64). Tensors without a gradient are skipped. If
// the norm is NaN or infinite, ClipGradNorm returns it with
// ErrNonFiniteNorm and leaves the gradients unchanged (torch's
// error_if_nonfinite=True; skipping the optimiser step is then the usual
// remedy). An invalid maxNorm or normType returns an error wrapping
// ErrConfig.
//
// A gradient on a device is read to host memory for its norm and scaled on
// its device. The per-tensor norms are accumulated in float64 and rounded to the
// gradient's type, so they may differ from torch's float32 reductions in
// the last bit.
func ClipGradNorm(params []radgen.Named, maxNorm, normType float64) (float64, error) {
	if !(maxNorm >= 0) || math.IsInf(maxNorm, 0) {
		return 0, fmt.Errorf("%w: maximum norm %v", ErrConfig, maxNorm)
	}
	if !(normType > 0) {
		return 0, fmt.Errorf("%w: norm type %v", ErrConfig, normType)
	}
	var grads []*radgen.Tensor
	var norms []float64
	all32 := true
	for _, p := range params {
		g := p.Tensor.Grad()
		switch {
		case g == nil:
			continue
		case g.Device() != radgen.CPU:
			// The norm is taken in host memory with the CPU's arithmetic.
			norms = append(norms, float64(float32(pNorm(g.To(radgen.CPU).Data(), normType))))
		case g.Is64():
			all32 = false
			norms = append(norms, pNorm(g.Data64(), normType))
		default:
			norms = append(norms, float64(float32(pNorm(g.Data(), normType))))
		}
		grads = append(grads, g)
	}
	if len(grads) == 0 {
		return 0, nil
	}
	total := pNorm(norms, normType)
	if all32 {
		total = float64(float32(total))
	}
	if math.IsNaN(total) || math.IsInf(total, 0) {
		return total, fmt.Errorf("%w: %v-norm of the gradients is %v", ErrNonFiniteNorm, normType, total)
	}
	// clip_coef = max_norm / (total_norm + 1e-6), clamped to at most 1; a
	// factor of 1 changes nothing.
	coef := maxNorm / (total + 1e-6)
	if all32 {
		coef = float64(float32(maxNorm) / (float32(total) + float32(1e-6)))
	}
	if coef >= 1 {
		return total, nil
	}
	for _, g := range grads {
		g.ScaleInPlace(coef) // in float32 for a float32 gradient
	}
	return total, nil
}

// pNorm returns the p-norm of x (the largest |x| for p = +Inf), accumulated
// in float64.
func pNorm[T float32 | float64](x []T, p float64) float64 {
	switch {
	case math.IsInf(p, 1):
		var m float64
		for _, v := range x {
			a := math.Abs(float64(v))
			if a != a {
				return a
			}
			m = max(m, a)
		}
		return m
	case p == 2:
		var s float64
		for _, v := range x {
			s += float64(v) * float64(v)
		}
		return math.Sqrt(s)
	case p == 1:
		var s float64
		for _, v := range x {
			s += math.Abs(float64(v))
		}
		return s
	}
	var s float64
	for _, v := range x {
		s += math.Pow(math.Abs(float64(v)), p)
	}
	return math.Pow(s, 1/p)
}
