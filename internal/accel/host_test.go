package accel

import (
	"math"
	"math/rand/v2"
	"testing"
)

func upload(t *testing.T, e Engine, x []float32) Ptr {
	t.Helper()
	p, err := e.AllocPtr(int64(4 * len(x)))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CopyIn(p, x); err != nil {
		t.Fatal(err)
	}
	return p
}

func download(t *testing.T, e Engine, p Ptr, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := e.CopyOut(out, p); err != nil {
		t.Fatal(err)
	}
	return out
}

func near(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > tol*math.Max(1, math.Abs(float64(want[i]))) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func randSlice(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// Each operation of the host engine against a direct computation, with
// pointers offset into their buffers as the decoder uses them.
func TestHostOps(t *testing.T) {
	e := NewHost()
	defer e.Close()
	rng := rand.New(rand.NewPCG(1, 2))

	// GemmStrided, x read at an offset into its buffer: y = x·wᵀ.
	x, w := randSlice(rng, 2+3*4), randSlice(rng, 5*4)
	px, pw := upload(t, e, x), upload(t, e, w)
	py := upload(t, e, make([]float32, 15))
	if err := e.GemmStrided(false, true, 1, 3, 5, 4, 1, px.Add(2), 4, 0, pw, 4, 0, 0, py, 5, 0); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 15)
	for r := range 3 {
		for o := range 5 {
			var s float32
			for i := range 4 {
				s += x[2+r*4+i] * w[o*4+i]
			}
			want[r*5+o] = s
		}
	}
	near(t, "GemmStrided", download(t, e, py, 15), want, 1e-6)

	// Gather: ids stored as int32 bits, an out-of-range id gives zeros.
	table := randSlice(rng, 4*3)
	pt := upload(t, e, table)
	pids, _ := e.AllocPtr(4 * 3)
	if err := e.CopyInInt32(pids, []int32{2, -1, 0}); err != nil {
		t.Fatal(err)
	}
	pg := upload(t, e, make([]float32, 9))
	if err := e.Gather(pg, pt, pids, 3, 4, 3, 2); err != nil {
		t.Fatal(err)
	}
	near(t, "Gather", download(t, e, pg, 9), []float32{2 * table[6], 2 * table[7], 2 * table[8], 0, 0, 0, 2 * table[0], 2 * table[1], 2 * table[2]}, 0)

	// Free, and a freed or foreign pointer is an error.
	if err := e.FreePtr(px); err != nil {
		t.Fatal(err)
	}
	if e.FreePtr(px) == nil || e.FreePtr(px.Add(1)) == nil {
		t.Error("double or interior free accepted")
	}
}

func TestHostOutOfBoundsPanics(t *testing.T) {
	e := NewHost()
	p, _ := e.AllocPtr(16)
	defer func() {
		if r := recover(); r == nil {
			t.Error("reading past a buffer did not panic")
		}
	}()
	e.CopyOut(make([]float32, 5), p)
}

func TestOpenCUDAWithoutGPU(t *testing.T) {
	e, err := OpenCUDA(0)
	if err != nil {
		t.Skipf("no CUDA engine here: %v", err)
	}
	defer e.Close()
	t.Logf("GPU: %s", e.Name())
}

func TestHostElementwise(t *testing.T) {
	e := NewHost()
	defer e.Close()
	a := upload(t, e, []float32{2, -6, 12, 0, 1.5, -4})
	b, _ := e.AllocPtr(4 * 6)
	if err := e.ReLU(b, a, 6); err != nil {
		t.Fatal(err)
	}
	near(t, "ReLU", download(t, e, b, 6), []float32{2, 0, 12, 0, 1.5, 0}, 0)
	if err := e.Scale(a, a, -0.5, 6); err != nil {
		t.Fatal(err)
	}
	near(t, "Scale", download(t, e, a, 6), []float32{-1, 3, -6, 0, -0.75, 2}, 0)
	if err := e.Sigmoid(a, a, 6); err != nil {
		t.Fatal(err)
	}
	near(t, "Sigmoid", download(t, e, a, 4), []float32{0.26894142, 0.95257413, 0.0024726232, 0.5}, 1e-6)
}

func TestHostLiveBytesAndAddresses(t *testing.T) {
	h := NewHost()
	p, _ := h.AllocPtr(10) // rounded up to 3 floats
	q, _ := h.AllocPtr(40)
	if got := h.LiveBytes(); got != 12+40 {
		t.Fatalf("live bytes %d, want 52", got)
	}
	// Addresses lie above the 48-bit user address space, never in Go's heap.
	if uint64(p)>>48 == 0 || uint64(q)>>48 == 0 {
		t.Fatalf("host pointers %#x, %#x inside the user address space", uintptr(p), uintptr(q))
	}
	if err := h.FreePtr(p); err != nil {
		t.Fatal(err)
	}
	if err := h.FreePtr(p); err == nil {
		t.Error("double free accepted")
	}
	if got := h.LiveBytes(); got != 40 {
		t.Fatalf("live bytes %d after a free, want 40", got)
	}
	_ = h.Close()
	if got := h.LiveBytes(); got != 0 {
		t.Fatalf("live bytes %d after Close", got)
	}
}

func TestHostTrainerPrimitives(t *testing.T) {
	h := NewHost()
	// Binary with broadcasting: (2, 3) + (3) and a masked fill.
	a := upload(t, h, []float32{1, 2, 3, 4, 5, 6})
	b := upload(t, h, []float32{10, 0, 30})
	d, _ := h.AllocPtr(24)
	if err := h.Binary(OpAdd, d, a, b, []int{2, 3}, []int{3, 1}, []int{0, 1}, 0); err != nil {
		t.Fatal(err)
	}
	near(t, "Binary add", download(t, h, d, 6), []float32{11, 2, 33, 14, 5, 36}, 0)
	_ = h.Binary(OpMaskFill, d, a, b, []int{2, 3}, []int{3, 1}, []int{0, 1}, -7)
	near(t, "Binary mask fill", download(t, h, d, 6), []float32{1, -7, 3, 4, -7, 6}, 0)
	// ReduceSum over rows (a bias gradient), accumulated into 1s.
	s := upload(t, h, []float32{1, 1, 1})
	_ = h.ReduceSum(s, a, []int{2, 3}, []int{0, 1}, true)
	near(t, "ReduceSum", download(t, h, s, 3), []float32{6, 8, 10}, 0)
	// CopyStrided: column block 1..2 of each row, added; a repeated row.
	c := upload(t, h, []float32{0, 0, 0, 0})
	_ = h.CopyStrided(c, 2, a.Add(1), 3, 2, 2, true)
	near(t, "CopyStrided", download(t, h, c, 4), []float32{2, 3, 5, 6}, 0)
	_ = h.CopyStrided(c, 2, b, 0, 2, 2, false)
	near(t, "CopyStrided repeat", download(t, h, c, 4), []float32{10, 0, 10, 0}, 0)
	// ScatterAdd: rows 0 and 2 of a (2, 3)… table, id −1 skipped.
	ids, _ := h.AllocPtr(12)
	_ = h.CopyInInt32(ids, []int32{1, -1, 1})
	tab := upload(t, h, []float32{0, 0, 0, 0})
	src := upload(t, h, []float32{1, 2, 3, 4, 5, 6})
	_ = h.ScatterAdd(tab, src, ids, 3, 2, 2)
	near(t, "ScatterAdd", download(t, h, tab, 4), []float32{0, 0, 6, 8}, 0)
}
