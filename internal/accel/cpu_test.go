package accel

import (
	"math/rand/v2"
	"testing"
)

// TestCPUAddBinary: AddBinary adds exactly what Binary writes, for every
// operation, with broadcast and strided operands.
func TestCPUAddBinary(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	shape := []int{3, 4, 5}
	cases := []struct{ sa, sb []int }{
		{[]int{20, 5, 1}, []int{20, 5, 1}}, // same shape
		{[]int{20, 5, 1}, []int{0, 0, 1}},  // a bias row
		{[]int{20, 5, 1}, []int{4, 1, 0}},  // one value per row
		{[]int{1, 15, 3}, []int{0, 5, 1}},  // strided a
	}
	var cpu CPU[float32]
	for _, c := range cases {
		a, b := make([]float32, 60), make([]float32, 60)
		for i := range a {
			a[i], b[i] = float32(r.NormFloat64()), float32(r.IntN(3)-1)
		}
		for op := OpAdd; op <= OpMaskFill; op++ {
			base := make([]float32, 60)
			for i := range base {
				base[i] = float32(r.NormFloat64())
			}
			want := make([]float32, 60)
			cpu.Binary(op, want, a, b, shape, c.sa, c.sb, -3)
			for i := range want {
				want[i] += base[i]
			}
			got := append([]float32(nil), base...)
			cpu.AddBinary(op, got, a, b, shape, c.sa, c.sb, -3)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("op %d strides %v %v: element %d = %v, want %v", op, c.sa, c.sb, i, got[i], want[i])
				}
			}
		}
	}
}

// TestCPUReduceSum: sums in float64 in row-major order, over a broadcast
// dimension and into strided rows, overwriting or accumulating.
func TestCPUReduceSum(t *testing.T) {
	src := make([]float64, 24)
	for i := range src {
		src[i] = float64(i + 1)
	}
	var cpu CPU[float64]
	cols := []float64{100, 100, 100, 100}
	cpu.ReduceSum(cols, src, []int{6, 4}, []int{0, 1}, true) // column sums, added
	for j, v := range cols {
		want := 100.0
		for i := range 6 {
			want += src[i*4+j]
		}
		if v != want {
			t.Errorf("column %d: %v, want %v", j, v, want)
		}
	}
	rows := make([]float64, 6)
	cpu.ReduceSum(rows, src, []int{6, 4}, []int{1, 0}, false) // row sums
	for i, v := range rows {
		want := 0.0
		for j := range 4 {
			want += src[i*4+j]
		}
		if v != want {
			t.Errorf("row %d: %v, want %v", i, v, want)
		}
	}
}
