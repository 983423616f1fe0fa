package accel

import (
	"math"

	"github.com/radgen/radgen/internal/kernels"
)

// AdamConsts are one parameter's scalars for an Adam step (see
// [kernels.AdamConsts]).
type AdamConsts = kernels.AdamConsts

// Optimizer is the part of an engine that updates parameters in place.
type Optimizer interface {
	// AdamStep applies one Adam (AMSGrad when k.AMSGrad) update to n
	// parameters p with gradients g and moments m, v (and vmax with
	// AMSGrad; ignored otherwise), with the arithmetic of
	// memtrans/optim's CPU step, rounding for rounding.
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
	AdamUpdate(&k, h.view(p, n), h.view(g, n), h.view(m, n), h.view(v, n), vm)
	return nil
}

// Clamp implements Optimizer.
func (h *Host) Clamp(dst Ptr, c float32, n int) error {
	d := h.view(dst, n)
	for i, x := range d {
		d[i] = min(max(x, -c), c)
	}
	return nil
}

// AdamUpdate is the Adam update of one slice in host memory (vmax nil
// without AMSGrad). Every float32 operation is written with an explicit
// conversion so that no compiler fuses a multiply and an add where ATen
// does not; the two places where ATen's vectorised add(x, alpha) does fuse
// are rounded once, as a fused multiply-add does.
func AdamUpdate(k *AdamConsts, p, g, m, v, vmax []float32) {
	n := len(p)
	g, m, v = g[:n], m[:n], v[:n]
	if vmax != nil {
		vmax = vmax[:n]
	}
	wd, omb1 := float64(k.WD), float64(k.OneMinusB1)
	for i := range p {
		gi := g[i]
		if k.Decoupled {
			p[i] = float32(p[i] * k.Decay)
		} else if k.WD != 0 {
			gi = fmaRound(float64(p[i])*wd, float64(gi))
		}
		mi := fmaRound(float64(gi)*omb1, float64(float32(m[i]*k.Beta1)))
		vi := float32(v[i]*k.Beta2) + float32(float32(k.OneMinusB2*gi)*gi)
		m[i], v[i] = mi, vi
		if vmax != nil {
			vi = max(vmax[i], vi)
			vmax[i] = vi
		}
		denom := float32(float32(math.Sqrt(float64(vi)))/k.BC2Sqrt) + k.Eps
		p[i] += float32(k.NegStepLen*mi) / denom
	}
}

// fmaRound rounds x + z to float32 once, x an exact product of two float32
// values: the float64 sum is rounded again unless it lands on a float32
// tie (or in float32's subnormal range), where the exact sum is first
// rounded to odd (Boldo & Melquiond 2008).
func fmaRound(x, z float64) float32 {
	s := x + z
	u := math.Float64bits(s)
	if u&(1<<29-1) != 1<<28 && u&(0x7ff<<52) >= (1023-126)<<52 {
		return float32(s)
	}
	if s == 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return float32(s)
	}
	b := s - x
	e := (x - (s - b)) + (z - b)
	if e != 0 && u&1 == 0 {
		if (e > 0) == (s > 0) {
			u++
		} else {
			u--
		}
		s = math.Float64frombits(u)
	}
	return float32(s)
}

// TensorBuffer is set by package radgen: it returns the engine and buffer
// of a *radgen.Tensor on a device (ok false for a CPU tensor or another
// value). Packages of the module that update tensors in place on their
// device (the optimisers) reach the storage through it.
var TensorBuffer func(t any) (e Engine, p Ptr, ok bool)
