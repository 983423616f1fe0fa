//go:build cuda

package cuda

import (
	"errors"
	"testing"
)

// fakeMem is a rawMem that hands out fake addresses and can run out.
type fakeMem struct {
	next     Ptr
	live     map[Ptr]uintptr
	limit    uintptr // bytes the fake device holds
	used     uintptr
	mallocs  int
	frees    int
	syncs    int
	failFree bool
}

func newFakeMem(limit uintptr) *fakeMem {
	return &fakeMem{next: 1 << 20, live: map[Ptr]uintptr{}, limit: limit}
}

func (f *fakeMem) malloc(n uintptr) (Ptr, error) {
	if f.used+n > f.limit {
		return 0, &Error{Op: "Alloc", Code: cudaErrorOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY"}
	}
	p := f.next
	f.next += Ptr(n)
	f.live[p] = n
	f.used += n
	f.mallocs++
	return p, nil
}

func (f *fakeMem) free(p Ptr) error {
	n, ok := f.live[p]
	if !ok {
		return errors.New("fake: double free")
	}
	delete(f.live, p)
	f.used -= n
	f.frees++
	return nil
}

func (f *fakeMem) sync() error { f.syncs++; return nil }

func TestSizeClass(t *testing.T) {
	cases := []struct{ n, want uintptr }{
		{0, 256}, {1, 256}, {256, 256}, {257, 320}, {320, 320}, {321, 384}, {511, 512}, {512, 512},
		{513, 640}, {1000, 1024}, {1025, 1280}, {3 << 20, 3 << 20}, {(3 << 20) + 1, 7 << 19},
	}
	for _, c := range cases {
		if got := sizeClass(c.n); got != c.want {
			t.Errorf("sizeClass(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	// Every class serves its request, wastes at most 20% above 256 bytes,
	// and is a multiple of 64 (the driver's blocks are 256-byte aligned;
	// classes keep sub-blocks aligned too).
	for n := uintptr(1); n < 1<<22; n = n*9/8 + 1 {
		c := sizeClass(n)
		if c < n || (n > minClass && float64(c-n) > 0.2*float64(c)) || c%64 != 0 {
			t.Fatalf("sizeClass(%d) = %d", n, c)
		}
		if sizeClass(c) != c {
			t.Fatalf("sizeClass not idempotent at %d", c)
		}
	}
}

func TestAllocatorReuse(t *testing.T) {
	f := newFakeMem(1 << 30)
	a := newAllocator(f)
	p1, err := a.alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := a.alloc(1000)
	if p1 == p2 {
		t.Fatal("two live blocks share an address")
	}
	if err := a.free(p1); err != nil {
		t.Fatal(err)
	}
	p3, _ := a.alloc(900) // same class (1024): the cached block
	if p3 != p1 {
		t.Errorf("cached block not reused: got %#x want %#x", p3, p1)
	}
	if f.mallocs != 2 {
		t.Errorf("driver mallocs = %d, want 2", f.mallocs)
	}
	st := a.stats()
	if st.Allocs != 3 || st.Hits != 1 || st.InUse != 2048 || st.Cached != 0 || st.Peak != 2048 {
		t.Errorf("stats = %+v", st)
	}
	if err := a.free(p3 + 4); !errors.Is(err, ErrNotAllocated) {
		t.Errorf("free of a view: %v, want ErrNotAllocated", err)
	}
	a.free(p3)
	if err := a.free(p3); !errors.Is(err, ErrNotAllocated) {
		t.Errorf("double free: %v, want ErrNotAllocated", err)
	}
	if got := a.size(p2); got != 1024 {
		t.Errorf("size = %d", got)
	}
}

func TestAllocatorOutOfMemoryReleasesCache(t *testing.T) {
	f := newFakeMem(4096)
	a := newAllocator(f)
	p, _ := a.alloc(2048)
	q, _ := a.alloc(1024)
	a.free(p)
	a.free(q)
	// 3000 → class 3072; the device has 4096 - 3072 cached = 1024 free: the
	// first malloc fails, the cache is given back, the retry succeeds.
	r, err := a.alloc(3000)
	if err != nil {
		t.Fatalf("alloc after releasing the cache: %v", err)
	}
	if f.syncs == 0 {
		t.Error("cache released without waiting for the device")
	}
	st := a.stats()
	if st.Cached != 0 || st.Releases != 2 || st.InUse != 3072 {
		t.Errorf("stats = %+v", st)
	}
	if _, err := a.alloc(2048); !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("over the limit: %v, want ErrOutOfMemory", err)
	}
	if st := a.stats(); st.Allocs != 3 {
		t.Errorf("failed alloc counted: %+v", st)
	}
	_ = r
}

func TestAllocatorReleaseAll(t *testing.T) {
	f := newFakeMem(1 << 30)
	a := newAllocator(f)
	var ps []Ptr
	for _, n := range []uintptr{10, 300, 5000, 70000} {
		p, _ := a.alloc(n)
		ps = append(ps, p)
	}
	a.free(ps[1])
	if err := a.releaseAll(); err != nil {
		t.Fatal(err)
	}
	if len(f.live) != 0 || f.frees != 4 {
		t.Errorf("driver still holds %d blocks after releaseAll (%d frees)", len(f.live), f.frees)
	}
	if st := a.stats(); st.InUse != 0 || st.Cached != 0 {
		t.Errorf("stats = %+v", st)
	}
}
