package radgen

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// batchChain is two-layer MLPs of one input, as an MCLN group's: stage
// 2i is the first layers of MLP group i (with ReLU), stage 2i+1 the
// second layers, reading stage 2i's results.
type batchChain struct {
	first, second [][]*Linear
}

func newBatchChain(r *rand.Rand, groups, in, hidden, out int) *batchChain {
	c := &batchChain{}
	for range groups {
		var f, s []*Linear
		for range 2 {
			f = append(f, NewLinear(in, hidden, true, r))
			s = append(s, NewLinear(hidden, out, true, r))
		}
		c.first, c.second = append(c.first, f), append(c.second, s)
	}
	return c
}

// to64 returns c with float64 copies of its maps.
func (c *batchChain) to64() *batchChain {
	to64 := func(l *Linear) *Linear { return &Linear{Weight: l.Weight.To64(), Bias: l.Bias.To64()} }
	c64 := &batchChain{}
	for i := range c.first {
		var f, s []*Linear
		for j := range 2 {
			f, s = append(f, to64(c.first[i][j])), append(s, to64(c.second[i][j]))
		}
		c64.first, c64.second = append(c64.first, f), append(c64.second, s)
	}
	return c64
}

// stages runs every group's two stages through linears (Graph.Linears,
// one stage after the other, or Batch.Linears, which adds them to a batch)
// and returns the outputs.
func (c *batchChain) stages(x *Tensor, linears func(out, xs []*Tensor, ls []*Linear, relu bool)) [][]*Tensor {
	var outs [][]*Tensor
	for i := range c.first {
		h, y := make([]*Tensor, 2), make([]*Tensor, 2)
		linears(h, []*Tensor{x, x}, c.first[i], true)
		linears(y, h, c.second[i], false)
		outs = append(outs, y)
	}
	return outs
}

// A Batch of dependent stages started beside other products gives, stage
// by stage as Wait covers them, what Graph.Linears gives one stage after
// the other: bit for bit on the CPU in float32, and the same values in
// float64 (which it computes as the stages are added).
func TestBatch(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2)))
	r := rand.New(rand.NewPCG(7, 8))
	c := newBatchChain(r, 4, 384, 256, 128)
	side := NewLinear(256, 512, true, r)
	c64 := c.to64()
	for _, f64 := range []bool{false, true} {
		x := Zeros(3, 384)
		Uniform(x, r, 1)
		c, side := c, side
		if f64 {
			x, c = x.To64(), c64
			side = &Linear{Weight: side.Weight.To64(), Bias: side.Bias.To64()}
		}
		g := NoGrad()
		want := c.stages(x, NoGrad().Linears)
		for round := range 3 {
			b := g.Batch()
			got := c.stages(x, b.Linears)
			b.Start()
			for range round { // products of the caller's own while the batch runs
				y := Zeros(3, 256)
				Uniform(y, r, 1)
				if f64 {
					y = y.To64()
				}
				side.Forward(g, y)
			}
			for i := range got {
				b.Wait(2*i + 2)
				for j := range got[i] {
					w, h := want[i][j].Float64s(), got[i][j].Float64s()
					for k := range w {
						if h[k] != w[k] && !(f64 && math.Abs(h[k]-w[k]) < 1e-12) {
							t.Fatalf("f64=%v round %d: group %d map %d y[%d] = %v, want %v", f64, round, i, j, k, h[k], w[k])
						}
					}
				}
			}
			b.Finish()
		}
	}
}

// A warm Batch on an arena allocates nothing.
func TestBatchAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	c := newBatchChain(r, 3, 256, 256, 256)
	x := Zeros(3, 256)
	Uniform(x, r, 1)
	g := NoGrad()
	arena := NewArena()
	g.SetArena(arena)
	h, y := make([]*Tensor, 2), make([]*Tensor, 2)
	xs := []*Tensor{x, x}
	run := func() {
		arena.Next()
		b := g.Batch()
		for i := range c.first {
			b.Linears(h, xs, c.first[i], true)
			b.Linears(y, h, c.second[i], false)
		}
		b.Start()
		b.Wait(2)
		b.Finish()
	}
	for range 3 { // the arena's halves and the runner's buffers grow
		run()
	}
	if allocs := testing.AllocsPerRun(20, run); allocs != 0 {
		t.Fatalf("%v allocations per batch", allocs)
	}
}

// Maps added beside a stage's (Batch.LinearsBeside), each group's first
// layers beside the second layers of the group before, as mcln.Group adds
// them, give what Graph.Linears gives one stage after the other: bit for
// bit in float32, where the batch runs beside the caller, and the same
// values in float64, computed as they are added. The batch counts one
// stage per group and one more.
func TestBatchBeside(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2)))
	r := rand.New(rand.NewPCG(7, 9))
	c32 := newBatchChain(r, 4, 384, 256, 128)
	for _, f64 := range []bool{false, true} {
		x, c := Zeros(3, 384), c32
		Uniform(x, r, 1)
		if f64 {
			x, c = x.To64(), c32.to64()
		}
		want := c.stages(x, NoGrad().Linears)
		n := len(c.first)
		b := NoGrad().Batch()
		hidden, got := make([][]*Tensor, n), make([][]*Tensor, n)
		for i := 0; i <= n; i++ {
			if i > 0 {
				got[i-1] = make([]*Tensor, 2)
				b.Linears(got[i-1], hidden[i-1], c.second[i-1], false)
			}
			if i < n {
				hidden[i] = make([]*Tensor, 2)
				b.LinearsBeside(hidden[i], []*Tensor{x, x}, c.first[i], true)
			}
		}
		if b.Stages() != n+1 {
			t.Fatalf("f64=%v: %d stages, want %d", f64, b.Stages(), n+1)
		}
		b.Start()
		for i := range n {
			b.Wait(i + 2)
			for j := range got[i] {
				w, h := want[i][j].Float64s(), got[i][j].Float64s()
				for k := range w {
					if h[k] != w[k] && !(f64 && math.Abs(h[k]-w[k]) < 1e-12) {
						t.Fatalf("f64=%v: group %d map %d y[%d] = %v, want %v", f64, i, j, k, h[k], w[k])
					}
				}
			}
		}
		b.Finish()
	}
}
