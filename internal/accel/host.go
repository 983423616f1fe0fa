package accel

import (
	"fmt"
	"math"
	"sync"
)

// hostShift places buffer i's bytes at hostBase + i << hostShift: a buffer
// holds at most 64 GiB, and pointer arithmetic within it is plain addition.
// hostBase puts every address above the 48-bit user address space, so that
// a host pointer held as a Go slice header (gorgonia's tensor.FromMemory)
// can never point into the Go heap.
const (
	hostShift = 36
	hostBase  = 1 << 62
	hostIDs   = 1<<(62-hostShift) - 1
)

// Host is an Engine whose device is the CPU: buffers are Go slices and
// every operation runs at once with radgen's CPU kernels. It is the
// reference implementation of the interface. The zero value is not usable;
// call NewHost.
type Host struct {
	mu   sync.RWMutex
	bufs [][]float32 // by id; nil when freed; id 0 unused so that 0 is no buffer
	free []int
	live int64 // bytes of live buffers (4·len of each), under mu
}

// NewHost returns a host engine.
func NewHost() *Host { return &Host{bufs: make([][]float32, 1)} }

// Name implements Engine.
func (h *Host) Name() string { return "host" }

// AllocPtr implements Engine.
func (h *Host) AllocPtr(size int64) (Ptr, error) {
	if size < 0 || size >= 1<<hostShift {
		return 0, fmt.Errorf("accel: host buffer of %d bytes", size)
	}
	buf := make([]float32, (size+3)/4)
	h.mu.Lock()
	defer h.mu.Unlock()
	var id int
	if n := len(h.free); n > 0 {
		id, h.free = h.free[n-1], h.free[:n-1]
		h.bufs[id] = buf
	} else {
		id = len(h.bufs)
		if id > hostIDs {
			return 0, fmt.Errorf("accel: host engine out of buffer ids")
		}
		h.bufs = append(h.bufs, buf)
	}
	h.live += 4 * int64(len(buf))
	return Ptr(hostBase | uint64(id)<<hostShift), nil
}

// FreePtr implements Engine.
func (h *Host) FreePtr(p Ptr) error {
	id := hostID(p)
	h.mu.Lock()
	defer h.mu.Unlock()
	if uint64(p)&(1<<hostShift-1) != 0 || id <= 0 || id >= len(h.bufs) || h.bufs[id] == nil {
		return fmt.Errorf("accel: free of %#x, not a buffer of this engine", uintptr(p))
	}
	h.live -= 4 * int64(len(h.bufs[id]))
	h.bufs[id] = nil
	h.free = append(h.free, id)
	return nil
}

// hostID returns the buffer id of p, or −1 when p is not a host pointer.
func hostID(p Ptr) int {
	if uint64(p)&hostBase == 0 {
		return -1
	}
	return int((uint64(p) &^ hostBase) >> hostShift)
}

// LiveBytes implements LiveByter: the bytes of the buffers allocated and
// not yet freed.
func (h *Host) LiveBytes() int64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.live
}

// view returns the n floats at p.
func (h *Host) view(p Ptr, n int) []float32 {
	id, off := hostID(p), int(uint64(p)&(1<<hostShift-1))
	h.mu.RLock()
	var buf []float32
	if id > 0 && id < len(h.bufs) {
		buf = h.bufs[id]
	}
	h.mu.RUnlock()
	check(buf != nil && off%4 == 0 && n >= 0 && off/4+n <= len(buf),
		"host pointer %#x (+%d floats) outside its buffer", uintptr(p), n)
	return buf[off/4 : off/4+n]
}

// CopyIn implements Engine.
func (h *Host) CopyIn(dst Ptr, src []float32) error {
	copy(h.view(dst, len(src)), src)
	return nil
}

// CopyInInt32 implements Engine: ids are stored by their bits.
func (h *Host) CopyInInt32(dst Ptr, src []int32) error {
	d := h.view(dst, len(src))
	for i, v := range src {
		d[i] = math.Float32frombits(uint32(v))
	}
	return nil
}

// CopyOut implements Engine.
func (h *Host) CopyOut(dst []float32, src Ptr) error {
	copy(dst, h.view(src, len(dst)))
	return nil
}

// CopyDevice implements Engine.
func (h *Host) CopyDevice(dst, src Ptr, n int64) error {
	check(n%4 == 0, "CopyDevice of %d bytes", n)
	copy(h.view(dst, int(n/4)), h.view(src, int(n/4)))
	return nil
}

// span returns the floats a strided batch of (rows, cols) matrices with
// leading dimension ld covers.
func span(batch, stride, rows, cols, ld int) int {
	if batch == 0 || rows == 0 || cols == 0 {
		return 0
	}
	return (batch-1)*stride + (rows-1)*ld + cols
}

// GemmStrided implements Engine.
func (h *Host) GemmStrided(transA, transB bool, batch, m, n, k int, alpha float32, a Ptr, lda, strideA int, b Ptr, ldb, strideB int, beta float32, c Ptr, ldc, strideC int) error {
	check(batch >= 0 && m >= 0 && n >= 0 && k >= 0, "GemmStrided: sizes %d %d %d %d", batch, m, n, k)
	if batch == 0 || m == 0 || n == 0 {
		return nil
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	CPU[float32]{}.GemmStrided(transA, transB, batch, m, n, k, alpha,
		h.view(a, span(batch, strideA, ar, ac, lda)), lda, strideA,
		h.view(b, span(batch, strideB, br, bc, ldb)), ldb, strideB,
		beta, h.view(c, span(batch, strideC, m, n, ldc)), ldc, strideC)
	return nil
}

// Scale implements Engine.
func (h *Host) Scale(dst, src Ptr, alpha float32, n int) error {
	CPU[float32]{}.Scale(h.view(dst, n), h.view(src, n), alpha)
	return nil
}

// Sigmoid implements Engine.
func (h *Host) Sigmoid(dst, src Ptr, n int) error {
	CPU[float32]{}.Activation(ActSigmoid, h.view(dst, n), h.view(src, n))
	return nil
}

// ReLU implements Engine.
func (h *Host) ReLU(dst, src Ptr, n int) error {
	CPU[float32]{}.Activation(ActReLU, h.view(dst, n), h.view(src, n))
	return nil
}

// Tanh implements Engine.
func (h *Host) Tanh(dst, src Ptr, n int) error {
	CPU[float32]{}.Activation(ActTanh, h.view(dst, n), h.view(src, n))
	return nil
}

// Softmax implements Engine.
func (h *Host) Softmax(dst, src Ptr, rows, cols int) error {
	check(rows >= 0 && cols >= 0, "Softmax: rows=%d cols=%d", rows, cols)
	if rows > 0 && cols > 0 {
		CPU[float32]{}.Softmax(h.view(dst, rows*cols), h.view(src, rows*cols), cols, false)
	}
	return nil
}

// LogSoftmax implements Engine.
func (h *Host) LogSoftmax(dst, src Ptr, rows, cols int) error {
	check(rows >= 0 && cols >= 0, "LogSoftmax: rows=%d cols=%d", rows, cols)
	if rows > 0 && cols > 0 {
		CPU[float32]{}.Softmax(h.view(dst, rows*cols), h.view(src, rows*cols), cols, true)
	}
	return nil
}

// Gather implements Engine.
func (h *Host) Gather(dst, table, ids Ptr, n, vocab, dim int, scale float32) error {
	check(n >= 0 && vocab >= 0 && dim >= 0, "Gather: n=%d vocab=%d dim=%d", n, vocab, dim)
	CPU[float32]{}.Gather(h.view(dst, n*dim), h.view(table, vocab*dim), idsOf(h.view(ids, n)), vocab, dim, scale)
	return nil
}

// Sync implements Engine: host work is done when its call returns.
func (h *Host) Sync() error { return nil }

// Close implements Engine: it releases every buffer.
func (h *Host) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bufs, h.free, h.live = make([][]float32, 1), nil, 0
	return nil
}

var _ Engine = (*Host)(nil)
