package radgen

import (
	"fmt"
	"slices"

	"github.com/radgen/radgen/internal/accel"
)

// Reshape returns x viewed with a new shape of the same size. One dimension
// may be −1 and is inferred. The result shares x's storage.
func (g *Graph) Reshape(x *Tensor, shape ...int) *Tensor {
	var buf [8]int // on the stack for ranks up to 8: the result copies it
	shape = append(buf[:0], shape...)
	infer, n := -1, 1
	for i, s := range shape {
		if s == -1 {
			if infer >= 0 {
				panic("radgen: Reshape with two −1 dimensions")
			}
			infer = i
			continue
		}
		n *= s
	}
	if infer >= 0 {
		if n == 0 || x.Len()%n != 0 {
			panic(fmt.Sprintf("radgen: cannot reshape %v to %v", x.shape, slices.Clone(shape)))
		}
		shape[infer] = x.Len() / n
		n *= shape[infer]
	}
	if n != x.Len() {
		panic(fmt.Sprintf("radgen: cannot reshape %v to %v", x.shape, slices.Clone(shape)))
	}
	var out *Tensor
	if x.device != CPU {
		out = devView(x, shape)
	} else {
		out = g.view(x, shape)
		if x.carry != nil && len(shape) > 0 && shape[len(shape)-1] == x.Dim(-1) {
			out.carry, out.carryGen = x.carry, x.carryGen // the same rows
		}
	}
	if g.needs(x) {
		g.push(out, func() {
			if out.grad != nil {
				give(x, reshapeGrad(out.grad, x.shape)) // out keeps no gradient after this pass
			}
		})
	}
	return out
}

func reshapeGrad(t *Tensor, shape []int) *Tensor {
	if t.device != CPU {
		return devView(t, shape)
	}
	if t.Is64() {
		return FromFloat64(t.Data64(), shape...)
	}
	return FromFloat32(t.Data(), shape...)
}

// Permute returns x with its axes reordered: dimension i of the result is
// dimension perm[i] of x. The result is contiguous: a new tensor, or, when
// the permutation moves only axes of size 1 (so that the values keep their
// order), a view of x's storage as Reshape returns.
func (g *Graph) Permute(x *Tensor, perm ...int) *Tensor {
	if len(perm) != x.Rank() {
		panic(fmt.Sprintf("radgen: Permute %v of %v", slices.Clone(perm), x.shape))
	}
	// On the stack for ranks up to 8.
	var seenBuf [8]bool
	var oshapeBuf, invBuf [8]int
	seen := append(seenBuf[:0], make([]bool, len(perm))...)
	oshape := append(oshapeBuf[:0], make([]int, len(perm))...)
	inv := append(invBuf[:0], make([]int, len(perm))...)
	for i, p := range perm {
		if p < 0 || p >= len(perm) || seen[p] {
			panic(fmt.Sprintf("radgen: Permute %v is not a permutation", slices.Clone(perm)))
		}
		seen[p] = true
		oshape[i] = x.shape[p]
		inv[p] = i
	}
	if keepsOrder(x.shape, perm) {
		return g.Reshape(x, oshape...)
	}
	p := primsOf("Permute", x)
	out := g.empty(x, oshape)
	p.permute(out.at(0), x.at(0), permutation(x.shape, perm))
	keep(x, out)
	if g.needs(x) {
		back := permutation(oshape, inv) // the backward pass outlives the buffers
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			dx := g.empty(x, x.shape)
			p.permute(dx.at(0), out.grad.at(0), back)
			keep(out.grad, dx)
			give(x, dx)
		})
	}
	return out
}

// keepsOrder reports whether permuting the axes of shape by perm leaves the
// values in the same order: the axes of size greater than 1 stay in order.
func keepsOrder(shape, perm []int) bool {
	last := -1
	for _, p := range perm {
		if shape[p] == 1 {
			continue
		}
		if p < last {
			return false
		}
		last = p
	}
	return true
}

// Transpose swaps dimensions i and j (negative counts from the end).
func (g *Graph) Transpose(x *Tensor, i, j int) *Tensor {
	r := x.Rank()
	if i < 0 {
		i += r
	}
	if j < 0 {
		j += r
	}
	perm := make([]int, r)
	for k := range perm {
		perm[k] = k
	}
	perm[i], perm[j] = perm[j], perm[i]
	return g.Permute(x, perm...)
}

// Concat joins tensors along axis; all other dimensions must agree.
func (g *Graph) Concat(axis int, xs ...*Tensor) *Tensor {
	if len(xs) == 0 {
		panic("radgen: Concat of nothing")
	}
	p := primsOf("Concat", xs...)
	r := xs[0].Rank()
	if axis < 0 {
		axis += r
	}
	var buf [8]int // on the stack for ranks up to 8
	oshape := append(buf[:0], xs[0].shape...)
	oshape[axis] = 0
	for _, x := range xs {
		if x.Rank() != r {
			panic(fmt.Sprintf("radgen: Concat of %v and %v", xs[0].shape, x.shape))
		}
		for d := range r {
			if d != axis && x.shape[d] != xs[0].shape[d] {
				panic(fmt.Sprintf("radgen: Concat along %d of %v and %v", axis, xs[0].shape, x.shape))
			}
		}
		oshape[axis] += x.shape[axis]
	}
	outer := numel(oshape[:axis])
	inner := numel(oshape[axis+1:])
	out := g.empty(xs[0], oshape)
	orow := oshape[axis] * inner // each input is a block of columns of out, as (outer, orow)
	off := 0
	for _, x := range xs {
		w := x.shape[axis] * inner
		p.copyStrided(out.at(off), orow, x.at(0), w, outer, w, false)
		off += w
	}
	keep(out)
	keep(xs...)
	if !g.record {
		carryConcat(out, axis, xs)
	}
	if g.needs(xs...) {
		xs := slices.Clone(xs) // the backward pass outlives the caller's slice
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			off := 0
			for _, x := range xs {
				w := x.shape[axis] * inner
				if x.requiresGrad {
					p.copyStrided(gradOf(x).at(0), w, out.grad.at(off), orow, outer, w, true)
					keep(x.grad)
				}
				off += w
			}
			keep(out.grad)
		})
	}
	return out
}

// Slice returns x[..., start:end, ...] along axis, as a new tensor.
func (g *Graph) Slice(x *Tensor, axis, start, end int) *Tensor {
	p := primsOf("Slice", x)
	if axis < 0 {
		axis += x.Rank()
	}
	if start < 0 || end > x.shape[axis] || start > end {
		panic(fmt.Sprintf("radgen: Slice [%d:%d] of axis %d of %v", start, end, axis, x.shape))
	}
	var buf [8]int // on the stack for ranks up to 8
	oshape := append(buf[:0], x.shape...)
	oshape[axis] = end - start
	outer := numel(x.shape[:axis])
	inner := numel(x.shape[axis+1:])
	xrow := x.shape[axis] * inner // x as (outer, xrow), out a block of its columns
	w := (end - start) * inner
	out := g.empty(x, oshape)
	p.copyStrided(out.at(0), w, x.at(start*inner), xrow, outer, w, false)
	keep(x, out)
	if g.needs(x) {
		g.push(out, func() {
			if out.grad != nil {
				p.copyStrided(gradOf(x).at(start*inner), xrow, out.grad.at(0), w, outer, w, true)
				keep(x.grad, out.grad)
			}
		})
	}
	return out
}

// Split cuts x along axis into pieces of the given sizes.
func (g *Graph) Split(x *Tensor, axis int, sizes ...int) []*Tensor {
	out := make([]*Tensor, len(sizes))
	start := 0
	for i, s := range sizes {
		out[i] = g.Slice(x, axis, start, start+s)
		start += s
	}
	if ax := axis; ax >= 0 && start != x.shape[ax] || ax < 0 && start != x.shape[x.Rank()+ax] {
		panic(fmt.Sprintf("radgen: Split sizes %v do not cover axis %d of %v", sizes, axis, x.shape))
	}
	return out
}

// IndexSelect gathers entries of x along axis: result index i along axis is
// x's index idx[i]. It reorders beams and picks rows.
func (g *Graph) IndexSelect(x *Tensor, axis int, idx []int) *Tensor {
	p := primsOf("IndexSelect", x)
	if axis < 0 {
		axis += x.Rank()
	}
	n := x.shape[axis]
	for _, i := range idx {
		if i < 0 || i >= n {
			panic(fmt.Sprintf("radgen: IndexSelect index %d out of range [0,%d)", i, n))
		}
	}
	var buf [8]int // on the stack for ranks up to 8
	oshape := append(buf[:0], x.shape...)
	oshape[axis] = len(idx)
	outer := numel(x.shape[:axis])
	inner := numel(x.shape[axis+1:])
	out := g.empty(x, oshape)
	ids := indexesOf(p, x, idx)
	for o := range outer { // rows of inner values, x's block o as the table
		gather(p, out.at(o*len(idx)*inner), x.at(o*n*inner), ids, n, inner)
	}
	keep(x, out)
	if g.needs(x) {
		// Indexes of its own (the caller may reuse idx), so that idx itself
		// does not escape when nothing is recorded.
		back := indexesOf(p, x, slices.Clone(idx))
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			dx := gradOf(x)
			for o := range outer {
				scatterAdd(p, dx.at(o*n*inner), out.grad.at(o*back.n*inner), back, n, inner)
			}
			keep(dx, out.grad)
		})
	}
	return out
}

// Embedding looks up rows of table [V, D] for ids and returns
// [shape..., D]; len(ids) must equal the product of shape.
func (g *Graph) Embedding(table *Tensor, ids []int, shape ...int) *Tensor {
	if numel(shape) != len(ids) {
		panic(fmt.Sprintf("radgen: Embedding of %d ids as shape %v", len(ids), slices.Clone(shape)))
	}
	rows := g.IndexSelect(table, 0, ids)
	var buf [8]int // on the stack for ranks up to 8
	return g.Reshape(rows, append(append(buf[:0], shape...), table.Dim(1))...)
}

// PickLast returns out[r] = x[r, idx[r]] for x viewed as [rows, V]: the
// log-probability of each target in a language-model loss.
func (g *Graph) PickLast(x *Tensor, idx []int) *Tensor {
	p := primsOf("PickLast", x)
	v := x.Dim(-1)
	rows := x.Len() / v
	if len(idx) != rows {
		panic(fmt.Sprintf("radgen: PickLast of %d indices from %v", len(idx), x.shape))
	}
	flat := make([]int, rows) // element r·V + idx[r] of x as a column
	for r, i := range idx {
		if i < 0 || i >= v {
			panic(fmt.Sprintf("radgen: PickLast index %d out of range [0,%d)", i, v))
		}
		flat[r] = r*v + i
	}
	ids := indexesOf(p, x, flat)
	out := g.empty(x, x.shape[:x.Rank()-1])
	gather(p, out.at(0), x.at(0), ids, rows*v, 1)
	keep(x, out)
	if g.needs(x) {
		g.push(out, func() {
			if out.grad != nil {
				scatterAdd(p, gradOf(x).at(0), out.grad.at(0), ids, rows*v, 1)
				keep(x.grad, out.grad)
			}
		})
	}
	return out
}

// Sum returns the sum of all elements as a scalar (shape []), accumulated
// in float64.
func (g *Graph) Sum(x *Tensor) *Tensor {
	p := primsOf("Sum", x)
	n := x.Len()
	out := g.empty(x, nil)
	if n == 0 {
		p.fill(out.at(0), 0, 1)
	} else {
		p.reduceSum(out.at(0), x.at(0), newLayout([]int{n}, []int{0}, []int{0}), false)
	}
	keep(x, out)
	if g.needs(x) {
		g.push(out, func() { // dX += dY in every element
			if out.grad == nil {
				return
			}
			dx := gradOf(x)
			if n == 0 {
				return
			}
			p.binary(accel.OpAdd, dx.at(0), dx.at(0), out.grad.at(0), newLayout([]int{n}, nil, []int{0}), 0)
			keep(dx, out.grad)
		})
	}
	return out
}
