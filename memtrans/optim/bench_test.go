package optim

import (
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/radgen/radgen"
)

// benchParams returns about 35M parameters (35 tensors of 1024×1024, the
// size of R2Gen with its ResNet-101 extractor) with gradients set.
func benchParams() []radgen.Named {
	const tensors, rows, cols = 35, 1024, 1024
	ps := make([]radgen.Named, tensors)
	for i := range ps {
		p := make([]float32, rows*cols)
		g := make([]float32, rows*cols)
		for j := range p {
			p[j] = float32(j%1000)*1e-4 - 0.05
			g[j] = float32(j%777)*1e-5 - 0.003
		}
		t := radgen.FromFloat32(p, rows, cols).SetRequiresGrad(true)
		t.SetGrad(radgen.FromFloat32(g, rows, cols))
		ps[i] = radgen.Named{Name: fmt.Sprintf("layer%d.weight", i), Tensor: t}
	}
	return ps
}

// BenchmarkAdamStep measures one R2Gen optimiser step (Adam with amsgrad
// and weight decay) over 35M parameters, with one worker and with
// GOMAXPROCS workers. Bytes are those the update reads and writes (9
// float32 per parameter); ns/param is the time per parameter.
func BenchmarkAdamStep(b *testing.B) {
	if testing.Short() {
		b.Skip("35M-parameter benchmark skipped in short mode")
	}
	ps := benchParams()
	n := 0
	for _, p := range ps {
		n += p.Tensor.Len()
	}
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("params=%dM/workers=%d", n>>20, workers), func(b *testing.B) {
			opt, err := NewAdam([]Group{{Params: ps, LR: 1e-4, WeightDecay: 5e-5}}, WithAMSGrad(true), WithWorkers(workers))
			if err != nil {
				b.Fatal(err)
			}
			opt.Step() // allocate the moments outside the timed loop
			b.SetBytes(int64(9 * 4 * n))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				opt.Step()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/param")
		})
	}
}

// BenchmarkAdamStepBaseline is the same step written the obvious way in
// float32 (no fused adds, no tie checks): what the torch-exact arithmetic
// of BenchmarkAdamStep costs relative to it.
func BenchmarkAdamStepBaseline(b *testing.B) {
	if testing.Short() {
		b.Skip("35M-parameter benchmark skipped in short mode")
	}
	ps := benchParams()
	type st struct{ m, v, vmax []float32 }
	states := make([]st, len(ps))
	n := 0
	for i, p := range ps {
		l := p.Tensor.Len()
		states[i] = st{make([]float32, l), make([]float32, l), make([]float32, l)}
		n += l
	}
	const lr, wd, b1, b2, eps = 1e-4, 5e-5, 0.9, 0.999, 1e-8
	b.SetBytes(int64(9 * 4 * n))
	b.ResetTimer()
	for it := range b.N {
		step := float64(it + 1)
		stepLen := float32(lr / (1 - math.Pow(b1, step)))
		bc2 := float32(math.Sqrt(1 - math.Pow(b2, step)))
		for i, p := range ps {
			w, g, s := p.Tensor.Data(), p.Tensor.Grad().Data(), states[i]
			for j := range w {
				gj := g[j] + wd*w[j]
				s.m[j] = b1*s.m[j] + (1-b1)*gj
				s.v[j] = b2*s.v[j] + (1-b2)*gj*gj
				s.vmax[j] = max(s.vmax[j], s.v[j])
				w[j] -= stepLen * s.m[j] / (float32(math.Sqrt(float64(s.vmax[j])))/bc2 + eps)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/param")
}

// BenchmarkClipGradValue measures R2Gen's clip_grad_value_(0.1) over the
// same 35M gradients.
func BenchmarkClipGradValue(b *testing.B) {
	if testing.Short() {
		b.Skip("35M-parameter benchmark skipped in short mode")
	}
	ps := benchParams()
	n := 35 << 20
	b.SetBytes(int64(8 * n))
	b.ResetTimer()
	for range b.N {
		ClipGradValue(ps, 0.1)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/param")
}
