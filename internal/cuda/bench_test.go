//go:build cuda

package cuda

// Kernel benchmarks (skip without a GPU) at decoder-step sizes: R2Gen's IU
// X-Ray model (d_model 512, 8 heads, vocabulary 760 + 1, 98 visual tokens)
// at batch 128 × beam 3 = 384 rows. The model's decoder on the engine is
// measured by memtrans's BenchmarkGenerateDevice.

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

const (
	benchHeads = 8
	benchVocab = 761
	benchTenc  = 98
)

func benchKernel(b *testing.B, bytes int64, run func(e *Engine, x, y Ptr) error, floats int) {
	e := gpu(b)
	rng := rand.New(rand.NewPCG(1, 2))
	x, y := upload(b, e, randVec(rng, floats, 1)), alloc(b, e, floats*4)
	must(b, run(e, x, y))
	must(b, e.Sync())
	b.SetBytes(bytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := run(e, x, y); err != nil {
			b.Fatal(err)
		}
	}
	must(b, e.Sync())
}

func BenchmarkGPUSoftmaxVocab(b *testing.B) {
	const rows = 384
	benchKernel(b, 2*rows*benchVocab*4, func(e *Engine, x, y Ptr) error { return e.LogSoftmax(y, x, rows, benchVocab) }, rows*benchVocab)
}

func BenchmarkGPUSoftmaxCross(b *testing.B) {
	const rows = 384 * benchHeads
	benchKernel(b, 2*rows*benchTenc*4, func(e *Engine, x, y Ptr) error { return e.Softmax(y, x, rows, benchTenc) }, rows*benchTenc)
}

func BenchmarkGPUGemm(b *testing.B) {
	for _, s := range []struct{ m, n, k int }{{384, 512, 512}, {512, 512, 512}, {4096, 4096, 4096}} {
		b.Run(fmt.Sprintf("%dx%dx%d", s.m, s.n, s.k), func(b *testing.B) {
			e := gpu(b)
			rng := rand.New(rand.NewPCG(3, 4))
			a, w, c := upload(b, e, randVec(rng, s.m*s.k, 1)), upload(b, e, randVec(rng, s.k*s.n, 1)), alloc(b, e, s.m*s.n*4)
			must(b, e.Gemm(false, false, s.m, s.n, s.k, 1, a, s.k, w, s.n, 0, c, s.n))
			must(b, e.Sync())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := e.Gemm(false, false, s.m, s.n, s.k, 1, a, s.k, w, s.n, 0, c, s.n); err != nil {
					b.Fatal(err)
				}
			}
			must(b, e.Sync())
			b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
