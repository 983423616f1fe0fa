package radgen

import (
	"slices"
	"testing"
	"unsafe"
)

// rowsOf returns a (n, w) float32 tensor whose element (i, j) is
// base + 10·i + j.
func rowsOf(base float32, n, w int) *Tensor {
	x := Zeros(n, w)
	for i := range n {
		for j := range w {
			x.Data()[i*w+j] = base + float32(10*i+j)
		}
	}
	return x
}

// Rows holds what was appended, in order, on the device of the rows
// appended, across growths of its storage; a view keeps its values while
// rows are appended after it; Gather picks rows and pieces of rows into a
// buffer that the next Gather reuses; a reset keeps the storage, and
// appends after it show in new views.
func TestRows(t *testing.T) {
	for _, dev := range []Device{CPU, testDevice(t)} {
		t.Run(dev.String(), func(t *testing.T) {
			g := NoGrad()
			var r Rows
			var want []float32
			var views []*Tensor
			var shown [][]float32
			for i, n := range []int{2, 3, 0, 10, 1, 1, 40} { // room for 16 rows, then 32 (doubled), then 337 (7·40 more)
				x := rowsOf(float32(1000*i), n, 3)
				r.Append(g, x.To(dev))
				want = append(want, x.Data()...)
				if r.Len() != len(want)/3 {
					t.Fatalf("after %d appends: %d rows, want %d", i+1, r.Len(), len(want)/3)
				}
				v := r.View(g)
				if v.Device() != dev || !slices.Equal(v.Shape(), []int{r.Len(), 3}) {
					t.Fatalf("view %v on %v, want (%d, 3) on %v", v.Shape(), v.Device(), r.Len(), dev)
				}
				views, shown = append(views, v), append(shown, slices.Clone(want))
				if c, want := r.t.Dim(0), []int{16, 16, 16, 16, 16, 32, 337}[i]; c != want {
					t.Fatalf("after %d appends: room for %d rows, want %d", i+1, c, want)
				}
			}
			for i, v := range views {
				if got := v.To(CPU).Data(); !slices.Equal(got, shown[i]) {
					t.Fatalf("view %d after later appends: %v, want %v", i, got, shown[i])
				}
			}
			// Gather: the rows cut into 3 pieces of one value, picked.
			idx := []int{len(want) - 1, 0, 7, 7, 4}
			got := r.Gather(g, idx, 3)
			if got.Device() != dev || !slices.Equal(got.Shape(), []int{len(idx), 1}) {
				t.Fatalf("gathered %v on %v, want (%d, 1) on %v", got.Shape(), got.Device(), len(idx), dev)
			}
			for i, j := range idx {
				if v := got.To(CPU).Data()[i]; v != want[j] {
					t.Fatalf("gathered piece %d is %v, want %v", i, v, want[j])
				}
			}
			// A whole row, in the buffer of the gather above.
			whole := r.Gather(g, []int{1}, 1).To(CPU).Data()
			if wantWhole := want[3:6]; !slices.Equal(whole, wantWhole) {
				t.Fatalf("gathered row %v, want %v", whole, wantWhole)
			}
			if got := got.To(CPU).Data(); got[0] != want[3] || got[1] != want[4] {
				t.Fatalf("an earlier gather holds %v after the next one, want its buffer overwritten", got)
			}
			storage := storageOf(r.t)
			r.Reset()
			if r.Len() != 0 {
				t.Fatalf("%d rows after Reset", r.Len())
			}
			x := rowsOf(-5, 60, 3)
			r.Append(g, x.To(dev))
			if got := r.View(g).To(CPU).Data(); !slices.Equal(got, x.Data()) {
				t.Fatalf("after a reset: %v, want %v", got, x.Data())
			}
			if storageOf(r.t) != storage {
				t.Fatal("rows appended after a reset, fewer than before, grew new storage")
			}
			// Rows of another device, width or element type replace
			// those of an empty Rows.
			r.Reset()
			y := Zeros64(2, 5)
			r.Append(g, y)
			if v := r.View(g); !v.Is64() || v.Device() != CPU || !slices.Equal(v.Shape(), []int{2, 5}) {
				t.Fatalf("after a reset and float64 rows: %v", v)
			}
		})
	}
}

// storageOf returns the address of t's values, on the CPU or a device.
func storageOf(t *Tensor) uintptr {
	if t.buf != nil {
		return uintptr(t.buf.ptr)
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(hostValues[float32](t))))
}

// Appending to a Rows that has grown, viewing it and gathering from it
// allocate nothing on a graph with an arena: what a decoding step does
// with its caches.
func TestRowsAllocs(t *testing.T) {
	g, a := NoGrad(), NewArena()
	g.SetArena(a)
	var r Rows
	x := rowsOf(1, 4, 8)
	idx := []int{3, 1, 2, 0}
	step := func() {
		a.Next()
		r.Reset()
		for range 10 {
			r.Append(g, x)
		}
		g.IndexSelect(g.Reshape(r.View(g), 80, 4), 0, idx)
		r.Gather(g, idx, 2)
	}
	step()
	step()
	step()
	if n := testing.AllocsPerRun(20, step); n != 0 {
		t.Fatalf("%v allocations per step, want 0", n)
	}
}

// What does not fit a Rows is refused with a panic.
func TestRowsPanics(t *testing.T) {
	g := NoGrad()
	expectPanic(t, "radgen: Rows.Append", func() {
		var r Rows
		r.Append(g, Zeros(2, 3, 4))
	})
	expectPanic(t, "radgen: Rows.Append", func() {
		var r Rows
		r.Append(g, Zeros(2, 3))
		r.Append(g, Zeros(2, 4))
	})
	expectPanic(t, "radgen: Rows.Append", func() {
		var r Rows
		r.Append(g, Zeros(2, 3))
		r.Append(g, Zeros64(2, 3))
	})
	expectPanic(t, "radgen: Rows.Append", func() {
		var r Rows
		r.Append(g, Zeros(2, 3))
		r.Append(g, Zeros(2, 3).To(testDevice(t)))
	})
	expectPanic(t, "radgen: Rows.View", func() {
		var r Rows
		r.View(g)
	})
	expectPanic(t, "radgen: Rows.Gather", func() {
		var r Rows
		r.Gather(g, []int{0}, 1)
	})
	expectPanic(t, "radgen: Rows.Gather", func() {
		var r Rows
		r.Append(g, Zeros(2, 3))
		r.Gather(g, []int{0}, 2)
	})
	expectPanic(t, "radgen: Rows.Gather", func() {
		var r Rows
		r.Append(g, Zeros(2, 3))
		r.Gather(g, []int{0, 6}, 3)
	})
}
