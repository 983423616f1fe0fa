package kernels

import "math"

// NormKind selects how a row is normalised.
type NormKind uint8

const (
	// NormR2Gen divides by the unbiased (Bessel, n−1) standard deviation with
	// eps added to the std: (x − μ) / (std + eps). This is R2Gen's LayerNorm.
	NormR2Gen NormKind = iota
	// NormStandard divides by sqrt(biased variance + eps), as torch.nn.LayerNorm.
	NormStandard
)

// Normalize writes x̂ = (x − μ)/σ for each row of length n into dst and the
// per-row 1/σ into inv (len = rows). Statistics are computed in float64.
func Normalize[T Float](dst, inv, x []T, n int, eps float64, kind NormKind) {
	r := 0
	for off := 0; off+n <= len(x); off += n {
		row, out := x[off:off+n], dst[off:off+n]
		var mean float64
		for _, v := range row {
			mean += float64(v)
		}
		mean /= float64(n)
		var ss float64
		for _, v := range row {
			d := float64(v) - mean
			ss += d * d
		}
		var is float64
		switch kind {
		case NormR2Gen:
			std := 0.0
			if n > 1 {
				std = math.Sqrt(ss / float64(n-1))
			} else {
				std = math.NaN() // torch.std of one element is NaN
			}
			is = 1 / (std + eps)
		default:
			is = 1 / math.Sqrt(ss/float64(n)+eps)
		}
		for i, v := range row {
			out[i] = T((float64(v) - mean) * is)
		}
		inv[r] = T(is)
		r++
	}
}

// NormalizeBackward accumulates into dx the gradient of x̂ = (x − μ)/σ given
// dy = ∂L/∂x̂, x̂ (y) and 1/σ (inv).
//
// Standard: σ = sqrt(v + eps), v = Σ(x−μ)²/n, so
// dx = inv·(dy − mean(dy) − x̂·mean(dy·x̂)).
// R2Gen: σ = s + eps with s = sqrt(Σ(x−μ)²/(n−1)), so
// dx = inv·(dy − mean(dy)) − inv²·(Σ dy·(x−μ))·(x−μ)/((n−1)·s),
// written with x − μ = x̂/inv.
func NormalizeBackward[T Float](dx, dy, y, inv []T, n int, eps float64, kind NormKind) {
	r := 0
	for off := 0; off+n <= len(y); off += n {
		yr, dyr, dxr := y[off:off+n], dy[off:off+n], dx[off:off+n]
		is := float64(inv[r])
		r++
		var sdy, sdyy float64
		for i := range yr {
			sdy += float64(dyr[i])
			sdyy += float64(dyr[i]) * float64(yr[i])
		}
		mdy := sdy / float64(n)
		switch kind {
		case NormR2Gen:
			// x−μ = ŷ/is ; s = 1/is − eps
			s := 1/is - eps
			// Σ dy·(x−μ) = sdyy/is
			// A constant row (s = 0) has x − μ = 0: the term vanishes
			// (the formula's 0/0 would make the whole row NaN).
			c := 0.0
			if s != 0 {
				c = is * is * (sdyy / is) / (float64(n-1) * s)
			}
			for i := range yr {
				xm := float64(yr[i]) / is
				dxr[i] += T(is*(float64(dyr[i])-mdy) - c*xm)
			}
		default:
			myy := sdyy / float64(n)
			for i := range yr {
				dxr[i] += T(is * (float64(dyr[i]) - mdy - float64(yr[i])*myy))
			}
		}
	}
}
