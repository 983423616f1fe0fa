//go:build cuda

package cuda

//go:generate sh kernels/gen.sh

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	_ "embed"
	"fmt"
	"math"
	"unsafe"
)

// ptxSource is kernels/radgen.cu compiled by nvcc (kernels/gen.sh) for
// compute_52; the driver JIT-compiles it for the device at NewEngine.
//
//go:embed kernels/radgen.ptx
var ptxSource string

type kernel int

const (
	kAdd kernel = iota
	kMul
	kScale
	kReLU
	kTanh
	kSigmoid
	kSoftmax
	kLogSoftmax
	kLayerNorm
	kGather
	kRMGate
	kSplitHeads
	kMergeHeads
	kTranspose
	kFill
	kAxpy
	kClamp
	kBinary
	kGatherStrided
	kReduceSerial
	kReduceBlock
	kActBackward
	kSoftmaxBackward
	kNormalize
	kNormalizeBackward
	kCopyRows
	kScatterAdd
	kIm2col
	kCol2im
	kMaxPool
	kMaxPoolBackward
	kAdam
	numKernels
)

// kernelNames are the entry points of kernels/radgen.cu, by kernel.
var kernelNames = [numKernels]string{
	kAdd:        "rg_add_f32",
	kMul:        "rg_mul_f32",
	kScale:      "rg_scale_f32",
	kReLU:       "rg_relu_f32",
	kTanh:       "rg_tanh_f32",
	kSigmoid:    "rg_sigmoid_f32",
	kSoftmax:    "rg_softmax_f32",
	kLogSoftmax: "rg_log_softmax_f32",
	kLayerNorm:  "rg_layer_norm_f32",
	kGather:     "rg_gather_f32",
	kRMGate:     "rg_rm_gate_f32",
	kSplitHeads: "rg_split_heads_f32",
	kMergeHeads: "rg_merge_heads_f32",
	kTranspose:  "rg_transpose_f32",

	kFill:              "rg_fill_f32",
	kAxpy:              "rg_axpy_f32",
	kClamp:             "rg_clamp_f32",
	kBinary:            "rg_binary_f32",
	kGatherStrided:     "rg_gather_strided_f32",
	kReduceSerial:      "rg_reduce_serial_f32",
	kReduceBlock:       "rg_reduce_block_f32",
	kActBackward:       "rg_act_backward_f32",
	kSoftmaxBackward:   "rg_softmax_backward_f32",
	kNormalize:         "rg_normalize_f32",
	kNormalizeBackward: "rg_normalize_backward_f32",
	kCopyRows:          "rg_copy_rows_f32",
	kScatterAdd:        "rg_scatter_add_f32",
	kIm2col:            "rg_im2col_f32",
	kCol2im:            "rg_col2im_f32",
	kMaxPool:           "rg_maxpool_f32",
	kMaxPoolBackward:   "rg_maxpool_backward_f32",
	kAdam:              "rg_adam_f32",
}

func (e *Engine) loadKernels() error {
	src := C.CString(ptxSource)
	defer C.free(unsafe.Pointer(src))
	const logLen = 8192
	log := (*C.char)(C.malloc(logLen))
	defer C.free(unsafe.Pointer(log))
	if rc := C.rg_module_load(e.c, src, &e.mod, log, logLen); rc != 0 {
		err := status("load kernels", rc).(*Error)
		err.Detail += " " + C.GoString(log)
		return err
	}
	for k, name := range kernelNames {
		cname := C.CString(name)
		rc := C.rg_module_function(e.c, e.mod, cname, &e.fn[k])
		C.free(unsafe.Pointer(cname))
		if err := status("kernel "+name, rc); err != nil {
			return err
		}
	}
	return nil
}

// ---- launching ------------------------------------------------------------------

// args packs kernel parameters, one 8-byte slot each (see rg_launch).
type args struct {
	v [C.RG_MAX_KERNEL_ARGS]C.uint64_t
	n int
}

func (a *args) ptr(p Ptr) *args     { a.v[a.n] = C.uint64_t(p); a.n++; return a }
func (a *args) i32(x int) *args     { a.v[a.n] = C.uint64_t(uint32(int32(x))); a.n++; return a }
func (a *args) i64(x int64) *args   { a.v[a.n] = C.uint64_t(uint64(x)); a.n++; return a }
func (a *args) f32(x float32) *args { a.v[a.n] = C.uint64_t(math.Float32bits(x)); a.n++; return a }
func (a *args) f64(x float64) *args { a.v[a.n] = C.uint64_t(math.Float64bits(x)); a.n++; return a }

// int32s packs a struct of int32 fields (rg_dims, rg_conv in radgen.cu)
// into consecutive slots, two fields to a slot, low half first (the
// device's little-endian layout). The driver copies a parameter's bytes
// from where its slot's pointer points, so such a struct spans several
// slots and must be the kernel's last parameter.
func (a *args) int32s(v ...int32) *args {
	for i := 0; i < len(v); i += 2 {
		w := uint64(uint32(v[i]))
		if i+1 < len(v) {
			w |= uint64(uint32(v[i+1])) << 32
		}
		a.v[a.n] = C.uint64_t(w)
		a.n++
	}
	return a
}
func (a *args) flag(b bool) *args {
	if b {
		return a.i32(1)
	}
	return a.i32(0)
}

type dim3 struct{ x, y, z uint32 }

func (e *Engine) launch(k kernel, grid, block dim3, a *args) error {
	if e.launched != nil {
		return e.launched(k, grid, block, a)
	}
	c, err := e.enter()
	if err != nil {
		return err
	}
	defer e.leave()
	return status(kernelNames[k], C.rg_launch(c, e.fn[k],
		C.uint(grid.x), C.uint(grid.y), C.uint(grid.z),
		C.uint(block.x), C.uint(block.y), C.uint(block.z), 0, &a.v[0], C.int(a.n)))
}

const elemBlock = 256

// elemGrid sizes a grid-stride launch over n elements.
func (e *Engine) elemGrid(n int64) dim3 {
	g := (n + elemBlock - 1) / elemBlock
	if g > int64(e.maxGrid) {
		g = int64(e.maxGrid)
	}
	return dim3{uint32(g), 1, 1}
}

// rowBlock picks the block size of a one-block-per-row kernel.
func rowBlock(cols int) dim3 {
	switch {
	case cols <= 32:
		return dim3{32, 1, 1}
	case cols <= 64:
		return dim3{64, 1, 1}
	case cols <= 128:
		return dim3{128, 1, 1}
	case cols <= 2048:
		return dim3{256, 1, 1}
	}
	return dim3{512, 1, 1}
}

// check panics on a programmer error (bad sizes), as gonum does.
func check(ok bool, format string, v ...any) {
	if !ok {
		panic("cuda: " + fmt.Sprintf(format, v...))
	}
}

func fitsInt32(v ...int) bool {
	for _, x := range v {
		if x < 0 || x > math.MaxInt32 {
			return false
		}
	}
	return true
}

// ---- element-wise ------------------------------------------------------------------

// Broadcast says which row of b goes with row r of a in Add and Mul: row
// (r / Div) % Rows of b, a (Rows, cols) matrix.
type Broadcast struct{ Rows, Div int }

// Same pairs row r of a with row r of b: b has a's shape (rows, cols).
func Same(rows int) Broadcast { return Broadcast{Rows: rows, Div: 1} }

// RowVector pairs every row of a with b's only row (a bias).
var RowVector = Broadcast{Rows: 1, Div: 1}

// Cyclic pairs row r of a with row r % rows of b: positional encodings
// (T, D) added to (B*T, D) activations are Cyclic(T).
func Cyclic(rows int) Broadcast { return Broadcast{Rows: rows, Div: 1} }

// PerGroup pairs rows g*size ... (g+1)*size-1 of a with row g of b: one
// row per batch element over its S memory slots is PerGroup(B, S).
func PerGroup(groups, size int) Broadcast { return Broadcast{Rows: groups, Div: size} }

func (e *Engine) binary(k kernel, dst, a, b Ptr, rows, cols int, bc Broadcast) error {
	check(fitsInt32(rows, cols, bc.Rows, bc.Div) && bc.Rows > 0 && bc.Div > 0,
		"%s: bad sizes rows=%d cols=%d broadcast=%+v", kernelNames[k], rows, cols, bc)
	n := int64(rows) * int64(cols)
	if n == 0 {
		return nil
	}
	var ar args
	ar.ptr(dst).ptr(a).ptr(b).i64(n).i32(cols).i32(bc.Rows).i32(bc.Div)
	return e.launch(k, e.elemGrid(n), dim3{elemBlock, 1, 1}, &ar)
}

// Add computes dst = a + b for a, dst (rows, cols) and b broadcast by bc.
// dst may be a or b.
func (e *Engine) Add(dst, a, b Ptr, rows, cols int, bc Broadcast) error {
	return e.binary(kAdd, dst, a, b, rows, cols, bc)
}

// Mul computes dst = a ⊙ b (element-wise) for a, dst (rows, cols) and b
// broadcast by bc. dst may be a or b.
func (e *Engine) Mul(dst, a, b Ptr, rows, cols int, bc Broadcast) error {
	return e.binary(kMul, dst, a, b, rows, cols, bc)
}

func (e *Engine) unary(k kernel, dst, src Ptr, n int, alpha *float32) error {
	check(n >= 0, "%s: negative length %d", kernelNames[k], n)
	if n == 0 {
		return nil
	}
	var ar args
	ar.ptr(dst).ptr(src)
	if alpha != nil {
		ar.f32(*alpha)
	}
	ar.i64(int64(n))
	return e.launch(k, e.elemGrid(int64(n)), dim3{elemBlock, 1, 1}, &ar)
}

// Scale computes dst = alpha·src over n elements (in place allowed).
func (e *Engine) Scale(dst, src Ptr, alpha float32, n int) error {
	return e.unary(kScale, dst, src, n, &alpha)
}

// ReLU computes dst = max(src, 0) over n elements (in place allowed).
func (e *Engine) ReLU(dst, src Ptr, n int) error { return e.unary(kReLU, dst, src, n, nil) }

// Tanh computes dst = tanh(src) over n elements (in place allowed).
func (e *Engine) Tanh(dst, src Ptr, n int) error { return e.unary(kTanh, dst, src, n, nil) }

// Sigmoid computes dst = 1/(1+exp(-src)) over n elements (in place allowed).
func (e *Engine) Sigmoid(dst, src Ptr, n int) error { return e.unary(kSigmoid, dst, src, n, nil) }

// ---- softmax ------------------------------------------------------------------------

// Mask selects the scores that Softmax replaces by -1e9 before normalising,
// as R2Gen's scores.masked_fill(mask == 0, -1e9). For attention scores
// (B, H, Tq, Tk) viewed as rows = B*H*Tq, cols = Tk:
//
//	Keys:         optional byte mask (B, KeyRows, Tk), 0 = masked; 0 for none
//	KeyRows:      1 for a key padding mask (B, 1, Tk), Tq for a full (B, Tq, Tk)
//	RowsPerBatch: score rows per batch element, H*Tq
//	QLen:         Tq, the queries per (batch, head)
//	Causal:       also mask key j > QOffset + q for query q (subsequent mask)
//	QOffset:      position of the first query (incremental decoding: T-1)
type Mask struct {
	Keys         Ptr
	KeyRows      int
	RowsPerBatch int
	QLen         int
	Causal       bool
	QOffset      int
}

// Softmax computes dst = softmax(src) over the last axis of (rows, cols),
// with the positions m selects set to -1e9 first (m may be nil). A fully
// masked row comes out uniform, as in PyTorch. In place allowed.
func (e *Engine) Softmax(dst, src Ptr, rows, cols int, m *Mask) error {
	check(fitsInt32(rows, cols), "Softmax: bad sizes rows=%d cols=%d", rows, cols)
	if rows == 0 || cols == 0 {
		return nil
	}
	mm := Mask{KeyRows: 1, RowsPerBatch: rows, QLen: 1}
	if m != nil {
		mm = *m
		check(mm.QLen > 0 && fitsInt32(mm.QLen, mm.QOffset), "Softmax: mask needs QLen > 0: %+v", mm)
		if mm.Keys != 0 {
			check(mm.RowsPerBatch > 0 && mm.KeyRows > 0 && fitsInt32(mm.RowsPerBatch, mm.KeyRows) &&
				(mm.KeyRows == 1 || mm.KeyRows == mm.QLen),
				"Softmax: bad key mask %+v (KeyRows must be 1 or QLen)", mm)
		} else {
			mm.RowsPerBatch, mm.KeyRows = max(mm.RowsPerBatch, 1), max(mm.KeyRows, 1)
		}
	}
	var ar args
	ar.ptr(dst).ptr(src).i32(rows).i32(cols).ptr(mm.Keys).i32(mm.RowsPerBatch).i32(mm.KeyRows).
		i32(mm.QLen).flag(mm.Causal).i32(mm.QOffset)
	return e.launch(kSoftmax, dim3{uint32(rows), 1, 1}, rowBlock(cols), &ar)
}

// LogSoftmax computes dst = log(softmax(src)) over the last axis of
// (rows, cols). In place allowed.
func (e *Engine) LogSoftmax(dst, src Ptr, rows, cols int) error {
	check(fitsInt32(rows, cols), "LogSoftmax: bad sizes rows=%d cols=%d", rows, cols)
	if rows == 0 || cols == 0 {
		return nil
	}
	var ar args
	ar.ptr(dst).ptr(src).i32(rows).i32(cols)
	return e.launch(kLogSoftmax, dim3{uint32(rows), 1, 1}, rowBlock(cols), &ar)
}

// ---- layer norms -----------------------------------------------------------------------

// NormKind picks the layer norm formula.
type NormKind int

const (
	// NormR2Gen is R2Gen's LayerNorm: gamma·(x − mean)/(std + eps) + beta
	// with the unbiased (n−1) std and eps added to the std (eps = 1e-6).
	NormR2Gen NormKind = iota
	// NormStandard is torch.nn.LayerNorm: gamma·(x − mean)/sqrt(var + eps)
	// + beta with the biased variance.
	NormStandard
)

func (e *Engine) layerNorm(dst, src, gamma, beta Ptr, rows, cols, stride int, eps float32, kind NormKind) error {
	check(fitsInt32(rows, cols) && (kind == NormR2Gen || kind == NormStandard),
		"LayerNorm: bad arguments rows=%d cols=%d kind=%d", rows, cols, kind)
	if rows == 0 || cols == 0 {
		return nil
	}
	var ar args
	ar.ptr(dst).ptr(src).ptr(gamma).ptr(beta).i32(rows).i32(cols).i32(stride).f32(eps).flag(kind == NormR2Gen)
	return e.launch(kLayerNorm, dim3{uint32(rows), 1, 1}, rowBlock(cols), &ar)
}

// LayerNorm normalises each row of src (rows, cols) with gamma and beta of
// shape (cols). In place allowed.
func (e *Engine) LayerNorm(dst, src, gamma, beta Ptr, rows, cols int, eps float32, kind NormKind) error {
	return e.layerNorm(dst, src, gamma, beta, rows, cols, 0, eps, kind)
}

// CondLayerNorm is LayerNorm with one gamma and beta row per row of src:
// gamma, beta (rows, cols). This is the normalisation of R2Gen's
// memory-driven conditional layer norm (Chen et al. 2020, Eqs. 11-15), whose
// gamma_hat = gamma + mlp_gamma(M_t) and beta_hat the caller computes.
func (e *Engine) CondLayerNorm(dst, src, gamma, beta Ptr, rows, cols int, eps float32, kind NormKind) error {
	return e.layerNorm(dst, src, gamma, beta, rows, cols, cols, eps, kind)
}

// ---- gather ---------------------------------------------------------------------------

// Gather sets dst[i, :] = scale · table[ids[i], :] for i < n, with table
// (vocab, dim), ids n int32s on the device, dst (n, dim). An id outside
// [0, vocab) gives a row of zeros. Embedding lookup: scale = sqrt(d_model)
// in R2Gen; beam reordering: scale = 1. dst must not overlap table.
func (e *Engine) Gather(dst, table, ids Ptr, n, vocab, dim int, scale float32) error {
	check(fitsInt32(n, vocab, dim), "Gather: bad sizes n=%d vocab=%d dim=%d", n, vocab, dim)
	if n == 0 || dim == 0 {
		return nil
	}
	var ar args
	ar.ptr(dst).ptr(table).ptr(ids).i32(n).i32(vocab).i32(dim).f32(scale)
	g := min(n, 65535)
	return e.launch(kGather, dim3{uint32(g), 1, 1}, rowBlock(dim), &ar)
}

// ---- relational memory ---------------------------------------------------------------

// RMGate is the gated update of R2Gen's relational memory (Chen et al.
// 2020, Eqs. 9-10; RelationalMemory.forward_step):
//
//	dst = sigmoid(gw_i + gu_i) ⊙ tanh(next) + sigmoid(gw_f + gu_f) ⊙ mem
//
// with next, mem, dst (B*S, d); gw = W(input)+b_W (B, 2d), one row per batch
// element, broadcast over its S slots; gu = U(tanh(mem))+b_U (B*S, 2d). The
// first d columns of the gates are the input gate, the last d the forget
// gate, which multiplies mem itself (not tanh(mem)). dst may be next or mem.
func (e *Engine) RMGate(dst, next, mem, gw, gu Ptr, batch, slots, d int) error {
	check(fitsInt32(batch, slots, d, batch*slots) && slots > 0, "RMGate: bad sizes batch=%d slots=%d d=%d", batch, slots, d)
	n := int64(batch) * int64(slots) * int64(d)
	if n == 0 {
		return nil
	}
	var ar args
	ar.ptr(dst).ptr(next).ptr(mem).ptr(gw).ptr(gu).i32(batch * slots).i32(slots).i32(d)
	return e.launch(kRMGate, e.elemGrid(n), dim3{elemBlock, 1, 1}, &ar)
}

// ---- layout ---------------------------------------------------------------------------

// SplitHeads copies heads out of rows: src has B*T rows with leading
// dimension ld, head h of row (b, t) being columns colOff + h*dk ... + dk-1;
// dst is (B, H, T, dk) contiguous. With colOff = 0, D, 2D it cuts Q, K and V
// out of one fused (B, T, 3D) projection (ld = 3D).
func (e *Engine) SplitHeads(dst, src Ptr, b, t, h, dk, ld, colOff int) error {
	return e.AppendHeads(dst, src, b, t, h, dk, ld, colOff, t, 0)
}

// AppendHeads is SplitHeads into a key/value cache: dst is (B, H, capacity,
// dk) and the t new positions of each (b, h) are written at pos ... pos+t-1.
// Incremental decoding appends the new token's keys (t = 1, pos = steps so
// far) and attends over positions 0 ... pos.
func (e *Engine) AppendHeads(dst, src Ptr, b, t, h, dk, ld, colOff, capacity, pos int) error {
	check(fitsInt32(b, t, h, dk, ld, colOff, capacity, pos) && colOff+h*dk <= ld && pos+t <= capacity,
		"SplitHeads: bad sizes b=%d t=%d h=%d dk=%d ld=%d colOff=%d capacity=%d pos=%d",
		b, t, h, dk, ld, colOff, capacity, pos)
	n := int64(b) * int64(t) * int64(h) * int64(dk)
	if n == 0 {
		return nil
	}
	var ar args
	ar.ptr(dst).ptr(src).i32(b).i32(t).i32(h).i32(dk).i32(ld).i32(colOff).i32(capacity).i32(pos)
	return e.launch(kSplitHeads, e.elemGrid(n), dim3{elemBlock, 1, 1}, &ar)
}

// MergeHeads is the inverse of SplitHeads with colOff 0: src (B, H, T, dk)
// contiguous, dst B*T rows with leading dimension ld ≥ H*dk.
func (e *Engine) MergeHeads(dst, src Ptr, b, t, h, dk, ld int) error {
	check(fitsInt32(b, t, h, dk, ld) && h*dk <= ld,
		"MergeHeads: bad sizes b=%d t=%d h=%d dk=%d ld=%d", b, t, h, dk, ld)
	n := int64(b) * int64(t) * int64(h) * int64(dk)
	if n == 0 {
		return nil
	}
	var ar args
	ar.ptr(dst).ptr(src).i32(b).i32(t).i32(h).i32(dk).i32(ld)
	return e.launch(kMergeHeads, e.elemGrid(n), dim3{elemBlock, 1, 1}, &ar)
}

// Transpose writes dst (batch, cols, rows) = the transpose of each matrix
// of src (batch, rows, cols). dst must not overlap src.
func (e *Engine) Transpose(dst, src Ptr, batch, rows, cols int) error {
	check(fitsInt32(batch, rows, cols) && batch <= 65535, "Transpose: bad sizes batch=%d rows=%d cols=%d", batch, rows, cols)
	if batch == 0 || rows == 0 || cols == 0 {
		return nil
	}
	var ar args
	ar.ptr(dst).ptr(src).i32(rows).i32(cols)
	grid := dim3{uint32((cols + 31) / 32), uint32((rows + 31) / 32), uint32(batch)}
	check(grid.y <= 65535, "Transpose: %d rows is too many", rows)
	return e.launch(kTranspose, grid, dim3{32, 8, 1}, &ar)
}
