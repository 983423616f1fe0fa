package radgen

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

var matmulShapes = []struct{ m, n, k int }{{512, 512, 512}, {2048, 512, 512}}

func randData(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 9))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.Float64()*2 - 1)
	}
	return out
}

// BenchmarkMatMul times Graph.MatMul (no gradients) and reports GFLOP/s;
// BenchmarkMatMulGonum is the same product through gonum's blas32 in the
// same run, the baseline of the ratio.
func BenchmarkMatMul(b *testing.B) {
	for _, s := range matmulShapes {
		b.Run(fmt.Sprintf("%dx%dx%d", s.m, s.n, s.k), func(b *testing.B) {
			a := FromFloat32(randData(s.m*s.k, 1), s.m, s.k)
			w := FromFloat32(randData(s.k*s.n, 2), s.k, s.n)
			g := NoGrad()
			b.ResetTimer()
			for range b.N {
				g.MatMul(a, w, false)
			}
			b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func BenchmarkMatMulGonum(b *testing.B) {
	var impl gonum.Implementation
	for _, s := range matmulShapes {
		b.Run(fmt.Sprintf("%dx%dx%d", s.m, s.n, s.k), func(b *testing.B) {
			a, w := randData(s.m*s.k, 1), randData(s.k*s.n, 2)
			c := make([]float32, s.m*s.n)
			b.ResetTimer()
			for range b.N {
				impl.Sgemm(blas.NoTrans, blas.NoTrans, s.m, s.n, s.k, 1, a, s.k, w, s.n, 0, c, s.n)
			}
			b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
