package radgen

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// mlpChain is two-layer MLPs of one input, as a decoder's conditional
// norms are: group i's first layers (with ReLU) read the input, its second
// layers the first's results, each added to an offset (AddLinear).
type mlpChain struct {
	first, second [][]*Linear
	offsets       [][]*Tensor
}

func newMLPChain(r *rand.Rand, groups, in, hidden, out int) *mlpChain {
	c := &mlpChain{}
	for range groups {
		var f, s []*Linear
		var o []*Tensor
		for range 2 {
			f = append(f, NewLinear(in, hidden, true, r))
			s = append(s, NewLinear(hidden, out, true, r))
			off := Zeros(out)
			Uniform(off, r, 1)
			o = append(o, off)
		}
		c.first, c.second, c.offsets = append(c.first, f), append(c.second, s), append(c.offsets, o)
	}
	return c
}

// to64 returns c with float64 copies of its maps and offsets.
func (c *mlpChain) to64() *mlpChain {
	to64 := func(l *Linear) *Linear { return &Linear{Weight: l.Weight.To64(), Bias: l.Bias.To64()} }
	c64 := &mlpChain{}
	for i := range c.first {
		var f, s []*Linear
		var o []*Tensor
		for j := range 2 {
			f, s, o = append(f, to64(c.first[i][j])), append(s, to64(c.second[i][j])), append(o, c.offsets[i][j].To64())
		}
		c64.first, c64.second, c64.offsets = append(c64.first, f), append(c64.second, s), append(c64.offsets, o)
	}
	return c64
}

// issue issues every group's products on g and returns their results.
func (c *mlpChain) issue(g *Graph, x *Tensor) [][]*Tensor {
	var outs [][]*Tensor
	for i := range c.first {
		h := make([]*Tensor, 2)
		g.Linears(h, []*Tensor{x, x}, c.first[i], true)
		outs = append(outs, []*Tensor{g.AddLinear(c.offsets[i][0], h[0], c.second[i][0]), g.AddLinear(c.offsets[i][1], h[1], c.second[i][1])})
	}
	return outs
}

// sameValues fails unless got and want hold the same bits (float32) or
// values within 1e-12 (float64).
func sameValues(t *testing.T, what string, got, want *Tensor) {
	t.Helper()
	w, h := want.Float64s(), got.Float64s()
	for k := range w {
		if h[k] != w[k] && !(got.Is64() && math.Abs(h[k]-w[k]) < 1e-12) {
			t.Fatalf("%s: value %d = %v, want %v", what, k, h[k], w[k])
		}
	}
}

// Products issued within Ahead, chained through pending results and read
// while the caller computes products of its own, give what they give
// issued outside it: bit for bit in float32 (where they run beside the
// caller) and the same values in float64 (where Ahead is f). The next
// Ahead waits for the one before, whose results are then read.
func TestAhead(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2)))
	r := rand.New(rand.NewPCG(7, 8))
	c32 := newMLPChain(r, 4, 384, 256, 128)
	side := NewLinear(256, 512, true, r)
	for _, f64 := range []bool{false, true} {
		c, side := c32, side
		if f64 {
			c = c32.to64()
			side = &Linear{Weight: side.Weight.To64(), Bias: side.Bias.To64()}
		}
		g := NoGrad()
		var earlier [][]*Tensor
		var earlierWant [][]*Tensor
		for round := range 3 {
			x := Zeros(3, 384)
			Uniform(x, r, 1)
			if f64 {
				x = x.To64()
			}
			want := c.issue(NoGrad(), x)
			var got [][]*Tensor
			g.Ahead(func() { got = c.issue(g, x) })
			if round == 1 {
				// The results of the batch before this one, read only now.
				for i := range earlier {
					for j := range earlier[i] {
						sameValues(t, "earlier batch", earlier[i][j], earlierWant[i][j])
					}
				}
			}
			for range round { // products of the caller's own while the batch runs
				y := Zeros(3, 256)
				Uniform(y, r, 1)
				if f64 {
					y = y.To64()
				}
				var o [1]*Tensor
				g.Linears(o[:], []*Tensor{y}, []*Linear{side}, false)
			}
			if round == 0 {
				earlier, earlierWant = got, want
				continue
			}
			for i := range got {
				for j := range got[i] {
					sameValues(t, "ahead", got[i][j], want[i][j])
				}
			}
		}
	}
}

// AddLinear is Add after Linear: the same bits where Linears batches its
// products (against Linears' own), and where it does not (against Linear).
func TestAddLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	l := NewLinear(40, 24, true, r)
	a := Zeros(24)
	Uniform(a, r, 1)
	for _, rows := range []int{1, 5, 48, 60} {
		x := Zeros(rows, 40)
		Uniform(x, r, 1)
		g := NoGrad()
		var lin [1]*Tensor
		g.Linears(lin[:], []*Tensor{x}, []*Linear{l}, false)
		sameValues(t, "AddLinear", g.AddLinear(a, x, l), g.Add(lin[0], a))
	}
}

// Within Ahead, an op that reads a pending result has the batch computed
// there, and views of pending results are pending: a product reading a
// view, issued after that op, still reads the right values.
func TestAheadReadWithin(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2)))
	r := rand.New(rand.NewPCG(5, 6))
	l0, l1 := NewLinear(64, 64, true, r), NewLinear(64, 32, true, r)
	x := Zeros(2, 3, 64)
	Uniform(x, r, 1)
	run := func(g *Graph) (sum, y *Tensor) {
		var h, o [1]*Tensor
		g.Linears(h[:], []*Tensor{x}, []*Linear{l0}, true)
		v := g.Reshape(h[0], 6, 64) // a view: pending as h is
		g.Linears(o[:], []*Tensor{v}, []*Linear{l1}, false)
		sum = g.Scale(h[0], 2) // reads h within f
		g.Linears(h[:], []*Tensor{g.Reshape(o[0], 2, 3, 32)}, []*Linear{NewLinear(32, 8, false, rand.New(rand.NewPCG(1, 1)))}, false)
		return sum, h[0]
	}
	wantSum, wantY := run(NoGrad())
	g := NoGrad()
	var sum, y *Tensor
	g.Ahead(func() { sum, y = run(g) })
	sameValues(t, "read within", sum, wantSum)
	sameValues(t, "after the read", y, wantY)
}

// A warm ahead batch on an arena allocates nothing, and the arena's Next
// waits for it: the step's results stay valid through the next step.
func TestAheadArena(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	c := newMLPChain(r, 3, 256, 256, 256)
	x := Zeros(3, 256)
	Uniform(x, r, 1)
	want := c.issue(NoGrad(), x)
	g := NoGrad()
	arena := NewArena()
	g.SetArena(arena)
	h, y := make([]*Tensor, 2), make([]*Tensor, 2)
	xs := []*Tensor{x, x}
	var last [][]*Tensor
	run := func() {
		arena.Next()
		g.Ahead(func() {
			for i := range c.first {
				g.Linears(h, xs, c.first[i], true)
				g.Linears(y, h, c.second[i], false)
			}
		})
		y[0].Data()
	}
	for range 3 { // the arena's halves and the runner's buffers grow
		run()
	}
	if allocs := testing.AllocsPerRun(20, run); allocs != 0 {
		t.Fatalf("%v allocations per step", allocs)
	}
	arena.Next()
	g.Ahead(func() { last = c.issue(g, x) })
	arena.Next() // waits for the batch, which wrote into the other half
	for i := range last {
		for j := range last[i] {
			sameValues(t, "after Next", last[i][j], want[i][j])
		}
	}
	g.SetArena(nil)
}

// Random chains of products within Ahead — each reading the input or any
// earlier result, through a view or not, some as AddLinear, with a read
// within f now and then — give what they give outside it, bit for bit.
func TestAheadRandomChains(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2)))
	r := rand.New(rand.NewPCG(11, 12))
	const d = 96
	maps := make([]*Linear, 6)
	for i := range maps {
		maps[i] = NewLinear(d, d, true, r)
	}
	offset := Zeros(d)
	Uniform(offset, r, 1)
	for trial := range 20 {
		seed := uint64(trial)
		x := Zeros(4, d)
		Uniform(x, r, 1)
		run := func(g *Graph) []*Tensor {
			pick := rand.New(rand.NewPCG(seed, 1))
			ts := []*Tensor{x}
			for range 12 {
				in := ts[pick.IntN(len(ts))]
				if pick.IntN(3) == 0 {
					in = g.Reshape(in, 2, 2, d) // a view
				}
				l := maps[pick.IntN(len(maps))]
				switch pick.IntN(5) {
				case 0:
					ts = append(ts, g.AddLinear(offset, in, l))
				case 1:
					ts = append(ts, g.Scale(in, 0.5)) // a read within f
				default:
					var o [2]*Tensor
					g.Linears(o[:], []*Tensor{in, x}, []*Linear{l, maps[0]}, pick.IntN(2) == 0)
					ts = append(ts, o[0], o[1])
				}
			}
			return ts
		}
		want := run(NoGrad())
		g := NoGrad()
		var got []*Tensor
		g.Ahead(func() { got = run(g) })
		for i := len(got) - 1; i >= 0; i-- { // the last first: the batch waits stage by stage
			sameValues(t, "chain", got[i], want[i])
		}
	}
}
