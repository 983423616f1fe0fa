package radgen

import "github.com/radgen/radgen/internal/half"

// Ahead runs f and computes the products it issues beside the caller.
//
// In a graph that records nothing, on the CPU, the products that f issues
// through Linears and AddLinear with float32 inputs of at most 48 rows
// are not computed when they are issued: they join the graph's ahead
// batch, and their results are pending. When f returns, the batch starts
// on the CPU's helper threads while the caller goes on (the products the
// caller computes meanwhile are shared out first), and any op that reads
// a pending tensor, or any access to its values, first waits until the
// batch has computed it, computing what is left of it on the calling
// goroutine. A product that reads a pending result runs after it; every
// other joins the products issued before it, so that the helpers meet
// only where a result is needed. Within f, an op other than those
// products that reads a pending result has the batch computed at once up
// to there.
//
// A decoding step is its use: once the step's memory is known, it issues
// the products that read the memory alone — every conditional norm's γ̂
// and β̂, the relational memory's own products for the next step — which
// stream most of the step's weights beside the serial work of the first
// layers.
//
// Elsewhere (a recording graph, a device, float64, more rows) the
// products are computed as f issues them, and Ahead is f. A graph has one
// ahead batch at a time: Ahead, SetArena and its arena's Next first wait
// for the one before. Ahead within f is f.
func (g *Graph) Ahead(f func()) {
	if g.record {
		f()
		return
	}
	if g.ahead == nil {
		g.ahead = new(aheadBatch)
	}
	a := g.ahead
	if a.open {
		f()
		return
	}
	a.finish()
	a.r, a.open = getRunner(), true
	defer a.start()
	f()
}

// aheadBatch is a graph's batch of products computed beside the caller
// (Ahead).
type aheadBatch struct {
	r       *half.Runner // nil when no batch is open or running
	gen     uint32       // the batch's number: a tensor pending in an earlier one is computed
	stage   int32        // r's last stage
	open    bool         // Ahead's f runs: products join r
	started bool         // r runs beside the caller
}

// pendMark marks a tensor whose values an ahead batch computes, in stage
// stage of its batch gen; the zero mark, a tensor whose values are there.
type pendMark struct {
	a     *aheadBatch
	gen   uint32
	stage int32
}

// join readies a's batch for products of xs: a new stage if one of them
// is pending in the last.
func (a *aheadBatch) join(xs ...*Tensor) {
	for _, x := range xs {
		if m := x.pend; m.a == a && m.gen == a.gen && m.stage == a.stage {
			a.r.Barrier()
			a.stage++
			return
		}
	}
}

// mark marks ts pending in a's last stage.
func (a *aheadBatch) mark(ts []*Tensor) {
	for _, t := range ts {
		t.pend = pendMark{a: a, gen: a.gen, stage: a.stage}
	}
}

// start starts the batch that f filled, beside the caller.
func (a *aheadBatch) start() {
	a.open, a.started = false, true
	a.r.Start()
}

// flush computes the products added so far at once, within f: the batch
// goes on empty.
func (a *aheadBatch) flush() {
	a.r.Run()
	a.gen++
	a.stage = 0
}

// finish waits for the batch running beside the caller, if any, and gives
// its runner back.
func (a *aheadBatch) finish() {
	if a == nil || a.open || a.r == nil {
		return
	}
	if a.started {
		a.r.Finish()
		a.started = false
	}
	runners.Put(a.r)
	a.r = nil
	a.gen++
	a.stage = 0
}

// wait returns once the batch has computed the tensor marked m.
func (a *aheadBatch) wait(m pendMark) {
	switch {
	case m.gen != a.gen: // an earlier batch, finished
	case a.open:
		a.flush()
	case a.started:
		a.r.Wait(int(m.stage) + 1)
	}
}

// ready returns once t's values are there: it waits for the ahead batch
// computing them, if any.
func (t *Tensor) ready() {
	if t.lazy != nil {
		t.resolveLazy()
	}
	if m := t.pend; m.a != nil {
		t.pend = pendMark{}
		m.a.wait(m)
	}
}

// waitAhead waits for g's ahead batch, if any.
func (g *Graph) waitAhead() { g.ahead.finish() }
