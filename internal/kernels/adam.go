package kernels

import "math"

// Adam applies one Adam update (AMSGrad when vmax is not nil) to the
// parameters p with gradients g and moments m and v, in place, as
// torch.optim.Adam 1.13's single-tensor step computes it with the scalars k
// (memtrans/optim's Adam.Step states the update and computes k). g, m, v
// and vmax must be at least as long as p. The host engine's AdamStep and
// radgen's Tensor.AdamUpdate on the CPU run it; the CUDA engine's AdamStep
// computes the same values with the same roundings.
//
// Every float32 operation is written with an explicit conversion so that no
// compiler fuses a multiply and an add where ATen does not (the Go
// specification allows fusion otherwise). The two places where ATen's
// vectorised add(x, alpha) does fuse are rounded once: they are FMA32,
// written out so that its fast path is inlined (FMA32 itself is over the
// inliner's budget).
func Adam(k *AdamConsts, p, g, m, v, vmax []float32) {
	n := len(p)
	g, m, v = g[:n], m[:n], v[:n]
	if vmax != nil {
		vmax = vmax[:n]
	}
	wd, omb1 := float64(k.WD), float64(k.OneMinusB1)
	for i := range p {
		gi := g[i]
		if k.Decoupled {
			p[i] = float32(p[i] * k.Decay) // param.mul_(1 - lr*wd)
		} else if k.WD != 0 {
			// grad = grad.add(param, alpha=wd), fused: FMA32(p[i], k.WD, gi).
			x, z := float64(p[i])*wd, float64(gi)
			if s := x + z; !fmaTie(s) {
				gi = float32(s)
			} else {
				gi = fmaSlow(x, z, s)
			}
		}
		// exp_avg.mul_(β1).add_(grad, alpha=1-β1), fused:
		// FMA32(gi, k.OneMinusB1, m[i]·β1).
		var mi float32
		x, z := float64(gi)*omb1, float64(float32(m[i]*k.Beta1))
		if s := x + z; !fmaTie(s) {
			mi = float32(s)
		} else {
			mi = fmaSlow(x, z, s)
		}
		// exp_avg_sq.mul_(β2).addcmul_(grad, grad, value=1-β2)
		vi := float32(v[i]*k.Beta2) + float32(float32(k.OneMinusB2*gi)*gi)
		m[i], v[i] = mi, vi
		if vmax != nil {
			vi = max(vmax[i], vi) // torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
			vmax[i] = vi
		}
		// (sqrt(v̂) / bias_correction2_sqrt).add_(eps); a float64 square root
		// rounded to float32 is the correctly rounded float32 one (53 ≥ 2·24+2).
		denom := float32(float32(math.Sqrt(float64(vi)))/k.BC2Sqrt) + k.Eps
		p[i] += float32(k.NegStepLen*mi) / denom // param.addcdiv_(exp_avg, denom, value=-step_size)
	}
}

// FMA32 returns x·y + z rounded once to float32, as a fused multiply-add
// (_mm256_fmadd_ps, CUDA's __fmaf_rn) computes it, on any CPU.
//
// The product of two float32 values is exact in float64 (24+24 bits ≤ 53),
// so s = x·y + z in float64 is rounded once. Rounding s again to float32
// gives the right answer unless s landed exactly on a float32 tie (a value
// halfway between two float32s, which float64 represents): the exact sum
// lies on one side of the tie, and s cannot tell which. Only then, and for
// results in float32's subnormal range, where the ties sit at other bits,
// does FMA32 take its slow path, which recovers the error of s (TwoSum)
// and rounds the exact sum to odd in float64 first (Boldo & Melquiond 2008:
// rounding to odd with at least 24+2 bits, then to nearest at 24 bits,
// equals rounding to nearest once).
func FMA32(x, y, z float32) float32 {
	p, c := float64(x)*float64(y), float64(z)
	s := p + c
	if !fmaTie(s) {
		return float32(s)
	}
	return fmaSlow(p, c, s)
}

// fmaTie reports whether the float64 s may round to float32 differently
// from the exact value it approximates. A normal float32 keeps the top 23
// of float64's 52 fraction bits: s is a tie when the other 29 are 1
// followed by 28 zeros. Below 2^-126 (zero included) float32 keeps fewer
// bits, so those values are reported too.
func fmaTie(s float64) bool {
	u := math.Float64bits(s)
	return u&(1<<29-1) == 1<<28 || u&(0x7ff<<52) < (1023-126)<<52
}

// fmaSlow rounds p + c (s their float64 sum) to float32 correctly by way of
// the exact sum rounded to odd.
func fmaSlow(p, c, s float64) float32 {
	if s == 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return float32(s) // exact (or not a number)
	}
	// TwoSum (Knuth): e = (p + c) − s exactly.
	b := s - p
	e := (p - (s - b)) + (c - b)
	if e != 0 {
		// s is inexact. Round to odd: of the two float64 values around the
		// exact sum, take the one whose last bit is 1.
		if u := math.Float64bits(s); u&1 == 0 {
			if (e > 0) == (s > 0) {
				u++ // the exact sum lies farther from zero than s
			} else {
				u--
			}
			s = math.Float64frombits(u)
		}
	}
	return float32(s)
}
