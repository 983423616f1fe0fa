package f32

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// benchShapes are the m×n×k products of the GEMM benchmarks: cubes, then the
// im2col products of ResNet-101's convolutions on a 224² image (m = output
// pixels, n = output channels, k = input channels × kernel area), then
// decoding-size products (a few rows times a weight matrix).
var benchShapes = [][3]int{
	{512, 512, 512},
	{1024, 1024, 1024},
	{2048, 2048, 2048},
	// ResNet-101 at 224²: conv1 (7×7/2, 3→64 at 112²) ...
	{12544, 64, 147},
	// ... layer1 at 56²: 1×1 64→64, 3×3 64→64, 1×1 64→256, 1×1 256→64 ...
	{3136, 64, 64},
	{3136, 64, 576},
	{3136, 256, 64},
	{3136, 64, 256},
	// ... layer2 at 28²: 1×1 256→128 (at 56²), 3×3 128→128, 1×1 128→512, 1×1 512→128 ...
	{3136, 128, 256},
	{784, 128, 1152},
	{784, 512, 128},
	{784, 128, 512},
	// ... layer3 at 14²: 3×3 256→256, 1×1 256→1024, 1×1 1024→256 ...
	{196, 256, 2304},
	{196, 1024, 256},
	{196, 256, 1024},
	// ... layer4 at 7²: 3×3 512→512, 1×1 512→2048, 1×1 2048→512.
	{49, 512, 4608},
	{49, 2048, 512},
	{49, 512, 2048},
	// Decoding: beams × d_model by a weight matrix, in cache and (the
	// 128 MB ones) from memory.
	{1, 2048, 512},
	{3, 512, 512},
	{3, 761, 512},
	{3, 512, 2048},
	{48, 512, 512},
	{16, 2048, 512},
	{1, 8192, 4096},
	{3, 8192, 4096},
}

func benchOperands(m, n, k int) (a, b, c []float32) {
	rng := rand.New(rand.NewPCG(1, 2))
	a, b, c = make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	for i := range b {
		b[i] = float32(rng.NormFloat64())
	}
	return a, b, c
}

func benchGemm(b *testing.B, f func(m, n, k int, a, bm, c []float32)) {
	for _, s := range benchShapes {
		m, n, k := s[0], s[1], s[2]
		b.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(b *testing.B) {
			a, bm, c := benchOperands(m, n, k)
			b.SetBytes(int64(4 * (m*k + k*n + m*n)))
			b.ReportAllocs()
			for b.Loop() {
				f(m, n, k, a, bm, c)
			}
			b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkSgemm measures Gemm, C = A·B with B stored k×n.
func BenchmarkSgemm(b *testing.B) {
	benchGemm(b, func(m, n, k int, a, bm, c []float32) {
		Gemm(false, false, m, n, k, 1, a, k, bm, n, 0, c, n)
	})
}

// BenchmarkSgemmTransB measures Gemm with B stored n×k (C = A·Bᵀ, a weight
// matrix as PyTorch's Linear keeps it).
func BenchmarkSgemmTransB(b *testing.B) {
	benchGemm(b, func(m, n, k int, a, bm, c []float32) {
		Gemm(false, true, m, n, k, 1, a, k, bm, k, 0, c, n)
	})
}

// BenchmarkSgemmGonum is the baseline: gonum's pure-Go Sgemm (row-major, as
// Gemm) on the same products.
func BenchmarkSgemmGonum(b *testing.B) {
	var impl gonum.Implementation
	benchGemm(b, func(m, n, k int, a, bm, c []float32) {
		impl.Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, k, bm, n, 0, c, n)
	})
}

// BenchmarkSgemmStrided measures attention-sized batches: 8 heads of
// 49×49×64 scores (Q·Kᵀ) and 49×64×49 outputs (P·V).
func BenchmarkSgemmStrided(b *testing.B) {
	const heads, t, d = 8, 49, 64
	q, kk, _ := benchOperands(heads*t, heads*t, d) // (heads, t, d) each, and more
	s := make([]float32, heads*t*t)
	o := make([]float32, heads*t*d)
	b.ReportAllocs()
	for b.Loop() {
		GemmStrided(false, true, heads, t, t, d, 0.125, q, d, t*d, kk, d, t*d, 0, s, t, t*t)
		GemmStrided(false, false, heads, t, d, t, 1, s, t, t*t, kk, d, t*d, 0, o, d, t*d)
	}
	b.ReportMetric(2*2*heads*t*t*d*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// convShapes are the products of ResNet-101's convolutions on the two 224²
// views of an IU X-Ray study as the inference engine runs them, channels
// last: m = output pixels of both views, n = output channels, k = input
// channels × kernel area; a 3×3, stride-1 convolution is 16 products of
// m = 2×2 tiles, k = input channels (Winograd's F(2×2, 3×3)).
var convShapes = [][3]int{
	{25088, 64, 147}, // conv1, 7×7/2 at 112²
	// layer1 at 56²: 1×1 64→64 and 256→64, 3×3 64→64 (Winograd), 1×1 64→256
	{6272, 64, 64}, {6272, 64, 256}, {1568, 64, 64}, {6272, 256, 64},
	// layer2 at 28²: 1×1 256→128 (at 56²), 3×3/2 128→128, 1×1 512→128,
	// 3×3 128→128 (Winograd), 1×1 128→512, 1×1/2 256→512
	{6272, 128, 256}, {1568, 128, 1152}, {1568, 128, 512}, {392, 128, 128}, {1568, 512, 128}, {1568, 512, 256},
	// layer3 at 14²: 3×3/2 256→256, 1×1 1024→256, 3×3 256→256 (Winograd), 1×1 256→1024
	{392, 256, 2304}, {392, 256, 1024}, {98, 256, 256}, {392, 1024, 256},
	// layer4 at 7²: 3×3/2 512→512, 1×1 2048→512, 3×3 512→512 (Winograd), 1×1 512→2048
	{98, 512, 4608}, {98, 512, 2048}, {32, 512, 512}, {98, 2048, 512},
}

// BenchmarkGemmPacked measures the fused product of the inference engine
// (weights packed once, bias and ReLU in the epilogue) on convShapes.
func BenchmarkGemmPacked(b *testing.B) {
	for _, s := range convShapes {
		m, n, k := s[0], s[1], s[2]
		b.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(b *testing.B) {
			a, bm, c := benchOperands(m, n, k)
			pb := PackB(false, k, n, bm, n)
			bias := make([]float32, n)
			b.ReportAllocs()
			for b.Loop() {
				GemmPacked(m, a, k, pb, 0, c, n, bias, true)
			}
			b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkSkinnyStream measures the rate at which the dot path streams a
// 256 MB weight matrix from memory for one to three rows (y = x·Wᵀ, W
// stored n×k): the bound on a decoding step's weight reads.
func BenchmarkSkinnyStream(b *testing.B) {
	const size = 64 << 20 // floats
	w := make([]float32, size)
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range w {
		w[i] = float32(rng.Float64())
	}
	for _, k := range []int{512, 2048, 4096} {
		n := size / k
		for m := 1; m <= 3; m++ {
			b.Run(fmt.Sprintf("m=%d/k=%d", m, k), func(b *testing.B) {
				x, y := make([]float32, m*k), make([]float32, m*n)
				for i := range x {
					x[i] = 1
				}
				b.SetBytes(4 * size)
				for b.Loop() {
					Gemm(false, true, m, n, k, 1, x, k, w, k, 0, y, n)
				}
			})
		}
	}
}

// BenchmarkSkinnyDispatch measures a decoding step's worth of small skinny
// products: 112 products of three rows by a 512×512 weight matrix (1 MB
// each, 112 MB in all, read from memory as a step reads its weights), each
// shared out among the goroutines on its own.
func BenchmarkSkinnyDispatch(b *testing.B) {
	const m, n, k, calls = 3, 512, 512, 112
	w := make([]float32, calls*n*k)
	rng := rand.New(rand.NewPCG(4, 4))
	for i := range w {
		w[i] = float32(rng.Float64())
	}
	x, _, y := benchOperands(m, n, k)
	b.SetBytes(int64(len(w)) * 4)
	for b.Loop() {
		for c := range calls {
			Gemm(false, true, m, n, k, 1, x, k, w[c*n*k:][:n*k], k, 0, y, n)
		}
	}
}
