package accel

import (
	"math"
	"math/rand/v2"
	"runtime"
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

// TestEachRunIn: the runs of a range of positions are those of the whole
// iteration cut to the range, for any range.
func TestEachRunIn(t *testing.T) {
	shape, sa, sb := []int{3, 4, 5}, []int{1, 15, 3}, []int{0, 5, 1}
	type elem struct{ ia, ib int }
	var whole []elem
	eachRun(shape, sa, sb, func(o, ia, ib, n, stepA, stepB int) {
		for i := range n {
			whole = append(whole, elem{ia + i*stepA, ib + i*stepB})
		}
	})
	for lo := 0; lo <= 60; lo += 7 {
		for hi := lo; hi <= 60; hi += 11 {
			var got []elem
			next := lo
			eachRunIn(shape, sa, sb, lo, hi, func(o, ia, ib, n, stepA, stepB int) {
				if o != next {
					t.Fatalf("[%d, %d): run at %d, want %d", lo, hi, o, next)
				}
				next = o + n
				for i := range n {
					got = append(got, elem{ia + i*stepA, ib + i*stepB})
				}
			})
			if len(got) != hi-lo {
				t.Fatalf("[%d, %d): %d elements", lo, hi, len(got))
			}
			for i, e := range got {
				if e != whole[lo+i] {
					t.Fatalf("[%d, %d): element %d at %v, want %v", lo, hi, lo+i, e, whole[lo+i])
				}
			}
		}
	}
}

// TestCPUSplitSameBits: a primitive split across the cores gives the bits
// of one piece, whatever GOMAXPROCS.
func TestCPUSplitSameBits(t *testing.T) {
	const n = 5*minSplit + 37
	r := rand.New(rand.NewPCG(3, 4))
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(r.NormFloat64()*3), float32(r.NormFloat64())
	}
	run := func() [][]float32 {
		var cpu CPU[float32]
		var outs [][]float32
		for act := ActReLU; act <= ActSigmoid; act++ {
			d := make([]float32, n)
			cpu.Activation(act, d, x)
			g := append([]float32(nil), y...)
			cpu.ActivationBackward(act, g, x, d)
			outs = append(outs, d, g)
		}
		d := make([]float32, n)
		cpu.Binary(OpMul, d, x, y, []int{n}, []int{1}, []int{1}, 0)
		cpu.AddBinary(OpAdd, d, x, y, []int{n}, []int{1}, []int{1}, 0)
		cpu.Axpy(d, y, 0.3)
		s := make([]float32, 1600*100)
		cpu.Softmax(s, x, 100, true)
		return append(outs, d, s)
	}
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	want := run()
	runtime.GOMAXPROCS(4)
	got := run()
	for i := range want {
		for j := range want[i] {
			if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
				t.Fatalf("output %d element %d: %v split, %v whole", i, j, got[i][j], want[i][j])
			}
		}
	}
}
