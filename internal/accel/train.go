package accel

import (
	"math"

	"github.com/radgen/radgen/internal/kernels"
)

// BinaryOp picks the elementwise operation of [Trainer.Binary].
type BinaryOp = kernels.BinaryOp

// The operations of [Trainer.Binary].
const (
	OpAdd      = kernels.OpAdd      // a + b
	OpSub      = kernels.OpSub      // a − b
	OpMul      = kernels.OpMul      // a ⊙ b
	OpMaskFill = kernels.OpMaskFill // a where b ≠ 0, value elsewhere
)

// Activation picks the function of [Trainer.ActivationBackward].
type Activation = kernels.Activation

// The functions of [Trainer.ActivationBackward].
const (
	ActReLU    = kernels.ActReLU    // max(x, 0)
	ActTanh    = kernels.ActTanh    // tanh(x)
	ActSigmoid = kernels.ActSigmoid // 1/(1 + exp(−x))
)

// Trainer is the part of an engine that runs the forward and backward
// passes of radgen's ops on device buffers. Every Engine implements it;
// the methods are listed apart because training, not decoding, needs them.
//
// Shapes and strides are in elements. Methods whose doc says "adds"
// accumulate into dst (gradients); the others overwrite it.
type Trainer interface {
	// Fill sets n floats at dst to v.
	Fill(dst Ptr, v float32, n int) error
	// Axpy adds alpha·src to dst over n elements.
	Axpy(dst, src Ptr, alpha float32, n int) error
	// Binary writes dst (contiguous, of the given shape) = a op b, element
	// idx of a at Σ idx_i·strideA_i and of b at Σ idx_i·strideB_i (stride 0
	// broadcasts). value is OpMaskFill's fill value.
	Binary(op BinaryOp, dst, a, b Ptr, shape, strideA, strideB []int, value float32) error
	// ReduceSum sums src (contiguous, of the given shape) into dst: element
	// idx of src goes to dst's element Σ idx_i·strideDst_i (stride 0 sums
	// over that dimension). Each sum is accumulated in float64 in row-major
	// order; accumulate adds it to dst instead of overwriting.
	ReduceSum(dst, src Ptr, shape, strideDst []int, accumulate bool) error
	// ActivationBackward adds dy ⊙ f′ (in terms of the output y) to dx over
	// n elements.
	ActivationBackward(act Activation, dx, dy, y Ptr, n int) error
	// SoftmaxBackward adds the gradient of a row-wise softmax (log-softmax
	// when log) with output y (rows, cols) to dx.
	SoftmaxBackward(dx, dy, y Ptr, rows, cols int, log bool) error
	// Normalize writes x̂ = (x − μ)/σ of each row of src (rows, cols) to
	// dst and 1/σ to inv (rows), σ as kind says; statistics in float64.
	Normalize(dst, inv, src Ptr, rows, cols int, eps float64, kind NormKind) error
	// NormalizeBackward adds the gradient of Normalize to dx, given its
	// output y and inv.
	NormalizeBackward(dx, dy, y, inv Ptr, rows, cols int, eps float64, kind NormKind) error
	// Permute writes dst = src with its axes reordered: dimension i of dst
	// is dimension perm[i] of src, a contiguous array of shape.
	Permute(dst, src Ptr, shape, perm []int) error
	// CopyStrided copies (or, with accumulate, adds) rows of cols floats:
	// row r of src at r·lds to row r of dst at r·ldd. lds 0 repeats one
	// row of src (a bias in every row).
	CopyStrided(dst Ptr, ldd int, src Ptr, lds int, rows, cols int, accumulate bool) error
	// ScatterAdd adds src[i, :] to dst[ids[i], :] for i < n, with dst
	// (vocab, dim) and ids n int32s on the device; ids outside [0, vocab)
	// are skipped. Rows are added in order of i.
	ScatterAdd(dst, src, ids Ptr, n, vocab, dim int) error
	// Im2col unfolds one image x (c, H, W) into the column matrix dst
	// (c·KH·KW, Ho·Wo), row stride ldd (internal/kernels.Im2col).
	Im2col(dst Ptr, ldd int, x Ptr, c int, g ConvGeom) error
	// Col2im adds the column matrix col (c·KH·KW, Ho·Wo), row stride ldc,
	// into the image dx (c, H, W) it was unfolded from: Im2col's adjoint.
	Col2im(dx, col Ptr, ldc int, c int, g ConvGeom) error
	// MaxPool writes the maximum of each window of x (planes, H, W) to dst
	// (planes, Ho, Wo) and the index of the (first) maximum in its plane to
	// arg, int32s (−1 for a window of padding only;
	// internal/kernels.MaxPool).
	MaxPool(dst, arg, x Ptr, planes int, g ConvGeom) error
	// MaxPoolBackward adds each dy to the element of dx that arg names.
	MaxPoolBackward(dx, dy, arg Ptr, planes, planeIn, planeOut int) error
}

// ConvGeom is the geometry of a convolution window over one channel plane
// (internal/kernels.ConvGeom: PyTorch's convention).
type ConvGeom = kernels.ConvGeom

// LiveByter is implemented by engines that count the bytes of their live
// buffers (allocated and not yet freed).
type LiveByter interface {
	LiveBytes() int64
}

// Fill implements Trainer.
func (h *Host) Fill(dst Ptr, v float32, n int) error {
	CPU[float32]{}.Fill(h.view(dst, n), v)
	return nil
}

// Axpy implements Trainer.
func (h *Host) Axpy(dst, src Ptr, alpha float32, n int) error {
	CPU[float32]{}.Axpy(h.view(dst, n), h.view(src, n), alpha)
	return nil
}

// extent returns how many elements an array of shape with strides spans.
func extent(shape, strides []int) int {
	n := 1
	for i, s := range shape {
		if s == 0 {
			return 0
		}
		n += (s - 1) * strides[i]
	}
	return n
}

// Binary implements Trainer.
func (h *Host) Binary(op BinaryOp, dst, a, b Ptr, shape, strideA, strideB []int, value float32) error {
	check(len(strideA) == len(shape) && len(strideB) == len(shape), "Binary: shape %v strides %v %v", shape, strideA, strideB)
	n := 1
	for _, s := range shape {
		n *= s
	}
	if n == 0 {
		return nil
	}
	CPU[float32]{}.Binary(op, h.view(dst, n), h.view(a, extent(shape, strideA)), h.view(b, extent(shape, strideB)), shape, strideA, strideB, value)
	return nil
}

// ReduceSum implements Trainer.
func (h *Host) ReduceSum(dst, src Ptr, shape, strideDst []int, accumulate bool) error {
	check(len(strideDst) == len(shape), "ReduceSum: shape %v strides %v", shape, strideDst)
	n := 1
	for _, s := range shape {
		n *= s
	}
	CPU[float32]{}.ReduceSum(h.view(dst, extent(shape, strideDst)), h.view(src, n), shape, strideDst, accumulate)
	return nil
}

// ActivationBackward implements Trainer.
func (h *Host) ActivationBackward(act Activation, dx, dy, y Ptr, n int) error {
	CPU[float32]{}.ActivationBackward(act, h.view(dx, n), h.view(dy, n), h.view(y, n))
	return nil
}

// SoftmaxBackward implements Trainer.
func (h *Host) SoftmaxBackward(dx, dy, y Ptr, rows, cols int, log bool) error {
	check(rows >= 0 && cols > 0, "SoftmaxBackward: rows=%d cols=%d", rows, cols)
	CPU[float32]{}.SoftmaxBackward(h.view(dx, rows*cols), h.view(dy, rows*cols), h.view(y, rows*cols), cols, log)
	return nil
}

func kernelNorm(kind NormKind) kernels.NormKind {
	check(kind == NormR2Gen || kind == NormStandard, "norm kind %d", kind)
	if kind == NormStandard {
		return kernels.NormStandard
	}
	return kernels.NormR2Gen
}

// Normalize implements Trainer.
func (h *Host) Normalize(dst, inv, src Ptr, rows, cols int, eps float64, kind NormKind) error {
	check(rows >= 0 && cols > 0, "Normalize: rows=%d cols=%d", rows, cols)
	CPU[float32]{}.Normalize(h.view(dst, rows*cols), h.view(inv, rows), h.view(src, rows*cols), cols, eps, kind)
	return nil
}

// NormalizeBackward implements Trainer.
func (h *Host) NormalizeBackward(dx, dy, y, inv Ptr, rows, cols int, eps float64, kind NormKind) error {
	check(rows >= 0 && cols > 0, "NormalizeBackward: rows=%d cols=%d", rows, cols)
	CPU[float32]{}.NormalizeBackward(h.view(dx, rows*cols), h.view(dy, rows*cols), h.view(y, rows*cols), h.view(inv, rows), cols, eps, kind)
	return nil
}

// Permute implements Trainer.
func (h *Host) Permute(dst, src Ptr, shape, perm []int) error {
	check(len(perm) == len(shape), "Permute: %v of %v", perm, shape)
	n := 1
	for _, s := range shape {
		n *= s
	}
	CPU[float32]{}.Permute(h.view(dst, n), h.view(src, n), shape, perm)
	return nil
}

// CopyStrided implements Trainer.
func (h *Host) CopyStrided(dst Ptr, ldd int, src Ptr, lds int, rows, cols int, accumulate bool) error {
	check(rows >= 0 && cols >= 0 && (rows <= 1 || ldd >= cols && (lds >= cols || lds == 0)), "CopyStrided: rows=%d cols=%d ldd=%d lds=%d", rows, cols, ldd, lds)
	if rows == 0 || cols == 0 {
		return nil
	}
	CPU[float32]{}.CopyStrided(h.view(dst, (rows-1)*ldd+cols), ldd, h.view(src, (rows-1)*lds+cols), lds, rows, cols, accumulate)
	return nil
}

// ScatterAdd implements Trainer.
func (h *Host) ScatterAdd(dst, src, ids Ptr, n, vocab, dim int) error {
	check(n >= 0 && vocab >= 0 && dim >= 0, "ScatterAdd: n=%d vocab=%d dim=%d", n, vocab, dim)
	CPU[float32]{}.ScatterAdd(h.view(dst, vocab*dim), h.view(src, n*dim), idsOf(h.view(ids, n)), vocab, dim)
	return nil
}

func convSizes(name string, c int, g ConvGeom) (n, rows, in int) {
	g.Check()
	n = g.OutH() * g.OutW()
	check(c >= 0 && n > 0, "%s: c=%d geometry %+v", name, c, g)
	return n, c * g.KH * g.KW, c * g.H * g.W
}

// Im2col implements Trainer.
func (h *Host) Im2col(dst Ptr, ldd int, x Ptr, c int, g ConvGeom) error {
	n, rows, in := convSizes("Im2col", c, g)
	if rows == 0 {
		return nil
	}
	kernels.Im2col(h.view(dst, (rows-1)*ldd+n), ldd, h.view(x, in), c, g)
	return nil
}

// Col2im implements Trainer.
func (h *Host) Col2im(dx, col Ptr, ldc int, c int, g ConvGeom) error {
	n, rows, in := convSizes("Col2im", c, g)
	if rows == 0 {
		return nil
	}
	kernels.Col2im(h.view(dx, in), h.view(col, (rows-1)*ldc+n), ldc, c, g)
	return nil
}

// MaxPool implements Trainer.
func (h *Host) MaxPool(dst, arg, x Ptr, planes int, g ConvGeom) error {
	g.Check()
	n := planes * g.OutH() * g.OutW()
	check(planes >= 0, "MaxPool: planes=%d", planes)
	a := make([]int32, n)
	kernels.MaxPool(h.view(dst, n), a, h.view(x, planes*g.H*g.W), planes, g)
	av := h.view(arg, n)
	for i, v := range a {
		av[i] = math.Float32frombits(uint32(v))
	}
	return nil
}

// MaxPoolBackward implements Trainer.
func (h *Host) MaxPoolBackward(dx, dy, arg Ptr, planes, planeIn, planeOut int) error {
	check(planes >= 0 && planeIn >= 0 && planeOut >= 0, "MaxPoolBackward: %d %d %d", planes, planeIn, planeOut)
	av := h.view(arg, planes*planeOut)
	a := make([]int32, len(av))
	for i, v := range av {
		a[i] = int32(math.Float32bits(v))
		check(a[i] < int32(planeIn), "MaxPoolBackward: index %d outside a plane of %d", a[i], planeIn)
	}
	kernels.MaxPoolBackward(h.view(dx, planes*planeIn), h.view(dy, planes*planeOut), a, planes, planeIn, planeOut)
	return nil
}
