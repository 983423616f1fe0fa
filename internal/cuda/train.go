//go:build cuda

package cuda

import (
	"math"
	"slices"
	"sort"

	"github.com/radgen/radgen/internal/kernels"
)

// The launchers of the training primitives and the optimiser: the
// operations of internal/accel's Trainer and Optimizer, with its host
// engine's semantics (and, where the host rounds each float32 operation on
// its own, its bits: see radgen.cu).

// MaxRank is the largest rank Binary, ReduceSum and Permute take once
// dimensions of size 1 are dropped and dimensions laid out contiguously in
// every operand are merged.
const MaxRank = 8

// BinaryOp picks the element-wise operation of Binary.
type BinaryOp = kernels.BinaryOp

// The operations of Binary.
const (
	OpAdd      = kernels.OpAdd      // a + b
	OpSub      = kernels.OpSub      // a − b
	OpMul      = kernels.OpMul      // a ⊙ b
	OpMaskFill = kernels.OpMaskFill // a where b ≠ 0, value elsewhere
)

// Activation picks the function of ActivationBackward.
type Activation = kernels.Activation

// The functions of ActivationBackward.
const (
	ActReLU    = kernels.ActReLU    // max(x, 0)
	ActTanh    = kernels.ActTanh    // tanh(x)
	ActSigmoid = kernels.ActSigmoid // 1/(1 + exp(−x))
)

// ConvGeom is the geometry of a convolution or pooling window over one
// channel plane (internal/kernels.ConvGeom: PyTorch's convention).
type ConvGeom = kernels.ConvGeom

// AdamConsts are one parameter's scalars for AdamStep (see
// [kernels.AdamConsts]).
type AdamConsts = kernels.AdamConsts

// dims is radgen.cu's rg_dims: a shape with two stride sets.
type dims struct {
	rank, aux int32
	dim       [MaxRank]int32
	s1, s2    [MaxRank]int32
}

func (a *args) dims(d *dims) *args {
	v := make([]int32, 0, 2+3*MaxRank)
	v = append(v, d.rank, d.aux)
	v = append(v, d.dim[:]...)
	v = append(v, d.s1[:]...)
	v = append(v, d.s2[:]...)
	return a.int32s(v...)
}

func (a *args) conv(g ConvGeom) *args {
	return a.int32s(int32(g.H), int32(g.W), int32(g.KH), int32(g.KW), int32(g.StrideH), int32(g.StrideW),
		int32(g.PadH), int32(g.PadW), int32(g.DilH), int32(g.DilW), int32(g.OutH()), int32(g.OutW()))
}

// numel returns the product of shape, checking that every size and the
// product fit the kernels' int32 and int64 indices.
func numel(name string, shape []int) int64 {
	check(fitsInt32(shape...), "%s: shape %v", name, shape)
	n := int64(1)
	for _, s := range shape {
		n *= int64(s)
		check(n <= 1<<50, "%s: shape %v too large", name, shape)
	}
	return n
}

// collapse drops the dimensions of size 1 and merges each dimension into
// the next wherever every stride set steps over the next one contiguously
// (s_i = s_{i+1}·shape_{i+1}): fewer dimensions, the same elements in the
// same row-major order. A merged size stays below 2³¹.
func collapse(shape []int, strides ...[]int) ([]int, [][]int) {
	var sh []int
	st := make([][]int, len(strides))
	for i, n := range shape {
		if n == 1 {
			continue
		}
		if j := len(sh) - 1; j >= 0 && int64(sh[j])*int64(n) <= math.MaxInt32 {
			merge := true
			for k := range strides {
				merge = merge && int64(st[k][j]) == int64(strides[k][i])*int64(n)
			}
			if merge {
				sh[j] *= n
				for k := range strides {
					st[k][j] = strides[k][i]
				}
				continue
			}
		}
		sh = append(sh, n)
		for k := range strides {
			st[k] = append(st[k], strides[k][i])
		}
	}
	return sh, st
}

func checkRank(name string, shape, collapsed []int) {
	check(len(collapsed) <= MaxRank, "%s: shape %v has %d dimensions that do not merge (at most %d)", name, shape, len(collapsed), MaxRank)
}

func (e *Engine) elementwise(k kernel, n int64, a *args) error {
	if n == 0 {
		return nil
	}
	return e.launch(k, e.elemGrid(n), dim3{elemBlock, 1, 1}, a)
}

// rowGrid is the grid of a one-block-per-row kernel that loops over rows.
func (e *Engine) rowGrid(rows int) dim3 {
	return dim3{uint32(min(rows, e.maxGrid*4)), 1, 1}
}

// Fill sets n floats at dst to v.
func (e *Engine) Fill(dst Ptr, v float32, n int) error {
	check(n >= 0, "Fill: n=%d", n)
	var a args
	a.ptr(dst).f32(v).i64(int64(n))
	return e.elementwise(kFill, int64(n), &a)
}

// Axpy adds alpha·src to dst over n elements (dst may be src).
func (e *Engine) Axpy(dst, src Ptr, alpha float32, n int) error {
	check(n >= 0, "Axpy: n=%d", n)
	var a args
	a.ptr(dst).ptr(src).f32(alpha).i64(int64(n))
	return e.elementwise(kAxpy, int64(n), &a)
}

// Clamp sets each of n floats at dst to min(max(x, −c), c), a NaN staying
// NaN (torch.nn.utils.clip_grad_value_).
func (e *Engine) Clamp(dst Ptr, c float32, n int) error {
	check(n >= 0, "Clamp: n=%d", n)
	var a args
	a.ptr(dst).f32(c).i64(int64(n))
	return e.elementwise(kClamp, int64(n), &a)
}

// Binary writes dst (contiguous, of the given shape) = a op b, element idx
// of a at Σ idx_i·strideA_i and of b at Σ idx_i·strideB_i (stride 0
// broadcasts); value is OpMaskFill's fill value. Rank at most MaxRank. dst
// may be an operand laid out contiguously in dst's shape.
func (e *Engine) Binary(op BinaryOp, dst, a, b Ptr, shape, strideA, strideB []int, value float32) error {
	check(len(strideA) == len(shape) && len(strideB) == len(shape) && op >= OpAdd && op <= OpMaskFill &&
		fitsInt32(strideA...) && fitsInt32(strideB...),
		"Binary: op %d shape %v strides %v %v", op, shape, strideA, strideB)
	n := numel("Binary", shape)
	if n == 0 {
		return nil
	}
	sh, st := collapse(shape, strideA, strideB)
	checkRank("Binary", shape, sh)
	d := dims{rank: int32(len(sh))}
	for i, s := range sh {
		d.dim[i], d.s1[i], d.s2[i] = int32(s), int32(st[0][i]), int32(st[1][i])
	}
	var ar args
	ar.ptr(dst).ptr(a).ptr(b).i64(n).i32(int(op)).f32(value).dims(&d)
	return e.elementwise(kBinary, n, &ar)
}

// Permute writes dst = src with its axes reordered: dimension i of dst is
// dimension perm[i] of src, a contiguous array of shape. dst must not
// overlap src.
func (e *Engine) Permute(dst, src Ptr, shape, perm []int) error {
	check(len(perm) == len(shape), "Permute: %v of %v", perm, shape)
	seen := make([]bool, len(perm))
	for _, p := range perm {
		check(p >= 0 && p < len(perm) && !seen[p], "Permute: %v is not a permutation", perm)
		seen[p] = true
	}
	n := numel("Permute", shape)
	stride := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		stride[i] = s
		s *= shape[i]
	}
	if n == 0 {
		return nil
	}
	oshape, ostride := make([]int, len(shape)), make([]int, len(shape))
	for i, p := range perm {
		oshape[i], ostride[i] = shape[p], stride[p]
	}
	sh, st := collapse(oshape, ostride)
	checkRank("Permute", shape, sh)
	d := dims{rank: int32(len(sh))}
	for i, s := range sh {
		d.dim[i], d.s1[i] = int32(s), int32(st[0][i])
	}
	var a args
	a.ptr(dst).ptr(src).i64(n).dims(&d)
	return e.elementwise(kGatherStrided, n, &a)
}

// reduceSerialMax is the longest sum ReduceSum gives one thread; longer
// sums take a block each. The choice depends on the sizes only, so a sum
// is computed the same way on every run and every GPU.
const reduceSerialMax = 256

// ReduceSum sums src (contiguous, of the given shape) into dst: element idx
// of src goes to dst's element Σ idx_i·strideDst_i (stride 0 sums over
// that dimension); accumulate adds the sum to dst instead of overwriting
// it. Sums are accumulated in float64: in row-major order, as the host
// does, when they are at most 256 long, and otherwise by a block of 256
// threads in a fixed tree (the same float32 result but in rare ties, and
// the same from run to run). The nonzero strides must address distinct
// elements (the destination of a broadcast: no two index tuples alias);
// elements of dst between them are set to 0 unless accumulate.
func (e *Engine) ReduceSum(dst, src Ptr, shape, strideDst []int, accumulate bool) error {
	check(len(strideDst) == len(shape) && fitsInt32(strideDst...), "ReduceSum: shape %v strides %v", shape, strideDst)
	n := numel("ReduceSum", shape)
	if n == 0 {
		return nil
	}
	srcStride := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		srcStride[i] = s
		s *= shape[i]
	}
	full, fullDst := shape, strideDst
	shape, st := collapse(shape, srcStride, strideDst)
	checkRank("ReduceSum", full, shape)
	srcStride, strideDst = st[0], st[1]
	var kept, summed []int
	for i := range shape {
		if strideDst[i] != 0 {
			kept = append(kept, i)
		} else {
			summed = append(summed, i)
		}
	}
	// Distinct destinations: sorted by stride, each kept dimension steps
	// over the whole span of the smaller ones.
	byStride := slices.Clone(kept)
	sort.SliceStable(byStride, func(i, j int) bool { return strideDst[byStride[i]] < strideDst[byStride[j]] })
	K, R, span := int64(1), int64(1), int64(1)
	for _, i := range byStride {
		check(int64(strideDst[i]) >= span, "ReduceSum: destination strides %v alias over shape %v", fullDst, full)
		span = int64(strideDst[i]) * int64(shape[i])
		K *= int64(shape[i])
	}
	for _, i := range summed {
		R *= int64(shape[i])
	}
	if !accumulate {
		// Gaps between the destination elements: the host writes zeros there.
		m := int64(1)
		for _, i := range kept {
			m += int64(strideDst[i]) * int64(shape[i]-1)
		}
		if m > K {
			if err := e.Fill(dst, 0, int(m)); err != nil {
				return err
			}
		}
	}
	d := dims{rank: int32(len(kept)), aux: int32(len(summed))}
	for j, i := range kept {
		d.dim[j], d.s1[j], d.s2[j] = int32(shape[i]), int32(srcStride[i]), int32(strideDst[i])
	}
	for j, i := range summed {
		d.dim[len(kept)+j], d.s1[len(kept)+j] = int32(shape[i]), int32(srcStride[i])
	}
	var a args
	a.ptr(dst).ptr(src).i64(K).i64(R).flag(accumulate).dims(&d)
	if R <= reduceSerialMax {
		return e.launch(kReduceSerial, e.elemGrid(K), dim3{elemBlock, 1, 1}, &a)
	}
	return e.launch(kReduceBlock, dim3{uint32(min(K, int64(e.maxGrid)*4)), 1, 1}, dim3{256, 1, 1}, &a)
}

// ActivationBackward adds dy ⊙ f′ (in terms of the output y) to dx over n
// elements.
func (e *Engine) ActivationBackward(act Activation, dx, dy, y Ptr, n int) error {
	check(n >= 0 && act >= ActReLU && act <= ActSigmoid, "ActivationBackward: activation %d n=%d", act, n)
	var a args
	a.ptr(dx).ptr(dy).ptr(y).i64(int64(n)).i32(int(act))
	return e.elementwise(kActBackward, int64(n), &a)
}

// SoftmaxBackward adds the gradient of a row-wise softmax (log-softmax when
// log) with output y (rows, cols) to dx: y ⊙ (dy − Σ dy·y), or dy −
// exp(y)·Σ dy, with the sums in float64.
func (e *Engine) SoftmaxBackward(dx, dy, y Ptr, rows, cols int, log bool) error {
	check(fitsInt32(rows, cols) && cols > 0, "SoftmaxBackward: rows=%d cols=%d", rows, cols)
	if rows == 0 {
		return nil
	}
	var a args
	a.ptr(dx).ptr(dy).ptr(y).i32(rows).i32(cols).flag(log)
	return e.launch(kSoftmaxBackward, e.rowGrid(rows), rowBlock(cols), &a)
}

// Normalize writes x̂ = (x − μ)/σ of each row of src (rows, cols) to dst and
// 1/σ to inv (rows), σ as kind says (NormR2Gen: the unbiased std + eps;
// NormStandard: sqrt(biased variance + eps)); statistics in float64. dst
// may be src.
func (e *Engine) Normalize(dst, inv, src Ptr, rows, cols int, eps float64, kind NormKind) error {
	check(fitsInt32(rows, cols) && cols > 0 && (kind == NormR2Gen || kind == NormStandard),
		"Normalize: rows=%d cols=%d kind=%d", rows, cols, kind)
	if rows == 0 {
		return nil
	}
	var a args
	a.ptr(dst).ptr(inv).ptr(src).i32(rows).i32(cols).f64(eps).flag(kind == NormR2Gen)
	return e.launch(kNormalize, e.rowGrid(rows), rowBlock(cols), &a)
}

// NormalizeBackward adds the gradient of Normalize to dx, given dy, its
// output y and inv.
func (e *Engine) NormalizeBackward(dx, dy, y, inv Ptr, rows, cols int, eps float64, kind NormKind) error {
	check(fitsInt32(rows, cols) && cols > 0 && (kind == NormR2Gen || kind == NormStandard),
		"NormalizeBackward: rows=%d cols=%d kind=%d", rows, cols, kind)
	if rows == 0 {
		return nil
	}
	var a args
	a.ptr(dx).ptr(dy).ptr(y).ptr(inv).i32(rows).i32(cols).f64(eps).flag(kind == NormR2Gen)
	return e.launch(kNormalizeBackward, e.rowGrid(rows), rowBlock(cols), &a)
}

// CopyStrided copies (or, with accumulate, adds) rows of cols floats: row r
// of src at r·lds to row r of dst at r·ldd. lds 0 repeats one row of src
// (a bias in every row).
func (e *Engine) CopyStrided(dst Ptr, ldd int, src Ptr, lds int, rows, cols int, accumulate bool) error {
	check(fitsInt32(rows, cols, ldd, lds) && (rows <= 1 || ldd >= cols && (lds >= cols || lds == 0)),
		"CopyStrided: rows=%d cols=%d ldd=%d lds=%d", rows, cols, ldd, lds)
	n := int64(rows) * int64(cols)
	var a args
	a.ptr(dst).i32(ldd).ptr(src).i32(lds).i32(rows).i32(cols).flag(accumulate)
	return e.elementwise(kCopyRows, n, &a)
}

// scatterParts is how many ranges of ids ScatterAdd splits the vocabulary
// into (at most): one block row each.
const scatterParts = 128

// ScatterAdd adds src[i, :] to dst[ids[i], :] for i < n, with dst (vocab,
// dim) and ids n int32s on the device; ids outside [0, vocab) are skipped.
// Rows are added in order of i, one addition at a time, as on the host (no
// atomics): the result has the host's bits whatever the schedule.
func (e *Engine) ScatterAdd(dst, src, ids Ptr, n, vocab, dim int) error {
	check(fitsInt32(n, vocab, dim), "ScatterAdd: n=%d vocab=%d dim=%d", n, vocab, dim)
	if n == 0 || vocab == 0 || dim == 0 {
		return nil
	}
	block := rowBlock(dim)
	grid := dim3{uint32((dim + int(block.x) - 1) / int(block.x)), uint32(min(vocab, scatterParts)), 1}
	var a args
	a.ptr(dst).ptr(src).ptr(ids).i32(n).i32(vocab).i32(dim)
	return e.launch(kScatterAdd, grid, block, &a)
}

func convCheck(name string, c int, g ConvGeom) (npix, rows int64) {
	g.Check()
	check(c >= 0 && fitsInt32(c, g.H, g.W, g.KH, g.KW, g.StrideH, g.StrideW, g.PadH, g.PadW, g.DilH, g.DilW) &&
		g.OutH() > 0 && g.OutW() > 0, "%s: c=%d geometry %+v", name, c, g)
	return int64(g.OutH()) * int64(g.OutW()), int64(c) * int64(g.KH) * int64(g.KW)
}

// Im2col unfolds one image x (c, H, W) into the column matrix dst
// (c·KH·KW, Ho·Wo), row stride ldd ≥ Ho·Wo (internal/kernels.Im2col).
func (e *Engine) Im2col(dst Ptr, ldd int, x Ptr, c int, g ConvGeom) error {
	npix, rows := convCheck("Im2col", c, g)
	check(fitsInt32(ldd) && int64(ldd) >= npix, "Im2col: ldd=%d < %d", ldd, npix)
	var a args
	a.ptr(dst).i32(ldd).ptr(x).i32(c).conv(g)
	return e.elementwise(kIm2col, rows*npix, &a)
}

// Col2im adds the column matrix col (c·KH·KW, Ho·Wo), row stride ldc, into
// the image dx (c, H, W) it was unfolded from: Im2col's adjoint. Each
// element of dx adds its taps in the host's order.
func (e *Engine) Col2im(dx, col Ptr, ldc int, c int, g ConvGeom) error {
	npix, rows := convCheck("Col2im", c, g)
	check(fitsInt32(ldc) && int64(ldc) >= npix, "Col2im: ldc=%d < %d", ldc, npix)
	if rows == 0 {
		return nil
	}
	var a args
	a.ptr(dx).ptr(col).i32(ldc).i32(c).conv(g)
	return e.elementwise(kCol2im, int64(c)*int64(g.H)*int64(g.W), &a)
}

// MaxPool writes the maximum of each window of x (planes, H, W) to dst
// (planes, Ho, Wo) and the index of the (first) maximum in its plane to
// arg, int32s (−1 for a window of padding only; internal/kernels.MaxPool).
func (e *Engine) MaxPool(dst, arg, x Ptr, planes int, g ConvGeom) error {
	g.Check()
	check(planes >= 0 && fitsInt32(planes, g.H, g.W, g.KH, g.KW, g.StrideH, g.StrideW, g.PadH, g.PadW, g.DilH, g.DilW),
		"MaxPool: planes=%d geometry %+v", planes, g)
	npix := int64(g.OutH()) * int64(g.OutW())
	var a args
	a.ptr(dst).ptr(arg).ptr(x).i32(planes).conv(g)
	return e.elementwise(kMaxPool, int64(planes)*npix, &a)
}

// MaxPoolBackward adds each dy (planes, planeOut) to the element of dx
// (planes, planeIn) that arg names (−1, or an index outside the plane, is
// skipped). One thread per plane adds in the host's order: overlapping
// windows give the host's bits, without atomics.
func (e *Engine) MaxPoolBackward(dx, dy, arg Ptr, planes, planeIn, planeOut int) error {
	check(fitsInt32(planes, planeIn, planeOut), "MaxPoolBackward: %d %d %d", planes, planeIn, planeOut)
	if planes == 0 || planeOut == 0 {
		return nil
	}
	const block = 64
	var a args
	a.ptr(dx).ptr(dy).ptr(arg).i32(planes).i32(planeIn).i32(planeOut)
	return e.launch(kMaxPoolBackward, dim3{uint32(min((planes+block-1)/block, e.maxGrid)), 1, 1}, dim3{block, 1, 1}, &a)
}

// AdamStep applies one Adam (AMSGrad when k.AMSGrad) update to n
// parameters p with gradients g and moments m, v (and vmax with AMSGrad;
// ignored otherwise), rounding for rounding as internal/kernels.Adam:
// two fused multiply-adds, every other operation rounded on its own.
func (e *Engine) AdamStep(p, g, m, v, vmax Ptr, n int, k AdamConsts) error {
	check(n >= 0 && (!k.AMSGrad || vmax != 0), "AdamStep: n=%d amsgrad=%v vmax=%#x", n, k.AMSGrad, vmax)
	var a args
	a.ptr(p).ptr(g).ptr(m).ptr(v).ptr(vmax).i64(int64(n)).f32(k.WD).f32(k.Decay).flag(k.Decoupled).
		f32(k.Beta1).f32(k.OneMinusB1).f32(k.Beta2).f32(k.OneMinusB2).f32(k.BC2Sqrt).f32(k.Eps).
		f32(k.NegStepLen).flag(k.AMSGrad)
	return e.elementwise(kAdam, int64(n), &a)
}
