package radgen

import (
	"slices"
	"testing"
)

// TestNewLayoutMerges: dimensions of size 1 go and neighbours that both
// operands run through contiguously merge, so that a bias added to
// (B, T, D) runs as (B·T, D) rows, and a scalar is one element.
func TestNewLayoutMerges(t *testing.T) {
	for _, c := range []struct {
		shape, sa, sb      []int
		dims, wantA, wantB []int
	}{
		{[]int{2, 3, 4}, nil, nil, []int{24}, []int{1}, []int{1}},
		{[]int{2, 3, 4}, nil, []int{0, 0, 1}, []int{6, 4}, []int{4, 1}, []int{0, 1}},
		{[]int{2, 1, 4}, nil, []int{4, 0, 1}, []int{8}, []int{1}, []int{1}},
		{[]int{2, 3, 4}, nil, []int{1, 0, 0}, []int{2, 12}, []int{12, 1}, []int{1, 0}},
		{[]int{3, 4}, []int{1, 3}, nil, []int{3, 4}, []int{1, 3}, []int{4, 1}}, // a transposed: no merge
		{nil, nil, nil, []int{1}, []int{1}, []int{1}},
		{[]int{0, 5}, nil, nil, []int{0}, []int{1}, []int{1}},
	} {
		l := newLayout(c.shape, c.sa, c.sb)
		if !slices.Equal(l.dims(), c.dims) || !slices.Equal(l.stridesA(), c.wantA) || !slices.Equal(l.stridesB(), c.wantB) {
			t.Errorf("newLayout(%v, %v, %v) = %v %v %v, want %v %v %v", c.shape, c.sa, c.sb,
				l.dims(), l.stridesA(), l.stridesB(), c.dims, c.wantA, c.wantB)
		}
	}
}
