package radgen

import (
	"math/bits"
	"unsafe"

	"gorgonia.org/tensor"
)

// Buffers keeps the memory of a training step for the next one. A
// recording graph made with ReuseBuffers takes the float32 CPU results of
// its ops, and their gradients, from b; Recycle, once the step is done
// with, gives all of it back, and the next graph of the same shapes
// allocates nothing for them: no fresh pages for the kernel to zero, no
// garbage for the collector. Only what a graph allocates for its results
// comes from b: parameters, their moments and a backward pass's
// temporaries do not.
//
// A Buffers belongs to one graph at a time, and its graphs to one
// goroutine, as a Trainer's steps are.
type Buffers struct {
	free  [128][][]float32 // by size class (bufClass)
	taken [][]float32      // handed out since the last Recycle
	kept  int              // floats held in free
}

// NewBuffers returns an empty pool; it grows during the first step.
func NewBuffers() *Buffers { return &Buffers{} }

// ReuseBuffers makes a recording graph take its results and their
// gradients from b (see Buffers).
func ReuseBuffers(b *Buffers) GraphOption {
	return func(g *Graph) { g.bufs = b }
}

// Recycle gives back every buffer b handed out since the last Recycle.
// The tensors made from them must not be used after it: the results of
// the graphs that took them, the gradients of those results, and a
// parameter's gradient where the backward pass handed it a result's
// gradient buffer (a parameter used once, say) — so a training step calls
// it after its optimiser step and ZeroGrad, as memtrans's Trainer does.
func (b *Buffers) Recycle() {
	for _, buf := range b.taken {
		c := bufClass(cap(buf))
		b.free[c] = append(b.free[c], buf[:cap(buf)])
		b.kept += cap(buf)
	}
	clear(b.taken)
	b.taken = b.taken[:0]
}

// bufClass returns the class of a buffer of n floats: above 4, the
// classes split each octave (2^e, 2^(e+1)] in four, so that a buffer is at
// most a quarter larger than what it serves.
func bufClass(n int) int {
	if n <= 4 {
		return 0
	}
	e := bits.Len(uint(n-1)) - 1 // 2^e < n ≤ 2^(e+1), e ≥ 2
	q := (n - 1 - 1<<e) >> (e - 2)
	return 1 + 4*(e-2) + q
}

// bufClassCap returns the capacity of buffers of class c: the largest n of
// the class.
func bufClassCap(c int) int {
	if c == 0 {
		return 4
	}
	e, q := (c-1)/4+2, (c-1)%4
	return 1<<e + (q+1)<<(e-2)
}

// floats returns n floats, zeros if zero is set, from a buffer of n's
// class if one is free, or a new one.
func (b *Buffers) floats(n int, zero bool) []float32 {
	c := bufClass(n)
	if c >= len(b.free) {
		return make([]float32, n) // beyond every class: not kept
	}
	var buf []float32
	if l := len(b.free[c]); l > 0 {
		buf = b.free[c][l-1][:n]
		b.free[c][l-1] = nil
		b.free[c] = b.free[c][:l-1]
		b.kept -= cap(buf)
		if zero {
			clear(buf)
		}
	} else {
		buf = make([]float32, n, bufClassCap(c))
	}
	b.taken = append(b.taken, buf)
	return buf
}

// tensor returns a float32 CPU tensor of shape from b, whose gradient will
// come from b too.
func (b *Buffers) tensor(shape []int, zero bool) *Tensor {
	t := fromSlice(b.floats(checkShape(shape), zero), tensor.Float32, shape)
	t.bufs = b
	return t
}

// owns reports whether data lies in a buffer b handed out (for tests).
func (b *Buffers) owns(data []float32) bool {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	for _, buf := range b.taken {
		q := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
		if p >= q && p < q+uintptr(cap(buf))*4 {
			return true
		}
	}
	return false
}
