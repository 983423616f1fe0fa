package radgen

import (
	"fmt"
	"slices"

	"github.com/radgen/radgen/internal/kernels"
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
	}
	if g.needs(x) {
		g.push(out, func() {
			if out.grad != nil {
				accumulate(x, reshapeGrad(out.grad, x.shape))
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
	if x.device != CPU {
		return devPermute(g, x, slices.Clone(perm), slices.Clone(oshape), slices.Clone(inv))
	}
	out := g.empty(x, oshape)
	if x.Is64() {
		kernels.Permute(out.Data64(), x.Data64(), x.shape, perm)
	} else {
		kernels.Permute(out.Data(), x.Data(), x.shape, perm)
	}
	if g.needs(x) {
		oshape, inv := slices.Clone(oshape), slices.Clone(inv) // the backward pass outlives the buffers
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			back := g.like(x, x.shape)
			if x.Is64() {
				kernels.Permute(back.Data64(), out.grad.Data64(), oshape, inv)
			} else {
				kernels.Permute(back.Data(), out.grad.Data(), oshape, inv)
			}
			accumulate(x, back)
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
	if xs[0].Is64() {
		return concat[float64](g, axis, xs)
	}
	return concat[float32](g, axis, xs)
}

func concat[T Float](g *Graph, axis int, xs []*Tensor) *Tensor {
	r := xs[0].Rank()
	if axis < 0 {
		axis += r
	}
	var buf [8]int // on the stack for ranks up to 8
	oshape := append(buf[:0], xs[0].shape...)
	oshape[axis] = 0
	for _, x := range xs {
		sameDevice("Concat", xs[0], x)
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
	if xs[0].device != CPU {
		return devConcat(g, axis, slices.Clone(xs), slices.Clone(oshape))
	}
	outer := numel(oshape[:axis])
	inner := numel(oshape[axis+1:])
	out := g.empty(xs[0], oshape)
	ov := values[T](out)
	orow := oshape[axis] * inner
	off := 0
	for _, x := range xs {
		xv := values[T](x)
		w := x.shape[axis] * inner
		for o := 0; o < outer; o++ {
			copy(ov[o*orow+off:o*orow+off+w], xv[o*w:(o+1)*w])
		}
		off += w
	}
	if g.needs(xs...) {
		xs := slices.Clone(xs) // the backward pass outlives the caller's slice
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			dy := values[T](out.grad)
			off := 0
			for _, x := range xs {
				w := x.shape[axis] * inner
				if x.requiresGrad {
					dx := values[T](gradOf(x))
					for o := 0; o < outer; o++ {
						src := dy[o*orow+off : o*orow+off+w]
						dst := dx[o*w : (o+1)*w]
						for i, v := range src {
							dst[i] += v
						}
					}
				}
				off += w
			}
		})
	}
	return out
}

// Slice returns x[..., start:end, ...] along axis, as a new tensor.
func (g *Graph) Slice(x *Tensor, axis, start, end int) *Tensor {
	if x.Is64() {
		return slice[float64](g, x, axis, start, end)
	}
	return slice[float32](g, x, axis, start, end)
}

func slice[T Float](g *Graph, x *Tensor, axis, start, end int) *Tensor {
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
	if x.device != CPU {
		return devSlice(g, x, axis, start, end, slices.Clone(oshape))
	}
	xrow := x.shape[axis] * inner
	w := (end - start) * inner
	out := g.empty(x, oshape)
	xv, ov := values[T](x), values[T](out)
	for o := 0; o < outer; o++ {
		copy(ov[o*w:(o+1)*w], xv[o*xrow+start*inner:o*xrow+start*inner+w])
	}
	if g.needs(x) {
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			dx, dy := values[T](gradOf(x)), values[T](out.grad)
			for o := 0; o < outer; o++ {
				dst := dx[o*xrow+start*inner : o*xrow+start*inner+w]
				for i, v := range dy[o*w : (o+1)*w] {
					dst[i] += v
				}
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
	if x.Is64() {
		return indexSelect[float64](g, x, axis, idx)
	}
	return indexSelect[float32](g, x, axis, idx)
}

func indexSelect[T Float](g *Graph, x *Tensor, axis int, idx []int) *Tensor {
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
	if x.device != CPU {
		return devIndexSelect(g, x, axis, append([]int(nil), idx...), slices.Clone(oshape))
	}
	outer := numel(x.shape[:axis])
	inner := numel(x.shape[axis+1:])
	out := g.empty(x, oshape)
	xv, ov := values[T](x), values[T](out)
	for o := 0; o < outer; o++ {
		for j, i := range idx {
			copy(ov[(o*len(idx)+j)*inner:(o*len(idx)+j+1)*inner], xv[(o*n+i)*inner:(o*n+i+1)*inner])
		}
	}
	if g.needs(x) {
		idx := append([]int(nil), idx...) // the caller may reuse its slice
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			dx, dy := values[T](gradOf(x)), values[T](out.grad)
			for o := 0; o < outer; o++ {
				for j, i := range idx {
					dst := dx[(o*n+i)*inner : (o*n+i+1)*inner]
					for k, v := range dy[(o*len(idx)+j)*inner : (o*len(idx)+j+1)*inner] {
						dst[k] += v
					}
				}
			}
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
	if x.device != CPU {
		if len(idx) != x.Len()/x.Dim(-1) {
			panic(fmt.Sprintf("radgen: PickLast of %d indices from %v", len(idx), x.shape))
		}
		return devPickLast(g, x, idx)
	}
	if x.Is64() {
		return pickLast[float64](g, x, idx)
	}
	return pickLast[float32](g, x, idx)
}

func pickLast[T Float](g *Graph, x *Tensor, idx []int) *Tensor {
	v := x.Dim(-1)
	rows := x.Len() / v
	if len(idx) != rows {
		panic(fmt.Sprintf("radgen: PickLast of %d indices from %v", len(idx), x.shape))
	}
	idx = append([]int(nil), idx...)
	out := g.like(x, x.shape[:x.Rank()-1])
	xv, ov := values[T](x), values[T](out)
	for r, i := range idx {
		if i < 0 || i >= v {
			panic(fmt.Sprintf("radgen: PickLast index %d out of range [0,%d)", i, v))
		}
		ov[r] = xv[r*v+i]
	}
	if g.needs(x) {
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			dx, dy := values[T](gradOf(x)), values[T](out.grad)
			for r, i := range idx {
				dx[r*v+i] += dy[r]
			}
		})
	}
	return out
}

// Sum returns the sum of all elements as a scalar (shape []).
func (g *Graph) Sum(x *Tensor) *Tensor {
	if x.device != CPU {
		return devSum(g, x)
	}
	if x.Is64() {
		return sum[float64](g, x)
	}
	return sum[float32](g, x)
}

func sum[T Float](g *Graph, x *Tensor) *Tensor {
	var s float64
	for _, v := range values[T](x) {
		s += float64(v)
	}
	out := g.like(x, nil)
	values[T](out)[0] = T(s)
	if g.needs(x) {
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			d := values[T](out.grad)[0]
			dx := values[T](gradOf(x))
			for i := range dx {
				dx[i] += d
			}
		})
	}
	return out
}
