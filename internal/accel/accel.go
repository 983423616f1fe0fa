// Package accel holds the engines that run radgen's ops: the primitives
// that the root package's forward and backward op bodies are written
// against (package radgen's prims.go), on every kind of memory.
//
// [CPU] runs them on Go slices of float32 or float64 with the CPU kernels
// of internal/kernels and internal/f32: it is the CPU's engine, and its
// methods are the one host implementation of each primitive.
//
// [Engine] is the device interface: the same primitives over float32
// buffers addressed by device pointers, queued in order on one stream. Two
// engines implement it. [Host] keeps its buffers in Go memory and runs
// every primitive on CPU[float32]: it is the reference that the device
// code path is tested against on any machine. With the cuda build tag,
// [OpenCUDA] returns the CUDA engine of internal/cuda (cuBLAS and the
// embedded PTX kernels), whose methods this interface mirrors one for one.
// Op code written against the primitives therefore runs unchanged on all.
//
// Pointers are byte addresses: p + 4·i is element i of the buffer at p, on
// both engines. Sizes are checked as in internal/cuda: a bad size is a
// programmer error and panics ("accel: …"); errors are for the device
// (out of memory, a failed launch).
package accel

import (
	"errors"
	"fmt"
)

// Ptr is the address of a float32 (or int32) buffer on an engine's device,
// in bytes. 0 is no buffer.
type Ptr uintptr

// Add returns p advanced by n float32 elements.
func (p Ptr) Add(n int) Ptr { return p + Ptr(4*n) }

// NormKind picks the normalisation formula of [Trainer.Normalize].
type NormKind int

const (
	// NormR2Gen is R2Gen's LayerNorm: (x − mean)/(std + eps) with the
	// unbiased (n−1) standard deviation.
	NormR2Gen NormKind = iota
	// NormStandard is torch.nn.LayerNorm: (x − mean)/√(var + eps) with the
	// biased variance.
	NormStandard
)

// Engine is a device and one stream on it. Operations are queued in call
// order; CopyOut waits for them. An Engine is safe for concurrent use, but
// operations on the same buffers must be ordered by the caller.
type Engine interface {
	// Name describes the device ("host", "NVIDIA H100 …").
	Name() string

	// AllocPtr returns a buffer of size bytes (uninitialised).
	AllocPtr(size int64) (Ptr, error)
	// FreePtr releases a buffer from AllocPtr.
	FreePtr(p Ptr) error

	// CopyIn copies src to the device at dst.
	CopyIn(dst Ptr, src []float32) error
	// CopyInInt32 copies int32 ids to the device at dst.
	CopyInInt32(dst Ptr, src []int32) error
	// CopyOut waits for the queued work and copies len(dst) floats from src.
	CopyOut(dst []float32, src Ptr) error
	// CopyDevice copies n bytes from src to dst on the device.
	CopyDevice(dst, src Ptr, n int64) error

	// GemmStrided computes batch products C_i = α·op(A_i)·op(B_i) + β·C_i of
	// row-major matrices, matrix i at i·stride floats past a, b and c
	// (internal/f32.GemmStrided's contract).
	GemmStrided(transA, transB bool, batch, m, n, k int, alpha float32, a Ptr, lda, strideA int, b Ptr, ldb, strideB int, beta float32, c Ptr, ldc, strideC int) error
	// Scale computes dst = alpha·src over n elements.
	Scale(dst, src Ptr, alpha float32, n int) error
	// Sigmoid computes dst = 1/(1 + exp(−src)) over n elements.
	Sigmoid(dst, src Ptr, n int) error
	// ReLU computes dst = max(src, 0) over n elements.
	ReLU(dst, src Ptr, n int) error
	// Tanh computes dst = tanh(src) over n elements.
	Tanh(dst, src Ptr, n int) error
	// Softmax normalises each row of (rows, cols).
	Softmax(dst, src Ptr, rows, cols int) error
	// LogSoftmax computes log(softmax) of each row of (rows, cols).
	LogSoftmax(dst, src Ptr, rows, cols int) error
	// Gather sets dst[i, :] = scale·table[ids[i], :] for i < n, with table
	// (vocab, dim) and ids n int32s on the device; an id outside [0, vocab)
	// gives zeros. dst must not overlap table.
	Gather(dst, table, ids Ptr, n, vocab, dim int, scale float32) error

	// Trainer holds the forward and backward primitives of training.
	Trainer
	// Optimizer holds the in-place parameter updates of training.
	Optimizer

	// Sync waits for the queued work and reports its errors.
	Sync() error
	// Close releases the engine and every buffer it allocated.
	Close() error
}

// PeakBandwidther is implemented by engines that know their device's
// theoretical memory bandwidth, in bytes/s (0 when unknown).
type PeakBandwidther interface {
	PeakBandwidth() float64
}

// ErrNoCUDA is returned by OpenCUDA in a build without the cuda tag.
var ErrNoCUDA = errors.New("accel: built without CUDA support (build with -tags cuda)")

// check panics on a programmer error (bad sizes), as gonum does.
func check(ok bool, format string, v ...any) {
	if !ok {
		panic("accel: " + fmt.Sprintf(format, v...))
	}
}
