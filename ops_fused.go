package radgen

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/radgen/radgen/internal/kernels"
)

// BatchNorm2dTrainAct is BatchNorm2dTrain followed by an optional residual
// sum and an optional ReLU, the unit a ResNet is made of, as one op. Its
// plain equivalent, which is what it computes on a device, is
//
//	y, newMean, newVar := g.BatchNorm2dTrain(x, weight, bias, runMean, runVar, eps, momentum)
//	if residual != nil {
//		y = g.Add(y, residual) // residual has x's shape
//	}
//	if relu {
//		y = g.ReLU(y)
//	}
//
// with the same values and gradients. On the CPU it runs on all cores, one
// channel at a time, in one pass for the statistics and one for y forward,
// and one for the sums and one for the gradient backward, keeping neither x̂
// nor the intermediate results.
func (g *Graph) BatchNorm2dTrainAct(x, weight, bias, runMean, runVar, residual *Tensor, relu bool, eps, momentum float64) (y, newMean, newVar *Tensor) {
	if deviceOf("BatchNorm2dTrainAct", x, weight, bias, runMean, runVar, residual) != CPU {
		y, newMean, newVar = g.BatchNorm2dTrain(x, weight, bias, runMean, runVar, eps, momentum)
		if residual != nil {
			y = g.Add(y, residual)
		}
		if relu {
			y = g.ReLU(y)
		}
		return y, newMean, newVar
	}
	if x.Is64() {
		return batchNormAct[float64](g, x, weight, bias, runMean, runVar, residual, relu, eps, momentum)
	}
	return batchNormAct[float32](g, x, weight, bias, runMean, runVar, residual, relu, eps, momentum)
}

func batchNormAct[T Float](g *Graph, x, weight, bias, runMean, runVar, res *Tensor, relu bool, eps, momentum float64) (*Tensor, *Tensor, *Tensor) {
	const op = "BatchNorm2dTrainAct"
	if x.Rank() < 2 {
		panic(fmt.Sprintf("radgen: %s of %v", op, x.shape))
	}
	c := x.Dim(1)
	plane := channelLayout(op, x, c)
	checkChannelVec(op, "weight", weight, c)
	checkChannelVec(op, "bias", bias, c)
	checkChannelVec(op, "running mean", runMean, c)
	checkChannelVec(op, "running variance", runVar, c)
	if (runMean == nil) != (runVar == nil) {
		panic("radgen: " + op + " needs both running statistics or neither")
	}
	if res != nil {
		if !slices.Equal(res.shape, x.shape) || res.Is64() != x.Is64() {
			panic(fmt.Sprintf("radgen: %s residual %v for input %v", op, res.shape, x.shape))
		}
	}
	m := x.Len() / max(c, 1)
	if m <= 1 {
		panic(fmt.Sprintf("radgen: %s: expected more than 1 value per channel, got input %v", op, x.shape))
	}
	out := g.empty(x, x.shape)
	p := &kernels.BatchNormAct[T]{
		C: c, Plane: plane, X: values[T](x), Y: values[T](out), ReLU: relu,
		Inv: make([]T, c), Shift: make([]T, c),
		Mean: make([]float64, c), Var: make([]float64, c), Inv64: make([]float64, c),
	}
	if res != nil {
		p.R = values[T](res)
	}
	if weight != nil {
		p.Gamma = values[T](weight)
	}
	if bias != nil {
		p.Beta = values[T](bias)
	}
	channelChunks(c, m, func(lo, hi int) { p.Forward(eps, lo, hi) })

	var newMean, newVar *Tensor
	if runMean != nil {
		newMean, newVar = like(runMean, runMean.shape), like(runVar, runVar.shape)
		rm, rv := runMean.Float64s(), runVar.Float64s()
		nm, nv := values[T](newMean), values[T](newVar)
		unbias := float64(m) / float64(m-1)
		for ch := range c {
			nm[ch] = T((1-momentum)*rm[ch] + momentum*p.Mean[ch])
			nv[ch] = T((1-momentum)*rv[ch] + momentum*p.Var[ch]*unbias)
		}
	}

	if g.needs(x, weight, bias, res) {
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			gr := &kernels.BatchNormActGrad[T]{
				DY: values[T](out.grad), SumDY: make([]float64, c), SumDYXhat: make([]float64, c),
			}
			// A gradient buffer allocated here is zero: it is written, not
			// added to. The residual's is taken first, so that when x is
			// the residual too the second use adds to the first. A residual
			// without a gradient yet takes dY's storage, which the result
			// gives up after this pass (see give): dz is written over dY,
			// value by value, each read before it is written.
			switch {
			case res != nil && res.requiresGrad && res.grad == nil && res != x:
				gr.DR, gr.FreshR = gr.DY, true
				res.grad = out.grad
			case res != nil && res.requiresGrad:
				gr.FreshR = res.grad == nil
				gr.DR = values[T](gradOf(res))
			}
			if x.requiresGrad {
				gr.FreshX = x.grad == nil
				gr.DX = values[T](gradOf(x))
			}
			channelChunks(c, m, func(lo, hi int) { p.Backward(gr, lo, hi) })
			if weight != nil && weight.requiresGrad {
				dw := values[T](gradOf(weight))
				for ch := range c {
					dw[ch] += T(gr.SumDYXhat[ch])
				}
			}
			if bias != nil && bias.requiresGrad {
				db := values[T](gradOf(bias))
				for ch := range c {
					db[ch] += T(gr.SumDY[ch])
				}
			}
		})
	}
	return out, newMean, newVar
}

// chunkWork is the number of elements from which a per-channel op is
// shared out between goroutines.
const chunkWork = 1 << 15

// channelChunks runs f over [0, c) in chunks of channels, each of per
// elements, on up to GOMAXPROCS goroutines that take chunks as they finish
// (so that a goroutine held up by other work on a shared core does not hold
// up the op).
func channelChunks(c, per int, f func(lo, hi int)) {
	procs := runtime.GOMAXPROCS(0)
	if procs <= 1 || c <= 1 || c*per < chunkWork {
		f(0, c)
		return
	}
	// About eight chunks per goroutine, but none under chunkWork elements.
	size := max(1, c/(8*procs), (chunkWork+per-1)/max(per, 1))
	n := (c + size - 1) / size
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			f(i*size, min(c, (i+1)*size))
		}
	}
	var wg sync.WaitGroup
	for range min(procs, n) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}
