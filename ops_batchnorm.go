package radgen

import (
	"fmt"
	"math"
)

// BatchNorm2d applies batch normalisation with fixed statistics (evaluation
// mode, torch.nn.BatchNorm2d after model.eval()) to x (B, C, ...):
//
//	y = (x − mean_c)/sqrt(var_c + eps)·weight_c + bias_c
//
// mean and variance are the running statistics (C); weight and bias (C) may be
// nil (affine = False). Gradients flow to x, weight, bias, and to mean and
// variance when they require them. torch's eps is 1e-5. On a deferred
// convolution (see Conv2d) it is folded into the convolution's weight.
func (g *Graph) BatchNorm2d(x, weight, bias, mean, variance *Tensor, eps float64) *Tensor {
	p := primsOf("BatchNorm2d", x, weight, bias, mean, variance)
	if mean == nil || variance == nil {
		panic("radgen: BatchNorm2d needs running statistics")
	}
	c := mean.Len()
	plane := channelLayout("BatchNorm2d", x, c)
	checkChannelVec("BatchNorm2d", "mean", mean, c)
	checkChannelVec("BatchNorm2d", "variance", variance, c)
	checkChannelVec("BatchNorm2d", "weight", weight, c)
	checkChannelVec("BatchNorm2d", "bias", bias, c)
	if y := g.absorbBN(x, weight, bias, mean, variance, eps); y != nil {
		return y
	}
	mu, vr := mean.Float64s(), variance.Float64s()
	var gamma, beta []float64
	if weight != nil {
		gamma = weight.Float64s()
	}
	if bias != nil {
		beta = bias.Float64s()
	}
	// The statistics folded into one scale and one shift per channel, in
	// float64, then rounded to x's element type.
	inv := make([]float64, c)
	scale, shift := make([]float64, c), make([]float64, c)
	for ch := range c {
		inv[ch] = 1 / math.Sqrt(vr[ch]+eps)
		s := inv[ch]
		if gamma != nil {
			s *= gamma[ch]
		}
		t := -mu[ch] * s
		if beta != nil {
			t += beta[ch]
		}
		scale[ch], shift[ch] = s, t
	}
	scaleT, shiftT := channelVec(x, scale), channelVec(x, shift)
	n := x.Len()
	out := g.empty(x, x.shape)
	p.channelAffine(out.at(0), x.at(0), scaleT.at(0), shiftT.at(0), c, plane, n)
	keep(x, out, scaleT, shiftT)
	if g.needs(x, mean, variance, weight, bias) {
		g.push(out, func() {
			dy := out.grad
			if dy == nil {
				return
			}
			if x.requiresGrad { // dx = dy·scale
				d := g.empty(x, x.shape)
				p.channelAffine(d.at(0), dy.at(0), scaleT.at(0), buffer{}, c, plane, n)
				send(x, d, 1, true)
				keep(d)
			}
			sdy, sdyx := p.channelSums(dy.at(0), x.at(0), c, plane, n)
			gw, gb, gm, gv := make([]float64, c), make([]float64, c), make([]float64, c), make([]float64, c)
			for ch := range c {
				gmm := 1.0
				if gamma != nil {
					gmm = gamma[ch]
				}
				centred := sdyx[ch] - mu[ch]*sdy[ch]
				gw[ch], gb[ch] = centred*inv[ch], sdy[ch]
				gm[ch] = -gmm * inv[ch] * sdy[ch]
				gv[ch] = -0.5 * gmm * inv[ch] * inv[ch] * inv[ch] * centred
			}
			addChannelGrad(weight, gw)
			addChannelGrad(bias, gb)
			addChannelGrad(mean, gm)
			addChannelGrad(variance, gv)
			keep(x, dy, scaleT)
		})
	}
	return out
}

// BatchNorm2dTrain applies batch normalisation with the statistics of the
// batch (training mode, torch.nn.BatchNorm2d after model.train()) to
// x (B, C, ...):
//
//	y = (x − μ_c)/sqrt(σ²_c + eps)·weight_c + bias_c
//
// with μ_c and the biased σ²_c over the B·H·W samples of channel c. weight and
// bias (C) may be nil. Gradients flow to x (through the statistics), weight
// and bias.
//
// When runMean and runVar (C) are given it also returns the updated running
// statistics as new tensors, as torch updates its buffers:
//
//	newMean = (1 − momentum)·runMean + momentum·μ
//	newVar  = (1 − momentum)·runVar  + momentum·σ²·m/(m − 1)
//
// (the unbiased variance, m = B·H·W samples); torch's momentum is 0.1. The
// inputs are not modified; with nil running statistics the returned ones are
// nil. It panics, as torch does, when a channel has a single sample.
func (g *Graph) BatchNorm2dTrain(x, weight, bias, runMean, runVar *Tensor, eps, momentum float64) (y, newMean, newVar *Tensor) {
	p := primsOf("BatchNorm2dTrain", x, weight, bias, runMean, runVar)
	c, plane, m := checkBatchNormTrain("BatchNorm2dTrain", x, weight, bias, runMean, runVar)
	n := x.Len()
	mu, vr := p.channelStats(x.at(0), c, plane, n)
	inv, shift := make([]float64, c), make([]float64, c)
	for ch := range c {
		inv[ch] = 1 / math.Sqrt(vr[ch]+eps)
		shift[ch] = -mu[ch] * inv[ch]
	}
	invT, shiftT := channelVec(x, inv), channelVec(x, shift)
	// x̂ is kept for the backward pass; y = x̂·γ + β.
	xhat := g.empty(x, x.shape)
	p.channelAffine(xhat.at(0), x.at(0), invT.at(0), shiftT.at(0), c, plane, n)
	out := g.empty(x, x.shape)
	p.channelAffine(out.at(0), xhat.at(0), optionalAt(weight), optionalAt(bias), c, plane, n)
	keep(x, xhat, out, invT, shiftT, weight, bias)
	newMean, newVar = runningStats(runMean, runVar, mu, vr, m, momentum)
	if g.needs(x, weight, bias) {
		g.push(out, func() {
			dy := out.grad
			if dy == nil {
				return
			}
			sdy, sdyx := p.channelSums(dy.at(0), xhat.at(0), c, plane, n)
			addChannelGrad(weight, sdyx)
			addChannelGrad(bias, sdy)
			if x.requiresGrad {
				var gamma []float64
				if weight != nil {
					gamma = weight.Float64s()
				}
				p.batchNormBackward(gradOf(x).at(0), dy.at(0), xhat.at(0), gamma, inv, sdy, sdyx, c, plane, n)
				keep(x.grad)
			}
			keep(dy, xhat)
		})
	}
	return out, newMean, newVar
}

// GlobalAvgPool2d returns the mean of each channel plane of x [B, C, H, W]
// (or any [B, C, ...]) as [B, C]: torch's AvgPool2d with the plane as its
// kernel, squeezed, which is how R2Gen computes its averaged visual feature.
func (g *Graph) GlobalAvgPool2d(x *Tensor) *Tensor {
	p := primsOf("GlobalAvgPool2d", x)
	if x.Rank() < 3 {
		panic(fmt.Sprintf("radgen: GlobalAvgPool2d of %v", x.shape))
	}
	plane := numel(x.shape[2:])
	if plane == 0 {
		panic(fmt.Sprintf("radgen: GlobalAvgPool2d of empty planes %v", x.shape))
	}
	planes := x.Dim(0) * x.Dim(1)
	out := g.empty(x, []int{x.Dim(0), x.Dim(1)})
	p.avgPlanes(out.at(0), x.at(0), planes, plane)
	keep(x, out)
	if g.needs(x) {
		g.push(out, func() {
			if out.grad != nil {
				p.avgPlanesBackward(gradOf(x).at(0), out.grad.at(0), planes, plane)
				keep(x.grad, out.grad)
			}
		})
	}
	return out
}

// checkBatchNormTrain checks the operands of a batch norm with batch
// statistics (op names it in the panics) and returns the channels, the
// size of a channel's plane and the values per channel.
func checkBatchNormTrain(op string, x, weight, bias, runMean, runVar *Tensor) (c, plane, m int) {
	if x.Rank() < 2 {
		panic(fmt.Sprintf("radgen: %s of %v", op, x.shape))
	}
	c = x.Dim(1)
	plane = channelLayout(op, x, c)
	checkChannelVec(op, "weight", weight, c)
	checkChannelVec(op, "bias", bias, c)
	checkChannelVec(op, "running mean", runMean, c)
	checkChannelVec(op, "running variance", runVar, c)
	if (runMean == nil) != (runVar == nil) {
		panic("radgen: " + op + " needs both running statistics or neither")
	}
	m = x.Len() / max(c, 1)
	if m <= 1 {
		panic(fmt.Sprintf("radgen: %s: expected more than 1 value per channel, got input %v", op, x.shape))
	}
	return c, plane, m
}

// runningStats returns the running statistics updated with a batch's
// mean and biased variance over m values per channel, torch's way (the
// variance unbiased), or nils without running statistics.
func runningStats(runMean, runVar *Tensor, mean, variance []float64, m int, momentum float64) (newMean, newVar *Tensor) {
	if runMean == nil {
		return nil, nil
	}
	rm, rv := runMean.Float64s(), runVar.Float64s()
	nm, nv := make([]float64, len(mean)), make([]float64, len(mean))
	unbias := float64(m) / float64(m-1)
	for ch := range mean {
		nm[ch] = (1-momentum)*rm[ch] + momentum*mean[ch]
		nv[ch] = (1-momentum)*rv[ch] + momentum*variance[ch]*unbias
	}
	return channelVec(runMean, nm), channelVec(runVar, nv)
}

// channelVec returns v, one value per channel, as a vector of t's element
// type on t's device.
func channelVec(t *Tensor, v []float64) *Tensor {
	if t.device == CPU && t.Is64() {
		return FromFloat64(v, len(v))
	}
	return float32Vec(v).To(t.device)
}

// float32Vec returns v rounded to float32, as a CPU vector.
func float32Vec(v []float64) *Tensor {
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	return FromFloat32(f, len(f))
}

// addChannelGrad adds v, one value per channel, to t's gradient, if t
// wants one.
func addChannelGrad(t *Tensor, v []float64) {
	if t != nil && t.requiresGrad {
		send(t, channelVec(t, v), 1, true)
	}
}

// optionalAt is t's buffer, or none for a nil t.
func optionalAt(t *Tensor) buffer {
	if t == nil {
		return buffer{}
	}
	return t.at(0)
}
