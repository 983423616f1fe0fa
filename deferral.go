package radgen

import (
	"fmt"
	"slices"

	"github.com/radgen/radgen/internal/half"
)

// The CPU engine defers the products of a graph that records nothing.
//
// A Linear of a float32 input of at most maxBatchRows rows, on such a
// graph on the CPU, is not computed when it is issued: it joins the
// graph's open batch, and its result is pending. A ReLU of a pending
// result, and its sum with a tensor whose values are there (of the
// result's shape, or a vector of its last dimension), join the product as
// its epilogue instead of running as ops of their own. Nothing else waits
// for a pending value until something reads it: an op that reads it, or
// any access to its values (Tensor.ready, through which every access
// goes), needs the batch.
//
// A batch is computed by internal/half's runner, with every weight read
// once for all the rows of its products and the output columns of all of
// them shared out among the cores in one start. The runner computes the
// products in the order they were issued, as far as their dependencies
// allow: a product that reads another's result starts once that product
// is done, and holds up the products issued after it only until then. So
// results are ready in the order the caller issued them, and a read waits
// for no product issued after the one it reads.
//
// When a read needs the batch's last product, the batch runs at once and
// whole. When it needs an earlier one, the batch starts beside the
// caller: the caller computes the products up to the one it needs, with
// the helpers, and goes on while the helpers compute the rest (the work
// that the caller reaches later: in a decoding step, the conditional
// norms' γ̂ and β̂ of the later layers, streamed beside the first layers'
// serial work). A graph has at most one batch running beside it; another
// waits for it first.
//
// The products that a Carried computes ahead for the next step (carried.go)
// join the open batch too; nothing reads them before the next step, and
// submit places them in the middle of the batch.
//
// The values of a deferred product are those of the same product computed
// at once by internal/half's kernels, whatever else shares its batch: a
// row's result depends on that row alone. Deferring is invisible to the
// caller but for one thing: a product reads its operands when it runs. A
// caller that writes in place into a tensor that a pending product reads
// (Tensor.Data's slice) must first read a result of the graph.

// maxBatchRows is the most rows of an input for which Linear defers its
// product (the decoding steps' products: a few rows against a weight that
// the product streams once); larger products run at once, through the
// GEMM.
const maxBatchRows = 48

// batch is a graph's batch of deferred products.
type batch struct {
	g       *Graph
	r       *half.Runner // nil until the batch starts
	gen     uint32       // the batch's number: a mark of another is not of this one
	ops     []product
	started bool // it runs beside the caller
	lastRI  int  // the runner's index of the last product it computes
}

// product is a deferred product, out = addend + act(x·Wᵀ + bias).
type product struct {
	out, x *Tensor
	w      *Tensor // the weight read, after SubstituteWeights
	bias   *Tensor
	addend *Tensor // nil, (N), or out's shape
	relu   bool
	dep    int32 // the product of the batch whose result x is; −1 for none
	ri     int   // the product's index in the runner; −1 for one with nothing to compute
	// read is set once another deferred product or a view reads out: no
	// epilogue may join the product after that.
	read bool
	// late is set for a product computed ahead for a Carried's next value:
	// the runner computes it after the batch's other products.
	late bool
	// rows, where m > 0, restricts the product to rows first, first +
	// stride, … (m of them) of x and of out.
	rows stridedRows
}

// stridedRows are m rows at a fixed stride from row first.
type stridedRows struct{ first, stride, m int }

// pendMark marks a tensor whose values are not computed yet: product op
// of batch b's generation gen; or, with x set, a product
// act(x·Wᵀ + bias) whose result a later op took over with an epilogue
// (see fuse), computed on its own if the tensor is read. The zero mark:
// the values are there.
type pendMark struct {
	b          *batch
	gen        uint32
	op         int32
	relu       bool
	x, w, bias *Tensor
}

// live reports whether m marks a product of b's current batch.
func (m pendMark) live() bool { return m.b != nil && m.gen == m.b.gen }

// deferrable reports whether Linear defers its product of x by w.
func (g *Graph) deferrable(x, w *Tensor) bool {
	if g.record || x.device != CPU || x.Is64() || x.IsHalf() || x.Rank() < 1 || w.device != CPU || w.Rank() != 2 {
		return false
	}
	return (w.IsHalf() || !w.Is64()) && x.Len() <= maxBatchRows*x.Dim(-1)
}

// openBatch returns g's open batch, making one if there is none.
func (g *Graph) openBatch() *batch {
	if g.open == nil {
		if n := len(g.spare); n > 0 {
			g.open, g.spare = g.spare[n-1], g.spare[:n-1]
		} else {
			g.open = &batch{g: g}
		}
	}
	return g.open
}

// deferLinear defers x·Wᵀ + bias (see the file comment) and returns the
// pending result; w is the weight after SubstituteWeights.
func (g *Graph) deferLinear(x, w, bias *Tensor) *Tensor {
	n, k := w.Dim(0), w.Dim(1)
	if x.Dim(-1) != k {
		panic(fmt.Sprintf("radgen: Linear of %v with weight %v", x.shape, w.shape))
	}
	if bias != nil && (bias.Rank() != 1 || bias.Dim(0) != n || bias.device != CPU || bias.Is64()) {
		panic(fmt.Sprintf("radgen: Linear bias %v for weight %v", bias, w.shape))
	}
	if r := x.carried(); r != nil && x.pend.b == nil && x.pend.x == nil {
		if out := g.linearAhead(r, x, w, bias); out != nil {
			return out
		}
	}
	// x and the bias are computed first unless x is a product of the open
	// batch (computing them may run the open batch itself).
	if m := x.pend; m.b == nil || m.b != g.open || !m.live() || m.x != nil {
		x.ready()
	}
	if bias != nil {
		bias.ready()
	}
	b := g.openBatch()
	dep := int32(-1)
	if m := x.pend; m.b == b && m.live() {
		dep = m.op
		b.ops[m.op].read = true
	}
	var buf [8]int // on the stack for ranks up to 8
	out := g.empty(x, append(append(buf[:0], x.shape[:x.Rank()-1]...), n))
	return g.issue(product{out: out, x: x, w: w, bias: bias, dep: dep})
}

// issue adds p to g's open batch and returns p.out, its result, pending.
func (g *Graph) issue(p product) *Tensor {
	b := g.openBatch()
	p.out.pend = pendMark{b: b, gen: b.gen, op: int32(len(b.ops))}
	b.ops = append(b.ops, p)
	return p.out
}

// fusable returns the product whose pending result t is, where an
// epilogue may still join it: a product of g's open batch that nothing
// reads yet.
func (g *Graph) fusable(t *Tensor) *product {
	m := t.pend
	if t.device != CPU || m.b == nil || m.b != g.open || !m.live() {
		return nil
	}
	if p := &m.b.ops[m.op]; !p.read && p.addend == nil {
		return p
	}
	return nil
}

// fuse makes p's result the tensor it returns, a new pending result with
// p's epilogue changed by edit, and t, p's result until now, a product to
// be computed on its own if it is read (t's holder may still read it).
func (g *Graph) fuse(t *Tensor, p *product, edit func(*product)) *Tensor {
	u := g.empty(t, t.shape)
	u.pend = t.pend
	t.pend = pendMark{relu: p.relu, x: p.x, w: p.w, bias: p.bias}
	p.out = u
	edit(p)
	return u
}

// fuseReLU returns ReLU(x) as the epilogue of the deferred product x is
// the pending result of, if it can join it.
func (g *Graph) fuseReLU(x *Tensor) (*Tensor, bool) {
	p := g.fusable(x)
	if p == nil || p.relu {
		return nil, false
	}
	return g.fuse(x, p, func(p *product) { p.relu = true }), true
}

// fuseAdd returns a + b as the epilogue of the deferred product that one
// of them is the pending result of, if the other's values are there and
// it can join it: the product's shape, or a vector of its last dimension.
func (g *Graph) fuseAdd(a, b *Tensor) (*Tensor, bool) {
	for _, pair := range [2][2]*Tensor{{a, b}, {b, a}} {
		t, c := pair[0], pair[1]
		p := g.fusable(t)
		if p == nil || c.pend.live() || c.pend.x != nil || c.device != CPU || c.Is64() || c.IsHalf() || c == t {
			continue
		}
		if slices.Equal(c.shape, t.shape) || c.Rank() == 1 && c.Dim(0) == t.Dim(-1) {
			return g.fuse(t, p, func(p *product) { p.addend = c }), true
		}
	}
	return nil, false
}

// submit adds the batch's products to its runner, each after the one
// whose result it reads, in the order they were issued but for two
// things. A product that reads the result of the product just before it
// trades places with the next product that reads neither, so that the
// runner streams that product's weights while the last chunks of the one
// before finish, instead of waiting for them (a conditional norm's two
// MLPs, issued one after the other, run as their first layers, then their
// second layers). And the products computed ahead for a Carried's next
// value, which nothing reads before the next step, go in the middle of
// the others' weight stream: after the products that the caller reaches
// first, and early enough to be done before the step ends (a decoding
// step's relational-memory products, after the first layer's γ̂ and β̂).
func (b *batch) submit() {
	b.r = getRunner()
	b.lastRI = -1
	last, held := int32(-1), int32(-1)
	place := func(i int32) {
		p := &b.ops[i]
		after := 0
		if p.dep >= 0 {
			after = b.ops[p.dep].ri + 1
		}
		p.ri = p.add(b.r, after)
		last = i
		if p.ri >= 0 {
			b.lastRI = p.ri
		}
	}
	mid, late := 0, false // half of the weight bytes of the products not late
	for i := range b.ops {
		if b.ops[i].late {
			late = true
		} else {
			mid += weightBytes(b.ops[i].w)
		}
	}
	mid /= 2
	placeLate := func() {
		if held >= 0 {
			place(held)
			held = -1
		}
		for i := range int32(len(b.ops)) {
			if b.ops[i].late {
				place(i)
			}
		}
		late = false
	}
	streamed := 0
	for i := range int32(len(b.ops)) {
		p := &b.ops[i]
		if p.late {
			continue
		}
		if late && streamed >= mid {
			placeLate()
		}
		streamed += weightBytes(p.w)
		switch {
		case held >= 0 && p.dep != held:
			place(i)
			place(held)
			held = -1
		case held >= 0: // a chain: the held product, then this one in its place
			place(held)
			held = i
		case p.dep >= 0 && p.dep == last:
			held = i
		default:
			place(i)
		}
	}
	if held >= 0 {
		place(held)
	}
	if late {
		placeLate()
	}
}

// add adds p to r, after r's op after−1 (none for 0), and returns its
// index in r.
func (p *product) add(r *half.Runner, after int) int {
	var hw half.Weights
	if p.w.IsHalf() {
		hw = *p.w.host.(*half.Weights)
	} else {
		hw = half.Float32(p.w.Dim(0), p.w.Dim(1), hostValues[float32](p.w))
	}
	var bias []float32
	if p.bias != nil {
		bias = hostValues[float32](p.bias)
	}
	y := hostValues[float32](p.out)
	x := hostValues[float32](p.x)
	if s := p.rows; s.m > 0 { // no epilogue joins such a product
		return r.Add(half.Op{M: s.m, X: x[s.first*hw.K:], LDX: s.stride * hw.K, W: hw, Bias: bias, Y: y[s.first*hw.N:], LDY: s.stride * hw.N, After: after})
	}
	if a := p.addend; a != nil {
		av := hostValues[float32](a)
		if len(av) == len(y) {
			copy(y, av)
		} else {
			for row := y; len(row) > 0; row = row[hw.N:] {
				copy(row, av)
			}
		}
	}
	return r.Add(half.Op{M: p.x.Len() / max(hw.K, 1), X: x, W: hw, Bias: bias, Y: y, ReLU: p.relu, Add: p.addend != nil, After: after})
}

// asideBytes is the least weight bytes that the products issued after
// the one a read needs must stream for the batch to start beside the
// caller; with fewer, the batch runs whole at once (the caller would
// reach them before a batch started beside it had saved anything).
const asideBytes = 4 << 20

// need returns once the batch has computed product op.
func (b *batch) need(op int32) {
	g := b.g
	if !b.started {
		if g.open == b {
			g.open = nil
		}
		// The products the runner computes after op: those issued after
		// it, and those computed ahead, which come last.
		var rest int
		opLate := b.ops[op].late
		for i := range b.ops {
			if p := &b.ops[i]; int32(i) != op && (p.late || int32(i) > op && !opLate) {
				rest += weightBytes(p.w)
			}
			if rest >= asideBytes {
				break
			}
		}
		if rest < asideBytes {
			b.finish()
			return
		}
		b.submit()
		if g.running != nil {
			g.running.finish()
		}
		b.r.Start()
		b.started, g.running = true, b
	}
	if b.ops[op].ri == b.lastRI {
		b.finish()
		return
	}
	b.r.Wait(b.ops[op].ri)
}

// weightBytes returns the bytes a product streams of the weight w.
func weightBytes(w *Tensor) int {
	if w.IsHalf() {
		return w.host.(*half.Weights).Bytes()
	}
	return 4 * w.Len()
}

// finish computes the whole batch.
func (b *batch) finish() {
	if b.started {
		b.r.Finish()
	} else {
		b.submit()
		b.r.Run()
	}
	b.done()
}

// done gives the runner of a computed batch back and keeps the batch for
// the graph's next one.
func (b *batch) done() {
	g := b.g
	if g.running == b {
		g.running = nil
	}
	runners.Put(b.r)
	b.r = nil
	clear(b.ops) // drop the references to the operands
	b.ops, b.started = b.ops[:0], false
	b.gen++
	g.spare = append(g.spare, b)
}

// ready returns once t's values are there: it computes them, or waits for
// the batch computing them, if they are pending.
func (t *Tensor) ready() {
	if t.lazy != nil { // a deferred convolution (ops_conv_infer.go)
		t.resolveLazy()
	}
	m := t.pend
	if m.b == nil && m.x == nil {
		return
	}
	t.pend = pendMark{}
	switch {
	case m.x != nil: // a product taken over by an epilogue: t's own
		m.x.ready()
		p := product{out: t, x: m.x, w: m.w, bias: m.bias, relu: m.relu}
		r := getRunner()
		p.add(r, 0)
		r.Run()
		runners.Put(r)
	case m.live():
		m.b.need(m.op)
	}
}

// sync computes every product g has deferred.
func (g *Graph) sync() {
	if b := g.open; b != nil && len(b.ops) > 0 {
		g.open = nil
		b.finish()
	}
	if b := g.running; b != nil {
		b.finish()
	}
}
