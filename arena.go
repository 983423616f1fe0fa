package radgen

import (
	"fmt"
	"slices"
)

// Arena recycles the memory of a no-grad graph's results across the steps
// of an incremental computation, such as a decoding that runs the same ops
// on one more position at every step: once the arena has grown to a step's
// size, a step's ops allocate nothing.
//
// An arena has two halves and a graph that uses it (Graph.SetArena) takes
// the float32 results of its CPU ops, and their views, from the current
// half. Next starts a step: it switches halves and clears the one it
// switches to. So the results of a step stay valid during the next step,
// and are overwritten by the step after it: what a caller keeps longer it
// must copy into its own storage (as mesh.KVCache does) or compute with a
// graph that uses no arena (or keep in an arena of their own, which Reset
// clears when the next such computation starts). Results made before
// SetArena do not belong to the arena.
//
// An Arena belongs to one goroutine at a time, as its graph does.
type Arena struct {
	halves [2]arenaHalf
	cur    int
	graph  *Graph // the graph that uses it, whose deferred products Next computes first
	limit  int    // the most float32 values a half holds (SetLimit); 0 for no limit
}

// arenaHalf is one half of an Arena: slabs for values, tensors, their
// shapes and the slice headers their storage points to.
type arenaHalf struct {
	floats  slab[float32]
	tensors slab[Tensor]
	shapes  slab[int]
	headers slab[[]float32]
	// full is set once a result did not fit under the arena's limit: the
	// half's results until its next reset come from the heap.
	full bool
}

// NewArena returns an empty arena; it grows during the first steps.
func NewArena() *Arena { return &Arena{} }

// Next starts a step: results made from now on overwrite those of the step
// before the previous one.
func (a *Arena) Next() {
	if a.graph != nil {
		a.graph.sync() // its deferred products may write into the half Next clears
	}
	a.cur ^= 1
	a.halves[a.cur].reset(a.limit)
}

// Reset starts over: results made from now on overwrite every result made
// before, in either half. A caller whose results live longer than a step
// (the start of a decoding: the encoder's results, which its steps read
// until it ends) keeps them in an arena of their own, which it resets
// when the next such computation starts, instead of calling Next.
func (a *Arena) Reset() {
	if a.graph != nil {
		a.graph.sync() // its deferred products may write into the memory Reset hands out again
	}
	for i := range a.halves {
		a.halves[i].reset(a.limit)
	}
	a.cur = 0
}

// SetLimit bounds the memory the arena keeps to about bytes for each of
// its halves: once the results made since the last Next or Reset would
// take more, the later ones, up to the next Next or Reset, are made as on
// a graph without an arena, and the collector frees each of them once it
// is dropped. The arena's buffers then never grow past the limit. An
// arena whose computations are now and then much larger than usual (the
// start of a decoding of a large batch, with its encoder's intermediate
// results) so keeps the memory of the usual ones only, and holds no more
// than that while a larger one runs: every result of a half is live as
// long as any one of them is. Zero, the default, sets no limit.
func (a *Arena) SetLimit(bytes int) {
	if bytes < 0 {
		panic(fmt.Sprintf("radgen: arena limit of %d bytes", bytes))
	}
	a.limit = bytes / 4
}

// Bytes returns the size of the buffers the arena keeps for its results'
// values, in bytes: what it has grown to, or will grow to at its next
// Reset or Next to hold what its results took since the last one.
func (a *Arena) Bytes() int {
	n := 0
	for i := range a.halves {
		f := &a.halves[i].floats
		n += max(len(f.buf), f.need)
	}
	return 4 * n
}

// zeros returns a float32 CPU tensor of shape, filled with zeros, from the
// current half; with dirty set, its values are whatever the arena held
// (for an op that writes every one).
func (a *Arena) zeros(shape []int, dirty bool) *Tensor {
	n := checkShape(shape)
	h := &a.halves[a.cur]
	if a.limit > 0 && !h.full && h.floats.need+n > a.limit {
		h.full = true
	}
	if h.full {
		return Zeros(shape...)
	}
	return a.view(h.floats.take(n, !dirty), shape)
}

// view returns a CPU tensor of shape over data (len(data) values), from the
// current half (from the heap once the half is full: an arena tensor
// would keep data alive as long as the half's other results).
func (a *Arena) view(data []float32, shape []int) *Tensor {
	h := &a.halves[a.cur]
	if h.full {
		return FromFloat32(data, shape...)
	}
	t := &h.tensors.take(1, true)[0]
	hdr := &h.headers.take(1, true)[0]
	*hdr = data
	t.host = hdr
	t.shape = h.shapes.take(len(shape), false)
	copy(t.shape, shape)
	t.device = CPU
	return t
}

// reset hands h's memory out again from its start, grown to hold all that
// was taken from it since the last reset, its values to at most limit (0:
// no limit).
func (h *arenaHalf) reset(limit int) {
	h.full = false
	h.floats.reset(limit)
	h.tensors.reset(0)
	h.shapes.reset(0)
	h.headers.reset(0)
}

// slab hands out consecutive pieces of one buffer. A piece that does not
// fit comes from the heap, and the next reset grows the buffer to hold all
// the pieces asked for since the last one.
type slab[T any] struct {
	buf        []T
	used, need int
}

// take returns n values of the slab: zeros if zero is set, whatever the
// slab held otherwise.
func (s *slab[T]) take(n int, zero bool) []T {
	s.need += n
	if s.used+n > len(s.buf) {
		return make([]T, n)
	}
	v := s.buf[s.used : s.used+n : s.used+n]
	s.used += n
	if zero {
		clear(v)
	}
	return v
}

func (s *slab[T]) reset(most int) {
	if s.need > len(s.buf) {
		n := s.need + s.need/4
		if most > 0 {
			n = max(min(n, most), s.need)
		}
		s.buf = make([]T, n)
	}
	s.used, s.need = 0, 0
}

// SetArena makes the graph take the float32 CPU results of its ops from a
// (see Arena); nil stops it. Only a graph that records nothing uses an
// arena: on a recording graph SetArena panics.
func (g *Graph) SetArena(a *Arena) {
	if g.record && a != nil {
		panic("radgen: SetArena on a graph that records gradients")
	}
	g.sync() // its deferred products may write into the arena
	if g.arena != nil {
		g.arena.graph = nil
	}
	if a != nil {
		a.graph = g
	}
	g.arena = a
}

// like returns a zero tensor with t's dtype and the given shape, from the
// graph's arena or step memory where it has one.
func (g *Graph) like(t *Tensor, shape []int) *Tensor {
	switch {
	case t.device != CPU:
		return devFull(t, shape, 0)
	case g.arena != nil && !t.Is64():
		return g.arena.zeros(shape, false)
	case g.ws != nil && !t.Is64():
		return g.ws.zeros(shape, false)
	}
	return like(t, shape)
}

// empty is like for an op that writes every value of its result: from the
// graph's arena or step memory, the values are not cleared first.
func (g *Graph) empty(t *Tensor, shape []int) *Tensor {
	switch {
	case t.device != CPU:
		return devNew(t, shape)
	case g.arena != nil && !t.Is64():
		return g.arena.zeros(shape, true)
	case g.ws != nil && !t.Is64():
		return g.ws.zeros(shape, true)
	}
	return like(t, shape)
}

// view returns a CPU tensor of shape sharing x's values, from the graph's
// arena or step memory where it has one.
func (g *Graph) view(x *Tensor, shape []int) *Tensor {
	var v *Tensor
	if x.Is64() {
		v = FromFloat64(hostValues[float64](x), shape...)
	} else {
		v = g.fromFloat32(hostValues[float32](x), shape...)
	}
	if m := x.pend; m.live() && m.x == nil {
		m.b.ops[m.op].read = true // no epilogue may change the values the view shares
	}
	v.pend = x.pend // a view of pending values is pending
	return v
}

// fromFloat32 wraps data (not copied) as a CPU tensor of the given shape,
// as the package function FromFloat32 does, from the graph's arena or step
// memory where it has one: a decoding step's view of a buffer it owns,
// without an allocation.
func (g *Graph) fromFloat32(data []float32, shape ...int) *Tensor {
	if n := checkShape(shape); len(data) != n {
		panic(fmt.Sprintf("radgen: %d values for shape %v", len(data), slices.Clone(shape)))
	}
	switch {
	case g.arena != nil:
		return g.arena.view(data, shape)
	case g.ws != nil:
		return g.ws.view(data, shape)
	}
	return FromFloat32(data, shape...)
}
