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
	kScale kernel = iota
	kReLU
	kTanh
	kSigmoid
	kSoftmax
	kLogSoftmax
	kGather
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
	kScale:      "rg_scale_f32",
	kReLU:       "rg_relu_f32",
	kTanh:       "rg_tanh_f32",
	kSigmoid:    "rg_sigmoid_f32",
	kSoftmax:    "rg_softmax_f32",
	kLogSoftmax: "rg_log_softmax_f32",
	kGather:     "rg_gather_f32",

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

// Softmax computes dst = softmax(src) over the last axis of (rows, cols).
// In place allowed.
func (e *Engine) Softmax(dst, src Ptr, rows, cols int) error {
	check(fitsInt32(rows, cols), "Softmax: bad sizes rows=%d cols=%d", rows, cols)
	if rows == 0 || cols == 0 {
		return nil
	}
	var ar args
	ar.ptr(dst).ptr(src).i32(rows).i32(cols)
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

// ---- normalisation kind ------------------------------------------------------------

// NormKind picks the normalisation formula of Normalize.
type NormKind int

const (
	// NormR2Gen is R2Gen's LayerNorm: (x − mean)/(std + eps) with the
	// unbiased (n−1) std and eps added to the std (eps = 1e-6).
	NormR2Gen NormKind = iota
	// NormStandard is torch.nn.LayerNorm: (x − mean)/sqrt(var + eps) with
	// the biased variance.
	NormStandard
)

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
