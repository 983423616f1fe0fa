package accel

import (
	"math"
	"slices"

	"github.com/radgen/radgen/internal/kernels"
)

// CPU is the engine of host memory: the primitives of [Trainer] (and the
// products and elementwise functions of [Engine]) over Go slices of T,
// running the CPU kernels of internal/kernels and internal/f32. It holds no
// state; its zero value is ready. Package radgen runs the CPU's tensors on
// it (float32 and float64 alike), and [Host] runs the reference engine's
// buffers on CPU[float32], so that each primitive is written once on the
// host.
//
// Every method has the contract of the [Trainer] or [Engine] method of the
// same name, with slices in place of pointers: a slice starts at the
// element the pointer would address and holds at least the elements the
// method reads or writes. Shapes and strides are in elements.
type CPU[T kernels.Float] struct{}

// Fill sets every element of dst to v.
func (CPU[T]) Fill(dst []T, v T) {
	for i := range dst {
		dst[i] = v
	}
}

// Axpy adds alpha·src to dst (len(dst) elements).
func (CPU[T]) Axpy(dst, src []T, alpha T) { kernels.AddScaled(dst, src[:len(dst)], alpha) }

// Scale writes dst = alpha·src (len(dst) elements).
func (CPU[T]) Scale(dst, src []T, alpha T) { kernels.Scale(dst, src[:len(dst)], alpha) }

// Activation writes dst = f(src) (len(dst) elements).
func (CPU[T]) Activation(act Activation, dst, src []T) {
	src = src[:len(dst)]
	switch act {
	case ActReLU:
		kernels.ReLU(dst, src)
	case ActTanh:
		kernels.Tanh(dst, src)
	case ActSigmoid:
		kernels.Sigmoid(dst, src)
	default:
		if !(false) {
			check(false, "Activation: activation %d", act)
		}
	}
}

// ActivationBackward adds dy ⊙ f′ (in terms of the output y) to dx
// (len(dx) elements).
func (CPU[T]) ActivationBackward(act Activation, dx, dy, y []T) {
	n := len(dx)
	dy, y = dy[:n], y[:n]
	switch act {
	case ActReLU:
		kernels.ReLUBackward(dx, dy, y)
	case ActTanh:
		kernels.TanhBackward(dx, dy, y)
	case ActSigmoid:
		kernels.SigmoidBackward(dx, dy, y)
	default:
		if !(false) {
			check(false, "ActivationBackward: activation %d", act)
		}
	}
}

// Softmax writes the softmax (log-softmax when log) of each row of cols
// elements of src to dst (len(dst) elements, a multiple of cols).
func (CPU[T]) Softmax(dst, src []T, cols int, log bool) {
	if !(cols > 0 && len(dst)%cols == 0) {
		check(false, "Softmax: %d elements in rows of %d", len(dst), cols)
	}
	if log {
		kernels.LogSoftmax(dst, src[:len(dst)], cols)
	} else {
		kernels.Softmax(dst, src[:len(dst)], cols)
	}
}

// SoftmaxBackward adds the gradient of a row-wise softmax (log-softmax
// when log) with output y to dx (len(dx) elements, a multiple of cols).
func (CPU[T]) SoftmaxBackward(dx, dy, y []T, cols int, log bool) {
	if !(cols > 0 && len(dx)%cols == 0) {
		check(false, "SoftmaxBackward: %d elements in rows of %d", len(dx), cols)
	}
	n := len(dx)
	if log {
		kernels.LogSoftmaxBackward(dx, dy[:n], y[:n], cols)
	} else {
		kernels.SoftmaxBackward(dx, dy[:n], y[:n], cols)
	}
}

// Normalize writes x̂ of each row of cols elements of src to dst
// (len(dst) elements) and 1/σ of each row to inv.
func (CPU[T]) Normalize(dst, inv, src []T, cols int, eps float64, kind NormKind) {
	if !(cols > 0 && len(dst)%cols == 0) {
		check(false, "Normalize: %d elements in rows of %d", len(dst), cols)
	}
	rows := len(dst) / cols
	kernels.Normalize(dst, inv[:rows], src[:len(dst)], cols, eps, kernelNorm(kind))
}

// NormalizeBackward adds the gradient of Normalize to dx (len(dx)
// elements), given its output y and inv.
func (CPU[T]) NormalizeBackward(dx, dy, y, inv []T, cols int, eps float64, kind NormKind) {
	if !(cols > 0 && len(dx)%cols == 0) {
		check(false, "NormalizeBackward: %d elements in rows of %d", len(dx), cols)
	}
	n := len(dx)
	kernels.NormalizeBackward(dx, dy[:n], y[:n], inv[:n/cols], cols, eps, kernelNorm(kind))
}

// GemmStrided computes batch products C_i = α·op(A_i)·op(B_i) + β·C_i.
func (CPU[T]) GemmStrided(transA, transB bool, batch, m, n, k int, alpha T, a []T, lda, strideA int, b []T, ldb, strideB int, beta T, c []T, ldc, strideC int) {
	if batch == 1 {
		kernels.Gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	kernels.GemmStrided(transA, transB, batch, m, n, k, alpha, a, lda, strideA, b, ldb, strideB, beta, c, ldc, strideC)
}

// Permute writes dst = src (of shape) with its axes reordered by perm.
func (CPU[T]) Permute(dst, src []T, shape, perm []int) {
	if len(perm) != len(shape) {
		if !(false) {
			check(false, "Permute: %v of %v", slices.Clone(perm), slices.Clone(shape))
		}
	}
	kernels.Permute(dst, src, shape, perm)
}

// CopyStrided copies (or, with accumulate, adds) rows of cols elements:
// row r of src at r·lds to row r of dst at r·ldd; lds 0 repeats src's
// first row.
func (CPU[T]) CopyStrided(dst []T, ldd int, src []T, lds int, rows, cols int, accumulate bool) {
	if !(rows >= 0 && cols >= 0 && (rows <= 1 || ldd >= cols && (lds >= cols || lds == 0))) {
		check(false, "CopyStrided: rows=%d cols=%d ldd=%d lds=%d", rows, cols, ldd, lds)
	}
	for r := range rows {
		d, s := dst[r*ldd:r*ldd+cols], src[r*lds:r*lds+cols]
		if accumulate {
			kernels.AddScaled(d, s, 1)
		} else {
			copy(d, s)
		}
	}
}

// Gather sets dst[i, :] = scale·table[ids[i], :] for every i, table (vocab,
// dim); an id outside [0, vocab) gives zeros.
func (CPU[T]) Gather(dst, table []T, ids []int, vocab, dim int, scale T) {
	for i, id := range ids {
		row := dst[i*dim : (i+1)*dim]
		if id < 0 || id >= vocab {
			clear(row)
			continue
		}
		src := table[id*dim : (id+1)*dim]
		if scale == 1 {
			copy(row, src)
		} else {
			kernels.Scale(row, src, scale)
		}
	}
}

// ScatterAdd adds src[i, :] to dst[ids[i], :] for every i, in order of i,
// dst (vocab, dim); ids outside [0, vocab) are skipped.
func (CPU[T]) ScatterAdd(dst, src []T, ids []int, vocab, dim int) {
	for i, id := range ids {
		if id < 0 || id >= vocab {
			continue
		}
		kernels.AddScaled(dst[id*dim:(id+1)*dim], src[i*dim:(i+1)*dim], 1)
	}
}

// Binary writes dst (contiguous, of shape) = a op b, element idx of a at
// Σ idx_i·strideA_i and of b at Σ idx_i·strideB_i (stride 0 broadcasts);
// value is OpMaskFill's fill. The innermost dimension runs as one loop.
func (CPU[T]) Binary(op BinaryOp, dst, a, b []T, shape, strideA, strideB []int, value T) {
	if len(strideA) != len(shape) || len(strideB) != len(shape) || op < OpAdd || op > OpMaskFill {
		// Copies: the slices stay on their caller's stack.
		if !(false) {
			check(false, "Binary: op %d shape %v strides %v %v", op, slices.Clone(shape), slices.Clone(strideA), slices.Clone(strideB))
		}
	}
	eachRun(shape, strideA, strideB, func(o, ia, ib, n, sa, sb int) {
		d := dst[o : o+n]
		if sa == 1 && sb == 1 {
			x, y := a[ia:ia+n], b[ib:ib+n]
			switch op {
			case OpAdd:
				for i := range d {
					d[i] = x[i] + y[i]
				}
			case OpSub:
				for i := range d {
					d[i] = x[i] - y[i]
				}
			case OpMul:
				for i := range d {
					d[i] = x[i] * y[i]
				}
			default:
				for i := range d {
					if y[i] != 0 {
						d[i] = x[i]
					} else {
						d[i] = value
					}
				}
			}
			return
		}
		for i := range d {
			x, y := a[ia+i*sa], b[ib+i*sb]
			switch op {
			case OpAdd:
				d[i] = x + y
			case OpSub:
				d[i] = x - y
			case OpMul:
				d[i] = x * y
			default:
				if y != 0 {
					d[i] = x
				} else {
					d[i] = value
				}
			}
		}
	})
}

// AddBinary adds a op b to dst (contiguous, of shape), with Binary's
// operands: dst += a op b, the gradient of a product or a mask added where
// it goes without a temporary.
func (CPU[T]) AddBinary(op BinaryOp, dst, a, b []T, shape, strideA, strideB []int, value T) {
	if len(strideA) != len(shape) || len(strideB) != len(shape) || op < OpAdd || op > OpMaskFill {
		check(false, "AddBinary: op %d shape %v strides %v %v", op, slices.Clone(shape), slices.Clone(strideA), slices.Clone(strideB))
	}
	eachRun(shape, strideA, strideB, func(o, ia, ib, n, sa, sb int) {
		d := dst[o : o+n]
		if sa == 1 && sb == 1 {
			x, y := a[ia:ia+n], b[ib:ib+n]
			switch op {
			case OpAdd:
				for i := range d {
					d[i] += x[i] + y[i]
				}
			case OpSub:
				for i := range d {
					d[i] += x[i] - y[i]
				}
			case OpMul:
				for i := range d {
					d[i] += x[i] * y[i]
				}
			default:
				for i := range d {
					if y[i] != 0 {
						d[i] += x[i]
					} else {
						d[i] += value
					}
				}
			}
			return
		}
		for i := range d {
			x, y := a[ia+i*sa], b[ib+i*sb]
			switch op {
			case OpAdd:
				d[i] += x + y
			case OpSub:
				d[i] += x - y
			case OpMul:
				d[i] += x * y
			default:
				if y != 0 {
					d[i] += x
				} else {
					d[i] += value
				}
			}
		}
	})
}

// ReduceSum sums src (contiguous, of shape) into dst: element idx of src
// goes to dst's element Σ idx_i·strideDst_i (stride 0 sums over that
// dimension). Each sum is accumulated in float64 in row-major order;
// accumulate adds it to dst instead of overwriting.
func (CPU[T]) ReduceSum(dst, src []T, shape, strideDst []int, accumulate bool) {
	if len(strideDst) != len(shape) {
		if !(false) {
			check(false, "ReduceSum: shape %v strides %v", slices.Clone(shape), slices.Clone(strideDst))
		}
	}
	m := extent(shape, strideDst)
	var small [64]float64
	acc := small[:0]
	if m <= len(small) {
		acc = small[:m]
	} else {
		acc = make([]float64, m)
	}
	eachRun(shape, strideDst, strideDst, func(o, id, _, n, sd, _ int) {
		s := src[o : o+n]
		if sd == 0 {
			t := acc[id] // the running sum: row-major order all the same
			for _, v := range s {
				t += float64(v)
			}
			acc[id] = t
			return
		}
		a := acc[id : id+n]
		for i, v := range s {
			a[i] += float64(v)
		}
	})
	d := dst[:m]
	for i, v := range acc {
		if accumulate {
			d[i] += T(v)
		} else {
			d[i] = T(v)
		}
	}
}

// eachRun calls f for every run of the innermost dimension of shape: the
// run starts at position o (row-major) and at offsets ia, ib along strides
// sa and sb, has n elements and steps the two offsets by the innermost
// strides. A rank-0 shape is one run of one element.
func eachRun(shape, sa, sb []int, f func(o, ia, ib, n, stepA, stepB int)) {
	nd := len(shape)
	if nd == 0 {
		f(0, 0, 0, 1, 0, 0)
		return
	}
	total := 1
	for _, s := range shape {
		total *= s
	}
	if total == 0 {
		return
	}
	last := shape[nd-1]
	var small [8]int
	idx := small[:0]
	if nd-1 <= len(small) {
		idx = small[:nd-1]
	} else {
		idx = make([]int, nd-1)
	}
	ia, ib := 0, 0
	for o := 0; o < total; o += last {
		f(o, ia, ib, last, sa[nd-1], sb[nd-1])
		for d := nd - 2; d >= 0; d-- {
			idx[d]++
			ia += sa[d]
			ib += sb[d]
			if idx[d] < shape[d] {
				break
			}
			ia -= sa[d] * shape[d]
			ib -= sb[d] * shape[d]
			idx[d] = 0
		}
	}
}

// idsOf reads n ids stored by their bits in float32 buffers (the
// reference engine's CopyInInt32).
func idsOf(v []float32) []int {
	ids := make([]int, len(v))
	for i, x := range v {
		ids[i] = int(int32(math.Float32bits(x)))
	}
	return ids
}
