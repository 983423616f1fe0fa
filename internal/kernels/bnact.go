package kernels

import "math"

// BatchNormAct is batch normalisation with batch statistics followed by an
// optional residual sum and an optional ReLU, on x laid out (B, C, plane):
//
//	x̂ = x·Inv_c + Shift_c         (Inv = 1/sqrt(σ²+eps), Shift = −μ·Inv)
//	y = act(x̂·γ_c + β_c + r)       (act = ReLU or the identity)
//
// Its methods work on a range of channels [lo, hi), so that goroutines can
// share out the channels; each channel's B planes are read while they are
// still in cache. x̂ is recomputed rather than stored: the backward pass
// reads x, y and dy.
//
// The float64 sums run in 16 lanes (lane j adds the values i ≡ j mod 16 of
// each plane, then the lanes are added in a fixed order), so that the
// assembly and the Go loops give the same bits.
type BatchNormAct[T Float] struct {
	C, Plane int
	X, Y, R  []T // input, output, residual (nil for none)
	// Inv and Shift (C) are written by Forward.
	Inv, Shift  []T
	Gamma, Beta []T // nil: 1 and 0
	ReLU        bool
	// Mean, Var and Inv64 (C), in float64, are written by Forward: the
	// batch mean, the biased variance and 1/sqrt(Var + eps).
	Mean, Var, Inv64 []float64
}

// The flags of the assembly loops.
const (
	bnReLU  = 1 // mask by y (forward: apply ReLU)
	bnRes   = 2 // forward: add r; backward: route dz to dr
	bnFresh = 4 // overwrite the gradient instead of adding to it
)

func (p *BatchNormAct[T]) batch() int {
	if p.C*p.Plane == 0 {
		return 0
	}
	return len(p.X) / (p.C * p.Plane)
}

// lanes16 adds up 16 lanes in a fixed order.
func lanes16(a *[16]float64) float64 {
	var s [8]float64
	for i := range s {
		s[i] = a[i] + a[i+8]
	}
	return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))
}

// Forward computes the statistics of the channels [lo, hi) in float64 (the
// mean, then the mean squared deviation from it) and writes their y.
func (p *BatchNormAct[T]) Forward(eps float64, lo, hi int) {
	batch, plane, c := p.batch(), p.Plane, p.C
	m := float64(batch * plane)
	for ch := lo; ch < hi; ch++ {
		var acc [16]float64
		for b := 0; b < batch; b++ {
			sumLanes(&acc, p.X[(b*c+ch)*plane:(b*c+ch+1)*plane])
		}
		mu := lanes16(&acc) / m
		acc = [16]float64{}
		for b := 0; b < batch; b++ {
			sqDevLanes(&acc, p.X[(b*c+ch)*plane:(b*c+ch+1)*plane], mu)
		}
		vr := lanes16(&acc) / m
		inv := 1 / math.Sqrt(vr+eps)
		p.Mean[ch], p.Var[ch], p.Inv64[ch] = mu, vr, inv
		is, sh := T(inv), T(-mu*inv)
		p.Inv[ch], p.Shift[ch] = is, sh
		gm, bt := T(1), T(0)
		if p.Gamma != nil {
			gm = p.Gamma[ch]
		}
		if p.Beta != nil {
			bt = p.Beta[ch]
		}
		for b := 0; b < batch; b++ {
			off := (b*c + ch) * plane
			var r []T
			if p.R != nil {
				r = p.R[off : off+plane]
			}
			normRow(p.Y[off:off+plane], p.X[off:off+plane], r, is, sh, gm, bt, p.ReLU)
		}
	}
}

// sumLanes adds x[i] to acc[i%16].
func sumLanes[T Float](acc *[16]float64, x []T) {
	i := 0
	if x32, ok := any(x).([]float32); ok {
		i = sumHead32(acc, x32)
	}
	for ; i < len(x); i++ {
		acc[i%16] += float64(x[i])
	}
}

// sqDevLanes adds (x[i] − mu)² to acc[i%16].
func sqDevLanes[T Float](acc *[16]float64, x []T, mu float64) {
	i := 0
	if x32, ok := any(x).([]float32); ok {
		i = sqDevHead32(acc, x32, mu)
	}
	for ; i < len(x); i++ {
		d := float64(x[i]) - mu
		acc[i%16] += d * d
	}
}

// normRow writes y = act((x·is + sh)·gm + bt + r) (r nil: no sum), where
// act is ReLU (NaN becomes +0, as in ReLU) or the identity.
func normRow[T Float](y, x, r []T, is, sh, gm, bt T, relu bool) {
	y = y[:len(x)]
	if r != nil {
		r = r[:len(x)]
	}
	i := 0
	if x32, ok := any(x).([]float32); ok {
		flags := 0
		if relu {
			flags |= bnReLU
		}
		if r != nil {
			flags |= bnRes
		}
		c := [4]float32{float32(is), float32(sh), float32(gm), float32(bt)}
		i = normHead32(any(y).([]float32), x32, any(r).([]float32), &c, flags)
	}
	for ; i < len(x); i++ {
		z := (x[i]*is+sh)*gm + bt
		if r != nil {
			z += r[i]
		}
		if relu && !(z > 0) {
			z = 0
		}
		y[i] = z
	}
}

// BatchNormActGrad holds the gradient buffers of BatchNormAct's backward
// pass. DX and DR may be nil (not wanted); with Fresh set for one of them
// its values are overwritten rather than added to (a buffer just allocated
// as zeros, which is then not read). DY is the gradient of y.
type BatchNormActGrad[T Float] struct {
	DY, DX, DR       []T
	FreshX, FreshR   bool
	SumDY, SumDYXhat []float64 // (C) written: Σdz and Σdz·x̂ per channel
}

// Backward runs the backward pass of the channels [lo, hi) after Forward.
// With dz = dy·[y > 0] (ReLU) or dy, it writes Σdz and Σdz·x̂ (the bias's
// and weight's gradients), routes dz to the residual (DR) and accumulates
//
//	dx = γ·inv·(dz − mean(dz) − x̂·mean(dz·x̂))
//
// into DX, the means over the channel's B·plane samples.
func (p *BatchNormAct[T]) Backward(gr *BatchNormActGrad[T], lo, hi int) {
	batch, plane, c := p.batch(), p.Plane, p.C
	m := float64(batch * plane)
	for ch := lo; ch < hi; ch++ {
		is, sh := p.Inv[ch], p.Shift[ch]
		var s, sx [16]float64
		for b := 0; b < batch; b++ {
			off := (b*c + ch) * plane
			var y, dr []T
			if p.ReLU {
				y = p.Y[off : off+plane]
			}
			if gr.DR != nil {
				dr = gr.DR[off : off+plane]
			}
			sumsRow(&s, &sx, p.X[off:off+plane], gr.DY[off:off+plane], y, dr, gr.FreshR, is, sh)
		}
		sdy, sdyx := lanes16(&s), lanes16(&sx)
		gr.SumDY[ch], gr.SumDYXhat[ch] = sdy, sdyx
		if gr.DX == nil {
			continue
		}
		g := 1.0
		if p.Gamma != nil {
			g = float64(p.Gamma[ch])
		}
		k := [3]float64{g * p.Inv64[ch], sdy / m, sdyx / m}
		for b := 0; b < batch; b++ {
			off := (b*c + ch) * plane
			var y []T
			if p.ReLU {
				y = p.Y[off : off+plane]
			}
			dxRow(gr.DX[off:off+plane], p.X[off:off+plane], gr.DY[off:off+plane], y, gr.FreshX, is, sh, &k)
		}
	}
}

// sumsRow adds dz into the lanes s and dz·x̂ into sx over a row, x̂ = x·is +
// sh, dz = dy·[y > 0] (dy where y is nil), and writes dz into dr (nil: not
// wanted; fresh: dr is overwritten, else added to).
func sumsRow[T Float](s, sx *[16]float64, x, dy, y, dr []T, fresh bool, is, sh T) {
	n := len(x)
	dy = dy[:n]
	if y != nil {
		y = y[:n]
	}
	if dr != nil {
		dr = dr[:n]
	}
	i := 0
	if x32, ok := any(x).([]float32); ok {
		c := [4]float32{float32(is), float32(sh)}
		i = sumsHead32(s, sx, x32, any(dy).([]float32), any(y).([]float32), any(dr).([]float32), &c, bnFlags(y != nil, dr != nil, fresh))
	}
	for ; i < n; i++ {
		d := dy[i]
		if y != nil {
			d = nonzero(d, y[i])
		}
		if dr != nil {
			if fresh {
				dr[i] = d
			} else {
				dr[i] += d
			}
		}
		s[i%16] += float64(d)
		sx[i%16] += float64(d) * float64(x[i]*is+sh)
	}
}

func bnFlags(relu, res, fresh bool) int {
	f := 0
	if relu {
		f |= bnReLU
	}
	if res {
		f |= bnRes
	}
	if fresh {
		f |= bnFresh
	}
	return f
}

// nonzero returns d where y ≠ 0 and +0 otherwise: the gradient through a
// ReLU whose output is y (never negative; a NaN, which ReLU does not
// output, would pass).
func nonzero[T Float](d, y T) T {
	if y == 0 {
		return 0
	}
	return d
}

// dxRow writes (fresh) or adds into dx float32(k·((dz − mdy) − x̂·mdyx))
// over a row, k = {k, mdy, mdyx}, with dz and x̂ as sumsRow has them.
func dxRow[T Float](dx, x, dy, y []T, fresh bool, is, sh T, k *[3]float64) {
	n := len(x)
	dx, dy = dx[:n], dy[:n]
	if y != nil {
		y = y[:n]
	}
	i := 0
	if x32, ok := any(x).([]float32); ok {
		c := [4]float32{float32(is), float32(sh)}
		i = dxHead32(any(dx).([]float32), x32, any(dy).([]float32), any(y).([]float32), &c, k, bnFlags(y != nil, false, fresh))
	}
	for ; i < n; i++ {
		d := dy[i]
		if y != nil {
			d = nonzero(d, y[i])
		}
		g := T(k[0] * (float64(d) - k[1] - float64(x[i]*is+sh)*k[2]))
		if fresh {
			dx[i] = g
		} else {
			dx[i] += g
		}
	}
}
