// Package accel is the device interface of radgen's accelerated decoding:
// the operations a decoder step needs, over float32 buffers addressed by
// device pointers, queued in order on one stream.
//
// Two engines implement it. [Host] keeps its buffers in Go memory and runs
// every operation with the CPU kernels: it is the reference that the device
// code path is tested against on any machine. With the cuda build tag,
// [OpenCUDA] returns the CUDA engine of internal/cuda (cuBLAS and the
// embedded PTX kernels), whose methods this interface mirrors one for one.
// Model code written against Engine therefore runs unchanged on either.
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

// Broadcast says which row of b goes with row r of a in [Engine.Add]: row
// (r / Div) % Rows of b, a (Rows, cols) matrix.
type Broadcast struct{ Rows, Div int }

// Same pairs row r of a with row r of b: b has a's shape.
func Same(rows int) Broadcast { return Broadcast{Rows: rows, Div: 1} }

// RowVector pairs every row of a with b's only row (a bias).
var RowVector = Broadcast{Rows: 1, Div: 1}

// PerGroup pairs rows g·size … (g+1)·size−1 of a with row g of b.
func PerGroup(groups, size int) Broadcast { return Broadcast{Rows: groups, Div: size} }

// NormKind picks the layer norm formula.
type NormKind int

const (
	// NormR2Gen is R2Gen's LayerNorm: γ·(x − mean)/(std + eps) + β with the
	// unbiased (n−1) standard deviation.
	NormR2Gen NormKind = iota
	// NormStandard is torch.nn.LayerNorm: γ·(x − mean)/√(var + eps) + β with
	// the biased variance.
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
	// Linear computes y = x·Wᵀ + bias for x (rows, in), w (out, in) and bias
	// (out) or 0.
	Linear(y, x, w, bias Ptr, rows, in, out int) error

	// Add computes dst = a + b for a, dst (rows, cols) and b broadcast by bc.
	Add(dst, a, b Ptr, rows, cols int, bc Broadcast) error
	// Mul computes dst = a ⊙ b for a, dst (rows, cols) and b broadcast by bc.
	Mul(dst, a, b Ptr, rows, cols int, bc Broadcast) error
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
	// LayerNorm normalises each row of src (rows, cols) with γ, β (cols).
	LayerNorm(dst, src, gamma, beta Ptr, rows, cols int, eps float32, kind NormKind) error
	// CondLayerNorm is LayerNorm with one γ and β row per row of src.
	CondLayerNorm(dst, src, gamma, beta Ptr, rows, cols int, eps float32, kind NormKind) error
	// Gather sets dst[i, :] = scale·table[ids[i], :] for i < n, with table
	// (vocab, dim) and ids n int32s on the device; an id outside [0, vocab)
	// gives zeros. dst must not overlap table.
	Gather(dst, table, ids Ptr, n, vocab, dim int, scale float32) error
	// RMGate is R2Gen's gated memory update (Chen et al. 2020, Eqs. 9–10):
	// dst = σ(gw_i + gu_i) ⊙ tanh(next) + σ(gw_f + gu_f) ⊙ mem, with next,
	// mem, dst (batch·slots, d), gw (batch, 2d) broadcast over each batch
	// element's slots, gu (batch·slots, 2d).
	RMGate(dst, next, mem, gw, gu Ptr, batch, slots, d int) error
	// AppendHeads writes the heads of b·t rows of src (leading dimension
	// ld, head h at columns colOff + h·dk …) into the cache dst (b, h,
	// capacity, dk) at positions pos … pos+t−1.
	AppendHeads(dst, src Ptr, b, t, h, dk, ld, colOff, capacity, pos int) error

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
