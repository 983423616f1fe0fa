//go:build cuda

package cuda

/*
#include "shim.h"
*/
import "C"

// cuBLAS is column-major; radgen is row-major. A row-major m×n matrix with
// leading dimension ld is, read column-major, its n×m transpose with the
// same ld. So row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ:
// call cuBLAS with the operands swapped, m and n swapped, and the same
// transpose flags (tensor's StdEng and gorgonia's CUDA engine do the same).

const (
	cublasOpN = 0
	cublasOpT = 1
)

func op(trans bool) C.uint {
	if trans {
		return cublasOpT
	}
	return cublasOpN
}

func checkGemm(name string, transA, transB bool, m, n, k, lda, ldb, ldc int) {
	check(fitsInt32(m, n, k, lda, ldb, ldc), "%s: bad sizes m=%d n=%d k=%d", name, m, n, k)
	colsA, colsB := k, n // row lengths of A and B as stored
	if transA {
		colsA = m
	}
	if transB {
		colsB = k
	}
	check(lda >= max(1, colsA), "%s: lda %d < %d", name, lda, colsA)
	check(ldb >= max(1, colsB), "%s: ldb %d < %d", name, ldb, colsB)
	check(ldc >= max(1, n), "%s: ldc %d < %d", name, ldc, n)
}

// Gemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices on
// the device, where op(X) is X or Xᵀ as transA and transB say. op(A) is
// m×k, op(B) is k×n and C is m×n; lda, ldb and ldc are the row strides of A,
// B and C as stored. It mirrors internal/f32.Gemm. The GEMM is queued on the
// engine's stream; it returns ErrNoCUBLAS when no cuBLAS library was found.
func (e *Engine) Gemm(transA, transB bool, m, n, k int, alpha float32, a Ptr, lda int, b Ptr, ldb int, beta float32, c Ptr, ldc int) error {
	checkGemm("Gemm", transA, transB, m, n, k, lda, ldb, ldc)
	if e.blasErr != nil {
		return e.blasErr
	}
	if m == 0 || n == 0 {
		return nil
	}
	ctx, err := e.enter()
	if err != nil {
		return err
	}
	defer e.leave()
	return status("Gemm", C.rg_sgemm(ctx, op(transB), op(transA), C.int(n), C.int(m), C.int(k),
		C.float(alpha), C.rg_CUdeviceptr(b), C.int(ldb), C.rg_CUdeviceptr(a), C.int(lda),
		C.float(beta), C.rg_CUdeviceptr(c), C.int(ldc)))
}

// GemmStrided runs batch independent Gemm calls in one cuBLAS call
// (cublasSgemmStridedBatched); matrix i of A, B and C starts i·strideA,
// i·strideB and i·strideC float32s after a, b and c. A stride of 0 shares
// one matrix across the batch. It mirrors internal/f32.GemmStrided: attention
// scores QKᵀ over (B·H) heads are GemmStrided(false, true, B*H, Tq, Tk, dk,
// 1/sqrt(dk), q, dk, Tq*dk, k, dk, Tk*dk, 0, s, Tk, Tq*Tk).
func (e *Engine) GemmStrided(transA, transB bool, batch, m, n, k int, alpha float32, a Ptr, lda, strideA int, b Ptr, ldb, strideB int, beta float32, c Ptr, ldc, strideC int) error {
	checkGemm("GemmStrided", transA, transB, m, n, k, lda, ldb, ldc)
	check(fitsInt32(batch) && strideA >= 0 && strideB >= 0 && strideC >= 0,
		"GemmStrided: bad batch %d or strides %d %d %d", batch, strideA, strideB, strideC)
	if e.blasErr != nil {
		return e.blasErr
	}
	if batch == 0 || m == 0 || n == 0 {
		return nil
	}
	ctx, err := e.enter()
	if err != nil {
		return err
	}
	defer e.leave()
	return status("GemmStrided", C.rg_sgemm_strided_batched(ctx, op(transB), op(transA),
		C.int(n), C.int(m), C.int(k), C.float(alpha),
		C.rg_CUdeviceptr(b), C.int(ldb), C.longlong(strideB),
		C.rg_CUdeviceptr(a), C.int(lda), C.longlong(strideA),
		C.float(beta), C.rg_CUdeviceptr(c), C.int(ldc), C.longlong(strideC), C.int(batch)))
}
