package optim

import (
	"fmt"
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
