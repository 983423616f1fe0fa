package radgen

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// sameValues fails unless got and want hold the same bits (float32) or
// values within 1e-12 (float64).
func sameValues(t *testing.T, what string, got, want *Tensor) {
	t.Helper()
	w, h := want.Float64s(), got.Float64s()
	if len(w) != len(h) {
		t.Fatalf("%s: %d values, want %d", what, len(h), len(w))
	}
	for k := range w {
		if h[k] != w[k] && !(got.Is64() && math.Abs(h[k]-w[k]) < 1e-12) {
			t.Fatalf("%s: value %d = %v, want %v", what, k, h[k], w[k])
		}
	}
}

// at once reads t at once: on a graph that defers products, its product
// is computed now, alone.
func atOnce(t *Tensor) *Tensor { t.Data(); return t }

// mlps issues two-layer MLPs of one input, as a decoder's conditional
// norms are: each γ̂ = γ + L2(ReLU(L0(x))), in the order the norms come.
// With read set, every result is read as soon as it is issued.
func mlps(g *Graph, x *Tensor, first, second []*Linear, offsets []*Tensor, read bool) []*Tensor {
	r := func(t *Tensor) *Tensor { return t }
	if read {
		r = atOnce
	}
	var outs []*Tensor
	for i := range first {
		h := r(g.ReLU(r(first[i].Forward(g, x))))
		outs = append(outs, r(g.Add(offsets[i], r(second[i].Forward(g, h)))))
	}
	return outs
}

func newMLPs(r *rand.Rand, n, in, hidden, out int) (first, second []*Linear, offsets []*Tensor) {
	for range n {
		first = append(first, NewLinear(in, hidden, true, r))
		second = append(second, NewLinear(hidden, out, true, r))
		off := Zeros(out)
		Uniform(off, r, 1)
		offsets = append(offsets, off)
	}
	return first, second, offsets
}

// Products deferred on a graph that records nothing, chained through
// pending results, with their ReLU and sums as epilogues, and read late,
// in any order, while the caller issues and reads products of its own,
// give the bits they give read one by one as they are issued. A result
// of an earlier round is read only after the next round has begun.
func TestDeferredProducts(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2)))
	r := rand.New(rand.NewPCG(7, 8))
	first, second, offsets := newMLPs(r, 8, 384, 512, 256) // 10 MB of weights: the batch runs beside the reader
	side := NewLinear(384, 512, true, r)
	g := NoGrad()
	var earlier, earlierWant []*Tensor
	for round, rows := range []int{3, 1, 48, 7, 3} {
		x := Zeros(rows, 384)
		Uniform(x, r, 1)
		want := mlps(NoGrad(), x, first, second, offsets, true)
		got := mlps(g, x, first, second, offsets, false)
		for i := range earlier {
			sameValues(t, "earlier round", earlier[i], earlierWant[i])
		}
		for i := range got {
			k := (i*5 + round) % len(got) // read in another order each round
			if i%3 == 0 {
				atOnce(side.Forward(g, x)) // the caller's own products meanwhile
			}
			sameValues(t, "deferred", got[k], want[k])
		}
		earlier, earlierWant = mlps(g, x, first, second, offsets, false), want
	}
}

// An epilogue that joins a product leaves the product's own result as it
// was: a caller holding it reads x·Wᵀ + b, not its ReLU or sum.
func TestDeferredEpilogueKeepsOperand(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	l := NewLinear(32, 24, true, r)
	x, full, vec := Zeros(3, 32), Zeros(3, 24), Zeros(24)
	for _, u := range []*Tensor{x, full, vec} {
		Uniform(u, r, 1)
	}
	ref := NoGrad()
	raw := atOnce(l.Forward(ref, x))
	relu, sumFull, sumVec := atOnce(ref.ReLU(raw)), atOnce(ref.Add(full, raw)), atOnce(ref.Add(raw, vec))
	reluSum := atOnce(ref.Add(relu, vec))
	for _, order := range [][]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 0, 4, 1, 3}} {
		g := NoGrad()
		y := l.Forward(g, x)
		a := g.ReLU(y)
		b := g.Add(full, l.Forward(g, x))
		c := g.Add(l.Forward(g, x), vec)
		d := g.Add(g.ReLU(l.Forward(g, x)), vec)
		got := []*Tensor{y, a, b, c, d}
		want := []*Tensor{raw, relu, sumFull, sumVec, reluSum}
		for _, i := range order {
			sameValues(t, "epilogue", got[i], want[i])
		}
	}
	// A product that something reads takes no epilogue: the ReLU of a
	// result read through a view is an op of its own, the view unchanged.
	g := NoGrad()
	y := l.Forward(g, x)
	v := g.Reshape(y, 72)
	a := g.ReLU(y)
	sameValues(t, "view", v, g.Reshape(raw, 72))
	sameValues(t, "ReLU after a view", a, relu)
}

// A read within a chain has the batch computed there, and views of
// pending results are pending: a product reading a view, issued after
// that read, still reads the right values.
func TestDeferredReadWithin(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2)))
	r := rand.New(rand.NewPCG(5, 6))
	l0, l1, l2 := NewLinear(64, 64, true, r), NewLinear(64, 32, true, r), NewLinear(32, 8, false, r)
	x := Zeros(2, 3, 64)
	Uniform(x, r, 1)
	run := func(g *Graph, read func(*Tensor) *Tensor) (sum, y *Tensor) {
		h := read(g.ReLU(read(l0.Forward(g, x))))
		v := g.Reshape(h, 6, 64) // a view: pending as h is
		o := read(l1.Forward(g, v))
		sum = g.Scale(h, 2) // reads h
		return sum, read(l2.Forward(g, g.Reshape(o, 2, 3, 32)))
	}
	wantSum, wantY := run(NoGrad(), atOnce)
	sum, y := run(NoGrad(), func(t *Tensor) *Tensor { return t })
	sameValues(t, "read within", sum, wantSum)
	sameValues(t, "after the read", y, wantY)
}

// Random chains of deferred products — each reading the input or any
// earlier result, through a view or not, with a ReLU, a sum or a read
// of its own now and then — give, read from the last, the bits they give
// read as they are issued.
func TestDeferredRandomChains(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2)))
	r := rand.New(rand.NewPCG(11, 12))
	const d = 96
	maps := make([]*Linear, 6)
	for i := range maps {
		maps[i] = NewLinear(d, d, true, r)
	}
	offset := Zeros(d)
	Uniform(offset, r, 1)
	for trial := range 30 {
		seed := uint64(trial)
		x := Zeros(4, d)
		Uniform(x, r, 1)
		run := func(g *Graph, read func(*Tensor) *Tensor) []*Tensor {
			pick := rand.New(rand.NewPCG(seed, 1))
			ts := []*Tensor{x}
			for range 14 {
				in := ts[pick.IntN(len(ts))]
				if pick.IntN(3) == 0 {
					in = g.Reshape(in, 2, 2, d) // a view
				}
				y := read(maps[pick.IntN(len(maps))].Forward(g, in))
				switch pick.IntN(6) {
				case 0:
					y = read(g.Add(offset, y))
				case 1:
					y = read(g.Add(y, g.Reshape(ts[pick.IntN(len(ts))], y.Shape()...)))
				case 2:
					y = read(g.ReLU(y))
				case 3:
					y = g.Scale(y, 0.5) // a read
				}
				ts = append(ts, y)
			}
			return ts
		}
		want := run(NoGrad(), atOnce)
		got := run(NoGrad(), func(t *Tensor) *Tensor { return t })
		for i := len(got) - 1; i >= 0; i-- { // the last first: the batch runs beside the reader
			sameValues(t, "chain", got[i], want[i])
		}
	}
}

// arenaMLPs is a no-grad graph on an arena and the MLPs of mlps, with
// their values on a graph without one.
type arenaMLPs struct {
	g             *Graph
	arena         *Arena
	x             *Tensor
	first, second []*Linear
	offsets, want []*Tensor
}

func newArenaMLPs(seed uint64) *arenaMLPs {
	r := rand.New(rand.NewPCG(seed, seed))
	c := &arenaMLPs{g: NoGrad(), arena: NewArena(), x: Zeros(3, 256)}
	c.first, c.second, c.offsets = newMLPs(r, 3, 256, 256, 256)
	Uniform(c.x, r, 1)
	c.want = mlps(NoGrad(), c.x, c.first, c.second, c.offsets, true)
	c.g.SetArena(c.arena)
	return c
}

// warmAllocs returns the allocations of a run of the MLPs, each result
// read as soon as issued, after start (the arena's Next or Reset).
func (c *arenaMLPs) warmAllocs(start func()) float64 {
	g := c.g
	return testing.AllocsPerRun(20, func() {
		start()
		for i := range c.first {
			g.Add(c.offsets[i], c.second[i].Forward(g, g.ReLU(c.first[i].Forward(g, c.x)))).Data()
		}
	})
}

// A warm step of deferred products on an arena allocates nothing, and the
// arena's Next computes what is pending first: the step's results stay
// valid through the next step.
func TestDeferredArena(t *testing.T) {
	c := newArenaMLPs(9)
	for range 3 { // the arena's halves and the runner's buffers grow
		c.arena.Next()
		mlps(c.g, c.x, c.first, c.second, c.offsets, false)[0].Data()
	}
	if allocs := c.warmAllocs(c.arena.Next); allocs != 0 {
		t.Fatalf("%v allocations per step", allocs)
	}
	c.arena.Next()
	last := mlps(c.g, c.x, c.first, c.second, c.offsets, false)
	c.arena.Next() // computes the pending products, which write into the other half
	for i := range last {
		sameValues(t, "after Next", last[i], c.want[i])
	}
	c.g.SetArena(nil)
}

// An arena's Reset computes what is pending first, then hands its memory
// out again from the start: a warm computation of the same shapes after
// a Reset allocates nothing, and its results are those of a graph without
// an arena.
func TestArenaReset(t *testing.T) {
	c := newArenaMLPs(10)
	for range 2 { // the first run grows the arena, the second fits in it
		c.arena.Reset()
		outs := mlps(c.g, c.x, c.first, c.second, c.offsets, false)
		for i := range outs {
			sameValues(t, "after Reset", outs[i], c.want[i])
		}
	}
	if allocs := c.warmAllocs(c.arena.Reset); allocs != 0 {
		t.Fatalf("%v allocations per run after Reset", allocs)
	}
	// Products pending at Reset are computed then, not later over the
	// results made after it from the same memory.
	c.arena.Reset()
	pending := c.first[0].Forward(c.g, c.x)
	c.arena.Reset()
	fresh := c.g.Add(c.x, c.x)
	if got, want := fresh.Data()[0], 2*c.x.Data()[0]; got != want {
		t.Fatalf("a result made after Reset holds %v, want %v", got, want)
	}
	if pending.pend.live() {
		t.Fatal("a product issued before Reset is still pending after it")
	}
	c.g.SetArena(nil)
}

// Products that the engine does not defer — float64, more rows than a
// decoding step's, a recording graph — give Linear's values whatever the
// graph, and deferred ones agree with them within float32 rounding.
func TestDeferredAgreesWithGEMM(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	l := NewLinear(200, 72, true, r)
	for _, rows := range []int{1, 5, 48, 49, 130} {
		x := Zeros(rows, 200)
		Uniform(x, r, 1)
		got := g64(NoGrad().ReLU(l.Forward(NoGrad(), x)))
		want := g64(NewGraph().ReLU(l.Forward(NewGraph(), x)))
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-5*(1+math.Abs(want[i])) {
				t.Fatalf("%d rows: value %d = %v, GEMM %v", rows, i, got[i], want[i])
			}
		}
	}
}

func g64(t *Tensor) []float64 { return t.Float64s() }

// A product that reads a result an epilogue took over, whose own input is
// pending in the open batch, computes that result on its own first: the
// open batch runs then, and the product joins a new one.
func TestDeferredReadsTakenOver(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	l0, l1, l2 := NewLinear(16, 16, true, r), NewLinear(16, 16, true, r), NewLinear(16, 8, true, r)
	x := Zeros(3, 16)
	Uniform(x, r, 1)
	run := func(g *Graph, read func(*Tensor) *Tensor) []*Tensor {
		h := read(l0.Forward(g, x))
		y := read(l1.Forward(g, h)) // pending in the open batch, reading h
		a := read(g.ReLU(y))        // takes y's product over
		z := read(l2.Forward(g, y)) // reads y: computed on its own
		w := read(l2.Forward(g, a))
		return []*Tensor{h, y, a, z, w}
	}
	for range 3 { // the batch kept for reuse must serve again
		want := run(NoGrad(), atOnce)
		g := NoGrad()
		g.spare = []*batch{{g: g}, {g: g}} // as a batch started beside the caller leaves them
		got := run(g, func(t *Tensor) *Tensor { return t })
		more := run(g, func(t *Tensor) *Tensor { return t })
		for i := len(got) - 1; i >= 0; i-- {
			sameValues(t, "taken over", got[i], want[i])
			sameValues(t, "the next batch", more[i], want[i])
		}
		if n := len(g.spare); n > 3 {
			t.Fatalf("%d batches kept for reuse", n)
		}
		for i, b := range g.spare {
			for _, c := range g.spare[i+1:] {
				if b == c {
					t.Fatal("a batch kept for reuse twice")
				}
			}
		}
	}
}

// An arena with a limit hands out its memory up to the limit only: the
// results past it are made on the heap, keep their values when the arena's
// memory is handed out again, and do not grow the arena; the results of a
// graph with a limited arena are those of a graph without one.
func TestArenaLimit(t *testing.T) {
	c := newArenaMLPs(11)
	const limit = 4 * 3 * 256 * 2 // two results of (3, 256)
	c.arena.SetLimit(limit)
	var past []*Tensor // results made past the limit, with their values then
	var values [][]float32
	for range 3 {
		c.arena.Reset()
		outs := mlps(c.g, c.x, c.first, c.second, c.offsets, false)
		for i := range outs {
			sameValues(t, "with a limited arena", outs[i], c.want[i])
		}
		if got := c.arena.Bytes(); got > limit {
			t.Fatalf("an arena limited to %d bytes holds %d", limit, got)
		}
		last := outs[len(outs)-1]
		past, values = append(past, last), append(values, slices.Clone(last.Data()))
	}
	// The arena's memory was handed out twice more since the first run:
	// results made past the limit are the heap's, not overwritten.
	for i := range past {
		if !slices.Equal(past[i].Data(), values[i]) {
			t.Fatalf("result %d made past the arena's limit changed after the arena's memory was handed out again", i)
		}
	}
	c.arena.SetLimit(0) // no limit: the arena grows to a run's size again
	for range 2 {
		c.arena.Reset()
		mlps(c.g, c.x, c.first, c.second, c.offsets, false)[0].Data()
	}
	if got := c.arena.Bytes(); got <= limit {
		t.Fatalf("an arena without a limit holds %d bytes after a run past %d", got, limit)
	}
	c.g.SetArena(nil)
}
