package radgen

import (
	"math/rand/v2"
	"testing"
)

// carriedNet is a recurrent step in the shape of R2Gen's relational
// memory: products of the carried rows directly (q), through an
// activation (u), and concatenated with one input row per entry (k,
// whose input rows lie at a fixed stride) or two (j, whose input rows do
// not), then the next value from them.
type carriedNet struct{ q, k, u, j *Linear }

func newCarriedNet(r *rand.Rand, d int) *carriedNet {
	return &carriedNet{NewLinear(d, d, true, r), NewLinear(d, d, true, r), NewLinear(d, d, false, r), NewLinear(d, d, true, r)}
}

func (n *carriedNet) step(g *Graph, m, y *Tensor) (next *Tensor, outs []*Tensor) {
	b, s, d := m.Dim(0), m.Dim(1), m.Dim(2)
	yr := g.Reshape(y, b, 1, d)
	q := n.q.Forward(g, m)
	k := n.k.Forward(g, g.Concat(1, m, yr))
	u := n.u.Forward(g, g.Tanh(m))
	j := n.j.Forward(g, g.Concat(1, yr, m, yr))
	next = g.Add(g.Tanh(g.Add(q, g.Slice(k, 1, 1, s+1))), g.Mul(g.Sigmoid(u), m))
	return next, []*Tensor{q, k, u, j}
}

// carriedRun steps net over the inputs ys from m0, reordering the rows
// by orders[t] after step t, with the memory carried in a Carried
// (carried) or as a plain tensor, on a graph with an arena or without
// one. after, if set, runs after each step (and its Set) with the step's
// number and the Carried (nil for a plain run). It returns every step's
// results, copied.
func carriedRun(net *carriedNet, m0 *Tensor, ys []*Tensor, orders [][]int, carried, arena bool, after func(int, *Carried)) [][]*Tensor {
	g := NoGrad()
	var a *Arena
	if arena {
		a = NewArena()
		g.SetArena(a)
	}
	var c *Carried
	if carried {
		c = new(Carried)
		c.Set(g, m0)
	}
	m := m0
	var all [][]*Tensor
	for t, y := range ys {
		if a != nil {
			a.Next()
		}
		if c != nil {
			m = c.Value(g)
		}
		next, outs := net.step(g, m, y)
		if c != nil {
			c.Set(g, next)
		}
		if after != nil {
			after(t, c)
		}
		var copies []*Tensor
		for _, o := range outs {
			copies = append(copies, FromFloat32(append([]float32(nil), o.Data()...), o.Shape()...))
		}
		all = append(all, copies)
		m = next
		if t < len(orders) && orders[t] != nil {
			if c != nil {
				c.Reorder(orders[t])
			} else {
				m = g.IndexSelect(m, 0, orders[t])
			}
		}
	}
	return all
}

// The fixture's sizes: the memory's slots and width.
const carriedSlots, carriedWidth = 3, 16

// newCarriedFixture returns a carriedNet, a memory of one entry and the
// inputs of steps steps under carriedOrders, drawn from seed.
func newCarriedFixture(seed uint64, steps int) (net *carriedNet, m0 *Tensor, ys []*Tensor) {
	r := rand.New(rand.NewPCG(seed, seed+1))
	net = newCarriedNet(r, carriedWidth)
	m0 = Zeros(1, carriedSlots, carriedWidth)
	Uniform(m0, r, 1)
	rows := 1
	for t := range steps {
		y := Zeros(rows, carriedWidth)
		Uniform(y, r, 1)
		ys = append(ys, y)
		if t < len(carriedOrders) && carriedOrders[t] != nil {
			rows = len(carriedOrders[t])
		}
	}
	return net, m0, ys
}

var carriedOrders = [][]int{{0, 0, 0}, {2, 0, 1}, {1, 1, 0}, nil, {0, 2, 2}, {2, 1, 0}, {0, 0, 1}}

func sameRuns(t *testing.T, what string, got, want [][]*Tensor) {
	t.Helper()
	for step := range want {
		for i := range want[step] {
			sameValues(t, what, got[step][i], want[step][i])
		}
	}
}

// Every step's results with the memory in a Carried have the bits of the
// same steps on a plain tensor reordered by IndexSelect, with and without
// an arena, also when a weight changes between steps (the products
// computed ahead with the old one are not served).
func TestCarriedAgreesWithPlain(t *testing.T) {
	net, m0, ys := newCarriedFixture(7, len(carriedOrders)+1)
	for _, arena := range []bool{false, true} {
		want := carriedRun(net, m0, ys, carriedOrders, false, arena, nil)
		sameRuns(t, "carried step result", carriedRun(net, m0, ys, carriedOrders, true, arena, nil), want)
	}
	change := func(weights *Tensor) func(int, *Carried) {
		return func(step int, c *Carried) {
			if step != 2 {
				return
			}
			if c != nil { // the products ahead computed with the weight before
				for _, u := range c.uses {
					u.ahead.ready()
				}
			}
			weights.Data()[5] += 0.25
		}
	}
	keep := net.k.Weight.Clone()
	want := carriedRun(net, m0, ys, carriedOrders, false, true, change(net.k.Weight))
	net.k.Weight = keep.Clone()
	got := carriedRun(net, m0, ys, carriedOrders, true, true, change(net.k.Weight))
	sameRuns(t, "carried step result after a weight change", got, want)
}

// The products computed ahead are the ones served: values planted in
// them after a Set reach the next step's results, in the rows of the
// memory (reordered), and only there.
func TestCarriedServesAhead(t *testing.T) {
	const s, d = carriedSlots, carriedWidth
	net, m0, ys := newCarriedFixture(9, 4)
	const planted = 1e6
	plant := func(step int, c *Carried) {
		if step != 1 {
			return
		}
		if len(c.uses) != 4 {
			t.Fatalf("%d products learned, want 4", len(c.uses))
		}
		for _, u := range c.uses {
			if u.ahead == nil {
				t.Fatalf("no product computed ahead for %v", u.w.Shape())
			}
			u.ahead.Data()[0] = planted // row 0 of the value, column 0
			u.version = u.w.version.Load()
		}
	}
	got := carriedRun(net, m0, ys, carriedOrders, true, true, plant)
	// After step 1 the rows are reordered by {2, 0, 1}: row 0 of the value
	// becomes entry 1, so rows s (q, u) and s+1 (k: [M; y]) of the next
	// step's results hold the planted value; j's input rows are not at a
	// fixed stride, and it is computed as issued.
	q, k, u, j := got[2][0].Data(), got[2][1].Data(), got[2][2].Data(), got[2][3].Data()
	for name, at := range map[string]float32{"q": q[s*d], "k": k[(s+1)*d], "u": u[s*d]} {
		if at != planted {
			t.Errorf("%s: the product computed ahead is not served (%v)", name, at)
		}
	}
	for name, vals := range map[string][]float32{"q": q, "k": k, "u": u, "j": j} {
		n := 0
		for _, v := range vals {
			if v == planted {
				n++
			}
		}
		if want := map[string]int{"q": 1, "k": 1, "u": 1, "j": 0}[name]; n != want {
			t.Errorf("%s: the planted value in %d places, want %d", name, n, want)
		}
	}
}

// Where the engine computes nothing ahead (float64, a recording graph),
// a Carried stores and reorders its value; empty, it holds nothing and
// ignores Reorder.
func TestCarriedStores(t *testing.T) {
	var c Carried
	c.Reorder([]int{3, 1})
	if v := c.Value(NoGrad()); v != nil {
		t.Fatalf("an empty Carried's value: %v", v)
	}
	m := FromFloat64([]float64{1, 2, 3, 4, 5, 6}, 3, 1, 2)
	for _, g := range []*Graph{NoGrad(), NewGraph()} {
		c.Set(g, m)
		c.Reorder([]int{2, 2, 0})
		c.Reorder([]int{1, 2})
		if got := c.Value(g).Float64s(); len(got) != 4 || got[0] != 5 || got[1] != 6 || got[2] != 1 || got[3] != 2 {
			t.Fatalf("reordered value %v", got)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Reorder out of range did not panic")
		}
	}()
	c.Reorder([]int{2})
}
