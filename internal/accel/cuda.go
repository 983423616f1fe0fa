//go:build cuda

package accel

import (
	"fmt"

	"github.com/radgen/radgen/internal/cuda"
)

// cudaEngine adapts internal/cuda's engine, whose methods this package's
// interface mirrors, to Engine.
type cudaEngine struct{ e *cuda.Engine }

// OpenCUDA opens GPU ordinal (its primary context, a stream, cuBLAS and the
// kernels). Without a driver or device it returns an error matching
// cuda.ErrNoDriver or cuda.ErrNoDevice.
func OpenCUDA(ordinal int) (Engine, error) {
	e, err := cuda.NewEngine(ordinal)
	if err != nil {
		return nil, err
	}
	return cudaEngine{e}, nil
}

func (c cudaEngine) Name() string {
	i := c.e.Info()
	return fmt.Sprintf("%s (GPU %d, compute %d.%d)", i.Name, i.Ordinal, i.Major, i.Minor)
}

// PeakBandwidth implements PeakBandwidther.
func (c cudaEngine) PeakBandwidth() float64 { return c.e.Info().PeakBandwidth }

func (c cudaEngine) AllocPtr(size int64) (Ptr, error) {
	p, err := c.e.AllocPtr(size)
	return Ptr(p), err
}

func (c cudaEngine) FreePtr(p Ptr) error                 { return c.e.FreePtr(cuda.Ptr(p)) }
func (c cudaEngine) CopyIn(dst Ptr, src []float32) error { return c.e.CopyIn(cuda.Ptr(dst), src) }
func (c cudaEngine) CopyInInt32(dst Ptr, src []int32) error {
	return c.e.CopyInInt32(cuda.Ptr(dst), src)
}
func (c cudaEngine) CopyOut(dst []float32, src Ptr) error { return c.e.CopyOut(dst, cuda.Ptr(src)) }
func (c cudaEngine) CopyDevice(dst, src Ptr, n int64) error {
	return c.e.CopyDevice(cuda.Ptr(dst), cuda.Ptr(src), n)
}

func (c cudaEngine) GemmStrided(transA, transB bool, batch, m, n, k int, alpha float32, a Ptr, lda, strideA int, b Ptr, ldb, strideB int, beta float32, cc Ptr, ldc, strideC int) error {
	return c.e.GemmStrided(transA, transB, batch, m, n, k, alpha, cuda.Ptr(a), lda, strideA, cuda.Ptr(b), ldb, strideB, beta, cuda.Ptr(cc), ldc, strideC)
}

func (c cudaEngine) Scale(dst, src Ptr, alpha float32, n int) error {
	return c.e.Scale(cuda.Ptr(dst), cuda.Ptr(src), alpha, n)
}

func (c cudaEngine) Sigmoid(dst, src Ptr, n int) error {
	return c.e.Sigmoid(cuda.Ptr(dst), cuda.Ptr(src), n)
}

func (c cudaEngine) ReLU(dst, src Ptr, n int) error { return c.e.ReLU(cuda.Ptr(dst), cuda.Ptr(src), n) }
func (c cudaEngine) Tanh(dst, src Ptr, n int) error { return c.e.Tanh(cuda.Ptr(dst), cuda.Ptr(src), n) }
func (c cudaEngine) Softmax(dst, src Ptr, rows, cols int) error {
	return c.e.Softmax(cuda.Ptr(dst), cuda.Ptr(src), rows, cols)
}
func (c cudaEngine) LogSoftmax(dst, src Ptr, rows, cols int) error {
	return c.e.LogSoftmax(cuda.Ptr(dst), cuda.Ptr(src), rows, cols)
}

func (c cudaEngine) Gather(dst, table, ids Ptr, n, vocab, dim int, scale float32) error {
	return c.e.Gather(cuda.Ptr(dst), cuda.Ptr(table), cuda.Ptr(ids), n, vocab, dim, scale)
}

// The Trainer and Optimizer methods: internal/cuda's kernels, whose
// semantics are the host engine's (see internal/cuda/train.go).

func (c cudaEngine) Fill(dst Ptr, v float32, n int) error { return c.e.Fill(cuda.Ptr(dst), v, n) }
func (c cudaEngine) Axpy(dst, src Ptr, alpha float32, n int) error {
	return c.e.Axpy(cuda.Ptr(dst), cuda.Ptr(src), alpha, n)
}
func (c cudaEngine) Binary(op BinaryOp, dst, a, b Ptr, shape, strideA, strideB []int, value float32) error {
	return c.e.Binary(op, cuda.Ptr(dst), cuda.Ptr(a), cuda.Ptr(b), shape, strideA, strideB, value)
}
func (c cudaEngine) ReduceSum(dst, src Ptr, shape, strideDst []int, accumulate bool) error {
	return c.e.ReduceSum(cuda.Ptr(dst), cuda.Ptr(src), shape, strideDst, accumulate)
}
func (c cudaEngine) ActivationBackward(act Activation, dx, dy, y Ptr, n int) error {
	return c.e.ActivationBackward(act, cuda.Ptr(dx), cuda.Ptr(dy), cuda.Ptr(y), n)
}
func (c cudaEngine) SoftmaxBackward(dx, dy, y Ptr, rows, cols int, log bool) error {
	return c.e.SoftmaxBackward(cuda.Ptr(dx), cuda.Ptr(dy), cuda.Ptr(y), rows, cols, log)
}
func (c cudaEngine) Normalize(dst, inv, src Ptr, rows, cols int, eps float64, kind NormKind) error {
	return c.e.Normalize(cuda.Ptr(dst), cuda.Ptr(inv), cuda.Ptr(src), rows, cols, eps, cudaNormKind(kind))
}
func (c cudaEngine) NormalizeBackward(dx, dy, y, inv Ptr, rows, cols int, eps float64, kind NormKind) error {
	return c.e.NormalizeBackward(cuda.Ptr(dx), cuda.Ptr(dy), cuda.Ptr(y), cuda.Ptr(inv), rows, cols, eps, cudaNormKind(kind))
}
func (c cudaEngine) Permute(dst, src Ptr, shape, perm []int) error {
	return c.e.Permute(cuda.Ptr(dst), cuda.Ptr(src), shape, perm)
}
func (c cudaEngine) CopyStrided(dst Ptr, ldd int, src Ptr, lds int, rows, cols int, accumulate bool) error {
	return c.e.CopyStrided(cuda.Ptr(dst), ldd, cuda.Ptr(src), lds, rows, cols, accumulate)
}
func (c cudaEngine) ScatterAdd(dst, src, ids Ptr, n, vocab, dim int) error {
	return c.e.ScatterAdd(cuda.Ptr(dst), cuda.Ptr(src), cuda.Ptr(ids), n, vocab, dim)
}

func (c cudaEngine) Im2col(dst Ptr, ldd int, x Ptr, ch int, g ConvGeom) error {
	return c.e.Im2col(cuda.Ptr(dst), ldd, cuda.Ptr(x), ch, g)
}
func (c cudaEngine) Col2im(dx, col Ptr, ldc int, ch int, g ConvGeom) error {
	return c.e.Col2im(cuda.Ptr(dx), cuda.Ptr(col), ldc, ch, g)
}

func (c cudaEngine) MaxPool(dst, arg, x Ptr, planes int, g ConvGeom) error {
	return c.e.MaxPool(cuda.Ptr(dst), cuda.Ptr(arg), cuda.Ptr(x), planes, g)
}
func (c cudaEngine) MaxPoolBackward(dx, dy, arg Ptr, planes, planeIn, planeOut int) error {
	return c.e.MaxPoolBackward(cuda.Ptr(dx), cuda.Ptr(dy), cuda.Ptr(arg), planes, planeIn, planeOut)
}

func (c cudaEngine) AdamStep(p, g, m, v, vmax Ptr, n int, k AdamConsts) error {
	return c.e.AdamStep(cuda.Ptr(p), cuda.Ptr(g), cuda.Ptr(m), cuda.Ptr(v), cuda.Ptr(vmax), n, k)
}
func (c cudaEngine) Clamp(dst Ptr, v float32, n int) error { return c.e.Clamp(cuda.Ptr(dst), v, n) }

func cudaNormKind(k NormKind) cuda.NormKind {
	check(k == NormR2Gen || k == NormStandard, "norm kind %d", k)
	if k == NormStandard {
		return cuda.NormStandard
	}
	return cuda.NormR2Gen
}

func (c cudaEngine) Sync() error  { return c.e.Sync() }
func (c cudaEngine) Close() error { return c.e.Close() }

var _ Engine = cudaEngine{}
