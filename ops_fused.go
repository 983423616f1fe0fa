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
// with the same values and gradients. It is one op on every engine: on the
// CPU its primitive runs on all cores, one channel at a time, in one pass
// for the statistics and one for y forward, and one for the sums and one
// for the gradient backward, keeping neither x̂ nor the intermediate
// results; a device runs the plain equivalent's primitives.
func (g *Graph) BatchNorm2dTrainAct(x, weight, bias, runMean, runVar, residual *Tensor, relu bool, eps, momentum float64) (y, newMean, newVar *Tensor) {
	const op = "BatchNorm2dTrainAct"
	p := primsOf(op, x, weight, bias, runMean, runVar, residual)
	res := residual
	c, plane, m := checkBatchNormTrain(op, x, weight, bias, runMean, runVar)
	if res != nil && !slices.Equal(res.shape, x.shape) {
		panic(fmt.Sprintf("radgen: %s residual %v for input %v", op, res.shape, x.shape))
	}
	n := x.Len()
	out := g.empty(x, x.shape)
	state, mean, variance := p.batchNormAct(out.at(0), x.at(0), optionalAt(res), optionalAt(weight), optionalAt(bias), relu, eps, c, plane, n)
	keep(x, res, weight, bias, out)
	newMean, newVar = runningStats(runMean, runVar, mean, variance, m, momentum)
	if g.needs(x, weight, bias, res) {
		g.push(out, func() {
			dy := out.grad
			if dy == nil {
				return
			}
			// A gradient made here holds zeros: it is written, not added
			// to (fresh). The residual's is taken first, so that when x is
			// the residual too the second use adds to the first. A residual
			// without a gradient yet takes dY's storage, which the result
			// gives up after this pass (see give): dz is written over dY,
			// value by value, each read before it is written.
			var dx, dres buffer
			var freshX, freshR bool
			switch {
			case res != nil && res.requiresGrad && res.grad == nil && res != x:
				res.grad, dres, freshR = dy, dy.at(0), true
			case res != nil && res.requiresGrad:
				freshR = res.grad == nil
				dres = gradOf(res).at(0)
			}
			if x.requiresGrad {
				freshX = x.grad == nil
				dx = gradOf(x).at(0)
			}
			sdz, sdzx := p.batchNormActBackward(state, dy.at(0), dx, dres, freshX, freshR)
			addChannelGrad(weight, sdzx)
			addChannelGrad(bias, sdz)
			keep(x, res, weight, out, dy, x.grad)
		})
	}
	return out, newMean, newVar
}

// batchNormActCPU is the CPU engine's batchNormAct: the fused kernels of
// internal/kernels on every core, a chunk of channels at a time.
func batchNormActCPU[T float](y, x, res, gamma, beta []T, relu bool, eps float64, c, plane int) (*kernels.BatchNormAct[T], []float64, []float64) {
	k := &kernels.BatchNormAct[T]{
		C: c, Plane: plane, X: x, Y: y, R: res, ReLU: relu, Gamma: gamma, Beta: beta,
		Inv: make([]T, c), Shift: make([]T, c),
		Mean: make([]float64, c), Var: make([]float64, c), Inv64: make([]float64, c),
	}
	channelChunks(c, len(x)/max(c, 1), func(lo, hi int) { k.Forward(eps, lo, hi) })
	return k, k.Mean, k.Var
}

// batchNormActBackwardCPU is the CPU engine's batchNormActBackward.
func batchNormActBackwardCPU[T float](k *kernels.BatchNormAct[T], dy, dx, dres []T, freshX, freshR bool) ([]float64, []float64) {
	gr := &kernels.BatchNormActGrad[T]{
		DY: dy, DX: dx, DR: dres, FreshX: freshX, FreshR: freshR,
		SumDY: make([]float64, k.C), SumDYXhat: make([]float64, k.C),
	}
	channelChunks(k.C, len(k.X)/max(k.C, 1), func(lo, hi int) { k.Backward(gr, lo, hi) })
	return gr.SumDY, gr.SumDYXhat
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
