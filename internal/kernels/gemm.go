package kernels

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/radgen/radgen/internal/f32"
)

var dimpl gonum.Implementation

// Gemm computes C = alpha·op(A)·op(B) + beta·C (row-major). float32 runs on
// the tuned kernels of internal/f32; float64 on gonum (tests only).
func Gemm[T Float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	switch cc := any(c).(type) {
	case []float32:
		f32.Gemm(transA, transB, m, n, k, float32(alpha), any(a).([]float32), lda, any(b).([]float32), ldb, float32(beta), cc, ldc)
	case []float64:
		if m == 0 || n == 0 {
			return
		}
		if k == 0 {
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					cc[i*ldc+j] *= float64(beta)
				}
			}
			return
		}
		ta, tb := blas.NoTrans, blas.NoTrans
		if transA {
			ta = blas.Trans
		}
		if transB {
			tb = blas.Trans
		}
		dimpl.Dgemm(ta, tb, m, n, k, float64(alpha), any(a).([]float64), lda, any(b).([]float64), ldb, float64(beta), cc, ldc)
	}
}

// GemmStrided runs batch Gemms; matrix i starts at i·stride (0 shares one
// matrix across the batch).
func GemmStrided[T Float](transA, transB bool, batch, m, n, k int, alpha T, a []T, lda, sa int, b []T, ldb, sb int, beta T, c []T, ldc, sc int) {
	if cc, ok := any(c).([]float32); ok {
		f32.GemmStrided(transA, transB, batch, m, n, k, float32(alpha), any(a).([]float32), lda, sa, any(b).([]float32), ldb, sb, float32(beta), cc, ldc, sc)
		return
	}
	for i := 0; i < batch; i++ {
		Gemm(transA, transB, m, n, k, alpha, a[i*sa:], lda, b[i*sb:], ldb, beta, c[i*sc:], ldc)
	}
}
