package radgen

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/radgen/radgen/internal/accel"
	"github.com/radgen/radgen/internal/half"
	"github.com/radgen/radgen/internal/kernels"
)

// The engines' primitives. Every op of a Graph is written once, in its
// ops_*.go file, against the primitives of this file: it checks its
// operands, allocates its result, calls primitives for its forward pass and
// records a backward pass that calls primitives too. Which engine runs them
// is the operands' business: the CPU's tensors run on accel.CPU (float32 or
// float64 slices, the CPU kernels), every other device's on its
// accel.Engine (the reference engine, CUDA). So the CPU is an engine like
// the others, and a fast path of one engine (skinny products, packed GEMM
// micro-kernels) is that engine's implementation of a primitive, never a
// second body of an op.
//
// Devices hold float32 only; an op on a float64 tensor off the CPU panics.

// buffer addresses the elements of a tensor's storage from some element
// on: a slice of the CPU's values (f32 or f64), an engine's pointer, or,
// for a half-precision weight matrix (Tensor.ToHalf), the CPU's packed
// binary16 copy, which only gemm reads.
type buffer struct {
	ptr accel.Ptr
	f32 []float32
	f64 []float64
	h16 *half.Weights
}

// none reports whether b addresses nothing (an absent optional operand).
func (b buffer) none() bool { return b.ptr == 0 && b.f32 == nil && b.f64 == nil }

// at returns the buffer of t's storage from element off.
func (t *Tensor) at(off int) buffer {
	t.ready()
	if t.buf != nil {
		return buffer{ptr: t.buf.ptr.Add(off)}
	}
	switch h := t.host.(type) {
	case []float32:
		return buffer{f32: h[off:]}
	case *[]float32:
		return buffer{f32: (*h)[off:]}
	case []float64:
		return buffer{f64: h[off:]}
	case *half.Weights:
		if off == 0 {
			return buffer{h16: h}
		}
	}
	panic(fmt.Sprintf("radgen: %v has no buffer for ops from element %d (a half-precision tensor is read only whole, as Linear's weight)", t, off))
}

// maxRank is the largest rank of a layout once its dimensions are merged
// (see newLayout); a layout is passed by value, so that handing one to an
// engine allocates nothing.
const maxRank = 8

// layout is the shape of an elementwise primitive's iteration and the
// strides of its operands along it (0 where one is broadcast). For
// Permute, a is the permutation.
type layout struct {
	rank  int
	shape [maxRank]int
	a, b  [maxRank]int
}

func (l *layout) dims() []int     { return l.shape[:l.rank] }
func (l *layout) stridesA() []int { return l.a[:l.rank] }
func (l *layout) stridesB() []int { return l.b[:l.rank] }

// newLayout returns the layout of shape with operand strides sa and sb
// (nil for contiguous), its dimensions of size 1 dropped and neighbours
// merged wherever both operands run through them contiguously, so that the
// innermost loop is as long as it can be.
func newLayout(shape, sa, sb []int) layout {
	var l layout
	ca, cb := 1, 1 // the contiguous strides of the dimension being read
	for i := len(shape) - 1; i >= 0; i-- {
		n := shape[i]
		ai, bi := ca, cb
		if sa != nil {
			ai = sa[i]
		}
		if sb != nil {
			bi = sb[i]
		}
		ca, cb = ca*n, cb*n
		if n == 1 {
			continue
		}
		if l.rank > 0 {
			j := l.rank - 1 // the dimension inside this one, merged so far
			if ai == l.a[j]*l.shape[j] && bi == l.b[j]*l.shape[j] {
				l.shape[j] *= n
				continue
			}
		}
		if l.rank == maxRank {
			panic(fmt.Sprintf("radgen: shape %v has more than %d dimensions that do not merge", slices.Clone(shape), maxRank))
		}
		l.shape[l.rank], l.a[l.rank], l.b[l.rank] = n, ai, bi
		l.rank++
	}
	// Built innermost first: reverse into row-major order.
	for i, j := 0, l.rank-1; i < j; i, j = i+1, j-1 {
		l.shape[i], l.shape[j] = l.shape[j], l.shape[i]
		l.a[i], l.a[j] = l.a[j], l.a[i]
		l.b[i], l.b[j] = l.b[j], l.b[i]
	}
	if l.rank == 0 { // a scalar, or every dimension of size 1
		l.rank, l.shape[0], l.a[0], l.b[0] = 1, 1, 1, 1
		if numel(shape) == 0 {
			l.shape[0] = 0
		}
	}
	return l
}

// permutation returns the layout of Permute: shape and perm as they are.
func permutation(shape, perm []int) layout {
	if len(shape) > maxRank {
		panic(fmt.Sprintf("radgen: Permute of rank %d (at most %d)", len(shape), maxRank))
	}
	l := layout{rank: len(shape)}
	copy(l.shape[:], shape)
	copy(l.a[:], perm)
	return l
}

// indexes are row indices for Gather and ScatterAdd, where the engine
// reads them: the caller's slice on the CPU, a device buffer elsewhere.
type indexes struct {
	host []int
	dev  *Tensor
	n    int
}

// prims are the primitives an op is written against: accel.Trainer's and
// accel.Engine's methods over buffers. Shapes and counts are in elements;
// scalars are float64 and rounded to the engine's element type. Methods
// whose doc in accel says "adds" accumulate into their destination.
type prims interface {
	fill(dst buffer, v float64, n int)
	axpy(dst, src buffer, alpha float64, n int)
	scale(dst, src buffer, alpha float64, n int)
	binary(op accel.BinaryOp, dst, a, b buffer, l layout, value float64)
	// addBinary adds a op b to dst: a gradient term without a temporary
	// where the engine can (dst contiguous over l).
	addBinary(op accel.BinaryOp, dst, a, b buffer, l layout, value float64)
	// reduceSum sums src (contiguous over l's shape) into dst at strides l.a.
	reduceSum(dst, src buffer, l layout, accumulate bool)
	activation(act accel.Activation, dst, src buffer, n int)
	activationBackward(act accel.Activation, dx, dy, y buffer, n int)
	softmax(dst, src buffer, rows, cols int, log bool)
	softmaxBackward(dx, dy, y buffer, rows, cols int, log bool)
	normalize(dst, inv, src buffer, rows, cols int, eps float64, kind NormKind)
	normalizeBackward(dx, dy, y, inv buffer, rows, cols int, eps float64, kind NormKind)
	gemm(transA, transB bool, batch, m, n, k int, alpha float64, a buffer, lda, sa int, b buffer, ldb, sb int, beta float64, c buffer, ldc, sc int)
	permute(dst, src buffer, l layout)
	clamp(dst buffer, c float64, n int)

	// The batch-norm family, over x laid out (B, C, plane) with n elements
	// in all: fused primitives, each with its plain equivalent in its doc.
	//
	// channelAffine writes dst = src·scale_c + shift_c (scale or shift may
	// be none: 1 or 0): a Binary Mul and a Binary Add with the vectors
	// broadcast along (B, plane).
	channelAffine(dst, src, scale, shift buffer, c, plane, n int)
	// channelSums returns, in float64, Σ dy and (unless x is none) Σ dy·x
	// per channel: ReduceSums to (C).
	channelSums(dy, x buffer, c, plane, n int) (sdy, sdyx []float64)
	// channelStats returns, in float64, the mean and the biased variance
	// of each channel, the variance as the mean of (x − μ)².
	channelStats(x buffer, c, plane, n int) (mean, variance []float64)
	// batchNormBackward adds γ·inv·(dy − mean(dy) − x̂·mean(dy·x̂)) per
	// channel to dx, given Σdy and Σdy·x̂ (channelSums); gamma nil is 1.
	batchNormBackward(dx, dy, xhat buffer, gamma, inv, sdy, sdyx []float64, c, plane, n int)
	// avgPlanes writes the mean of each of planes planes of plane values
	// (summed in float64), and avgPlanesBackward spreads dy/plane back:
	// a ReduceSum and a Scale, and their adjoint.
	avgPlanes(dst, x buffer, planes, plane int)
	avgPlanesBackward(dx, dy buffer, planes, plane int)

	// batchNormAct writes y = act(x̂·γ + β + res) (act ReLU or the
	// identity; gamma, beta, res may be none) with x̂ normalised by the
	// batch's statistics, and returns the state its backward needs and
	// the batch mean and biased variance per channel: BatchNorm2dTrain,
	// Add and ReLU's primitives in one.
	batchNormAct(y, x, res, gamma, beta buffer, relu bool, eps float64, c, plane, n int) (state any, mean, variance []float64)
	// batchNormActBackward, with dz = dy·[y > 0] (ReLU) or dy, adds dz to
	// dres and batch norm's input gradient of dz to dx (either may be
	// none; fresh: a gradient of zeros made for it, to be written, dres
	// possibly dy's own storage), and returns Σdz and Σdz·x̂ per channel.
	batchNormActBackward(state any, dy, dx, dres buffer, freshX, freshR bool) (sdz, sdzx []float64)

	// conv2d writes the convolution of x by w plus bias (none: no bias)
	// to out (Conv2d's contract); it returns what conv2dBackward needs
	// kept (the CPU's Winograd filters, when keep says the input's
	// gradient will be wanted), or nil. Its plain equivalent: Im2col and
	// a product per image.
	conv2d(out, x, w, bias buffer, s convShape, keep bool) any
	// conv2dBackward adds the gradients of conv2d to dw and dx (either
	// may be none; dx's values are first scaled by dxBeta, 0 for a new
	// gradient of zeros), given dY and what conv2d kept. Its plain
	// equivalent: Im2col, products and Col2im per image.
	conv2dBackward(dx buffer, dxBeta float64, dw, dy, x, w buffer, s convShape, saved any)
	// maxPool writes the maximum of each window of planes planes of x to
	// dst and returns where each was; maxPoolBackward adds each dY to the
	// element of dX it came from.
	maxPool(dst, x buffer, planes int, geo kernels.ConvGeom) poolArgs
	maxPoolBackward(dx, dy buffer, arg poolArgs, planes int, geo kernels.ConvGeom)
	// adam is one Adam step of n float32 parameters p (vmax unused
	// without k.AMSGrad).
	adam(p, g, m, v, vmax buffer, n int, k kernels.AdamConsts)
	copyStrided(dst buffer, ldd int, src buffer, lds, rows, cols int, accumulate bool)
}

// The primitives that read row indices, Gather and ScatterAdd, are
// functions over an engine rather than methods of prims: an interface
// method's slice arguments escape, and the CPU reads the caller's indices
// (a decoding step's beam reorder) where they are, which must not cost an
// allocation.

// indexesOf makes idx readable by p's gather and scatterAdd: idx itself on
// the CPU, a copy on like's device elsewhere.
func indexesOf(p prims, like *Tensor, idx []int) indexes {
	if _, ok := p.(devPrims); ok {
		return indexes{dev: devIDs(like, idx), n: len(idx)}
	}
	return indexes{host: idx, n: len(idx)}
}

// gather sets dst[i, :] = table[ids[i], :] for every i, table (vocab, dim).
func gather(p prims, dst, table buffer, ids indexes, vocab, dim int) {
	switch p := p.(type) {
	case cpuPrims[float32]:
		p.e.Gather(p.s(dst), p.s(table), ids.host, vocab, dim, 1)
	case cpuPrims[float64]:
		p.e.Gather(p.s(dst), p.s(table), ids.host, vocab, dim, 1)
	case devPrims:
		if ids.n > 0 && dim > 0 {
			p.must("Gather", p.e.e.Gather(dst.ptr, table.ptr, ids.dev.buf.ptr, ids.n, vocab, dim, 1))
			keep(ids.dev)
		}
	}
}

// scatterAdd adds src[i, :] to dst[ids[i], :] for every i, in order of i,
// dst (vocab, dim).
func scatterAdd(p prims, dst, src buffer, ids indexes, vocab, dim int) {
	switch p := p.(type) {
	case cpuPrims[float32]:
		p.e.ScatterAdd(p.s(dst), p.s(src), ids.host, vocab, dim)
	case cpuPrims[float64]:
		p.e.ScatterAdd(p.s(dst), p.s(src), ids.host, vocab, dim)
	case devPrims:
		if ids.n > 0 && dim > 0 {
			p.must("ScatterAdd", p.e.e.ScatterAdd(dst.ptr, src.ptr, ids.dev.buf.ptr, ids.n, vocab, dim))
			keep(ids.dev)
		}
	}
}

// primsOf returns the engine that runs op on ts (nil entries ignored): the
// CPU's float32 or float64 primitives, or a device's. It panics when the
// operands' devices or element types differ, or a device operand holds
// float64.
func primsOf(op string, ts ...*Tensor) prims {
	var first *Tensor
	for _, t := range ts {
		switch {
		case t == nil:
		case first == nil:
			first = t
		case t.device != first.device:
			panic(fmt.Sprintf("radgen: %s: operands on %v and %v", op, first.device, t.device))
		case t.Is64() != first.Is64():
			panic(fmt.Sprintf("radgen: %s of %v and %v", op, first, t))
		}
	}
	switch {
	case first.device != CPU:
		if first.Is64() {
			panic(fmt.Sprintf("radgen: %s: float64 tensor on %v", op, first.device))
		}
		return first.eng().prims
	case first.Is64():
		return cpu64
	}
	return cpu32
}

var (
	cpu32 prims = cpuPrims[float32]{}
	cpu64 prims = cpuPrims[float64]{}
)

// cpuPrims runs the primitives on the CPU's slices of T with accel.CPU.
type cpuPrims[T float] struct{ e accel.CPU[T] }

// s returns b's slice of T (the same memory, retyped at no cost).
func (cpuPrims[T]) s(b buffer) []T {
	if unsafe.Sizeof(T(0)) == 8 {
		return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b.f64))), len(b.f64))
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b.f32))), len(b.f32))
}

func (p cpuPrims[T]) fill(dst buffer, v float64, n int) { p.e.Fill(p.s(dst)[:n], T(v)) }
func (p cpuPrims[T]) axpy(dst, src buffer, alpha float64, n int) {
	p.e.Axpy(p.s(dst)[:n], p.s(src), T(alpha))
}
func (p cpuPrims[T]) scale(dst, src buffer, alpha float64, n int) {
	p.e.Scale(p.s(dst)[:n], p.s(src), T(alpha))
}
func (p cpuPrims[T]) binary(op accel.BinaryOp, dst, a, b buffer, l layout, value float64) {
	p.e.Binary(op, p.s(dst), p.s(a), p.s(b), l.dims(), l.stridesA(), l.stridesB(), T(value))
}
func (p cpuPrims[T]) addBinary(op accel.BinaryOp, dst, a, b buffer, l layout, value float64) {
	p.e.AddBinary(op, p.s(dst), p.s(a), p.s(b), l.dims(), l.stridesA(), l.stridesB(), T(value))
}
func (p cpuPrims[T]) reduceSum(dst, src buffer, l layout, accumulate bool) {
	p.e.ReduceSum(p.s(dst), p.s(src), l.dims(), l.stridesA(), accumulate)
}
func (p cpuPrims[T]) activation(act accel.Activation, dst, src buffer, n int) {
	p.e.Activation(act, p.s(dst)[:n], p.s(src))
}
func (p cpuPrims[T]) activationBackward(act accel.Activation, dx, dy, y buffer, n int) {
	p.e.ActivationBackward(act, p.s(dx)[:n], p.s(dy), p.s(y))
}
func (p cpuPrims[T]) softmax(dst, src buffer, rows, cols int, log bool) {
	p.e.Softmax(p.s(dst)[:rows*cols], p.s(src), cols, log)
}
func (p cpuPrims[T]) softmaxBackward(dx, dy, y buffer, rows, cols int, log bool) {
	p.e.SoftmaxBackward(p.s(dx)[:rows*cols], p.s(dy), p.s(y), cols, log)
}
func (p cpuPrims[T]) normalize(dst, inv, src buffer, rows, cols int, eps float64, kind NormKind) {
	p.e.Normalize(p.s(dst)[:rows*cols], p.s(inv), p.s(src), cols, eps, accel.NormKind(kind))
}
func (p cpuPrims[T]) normalizeBackward(dx, dy, y, inv buffer, rows, cols int, eps float64, kind NormKind) {
	p.e.NormalizeBackward(p.s(dx)[:rows*cols], p.s(dy), p.s(y), p.s(inv), cols, eps, accel.NormKind(kind))
}
func (p cpuPrims[T]) gemm(transA, transB bool, batch, m, n, k int, alpha float64, a buffer, lda, sa int, b buffer, ldb, sb int, beta float64, c buffer, ldc, sc int) {
	if b.h16 != nil {
		halfGemm(transA, transB, batch, m, n, k, alpha, a.f32, lda, *b.h16, beta, c.f32, ldc)
		return
	}
	p.e.GemmStrided(transA, transB, batch, m, n, k, T(alpha), p.s(a), lda, sa, p.s(b), ldb, sb, T(beta), p.s(c), ldc, sc)
}
func (p cpuPrims[T]) permute(dst, src buffer, l layout) {
	p.e.Permute(p.s(dst), p.s(src), l.dims(), l.stridesA())
}
func (p cpuPrims[T]) clamp(dst buffer, c float64, n int) { p.e.Clamp(p.s(dst)[:n], T(c)) }
func (p cpuPrims[T]) adam(pr, g, m, v, vmax buffer, n int, k kernels.AdamConsts) {
	var vm []float32
	if k.AMSGrad {
		vm = vmax.f32[:n]
	}
	kernels.Adam(&k, pr.f32[:n], g.f32[:n], m.f32[:n], v.f32[:n], vm)
}
func (p cpuPrims[T]) channelAffine(dst, src, scale, shift buffer, c, plane, n int) {
	kernels.ChannelAffine(p.s(dst)[:n], p.s(src)[:n], p.opt(scale, c), p.opt(shift, c), c, plane)
}
func (p cpuPrims[T]) channelSums(dy, x buffer, c, plane, n int) (sdy, sdyx []float64) {
	sdy = make([]float64, c)
	var xs []T
	if !x.none() {
		sdyx, xs = make([]float64, c), p.s(x)[:n]
	}
	kernels.ChannelSums(sdy, sdyx, p.s(dy)[:n], xs, c, plane)
	return sdy, sdyx
}
func (p cpuPrims[T]) channelStats(x buffer, c, plane, n int) (mean, variance []float64) {
	mean, variance = make([]float64, c), make([]float64, c)
	kernels.ChannelStats(mean, variance, p.s(x)[:n], c, plane)
	return mean, variance
}
func (p cpuPrims[T]) batchNormBackward(dx, dy, xhat buffer, gamma, inv, sdy, sdyx []float64, c, plane, n int) {
	var g []T
	if gamma != nil {
		g = make([]T, c)
		for i, v := range gamma {
			g[i] = T(v)
		}
	}
	kernels.BatchNormTrainBackward(p.s(dx)[:n], p.s(dy)[:n], p.s(xhat)[:n], g, inv, sdy, sdyx, c, plane)
}
func (p cpuPrims[T]) avgPlanes(dst, x buffer, planes, plane int) {
	kernels.AvgPlanes(p.s(dst)[:planes], p.s(x)[:planes*plane], plane)
}
func (p cpuPrims[T]) avgPlanesBackward(dx, dy buffer, planes, plane int) {
	kernels.AvgPlanesBackward(p.s(dx)[:planes*plane], p.s(dy)[:planes], plane)
}

func (p cpuPrims[T]) conv2d(out, x, w, bias buffer, s convShape, keep bool) any {
	if u := convForward(p.s(out), p.s(x), p.s(w), p.opt(bias, s.cout), s, keep); u != nil {
		return u
	}
	return nil
}
func (p cpuPrims[T]) conv2dBackward(dx buffer, dxBeta float64, dw, dy, x, w buffer, s convShape, saved any) {
	u, _ := saved.([]float32)
	convBackward(p.opt(dx, len(p.s(dx))), T(dxBeta), p.opt(dw, len(p.s(dw))), p.s(dy), p.s(x), p.s(w), s, u)
}
func (p cpuPrims[T]) maxPool(dst, x buffer, planes int, geo kernels.ConvGeom) poolArgs {
	arg := make([]int32, planes*geo.OutH()*geo.OutW())
	maxPoolPlanes(p.s(dst), arg, p.s(x), planes, geo)
	return poolArgs{host: arg}
}
func (p cpuPrims[T]) maxPoolBackward(dx, dy buffer, arg poolArgs, planes int, geo kernels.ConvGeom) {
	maxPoolPlanesBackward(p.s(dx), p.s(dy), arg.host, planes, geo)
}

func (p cpuPrims[T]) batchNormAct(y, x, res, gamma, beta buffer, relu bool, eps float64, c, plane, n int) (any, []float64, []float64) {
	return batchNormActCPU(p.s(y)[:n], p.s(x)[:n], p.opt(res, n), p.opt(gamma, c), p.opt(beta, c), relu, eps, c, plane)
}
func (p cpuPrims[T]) batchNormActBackward(state any, dy, dx, dres buffer, freshX, freshR bool) ([]float64, []float64) {
	k := state.(*kernels.BatchNormAct[T])
	n := len(k.X)
	return batchNormActBackwardCPU(k, p.s(dy)[:n], p.opt(dx, n), p.opt(dres, n), freshX, freshR)
}

// opt returns the first n values of b, or nil for none.
func (p cpuPrims[T]) opt(b buffer, n int) []T {
	if b.none() {
		return nil
	}
	return p.s(b)[:n]
}

func (p cpuPrims[T]) copyStrided(dst buffer, ldd int, src buffer, lds, rows, cols int, accumulate bool) {
	p.e.CopyStrided(p.s(dst), ldd, p.s(src), lds, rows, cols, accumulate)
}

// devPrims runs the primitives on a device's engine. Its callers keep the
// tensors whose buffers they pass alive until it returns (keep).
type devPrims struct{ e *engine }

func (p devPrims) must(op string, err error) { p.e.must(op, err) }

func (p devPrims) fill(dst buffer, v float64, n int) {
	if n > 0 {
		p.must("Fill", p.e.e.Fill(dst.ptr, float32(v), n))
	}
}
func (p devPrims) axpy(dst, src buffer, alpha float64, n int) {
	if n > 0 {
		p.must("Axpy", p.e.e.Axpy(dst.ptr, src.ptr, float32(alpha), n))
	}
}
func (p devPrims) scale(dst, src buffer, alpha float64, n int) {
	if n > 0 {
		p.must("Scale", p.e.e.Scale(dst.ptr, src.ptr, float32(alpha), n))
	}
}
func (p devPrims) binary(op accel.BinaryOp, dst, a, b buffer, l layout, value float64) {
	if numel(l.dims()) > 0 {
		p.must("Binary", p.e.e.Binary(op, dst.ptr, a.ptr, b.ptr, l.dims(), l.stridesA(), l.stridesB(), float32(value)))
	}
}
func (p devPrims) addBinary(op accel.BinaryOp, dst, a, b buffer, l layout, value float64) {
	n := numel(l.dims())
	if n == 0 {
		return
	}
	// The engines have no accumulating Binary: a temporary, then Axpy.
	t := onDevice(p.e, nil, []int{n})
	p.binary(op, t.at(0), a, b, l, value)
	p.axpy(dst, t.at(0), 1, n)
	keep(t)
}
func (p devPrims) reduceSum(dst, src buffer, l layout, accumulate bool) {
	if numel(l.dims()) > 0 { // an empty source has an empty destination
		p.must("ReduceSum", p.e.e.ReduceSum(dst.ptr, src.ptr, l.dims(), l.stridesA(), accumulate))
	}
}
func (p devPrims) activation(act accel.Activation, dst, src buffer, n int) {
	if n == 0 {
		return
	}
	var err error
	switch act {
	case accel.ActReLU:
		err = p.e.e.ReLU(dst.ptr, src.ptr, n)
	case accel.ActTanh:
		err = p.e.e.Tanh(dst.ptr, src.ptr, n)
	default:
		err = p.e.e.Sigmoid(dst.ptr, src.ptr, n)
	}
	p.must("activation", err)
}
func (p devPrims) activationBackward(act accel.Activation, dx, dy, y buffer, n int) {
	if n > 0 {
		p.must("ActivationBackward", p.e.e.ActivationBackward(act, dx.ptr, dy.ptr, y.ptr, n))
	}
}
func (p devPrims) softmax(dst, src buffer, rows, cols int, log bool) {
	if rows == 0 || cols == 0 {
		return
	}
	if log {
		p.must("LogSoftmax", p.e.e.LogSoftmax(dst.ptr, src.ptr, rows, cols))
	} else {
		p.must("Softmax", p.e.e.Softmax(dst.ptr, src.ptr, rows, cols))
	}
}
func (p devPrims) softmaxBackward(dx, dy, y buffer, rows, cols int, log bool) {
	if rows > 0 && cols > 0 {
		p.must("SoftmaxBackward", p.e.e.SoftmaxBackward(dx.ptr, dy.ptr, y.ptr, rows, cols, log))
	}
}
func (p devPrims) normalize(dst, inv, src buffer, rows, cols int, eps float64, kind NormKind) {
	if rows > 0 && cols > 0 {
		p.must("Normalize", p.e.e.Normalize(dst.ptr, inv.ptr, src.ptr, rows, cols, eps, accel.NormKind(kind)))
	}
}
func (p devPrims) normalizeBackward(dx, dy, y, inv buffer, rows, cols int, eps float64, kind NormKind) {
	if rows > 0 && cols > 0 {
		p.must("NormalizeBackward", p.e.e.NormalizeBackward(dx.ptr, dy.ptr, y.ptr, inv.ptr, rows, cols, eps, accel.NormKind(kind)))
	}
}
func (p devPrims) gemm(transA, transB bool, batch, m, n, k int, alpha float64, a buffer, lda, sa int, b buffer, ldb, sb int, beta float64, c buffer, ldc, sc int) {
	p.must("GemmStrided", p.e.e.GemmStrided(transA, transB, batch, m, n, k, float32(alpha), a.ptr, lda, sa, b.ptr, ldb, sb, float32(beta), c.ptr, ldc, sc))
}
func (p devPrims) permute(dst, src buffer, l layout) {
	if numel(l.dims()) > 0 {
		p.must("Permute", p.e.e.Permute(dst.ptr, src.ptr, l.dims(), l.stridesA()))
	}
}
func (p devPrims) clamp(dst buffer, c float64, n int) {
	if n > 0 {
		p.must("Clamp", p.e.e.Clamp(dst.ptr, float32(c), n))
	}
}
func (p devPrims) adam(pr, g, m, v, vmax buffer, n int, k kernels.AdamConsts) {
	if n > 0 {
		p.must("AdamStep", p.e.e.AdamStep(pr.ptr, g.ptr, m.ptr, v.ptr, vmax.ptr, n, k))
	}
}

// channels returns the layout of (B, C, plane) with a per-channel vector
// as its second operand.
func channels(c, plane, n int) layout {
	shape := []int{n / max(c*plane, 1), c, plane}
	return newLayout(shape, nil, []int{0, 1, 0})
}

// vec returns v on the device, in float32.
func (p devPrims) vec(v []float64) *Tensor { return float32Vec(v).To(p.e.dev) }

func (p devPrims) channelAffine(dst, src, scale, shift buffer, c, plane, n int) {
	if n == 0 {
		return
	}
	l := channels(c, plane, n)
	from := src
	if !scale.none() {
		p.binary(accel.OpMul, dst, src, scale, l, 0)
		from = dst
	}
	switch {
	case !shift.none():
		p.binary(accel.OpAdd, dst, from, shift, l, 0)
	case from.ptr != dst.ptr:
		p.must("CopyDevice", p.e.e.CopyDevice(dst.ptr, src.ptr, 4*int64(n)))
	}
}
func (p devPrims) channelSums(dy, x buffer, c, plane, n int) (sdy, sdyx []float64) {
	sums := onDevice(p.e, nil, []int{c})
	to := newLayout([]int{n / max(c*plane, 1), c, plane}, []int{0, 1, 0}, []int{0, 1, 0})
	p.fill(sums.at(0), 0, c)
	p.reduceSum(sums.at(0), dy, to, false)
	sdy = sums.Float64s()
	if !x.none() {
		prod := onDevice(p.e, nil, []int{max(n, 1)})
		p.binary(accel.OpMul, prod.at(0), dy, x, newLayout([]int{n}, nil, nil), 0)
		p.reduceSum(sums.at(0), prod.at(0), to, false)
		sdyx = sums.Float64s()
		keep(prod)
	}
	keep(sums)
	return sdy, sdyx
}
func (p devPrims) channelStats(x buffer, c, plane, n int) (mean, variance []float64) {
	s, _ := p.channelSums(x, buffer{}, c, plane, n)
	m := float64(n / max(c, 1))
	mean = make([]float64, c)
	for ch := range c {
		mean[ch] = s[ch] / m
	}
	d := onDevice(p.e, nil, []int{max(n, 1)})
	mu := p.vec(mean)
	p.binary(accel.OpSub, d.at(0), x, mu.at(0), channels(c, plane, n), 0)
	_, ss := p.channelSums(d.at(0), d.at(0), c, plane, n)
	keep(d, mu)
	variance = make([]float64, c)
	for ch := range c {
		variance[ch] = ss[ch] / m
	}
	return mean, variance
}
func (p devPrims) batchNormBackward(dx, dy, xhat buffer, gamma, inv, sdy, sdyx []float64, c, plane, n int) {
	m := float64(n / max(c, 1))
	k, mdy, mdyx := make([]float64, c), make([]float64, c), make([]float64, c)
	for ch := range c {
		gm := 1.0
		if gamma != nil {
			gm = gamma[ch]
		}
		k[ch], mdy[ch], mdyx[ch] = gm*inv[ch], sdy[ch]/m, sdyx[ch]/m
	}
	kv, mdyv, mdyxv := p.vec(k), p.vec(mdy), p.vec(mdyx)
	t := onDevice(p.e, nil, []int{max(n, 1)})
	p.channelAffine(t.at(0), xhat, mdyxv.at(0), mdyv.at(0), c, plane, n) // x̂·mean(dy·x̂) + mean(dy)
	p.binary(accel.OpSub, t.at(0), dy, t.at(0), newLayout([]int{n}, nil, nil), 0)
	p.channelAffine(t.at(0), t.at(0), kv.at(0), buffer{}, c, plane, n)
	p.axpy(dx, t.at(0), 1, n)
	keep(t, kv, mdyv, mdyxv)
}
func (p devPrims) avgPlanes(dst, x buffer, planes, plane int) {
	if planes == 0 {
		return
	}
	p.reduceSum(dst, x, layout{rank: 2, shape: [maxRank]int{planes, plane}, a: [maxRank]int{1, 0}}, false)
	p.scale(dst, dst, 1/float64(plane), planes)
}
func (p devPrims) avgPlanesBackward(dx, dy buffer, planes, plane int) {
	if planes == 0 {
		return
	}
	s := onDevice(p.e, nil, []int{planes})
	p.scale(s.at(0), dy, 1/float64(plane), planes)
	p.binary(accel.OpAdd, dx, dx, s.at(0), layout{rank: 2, shape: [maxRank]int{planes, plane}, a: [maxRank]int{plane, 1}, b: [maxRank]int{1, 0}}, 0)
	keep(s)
}

// bnActState is what a device's batchNormAct keeps for its backward.
type bnActState struct {
	xhat        *Tensor
	y           buffer
	gamma, inv  []float64
	relu        bool
	c, plane, n int
}

func (p devPrims) batchNormAct(y, x, res, gamma, beta buffer, relu bool, eps float64, c, plane, n int) (any, []float64, []float64) {
	mean, variance := p.channelStats(x, c, plane, n)
	inv, shift := make([]float64, c), make([]float64, c)
	for ch := range c {
		inv[ch] = 1 / math.Sqrt(variance[ch]+eps)
		shift[ch] = -mean[ch] * inv[ch]
	}
	invT, shiftT := p.vec(inv), p.vec(shift)
	xhat := onDevice(p.e, nil, []int{max(n, 1)})
	p.channelAffine(xhat.at(0), x, invT.at(0), shiftT.at(0), c, plane, n)
	p.channelAffine(y, xhat.at(0), gamma, beta, c, plane, n)
	flat := newLayout([]int{n}, nil, nil)
	if !res.none() {
		p.binary(accel.OpAdd, y, y, res, flat, 0)
	}
	if relu {
		p.activation(accel.ActReLU, y, y, n)
	}
	var g []float64
	if !gamma.none() {
		gv := onDevice(p.e, nil, []int{c})
		p.copyStrided(gv.at(0), c, gamma, c, 1, c, false)
		g = gv.Float64s()
	}
	keep(invT, shiftT)
	return &bnActState{xhat: xhat, y: y, gamma: g, inv: inv, relu: relu, c: c, plane: plane, n: n}, mean, variance
}
func (p devPrims) batchNormActBackward(state any, dy, dx, dres buffer, freshX, freshR bool) ([]float64, []float64) {
	st := state.(*bnActState)
	c, plane, n := st.c, st.plane, st.n
	dz := dy
	var mask *Tensor
	if st.relu { // dz = dy·[y > 0]
		mask = onDevice(p.e, nil, []int{max(n, 1)})
		p.fill(mask.at(0), 0, n)
		p.activationBackward(accel.ActReLU, mask.at(0), dy, st.y, n)
		dz = mask.at(0)
	}
	switch {
	case dres.none():
	case freshR && dres.ptr == dy.ptr: // dY's own storage: dz over it
		if dz.ptr != dres.ptr {
			p.must("CopyDevice", p.e.e.CopyDevice(dres.ptr, dz.ptr, 4*int64(n)))
		}
	default: // a fresh gradient holds zeros: adding writes it
		p.axpy(dres, dz, 1, n)
	}
	sdz, sdzx := p.channelSums(dz, st.xhat.at(0), c, plane, n)
	if !dx.none() {
		p.batchNormBackward(dx, dz, st.xhat.at(0), st.gamma, st.inv, sdz, sdzx, c, plane, n)
	}
	keep(mask, st.xhat)
	return sdz, sdzx
}

func (p devPrims) conv2d(out, x, w, bias buffer, s convShape, _ bool) any {
	geo := s.geo
	n, k, inSize := s.pixels(), s.column(), s.inSize()
	outSize := s.cout * n
	col := onDevice(p.e, nil, []int{k, n})
	for b := range s.batch { // Y[b] = W·im2col(X[b])
		p.must("Im2col", p.e.e.Im2col(col.ptr(0), n, x.ptr.Add(b*inSize), s.cin, geo))
		p.gemm(false, false, 1, s.cout, n, k, 1, w, k, 0, col.at(0), n, 0, 0, buffer{ptr: out.ptr.Add(b * outSize)}, n, 0)
	}
	if !bias.none() && s.batch > 0 {
		p.binary(accel.OpAdd, out, out, bias, newLayout([]int{s.batch, s.cout, n}, nil, []int{0, 1, 0}), 0)
	}
	keep(col)
	return nil
}
func (p devPrims) conv2dBackward(dx buffer, dxBeta float64, dw, dy, x, w buffer, s convShape, saved any) {
	geo := s.geo
	n, k, inSize := s.pixels(), s.column(), s.inSize()
	outSize := s.cout * n
	if dxBeta == 0 && !dx.none() { // the gradient is new: zeros for Col2im to add to
		p.fill(dx, 0, s.batch*inSize)
	}
	col := onDevice(p.e, nil, []int{k, n})
	for b := range s.batch {
		dyb := buffer{ptr: dy.ptr.Add(b * outSize)}
		if !dw.none() { // dW += dY[b]·im2col(X[b])ᵀ
			p.must("Im2col", p.e.e.Im2col(col.ptr(0), n, x.ptr.Add(b*inSize), s.cin, geo))
			p.gemm(false, true, 1, s.cout, k, n, 1, dyb, n, 0, col.at(0), n, 0, 1, dw, k, 0)
		}
		if !dx.none() { // dX[b] += col2im(Wᵀ·dY[b])
			p.gemm(true, false, 1, k, n, s.cout, 1, w, k, 0, dyb, n, 0, 0, col.at(0), n, 0)
			p.must("Col2im", p.e.e.Col2im(dx.ptr.Add(b*inSize), col.ptr(0), n, s.cin, geo))
		}
	}
	keep(col)
}
func (p devPrims) maxPool(dst, x buffer, planes int, geo kernels.ConvGeom) poolArgs {
	arg := onDevice(p.e, nil, []int{max(planes*geo.OutH()*geo.OutW(), 1)})
	if planes > 0 {
		p.must("MaxPool", p.e.e.MaxPool(dst.ptr, arg.ptr(0), x.ptr, planes, geo))
	}
	return poolArgs{dev: arg}
}
func (p devPrims) maxPoolBackward(dx, dy buffer, arg poolArgs, planes int, geo kernels.ConvGeom) {
	if planes > 0 {
		p.must("MaxPoolBackward", p.e.e.MaxPoolBackward(dx.ptr, dy.ptr, arg.dev.ptr(0), planes, geo.H*geo.W, geo.OutH()*geo.OutW()))
		keep(arg.dev)
	}
}

func (p devPrims) copyStrided(dst buffer, ldd int, src buffer, lds, rows, cols int, accumulate bool) {
	if rows > 0 && cols > 0 {
		p.must("CopyStrided", p.e.e.CopyStrided(dst.ptr, ldd, src.ptr, lds, rows, cols, accumulate))
	}
}
