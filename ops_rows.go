package radgen

import (
	"fmt"
	"slices"
)

// Rows is a matrix that grows by rows, on the device of the rows appended
// to it: what a step-by-step computation keeps of its earlier steps (the
// keys and values of an incremental decoding's positions), written once
// and read at every later step. Its storage has room for more rows than it
// holds: when an append does not fit, the storage grows to at least twice
// its size and room for seven more such appends, the rows held copied once
// then, so that appending a step's rows copies those rows and, now and
// then, the rows before them.
//
// Append, View and Gather are ops of the graph they are given, written
// once for every engine: on a recording graph, the gradient that reaches
// the rows through views and gathers flows back to the tensors that were
// appended. Appending writes into the storage in place, past every row a
// view shows, so a view's values do not change when rows are appended
// after it; Reset lets later appends overwrite them.
//
// The zero Rows is empty and ready to use. A Rows belongs to one goroutine
// at a time.
type Rows struct {
	// t is the storage, (capacity, W), on the device and of the element
	// type of the rows appended; on a recording graph, the version of it
	// that the last append made (each append's write is an op of its own).
	t *Tensor
	n int // rows held
	// scratch holds Gather's results on a graph that records nothing: on
	// the CPU in float32 a slice (growing it costs one allocation, where a
	// tensor's new values cost two), elsewhere a tensor on t's device and
	// of t's element type.
	scratch      []float32
	scratchOther *Tensor
}

// Len returns the number of rows held.
func (r *Rows) Len() int { return r.n }

// Reset empties r. It keeps the storage (and Gather's buffer), so that
// rows appended afterwards up to the number held before allocate nothing;
// they overwrite the values of the views taken before.
func (r *Rows) Reset() {
	r.n = 0
	if r.t != nil && (r.t.requiresGrad || r.t.grad != nil) {
		r.t = r.t.alias() // forget the recorded versions of the graph before
	}
}

// Append writes x's rows, (n, W), after the rows r holds, which must have
// x's width, element type and device; an empty r takes any (rows of
// another kind than its storage's get new storage). On a recording graph
// where x requires gradients, the gradient of the new rows (which later
// views read) is added to x's.
func (r *Rows) Append(g *Graph, x *Tensor) {
	if x.Rank() != 2 || x.IsHalf() {
		panic(fmt.Sprintf("radgen: Rows.Append of %v, want (n, W) of float32 or float64", x))
	}
	rows, w := x.shape[0], x.shape[1]
	if t := r.t; t != nil && (t.device != x.device || t.Is64() != x.Is64() || t.shape[1] != w) {
		if r.n > 0 {
			panic(fmt.Sprintf("radgen: Rows.Append of %v to rows %d wide of %v on %v", x, t.shape[1], t.dtype(), t.device))
		}
		r.t = nil
	}
	p := primsOf("Rows.Append", x)
	held, need := r.n*w, (r.n+rows)*w
	if r.t == nil || r.n+rows > r.t.shape[0] {
		// At least doubled, with room for seven more appends like x.
		capacity := max(r.n+rows+7*rows, 1)
		if r.t != nil {
			capacity = max(capacity, 2*r.t.shape[0])
		}
		old := r.t
		var rowsHeld buffer
		if held > 0 {
			rowsHeld = old.at(0) // before regrow, which may give old new values
		}
		grown := regrow(old, x, capacity, w)
		if held > 0 {
			p.copyStrided(grown.at(0), held, rowsHeld, held, 1, held, false)
			keep(old, grown)
			if g.needs(old) {
				g.push(grown, func() {
					if grown.grad != nil {
						p.axpy(gradOf(old).at(0), grown.grad.at(0), 1, held)
						keep(old.grad, grown.grad)
					}
				})
			}
		}
		r.t = grown
	}
	dst := r.t
	if g.needs(x, dst) {
		// A version of its own, whose gradient is that of the storage
		// after the write: the new rows' part goes to x, the rest to the
		// storage before it, where the new rows' part is zero (the write
		// replaced those values).
		before := dst
		dst = before.alias()
		g.push(dst, func() {
			if dst.grad == nil {
				return
			}
			if x.requiresGrad {
				p.axpy(gradOf(x).at(0), dst.grad.at(held), 1, need-held)
				keep(x.grad)
			}
			p.fill(dst.grad.at(held), 0, need-held)
			keep(dst.grad)
			give(before, dst.grad)
		})
	}
	if need > held {
		p.copyStrided(dst.at(held), need-held, x.at(0), need-held, 1, need-held, false)
	}
	keep(x, dst)
	r.t, r.n = dst, r.n+rows
}

// View returns the rows r holds, (Len(), W), sharing r's storage (on the
// CPU, from the graph's arena where it has one, as Reshape's results). It
// panics if nothing was ever appended to r.
func (r *Rows) View(g *Graph) *Tensor {
	t := r.storage("View")
	w := t.shape[1]
	out := g.prefix(t, r.n, w)
	if g.needs(t) {
		p, n := primsOf("Rows.View", t), r.n*w
		g.push(out, func() {
			if out.grad != nil {
				p.axpy(gradOf(t).at(0), out.grad.at(0), 1, n)
				keep(t.grad, out.grad)
			}
		})
	}
	return out
}

// Gather returns pieces of the rows r holds, each row cut into parts
// pieces of W/parts values: with the rows viewed as (Len()·parts,
// W/parts), row i of the result, (len(idx), W/parts), is row idx[i] of the
// view (IndexSelect of the view, in one op). On a graph that records
// nothing the result lives in a buffer of r, kept across Reset, that the
// next Gather overwrites: it serves until then (a decoding step's reads of
// its cache), and once grown it costs no allocation. On a recording graph
// it is a tensor of its own, whose gradient flows back to the rows.
func (r *Rows) Gather(g *Graph, idx []int, parts int) *Tensor {
	t := r.storage("Gather")
	w := t.shape[1]
	if parts <= 0 || w%parts != 0 {
		panic(fmt.Sprintf("radgen: Rows.Gather of rows %d wide in %d parts", w, parts))
	}
	n, piece := r.n*parts, w/parts
	for _, i := range idx {
		if i < 0 || i >= n {
			panic(fmt.Sprintf("radgen: Rows.Gather index %d out of range [0,%d)", i, n))
		}
	}
	p := primsOf("Rows.Gather", t)
	var out *Tensor
	if g.record {
		out = g.empty(t, []int{len(idx), piece})
	} else {
		// Grown, when it must, to at least twice its size and as many
		// values as the storage has room for: a cache's every row's
		// history is about that.
		size, room := len(idx)*piece, t.shape[0]*w
		if t.device == CPU && !t.Is64() {
			if len(r.scratch) < size {
				r.scratch = make([]float32, max(size, 2*len(r.scratch), room))
			}
			out = g.fromFloat32(r.scratch[:size], len(idx), piece)
		} else {
			if o := r.scratchOther; o == nil || o.device != t.device || o.Is64() != t.Is64() {
				r.scratchOther = regrow(nil, t, max(size, room), 1)
			} else if o.Len() < size {
				r.scratchOther = regrow(nil, t, max(size, 2*o.Len(), room), 1)
			}
			out = g.prefix(r.scratchOther, len(idx), piece)
		}
	}
	gather(p, out.at(0), t.at(0), indexesOf(p, t, idx), n, piece)
	keep(t, out)
	if g.needs(t) {
		back := indexesOf(p, t, slices.Clone(idx)) // the caller may reuse idx
		g.push(out, func() {
			if out.grad != nil {
				scatterAdd(p, gradOf(t).at(0), out.grad.at(0), back, n, piece)
				keep(t.grad, out.grad)
			}
		})
	}
	return out
}

// storage returns r's storage, and panics, naming op, if r has none.
func (r *Rows) storage(op string) *Tensor {
	if r.t == nil {
		panic("radgen: Rows." + op + " of rows never appended to")
	}
	return r.t
}

// prefix returns a (rows, w) tensor over the first rows·w values of t's
// storage: on the CPU, from the graph's arena where it has one.
func (g *Graph) prefix(t *Tensor, rows, w int) *Tensor {
	n := rows * w
	switch {
	case t.device != CPU:
		return onDevice(t.eng(), t.buf, []int{rows, w})
	case t.Is64():
		return FromFloat64(hostValues[float64](t)[:n], rows, w)
	}
	return g.fromFloat32(hostValues[float32](t)[:n], rows, w)
}

// regrow returns storage for rows·w values (uninitialised), shaped (rows,
// w), with x's element type on x's device, outside any arena, to replace
// old (nil for none). Where old is a CPU tensor of that type that no graph
// records (a Rows' own storage, of which views hold the values, never the
// tensor), it is old itself with new values: growing then costs the
// values alone, not a new tensor.
func regrow(old, x *Tensor, rows, w int) *Tensor {
	switch {
	case x.device != CPU:
		return devNew(x, []int{rows, w})
	case old != nil && old.device == CPU && old.dense == nil && !old.requiresGrad && old.grad == nil && len(old.shape) == 2:
		switch old.host.(type) {
		case []float32:
			if !x.Is64() {
				old.host, old.shape[0], old.shape[1] = make([]float32, rows*w), rows, w
				return old
			}
		case []float64:
			if x.Is64() {
				old.host, old.shape[0], old.shape[1] = make([]float64, rows*w), rows, w
				return old
			}
		}
	}
	return like(x, []int{rows, w})
}

// alias returns a tensor of t's shape over t's storage, outside any graph:
// no gradient, nothing recorded.
func (t *Tensor) alias() *Tensor {
	if t.device != CPU {
		return devView(t, t.shape)
	}
	return &Tensor{host: t.host, shape: slices.Clone(t.shape), device: CPU}
}
