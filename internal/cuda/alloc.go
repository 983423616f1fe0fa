//go:build cuda

package cuda

import (
	"errors"
	"math/bits"
	"sync"
)

// Ptr is a device address (a CUdeviceptr). For a *tensor.Dense of this
// engine it is Ptr(d.Uintptr()); an element offset i of a float32 buffer is
// p + Ptr(4*i).
type Ptr uintptr

// F32 returns the address of float32 element i of the buffer at p.
func (p Ptr) F32(i int) Ptr { return p + Ptr(4*i) }

// MemStats describes an engine's device memory. All sizes are in bytes.
type MemStats struct {
	InUse    uint64 // held by live allocations (rounded up to their size class)
	Cached   uint64 // freed by the program, kept for reuse, not given back to the driver
	Peak     uint64 // the largest InUse so far
	Allocs   uint64 // allocations served
	Hits     uint64 // of which served from the cache
	Releases uint64 // blocks given back to the driver (EmptyCache, out-of-memory retry, Close)
}

// rawMem is the allocator's backend: the driver (cuMemAlloc/cuMemFree) in
// an Engine, a fake in the allocator's unit tests.
type rawMem interface {
	malloc(n uintptr) (Ptr, error)
	free(p Ptr) error
	// sync waits for queued device work, so that blocks the program freed
	// are no longer read or written before they go back to the driver.
	sync() error
}

// Size classes: at most 256 bytes → 256; above, four classes per power of
// two (1.25, 1.5, 1.75 and 2 × 2^k), so a block wastes at most 20% of its
// size and freed blocks are reused by requests of nearby sizes.
const (
	minClass      = 256
	classesPerOct = 4
)

// sizeClass returns the size of the block that serves a request of n bytes.
func sizeClass(n uintptr) uintptr {
	if n <= minClass {
		return minClass
	}
	b := bits.Len64(uint64(n - 1)) // 2^(b-1) < n <= 2^b
	step := (uintptr(1) << (b - 1)) / classesPerOct
	return (n + step - 1) / step * step
}

// allocator is a caching allocator: freed blocks go to a free list per size
// class and are handed out again without a driver call. All device work runs
// on one stream, so a block freed by the host may be reused at once: any
// kernel still reading it was queued before the kernels that will write it.
// It is safe for concurrent use.
type allocator struct {
	mu    sync.Mutex
	raw   rawMem
	pools map[uintptr][]Ptr // size class → free blocks
	live  map[Ptr]uintptr   // block → size class
	st    MemStats
}

func newAllocator(raw rawMem) *allocator {
	return &allocator{raw: raw, pools: make(map[uintptr][]Ptr), live: make(map[Ptr]uintptr)}
}

func (a *allocator) alloc(n uintptr) (Ptr, error) {
	cls := sizeClass(n)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.st.Allocs++
	if pool := a.pools[cls]; len(pool) > 0 {
		p := pool[len(pool)-1]
		a.pools[cls] = pool[:len(pool)-1]
		a.st.Hits++
		a.st.Cached -= uint64(cls)
		a.track(p, cls)
		return p, nil
	}
	p, err := a.raw.malloc(cls)
	if err != nil && errors.Is(err, ErrOutOfMemory) && a.st.Cached > 0 {
		if rerr := a.releaseCachedLocked(); rerr != nil {
			return 0, rerr
		}
		p, err = a.raw.malloc(cls)
	}
	if err != nil {
		a.st.Allocs--
		return 0, err
	}
	a.track(p, cls)
	return p, nil
}

func (a *allocator) track(p Ptr, cls uintptr) {
	a.live[p] = cls
	a.st.InUse += uint64(cls)
	if a.st.InUse > a.st.Peak {
		a.st.Peak = a.st.InUse
	}
}

// free returns the block at p to its size class's free list.
func (a *allocator) free(p Ptr) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	cls, ok := a.live[p]
	if !ok {
		return ErrNotAllocated
	}
	delete(a.live, p)
	a.st.InUse -= uint64(cls)
	a.st.Cached += uint64(cls)
	a.pools[cls] = append(a.pools[cls], p)
	return nil
}

// size returns the size class of the live block at p, or 0.
func (a *allocator) size(p Ptr) uintptr {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.live[p]
}

func (a *allocator) stats() MemStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st
}

// releaseCached gives every cached block back to the driver.
func (a *allocator) releaseCached() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.releaseCachedLocked()
}

func (a *allocator) releaseCachedLocked() error {
	if a.st.Cached == 0 {
		return nil
	}
	if err := a.raw.sync(); err != nil {
		return err
	}
	var first error
	for cls, pool := range a.pools {
		for _, p := range pool {
			if err := a.raw.free(p); err != nil && first == nil {
				first = err
			}
			a.st.Releases++
			a.st.Cached -= uint64(cls)
		}
		delete(a.pools, cls)
	}
	return first
}

// releaseAll gives every block, cached or live, back to the driver (Close).
func (a *allocator) releaseAll() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for p, cls := range a.live {
		delete(a.live, p)
		a.st.InUse -= uint64(cls)
		a.st.Cached += uint64(cls)
		a.pools[cls] = append(a.pools[cls], p)
	}
	return a.releaseCachedLocked()
}
