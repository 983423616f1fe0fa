package accel

import (
	"math"
	"runtime"
	"slices"
	"sync"

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
	if !parallel(len(dst), 1) {
		fill(dst, v)
		return
	}
	split(len(dst), 1, func(lo, hi int) { fill(dst[lo:hi], v) })
}

func fill[T kernels.Float](d []T, v T) {
	for i := range d {
		d[i] = v
	}
}

// Axpy adds alpha·src to dst (len(dst) elements).
func (CPU[T]) Axpy(dst, src []T, alpha T) {
	x := src[:len(dst)]
	if !parallel(len(dst), 1) {
		kernels.AddScaled(dst, x, alpha)
		return
	}
	split(len(dst), 1, func(lo, hi int) { kernels.AddScaled(dst[lo:hi], x[lo:hi], alpha) })
}

// Scale writes dst = alpha·src (len(dst) elements).
func (CPU[T]) Scale(dst, src []T, alpha T) {
	x := src[:len(dst)]
	if !parallel(len(dst), 1) {
		kernels.Scale(dst, x, alpha)
		return
	}
	split(len(dst), 1, func(lo, hi int) { kernels.Scale(dst[lo:hi], x[lo:hi], alpha) })
}

// vectorAlign keeps the pieces of a split elementwise function at
// multiples of its vector kernels' width, so that each element runs
// through the same (vector or scalar) code as in one piece.
const vectorAlign = 64

// Activation writes dst = f(src) (len(dst) elements).
func (CPU[T]) Activation(act Activation, dst, src []T) {
	if act < ActReLU || act > ActSigmoid {
		check(false, "Activation: activation %d", act)
	}
	x := src[:len(dst)]
	if !parallel(len(dst), 1) {
		activation(act, dst, x)
		return
	}
	split(len(dst), vectorAlign, func(lo, hi int) { activation(act, dst[lo:hi], x[lo:hi]) })
}

func activation[T kernels.Float](act Activation, d, x []T) {
	switch act {
	case ActReLU:
		kernels.ReLU(d, x)
	case ActTanh:
		kernels.Tanh(d, x)
	default:
		kernels.Sigmoid(d, x)
	}
}

// ActivationBackward adds dy ⊙ f′ (in terms of the output y) to dx
// (len(dx) elements).
func (CPU[T]) ActivationBackward(act Activation, dx, dy, y []T) {
	if act < ActReLU || act > ActSigmoid {
		check(false, "ActivationBackward: activation %d", act)
	}
	n := len(dx)
	g, v := dy[:n], y[:n]
	if !parallel(n, 1) {
		activationBackward(act, dx, g, v)
		return
	}
	split(n, vectorAlign, func(lo, hi int) { activationBackward(act, dx[lo:hi], g[lo:hi], v[lo:hi]) })
}

func activationBackward[T kernels.Float](act Activation, dx, dy, y []T) {
	switch act {
	case ActReLU:
		kernels.ReLUBackward(dx, dy, y)
	case ActTanh:
		kernels.TanhBackward(dx, dy, y)
	default:
		kernels.SigmoidBackward(dx, dy, y)
	}
}

// rows checks that n elements are whole rows of cols and returns how many.
func rows(op string, n, cols int) int {
	if cols <= 0 || n%cols != 0 {
		check(false, "%s: %d elements in rows of %d", op, n, cols)
	}
	return n / cols
}

// Softmax writes the softmax (log-softmax when log) of each row of cols
// elements of src to dst (len(dst) elements, a multiple of cols).
func (CPU[T]) Softmax(dst, src []T, cols int, log bool) {
	r := rows("Softmax", len(dst), cols)
	x := src[:len(dst)]
	if !parallel(r, cols) {
		softmax(dst, x, cols, log)
		return
	}
	split(r, 1, func(lo, hi int) { softmax(dst[lo*cols:hi*cols], x[lo*cols:hi*cols], cols, log) })
}

func softmax[T kernels.Float](d, x []T, cols int, log bool) {
	if log {
		kernels.LogSoftmax(d, x, cols)
	} else {
		kernels.Softmax(d, x, cols)
	}
}

// SoftmaxBackward adds the gradient of a row-wise softmax (log-softmax
// when log) with output y to dx (len(dx) elements, a multiple of cols).
func (CPU[T]) SoftmaxBackward(dx, dy, y []T, cols int, log bool) {
	r := rows("SoftmaxBackward", len(dx), cols)
	g, v := dy[:len(dx)], y[:len(dx)]
	if !parallel(r, cols) {
		softmaxBackward(dx, g, v, cols, log)
		return
	}
	split(r, 1, func(lo, hi int) {
		softmaxBackward(dx[lo*cols:hi*cols], g[lo*cols:hi*cols], v[lo*cols:hi*cols], cols, log)
	})
}

func softmaxBackward[T kernels.Float](dx, dy, y []T, cols int, log bool) {
	if log {
		kernels.LogSoftmaxBackward(dx, dy, y, cols)
	} else {
		kernels.SoftmaxBackward(dx, dy, y, cols)
	}
}

// Normalize writes x̂ of each row of cols elements of src to dst
// (len(dst) elements) and 1/σ of each row to inv.
func (CPU[T]) Normalize(dst, inv, src []T, cols int, eps float64, kind NormKind) {
	r := rows("Normalize", len(dst), cols)
	k := kernelNorm(kind)
	x, iv := src[:len(dst)], inv[:r]
	if !parallel(r, cols) {
		kernels.Normalize(dst, iv, x, cols, eps, k)
		return
	}
	split(r, 1, func(lo, hi int) {
		kernels.Normalize(dst[lo*cols:hi*cols], iv[lo:hi], x[lo*cols:hi*cols], cols, eps, k)
	})
}

// NormalizeBackward adds the gradient of Normalize to dx (len(dx)
// elements), given its output y and inv.
func (CPU[T]) NormalizeBackward(dx, dy, y, inv []T, cols int, eps float64, kind NormKind) {
	r := rows("NormalizeBackward", len(dx), cols)
	k := kernelNorm(kind)
	g, v, iv := dy[:len(dx)], y[:len(dx)], inv[:r]
	if !parallel(r, cols) {
		kernels.NormalizeBackward(dx, g, v, iv, cols, eps, k)
		return
	}
	split(r, 1, func(lo, hi int) {
		kernels.NormalizeBackward(dx[lo*cols:hi*cols], g[lo*cols:hi*cols], v[lo*cols:hi*cols], iv[lo:hi], cols, eps, k)
	})
}

// Clamp sets each element x of dst to min(max(x, −c), c) (NaN stays NaN).
func (CPU[T]) Clamp(dst []T, c T) {
	for i, x := range dst {
		dst[i] = min(max(x, -c), c)
	}
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
		check(false, "Permute: %v of %v", slices.Clone(perm), slices.Clone(shape))
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
	if !parallel(rows, cols) {
		copyRows(dst, ldd, src, lds, 0, rows, cols, accumulate)
		return
	}
	split(rows, 1, func(lo, hi int) { copyRows(dst, ldd, src, lds, lo, hi, cols, accumulate) })
}

func copyRows[T kernels.Float](dst []T, ldd int, src []T, lds int, lo, hi, cols int, accumulate bool) {
	for r := lo; r < hi; r++ {
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
	binary("Binary", op, false, dst, a, b, shape, strideA, strideB, value)
}

// AddBinary adds a op b to dst (contiguous, of shape), with Binary's
// operands: dst += a op b, the gradient of a product or a mask added where
// it goes without a temporary.
func (CPU[T]) AddBinary(op BinaryOp, dst, a, b []T, shape, strideA, strideB []int, value T) {
	binary("AddBinary", op, true, dst, a, b, shape, strideA, strideB, value)
}

func binary[T kernels.Float](name string, op BinaryOp, acc bool, dst, a, b []T, shape, strideA, strideB []int, value T) {
	if len(strideA) != len(shape) || len(strideB) != len(shape) || op < OpAdd || op > OpMaskFill {
		// Copies: the slices stay on their caller's stack.
		check(false, "%s: op %d shape %v strides %v %v", name, op, slices.Clone(shape), slices.Clone(strideA), slices.Clone(strideB))
	}
	if !parallel(numel(shape), 1) || len(shape) > maxSplitRank {
		eachRun(shape, strideA, strideB, func(o, ia, ib, n, sa, sb int) { binaryRun(op, acc, dst, a, b, value, o, ia, ib, n, sa, sb) })
		return
	}
	// Copies of the layout, so that the slices themselves stay on their
	// caller's stack when nothing is split.
	var sh [maxSplitRank]int
	var st [2 * maxSplitRank]int
	k := copy(sh[:], shape)
	copy(st[:], strideA)
	copy(st[maxSplitRank:], strideB)
	split(numel(sh[:k]), 1, func(lo, hi int) {
		eachRunIn(sh[:k], st[:k], st[maxSplitRank:maxSplitRank+k], lo, hi, func(o, ia, ib, n, sa, sb int) {
			binaryRun(op, acc, dst, a, b, value, o, ia, ib, n, sa, sb)
		})
	})
}

// binaryRun computes one run of n elements of Binary (AddBinary when acc:
// a piece at a time into a buffer on the stack, then added).
func binaryRun[T kernels.Float](op BinaryOp, acc bool, dst, a, b []T, value T, o, ia, ib, n, sa, sb int) {
	if !acc {
		binaryInto(op, dst[o:o+n], a, b, value, ia, ib, sa, sb)
		return
	}
	var tmp [256]T
	for done := 0; done < n; done += len(tmp) {
		k := min(len(tmp), n-done)
		binaryInto(op, tmp[:k], a, b, value, ia+done*sa, ib+done*sb, sa, sb)
		kernels.AddScaled(dst[o+done:o+done+k], tmp[:k], 1)
	}
}

// binaryInto writes d[i] = a[ia + i·sa] op b[ib + i·sb] for every i.
func binaryInto[T kernels.Float](op BinaryOp, d, a, b []T, value T, ia, ib, sa, sb int) {
	n := len(d)
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
}

// ReduceSum sums src (contiguous, of shape) into dst: element idx of src
// goes to dst's element Σ idx_i·strideDst_i (stride 0 sums over that
// dimension). Each sum is accumulated in float64 in row-major order;
// accumulate adds it to dst instead of overwriting.
func (CPU[T]) ReduceSum(dst, src []T, shape, strideDst []int, accumulate bool) {
	if len(strideDst) != len(shape) {
		check(false, "ReduceSum: shape %v strides %v", slices.Clone(shape), slices.Clone(strideDst))
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
	eachRunIn(shape, sa, sb, 0, -1, f)
}

// eachRunIn is eachRun over the elements at positions lo … hi−1 (hi −1:
// to the end), the first and last runs cut to the range.
func eachRunIn(shape, sa, sb []int, lo, hi int, f func(o, ia, ib, n, stepA, stepB int)) {
	nd := len(shape)
	if nd == 0 {
		if lo == 0 && hi != 0 {
			f(0, 0, 0, 1, 0, 0)
		}
		return
	}
	total := 1
	for _, s := range shape {
		total *= s
	}
	if hi < 0 || hi > total {
		hi = total
	}
	if lo >= hi {
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
	// The outer index of lo's row and the offsets of the row's start.
	rowA, rowB := 0, 0
	for d, r := nd-2, lo/last; d >= 0; d-- {
		idx[d] = r % shape[d]
		r /= shape[d]
		rowA += idx[d] * sa[d]
		rowB += idx[d] * sb[d]
	}
	for o := lo; o < hi; {
		in := o % last
		n := min(last-in, hi-o)
		f(o, rowA+in*sa[nd-1], rowB+in*sb[nd-1], n, sa[nd-1], sb[nd-1])
		if o += n; o >= hi {
			return
		}
		for d := nd - 2; d >= 0; d-- { // the next row
			idx[d]++
			rowA += sa[d]
			rowB += sb[d]
			if idx[d] < shape[d] {
				break
			}
			rowA -= sa[d] * shape[d]
			rowB -= sb[d] * shape[d]
			idx[d] = 0
		}
	}
}

func numel(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

// minSplit is the size, in elements, from which an elementwise primitive
// splits its work across the cores: below it a goroutine's start would
// cost more than it saves (a decoding step's ops stay on one core). The
// split never changes a result: every element is computed as it would be
// in one piece, and no primitive that sums across elements is split.
const minSplit = 1 << 15

// maxSplitRank is the largest rank of a Binary that splits across the
// cores (a larger one runs in one piece).
const maxSplitRank = 16

// parallel reports whether n items of per elements each are worth
// splitting across the cores.
func parallel(n, per int) bool {
	return n >= 2 && n*per >= 2*minSplit && runtime.GOMAXPROCS(0) > 1
}

// split calls f on consecutive ranges that cover [0, n), in parallel, each
// range a multiple of align long (the last excepted). Its callers check
// parallel first, so that an op too small to split creates no closure.
func split(n, align int, f func(lo, hi int)) {
	w := max(1, min(runtime.GOMAXPROCS(0), n))
	chunk := (n + w - 1) / w
	chunk = (chunk + align - 1) / align * align
	var wg sync.WaitGroup
	for lo := chunk; lo < n; lo += chunk {
		wg.Go(func() { f(lo, min(lo+chunk, n)) })
	}
	f(0, min(chunk, n))
	wg.Wait()
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
