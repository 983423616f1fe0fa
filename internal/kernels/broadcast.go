package kernels

import "fmt"

// Broadcast describes a NumPy-style broadcast of two shapes a and b to Shape.
// AStr and BStr are the element strides of a and b along each output
// dimension, 0 where that operand is broadcast.
type Broadcast struct {
	Shape      []int
	AStr, BStr []int
}

// NewBroadcast aligns a and b at their trailing dimensions; sizes must be
// equal or 1.
func NewBroadcast(a, b []int) (Broadcast, error) { return NewBroadcastIn(nil, a, b) }

// NewBroadcastIn is NewBroadcast with the result's slices in buf when its
// capacity holds them (3·max(len(a), len(b)) ints), so that a caller with a
// buffer on its stack allocates nothing.
func NewBroadcastIn(buf []int, a, b []int) (Broadcast, error) {
	n := max(len(a), len(b))
	if cap(buf) < 3*n {
		buf = make([]int, 3*n)
	}
	buf = buf[:3*n]
	clear(buf)
	bc := Broadcast{Shape: buf[:n:n], AStr: buf[n : 2*n : 2*n], BStr: buf[2*n:]}
	sa, sb := 1, 1
	for i := n - 1; i >= 0; i-- {
		da, db := 1, 1
		if j := i - (n - len(a)); j >= 0 {
			da = a[j]
		}
		if j := i - (n - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db:
			bc.Shape[i] = da
		case da == 1:
			bc.Shape[i] = db
		case db == 1:
			bc.Shape[i] = da
		default:
			return Broadcast{}, fmt.Errorf("shapes %v and %v do not broadcast", a, b)
		}
		if da != 1 || bc.Shape[i] == 1 {
			bc.AStr[i] = sa
		}
		if db != 1 || bc.Shape[i] == 1 {
			bc.BStr[i] = sb
		}
		sa *= da
		sb *= db
	}
	return bc, nil
}

// Clone returns a copy of bc with slices of its own.
func (bc Broadcast) Clone() Broadcast {
	buf := make([]int, 3*len(bc.Shape))
	n := len(bc.Shape)
	copy(buf, bc.Shape)
	copy(buf[n:], bc.AStr)
	copy(buf[2*n:], bc.BStr)
	return Broadcast{Shape: buf[:n:n], AStr: buf[n : 2*n : 2*n], BStr: buf[2*n:]}
}

// Each calls f for every run of the innermost output dimension: the run
// starts at output offset o and operand offsets ia, ib, has n elements, and
// steps the operands by sa and sb (0 or 1).
func (bc *Broadcast) Each(f func(o, ia, ib, n, sa, sb int)) {
	nd := len(bc.Shape)
	if nd == 0 {
		f(0, 0, 0, 1, 0, 0)
		return
	}
	total := 1
	for _, s := range bc.Shape {
		total *= s
	}
	if total == 0 {
		return
	}
	last := bc.Shape[nd-1]
	sa, sb := bc.AStr[nd-1], bc.BStr[nd-1]
	idx := make([]int, nd-1)
	ia, ib := 0, 0
	for o := 0; o < total; o += last {
		f(o, ia, ib, last, sa, sb)
		for d := nd - 2; d >= 0; d-- {
			idx[d]++
			ia += bc.AStr[d]
			ib += bc.BStr[d]
			if idx[d] < bc.Shape[d] {
				break
			}
			ia -= bc.AStr[d] * idx[d]
			ib -= bc.BStr[d] * idx[d]
			idx[d] = 0
		}
	}
}

// Permute writes into dst the array src of the given shape with its axes
// reordered by perm: dst has shape[perm[0]], shape[perm[1]], ….
func Permute[T Float](dst, src []T, shape, perm []int) {
	nd := len(shape)
	if nd == 0 {
		copy(dst, src)
		return
	}
	srcStr := make([]int, nd)
	s := 1
	for i := nd - 1; i >= 0; i-- {
		srcStr[i] = s
		s *= shape[i]
	}
	oshape := make([]int, nd)
	ostr := make([]int, nd) // src stride for each output dim
	for i, p := range perm {
		oshape[i] = shape[p]
		ostr[i] = srcStr[p]
	}
	total := s
	if total == 0 {
		return
	}
	last := oshape[nd-1]
	ls := ostr[nd-1]
	idx := make([]int, nd-1)
	off := 0
	for o := 0; o < total; o += last {
		row := dst[o : o+last]
		if ls == 1 {
			copy(row, src[off:off+last])
		} else {
			j := off
			for i := range row {
				row[i] = src[j]
				j += ls
			}
		}
		for d := nd - 2; d >= 0; d-- {
			idx[d]++
			off += ostr[d]
			if idx[d] < oshape[d] {
				break
			}
			off -= ostr[d] * idx[d]
			idx[d] = 0
		}
	}
}
