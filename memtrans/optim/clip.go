package optim

import (
	"fmt"
	"math"

	"github.com/radgen/radgen"
)

// ClipGradValue clamps every element of every gradient to [−clip, clip] in
// place, as torch.nn.utils.clip_grad_value_ does (the bound is rounded to
// float32; NaN stays NaN). Tensors without a gradient are skipped. R2Gen
// clips at 0.1 before every optimiser step. It panics if clip is negative
// or NaN.
func ClipGradValue(params []radgen.Named, clip float64) {
	if !(clip >= 0) {
		panic(fmt.Sprintf("optim: ClipGradValue with bound %v", clip))
	}
	hi := float32(clip)
	lo := -hi
	for _, p := range params {
		g := p.Tensor.Grad()
		if g == nil {
			continue
		}
		d := g.Data()
		for i, x := range d {
			// clamp(x, lo, hi) = min(max(x, lo), hi); Go's min and max
			// return NaN if an argument is NaN, as torch.clamp does.
			d[i] = min(max(x, lo), hi)
		}
	}
}

// ClipGradNorm rescales the gradients so that their global norm is at most
// maxNorm, as torch.nn.utils.clip_grad_norm_ does, and returns the global
// norm before clipping. normType is the p of the p-norm (any p > 0; 2 is
// the usual choice), or math.Inf(1) for the largest absolute value. The global norm is the p-norm of the
// per-tensor p-norms; every gradient is multiplied by
//
//	min(1, maxNorm / (norm + 1e-6))
//
// computed in float32 as torch does. Tensors without a gradient are
// skipped. If the norm is NaN or infinite, ClipGradNorm returns it with
// ErrNonFiniteNorm and leaves the gradients unchanged (torch's
// error_if_nonfinite=True; skipping the optimiser step is then the usual
// remedy). An invalid maxNorm or normType returns an error wrapping
// ErrConfig.
//
// The per-tensor norms are accumulated in float64 and rounded to float32,
// so they may differ from torch's float32 reductions in the last bit.
func ClipGradNorm(params []radgen.Named, maxNorm, normType float64) (float64, error) {
	if !(maxNorm >= 0) || math.IsInf(maxNorm, 0) {
		return 0, fmt.Errorf("%w: maximum norm %v", ErrConfig, maxNorm)
	}
	if !(normType > 0) {
		return 0, fmt.Errorf("%w: norm type %v", ErrConfig, normType)
	}
	var grads [][]float32
	for _, p := range params {
		if g := p.Tensor.Grad(); g != nil {
			grads = append(grads, g.Data())
		}
	}
	if len(grads) == 0 {
		return 0, nil
	}
	norms := make([]float32, len(grads))
	for i, g := range grads {
		norms[i] = pNorm(g, normType)
	}
	total := pNorm(norms, normType)
	if math.IsNaN(float64(total)) || math.IsInf(float64(total), 0) {
		return float64(total), fmt.Errorf("%w: %v-norm of the gradients is %v", ErrNonFiniteNorm, normType, total)
	}
	coef := float32(maxNorm) / (total + float32(1e-6)) // max_norm / (total_norm + 1e-6)
	if coef < 1 {                                      // clamp(clip_coef, max=1.0); a factor of 1 changes nothing
		for _, g := range grads {
			for i := range g {
				g[i] *= coef
			}
		}
	}
	return float64(total), nil
}

// pNorm returns the p-norm of x (the largest |x| for p = +Inf), accumulated
// in float64 and rounded to float32.
func pNorm(x []float32, p float64) float32 {
	switch {
	case math.IsInf(p, 1):
		var m float32
		for _, v := range x {
			a := float32(math.Abs(float64(v)))
			if a > m || a != a {
				m = a
			}
			if m != m {
				return m
			}
		}
		return m
	case p == 2:
		var s float64
		for _, v := range x {
			s += float64(v) * float64(v)
		}
		return float32(math.Sqrt(s))
	case p == 1:
		var s float64
		for _, v := range x {
			s += math.Abs(float64(v))
		}
		return float32(s)
	}
	var s float64
	for _, v := range x {
		s += math.Pow(math.Abs(float64(v)), p)
	}
	return float32(math.Pow(s, 1/p))
}
