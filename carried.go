package radgen

import (
	"fmt"

	"github.com/radgen/radgen/internal/accel"
)

// Carried is a value that a step-by-step computation carries from each
// step to the next, with its entries along the first dimension reordered
// between steps: a decoding's recurrent memory, whose rows a beam search
// keeps, drops and repeats. Set stores a step's new value, Reorder
// reorders it, and Value returns it, reordered, for the next step to read.
//
// On the CPU, in float32 and on a graph that records nothing, the engine
// computes ahead the products that the next step will apply to the value:
// a step's products of the rows of Value — by a Linear, directly or
// through elementwise activations and concatenations with other rows
// along a leading dimension (the keys [M; y]·W_k of an attention over the
// memory and a new input) — are learned, and as soon as the next value is
// set, the same products of its rows join the graph's deferred products,
// to be computed beside the rest of the step (in the middle of its
// stream of weights, after what the step reads first). When the next
// step issues them on the reordered value, it
// finds them done and reorders their rows: a product computes each row on
// its own, so the values are those of the product issued then, bit for
// bit. A step that stops issuing a product stops its computation ahead
// from the next value on. Everywhere else Carried stores and reorders
// values, and computes nothing ahead.
//
// The zero Carried holds nothing. A Carried belongs to one goroutine and
// one graph at a time.
type Carried struct {
	value *Tensor
	// order: row i (along the first dimension) of Value is row order[i]
	// of value; identity while false.
	order, spare []int // spare: Reorder's next order, reused
	reorder      bool
	gen          uint32 // counts Sets: provenance of an earlier value is stale
	uses         []*carriedUse
	rows         []*carriedRows // provenance records of the current value, reused
	rowsUsed     int
}

// carriedUse is a product that a step applied to rows of a Carried's value:
// x·Wᵀ + bias with x the rows after the activations act.
type carriedUse struct {
	w, bias *Tensor
	act     [maxCarriedActs]accel.Activation
	nact    int
	seen    bool // issued since the last Set
	// ahead is the product of the current value's rows, computed ahead,
	// for generation gen and the weight's version version; nil for none.
	ahead   *Tensor
	gen     uint32
	version uint64
}

// maxCarriedActs is the most activations a product's rows may go through
// from a Carried's value for the engine to compute it ahead.
const maxCarriedActs = 2

// carriedRows says which rows of a tensor are rows of a Carried's value
// (after acts): row i, the tensor viewed as (rows, last dimension), is row
// src[i] of the value so viewed, or no row of it for src[i] < 0.
type carriedRows struct {
	c    *Carried
	gen  uint32
	act  [maxCarriedActs]accel.Activation
	nact int
	src  []int32
}

// Set stores v as the value a step carries to the next, in place of the
// one before, with its rows in order; g is the step's graph.
func (c *Carried) Set(g *Graph, v *Tensor) {
	c.value, c.reorder = v, false
	c.gen++
	c.rowsUsed = 0
	kept := c.uses[:0]
	for _, u := range c.uses {
		u.ahead = nil
		if u.seen {
			u.seen = false
			kept = append(kept, u)
		}
	}
	clear(c.uses[len(kept):])
	c.uses = kept
	if v == nil || !g.aheadable(v) {
		return
	}
	for _, u := range c.uses {
		if !g.deferrable(v, u.w) || v.Dim(-1) != u.w.Dim(1) {
			continue
		}
		x := v
		for _, act := range u.act[:u.nact] {
			x = g.activation("Carried", x, act)
		}
		u.ahead = g.deferLinear(x, u.w, u.bias)
		u.ahead.pend.b.ops[u.ahead.pend.op].late = true
		u.gen, u.version = c.gen, u.w.version.Load()
	}
}

// aheadable reports whether the engine computes products of v ahead.
func (g *Graph) aheadable(v *Tensor) bool {
	return !g.record && v.device == CPU && !v.Is64() && !v.IsHalf() && v.Rank() >= 2
}

// Reorder reorders the value's entries along its first dimension: entry i
// becomes entry src[i] of the value before. It does nothing if there is
// no value, and panics if an index is out of range.
func (c *Carried) Reorder(src []int) {
	if c.value == nil {
		return
	}
	n := c.value.Dim(0)
	if c.reorder {
		n = len(c.order)
	}
	next := c.spare[:0]
	for _, s := range src {
		if s < 0 || s >= n {
			panic(fmt.Sprintf("radgen: Carried reorder index %d of %d entries", s, n))
		}
		if c.reorder {
			s = c.order[s]
		}
		next = append(next, s)
	}
	c.order, c.spare, c.reorder = next, c.order, true
}

// Value returns the value, reordered, or nil if there is none.
func (c *Carried) Value(g *Graph) *Tensor {
	v := c.value
	if v == nil {
		return nil
	}
	var out *Tensor
	if c.reorder {
		out = g.IndexSelect(v, 0, c.order)
	} else {
		out = g.Reshape(v, v.shape...)
	}
	if !g.aheadable(v) || out.device != CPU {
		return out
	}
	per := v.Len() / max(v.Dim(0)*v.Dim(-1), 1) // rows per entry of the first dimension
	r := c.newRows(out.Len() / max(out.Dim(-1), 1))
	for i := range out.Dim(0) {
		e := i
		if c.reorder {
			e = c.order[i]
		}
		for j := range per {
			r.src[i*per+j] = int32(e*per + j)
		}
	}
	out.carry, out.carryGen = r, c.gen
	return out
}

// newRows returns a provenance record of the current value for n rows.
func (c *Carried) newRows(n int) *carriedRows {
	if c.rowsUsed == len(c.rows) {
		c.rows = append(c.rows, &carriedRows{})
	}
	r := c.rows[c.rowsUsed]
	c.rowsUsed++
	r.c, r.gen, r.nact = c, c.gen, 0
	if cap(r.src) < n {
		r.src = make([]int32, n, 2*n)
	}
	r.src = r.src[:n]
	return r
}

// carried returns t's provenance from a Carried's current value, nil for
// none.
func (t *Tensor) carried() *carriedRows {
	r := t.carry
	if r == nil || r.gen != t.carryGen || r.c.gen != r.gen {
		return nil
	}
	return r
}

// carryAct gives out, act(x) elementwise, x's provenance through act.
func carryAct(out, x *Tensor, act accel.Activation) {
	r := x.carried()
	if r == nil || r.nact == maxCarriedActs {
		return
	}
	o := r.c.newRows(len(r.src))
	copy(o.src, r.src)
	o.act, o.nact = r.act, r.nact
	o.act[o.nact] = act
	o.nact++
	out.carry, out.carryGen = o, o.gen
}

// carryConcat gives out, the concatenation of xs along axis (not the
// last), the provenance of the rows of xs that are rows of a Carried's
// value through the same activations.
func carryConcat(out *Tensor, axis int, xs []*Tensor) {
	var first *carriedRows
	for _, x := range xs {
		if r := x.carried(); r != nil {
			if first != nil && (r.c != first.c || r.nact != first.nact || r.act != first.act) {
				return
			}
			first = r
		}
	}
	if first == nil || axis >= out.Rank()-1 {
		return
	}
	o := first.c.newRows(out.Len() / max(out.Dim(-1), 1))
	o.act, o.nact = first.act, first.nact
	outer := numel(out.shape[:axis])
	inner := numel(out.shape[axis+1 : out.Rank()-1]) // rows per index along axis
	i := 0
	for b := range outer {
		for _, x := range xs {
			n := x.shape[axis] * inner
			r := x.carried()
			for j := range n {
				if r != nil {
					o.src[i] = r.src[b*n+j]
				} else {
					o.src[i] = -1
				}
				i++
			}
		}
	}
	out.carry, out.carryGen = o, o.gen
}

// linearAhead returns x·Wᵀ + bias for x whose rows are rows r of a
// Carried's value: learned as a use of the value, and computed from the
// product computed ahead where there is one: its rows copied, and the
// rows of x that are no rows of the value (which must lie at a fixed
// stride) a deferred product of their own. It returns nil where the
// product must be computed as usual.
func (g *Graph) linearAhead(r *carriedRows, x, w, bias *Tensor) *Tensor {
	c := r.c
	var u *carriedUse
	for _, v := range c.uses {
		if v.w == w && v.bias == bias && v.nact == r.nact && v.act == r.act {
			u = v
			break
		}
	}
	if u == nil {
		u = &carriedUse{w: w, bias: bias, act: r.act, nact: r.nact}
		c.uses = append(c.uses, u)
	}
	u.seen = true
	a := u.ahead
	if a == nil || u.gen != r.gen || u.version != w.version.Load() {
		return nil
	}
	// The rows that are not the value's: none, or at a fixed stride.
	first, stride, fresh := -1, 0, 0
	for i, s := range r.src {
		if s >= 0 {
			continue
		}
		switch {
		case fresh == 0:
			first = i
		case fresh == 1:
			stride = i - first
		case i != first+fresh*stride:
			return nil
		}
		fresh++
	}
	a.ready()
	n := w.Dim(0)
	var buf [8]int // on the stack for ranks up to 8
	out := g.empty(x, append(append(buf[:0], x.shape[:x.Rank()-1]...), n))
	av, ov := hostValues[float32](a), hostValues[float32](out)
	for i, s := range r.src {
		if s >= 0 {
			copy(ov[i*n:(i+1)*n], av[int(s)*n:(int(s)+1)*n])
		}
	}
	if fresh == 0 {
		return out
	}
	if bias != nil {
		bias.ready()
	}
	return g.issue(product{out: out, x: x, w: w, bias: bias, dep: -1, read: true,
		rows: stridedRows{first: first, stride: max(stride, 1), m: fresh}})
}
