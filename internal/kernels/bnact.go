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

func (p *BatchNormAct[T]) batch() int {
	if p.C*p.Plane == 0 {
		return 0
	}
	return len(p.X) / (p.C * p.Plane)
}

// Forward computes the statistics of the channels [lo, hi) (in float64, two
// passes, as ChannelStats) and writes their y.
func (p *BatchNormAct[T]) Forward(eps float64, lo, hi int) {
	batch, plane, c := p.batch(), p.Plane, p.C
	m := float64(batch * plane)
	for ch := lo; ch < hi; ch++ {
		var s0, s1, s2, s3 float64
		for b := 0; b < batch; b++ {
			x := p.X[(b*c+ch)*plane : (b*c+ch+1)*plane]
			i := 0
			for ; i+4 <= len(x); i += 4 {
				s0 += float64(x[i])
				s1 += float64(x[i+1])
				s2 += float64(x[i+2])
				s3 += float64(x[i+3])
			}
			for ; i < len(x); i++ {
				s0 += float64(x[i])
			}
		}
		mu := (s0 + s1 + s2 + s3) / m
		s0, s1, s2, s3 = 0, 0, 0, 0
		for b := 0; b < batch; b++ {
			x := p.X[(b*c+ch)*plane : (b*c+ch+1)*plane]
			i := 0
			for ; i+4 <= len(x); i += 4 {
				d0, d1 := float64(x[i])-mu, float64(x[i+1])-mu
				d2, d3 := float64(x[i+2])-mu, float64(x[i+3])-mu
				s0 += d0 * d0
				s1 += d1 * d1
				s2 += d2 * d2
				s3 += d3 * d3
			}
			for ; i < len(x); i++ {
				d := float64(x[i]) - mu
				s0 += d * d
			}
		}
		vr := (s0 + s1 + s2 + s3) / m
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

// normRow writes y = act((x·is + sh)·gm + bt + r) (r nil: no sum), where
// act is ReLU (NaN becomes 0, as in ReLU) or the identity.
func normRow[T Float](y, x, r []T, is, sh, gm, bt T, relu bool) {
	if y32, ok := any(y).([]float32); ok && relu {
		x32, r32 := any(x).([]float32), any(r).([]float32)
		normReLURow32(y32, x32, r32, float32(is), float32(sh), float32(gm), float32(bt))
		return
	}
	y = y[:len(x)]
	switch {
	case r != nil && relu:
		r = r[:len(x)]
		for i, v := range x {
			z := (v*is+sh)*gm + bt + r[i]
			if !(z > 0) {
				z = 0
			}
			y[i] = z
		}
	case r != nil:
		r = r[:len(x)]
		for i, v := range x {
			y[i] = (v*is+sh)*gm + bt + r[i]
		}
	case relu:
		for i, v := range x {
			z := (v*is+sh)*gm + bt
			if !(z > 0) {
				z = 0
			}
			y[i] = z
		}
	default:
		for i, v := range x {
			y[i] = (v*is+sh)*gm + bt
		}
	}
}

// positive32 returns z where z > 0 and +0 otherwise (NaN included), without
// a branch: half of a ReLU's inputs are negative, in no order a predictor
// can learn. z > 0 exactly when its bits b lie in [1, 0x7f800000] (+Inf's).
func positive32(z float32) float32 {
	b := math.Float32bits(z)
	keep := uint32((int64(b-1) - 0x7f800000) >> 63) // all ones when b−1 < 0x7f800000
	return math.Float32frombits(b & keep)
}

// nonzero32 returns d where y ≠ 0 and +0 otherwise, without a branch: the
// gradient through a ReLU whose output is y (never negative, never NaN).
func nonzero32(d, y float32) float32 {
	u := math.Float32bits(y) &^ (1 << 31)
	keep := uint32(int32(u|-u) >> 31) // all ones when u ≠ 0
	return math.Float32frombits(math.Float32bits(d) & keep)
}

func normReLURow32(y, x, r []float32, is, sh, gm, bt float32) {
	y = y[:len(x)]
	if r != nil {
		r = r[:len(x)]
		for i, v := range x {
			y[i] = positive32((v*is+sh)*gm + bt + r[i])
		}
		return
	}
	for i, v := range x {
		y[i] = positive32((v*is+sh)*gm + bt)
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
		var sdy, sdyx float64
		for b := 0; b < batch; b++ {
			off := (b*c + ch) * plane
			var y, dr []T
			if p.ReLU {
				y = p.Y[off : off+plane]
			}
			if gr.DR != nil {
				dr = gr.DR[off : off+plane]
			}
			s, sx := sumsRow(p.X[off:off+plane], gr.DY[off:off+plane], y, dr, gr.FreshR, is, sh)
			sdy += s
			sdyx += sx
		}
		gr.SumDY[ch], gr.SumDYXhat[ch] = sdy, sdyx
		if gr.DX == nil {
			continue
		}
		g := 1.0
		if p.Gamma != nil {
			g = float64(p.Gamma[ch])
		}
		k := g * p.Inv64[ch]
		mdy, mdyx := sdy/m, sdyx/m
		for b := 0; b < batch; b++ {
			off := (b*c + ch) * plane
			var y []T
			if p.ReLU {
				y = p.Y[off : off+plane]
			}
			dxRow(gr.DX[off:off+plane], p.X[off:off+plane], gr.DY[off:off+plane], y, gr.FreshX, is, sh, k, mdy, mdyx)
		}
	}
}

// sumsRow returns Σdz and Σdz·x̂ over a row, x̂ = x·is + sh, dz = dy·[y > 0]
// (dy where y is nil), and writes dz into dr (nil: not wanted; fresh: dr is
// overwritten, else added to).
func sumsRow[T Float](x, dy, y, dr []T, fresh bool, is, sh T) (s, sx float64) {
	if x32, ok := any(x).([]float32); ok {
		return sumsRow32(x32, any(dy).([]float32), any(y).([]float32), any(dr).([]float32), fresh, float32(is), float32(sh))
	}
	dy = dy[:len(x)]
	for i, v := range x {
		d := dy[i]
		if y != nil && !(y[i] > 0) {
			d = 0
		}
		if dr != nil {
			if fresh {
				dr[i] = d
			} else {
				dr[i] += d
			}
		}
		s += float64(d)
		sx += float64(d) * float64(v*is+sh)
	}
	return s, sx
}

func sumsRow32(x, dy, y, dr []float32, fresh bool, is, sh float32) (float64, float64) {
	n := len(x)
	dy = dy[:n]
	var s0, s1, x0, x1 float64
	// dz, by pairs: the two sums of each kind are independent chains.
	dz := func(i int) float32 {
		if y != nil {
			return nonzero32(dy[i], y[i])
		}
		return dy[i]
	}
	if y != nil {
		y = y[:n]
	}
	if dr != nil {
		dr = dr[:n]
	}
	i := 0
	for ; i+2 <= n; i += 2 {
		d0, d1 := dz(i), dz(i+1)
		if dr != nil {
			if fresh {
				dr[i], dr[i+1] = d0, d1
			} else {
				dr[i] += d0
				dr[i+1] += d1
			}
		}
		s0 += float64(d0)
		s1 += float64(d1)
		x0 += float64(d0) * float64(x[i]*is+sh)
		x1 += float64(d1) * float64(x[i+1]*is+sh)
	}
	for ; i < n; i++ {
		d := dz(i)
		if dr != nil {
			if fresh {
				dr[i] = d
			} else {
				dr[i] += d
			}
		}
		s0 += float64(d)
		x0 += float64(d) * float64(x[i]*is+sh)
	}
	return s0 + s1, x0 + x1
}

// dxRow writes (fresh) or adds into dx k·(dz − mdy − x̂·mdyx) over a row,
// with dz and x̂ as sumsRow has them.
func dxRow[T Float](dx, x, dy, y []T, fresh bool, is, sh T, k, mdy, mdyx float64) {
	if x32, ok := any(x).([]float32); ok {
		dxRow32(any(dx).([]float32), x32, any(dy).([]float32), any(y).([]float32), fresh, float32(is), float32(sh), k, mdy, mdyx)
		return
	}
	dx, dy = dx[:len(x)], dy[:len(x)]
	for i, v := range x {
		d := dy[i]
		if y != nil && !(y[i] > 0) {
			d = 0
		}
		g := T(k * (float64(d) - mdy - float64(v*is+sh)*mdyx))
		if fresh {
			dx[i] = g
		} else {
			dx[i] += g
		}
	}
}

func dxRow32(dx, x, dy, y []float32, fresh bool, is, sh float32, k, mdy, mdyx float64) {
	n := len(x)
	dx, dy = dx[:n], dy[:n]
	switch {
	case y != nil && fresh:
		y = y[:n]
		for i, v := range x {
			dx[i] = float32(k * (float64(nonzero32(dy[i], y[i])) - mdy - float64(v*is+sh)*mdyx))
		}
	case y != nil:
		y = y[:n]
		for i, v := range x {
			dx[i] += float32(k * (float64(nonzero32(dy[i], y[i])) - mdy - float64(v*is+sh)*mdyx))
		}
	case fresh:
		for i, v := range x {
			dx[i] = float32(k * (float64(dy[i]) - mdy - float64(v*is+sh)*mdyx))
		}
	default:
		for i, v := range x {
			dx[i] += float32(k * (float64(dy[i]) - mdy - float64(v*is+sh)*mdyx))
		}
	}
}
