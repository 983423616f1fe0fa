package radgen

import (
	"fmt"

	"github.com/radgen/radgen/internal/freelist"
	"github.com/radgen/radgen/internal/half"
)

// A Batch is a sequence of stages of linear maps (Graph.Linears) that runs
// beside the goroutine that made it: Start hands it to the CPU's helper
// threads, the caller goes on with other ops (whose own products the
// helpers serve first), and Wait joins in and returns once the results of
// the first stages are there. A stage may read the results of the stages
// before it. A decoding step uses it to stream the weights of later layers
// while the serial work of the first layers keeps its own goroutine busy.
//
// The results of a stage may not be read before a Wait that covers it.
// Where Graph.Linears would not batch a stage's maps (on a device, in a
// recording graph, in float64, with more rows), the stage and those before
// it are computed when it is added, and Start and Wait have nothing left
// to do. A Batch belongs to one goroutine and one graph; Finish gives it
// back, and it may not be used after.
type Batch struct {
	g      *Graph
	r      *half.Runner
	stages int  // stages added
	pend   int  // stages added to r and not yet computed
	start  bool // r was started
}

// batches holds idle batches, so that a warm decoding step allocates none.
var batches = freelist.New[Batch](16)

// Batch returns an empty batch of linear maps on g.
func (g *Graph) Batch() *Batch {
	b := batches.Get()
	if b == nil {
		b = new(Batch)
	}
	b.g, b.r = g, getRunner()
	return b
}

// Linears adds a stage to b: out[i] = act(xs[i]·Wᵢᵀ + bᵢ) as Graph.Linears
// computes it. The inputs may be results of b's earlier stages. It panics
// once b has started.
func (b *Batch) Linears(out, xs []*Tensor, ls []*Linear, relu bool) {
	if b.start {
		panic("radgen: Batch.Linears after Start")
	}
	b.stages++
	switch {
	case !b.g.batchable(xs):
		b.flush() // computed at once below: the stages before it may hold its inputs
	case b.pend > 0:
		b.r.Barrier()
	}
	if b.g.addLinears(b.r, "Batch.Linears", out, xs, ls, relu) {
		b.pend++
	}
}

// LinearsBeside adds maps to b's last stage, beside the maps already in
// it: out[i] = act(xs[i]·Wᵢᵀ + bᵢ) as Linears computes them, with an
// activation of their own. They may read the results of the stages before
// the last, not of the last itself, and the stage count stays. Putting
// independent maps in one stage spares the goroutines computing b a
// meeting at the stage's end. On an empty batch it is Linears. It panics
// once b has started.
func (b *Batch) LinearsBeside(out, xs []*Tensor, ls []*Linear, relu bool) {
	if b.start {
		panic("radgen: Batch.LinearsBeside after Start")
	}
	if b.stages == 0 {
		b.Linears(out, xs, ls, relu)
		return
	}
	if !b.g.batchable(xs) {
		b.flush() // computed at once below: the stages before the last may hold its inputs
	}
	if b.g.addLinears(b.r, "Batch.LinearsBeside", out, xs, ls, relu) && b.pend == 0 {
		b.pend = 1 // the last stage was computed at once; the runner holds these maps alone
	}
}

// Stages returns the number of stages added to b.
func (b *Batch) Stages() int { return b.stages }

// flush computes the stages added to the runner so far, at once.
func (b *Batch) flush() {
	if b.pend > 0 {
		b.r.Run()
		b.pend = 0
	}
}

// Start begins computing b's stages beside the calling goroutine.
func (b *Batch) Start() {
	if b.start {
		panic("radgen: Batch started twice")
	}
	b.start = true
	b.r.Start()
}

// Wait returns once the results of b's first n stages are computed
// (every stage's if n exceeds their number), computing what is left of
// them on the calling goroutine.
func (b *Batch) Wait(n int) {
	if !b.start {
		panic("radgen: Batch.Wait before Start")
	}
	if n < 0 {
		panic(fmt.Sprintf("radgen: Batch.Wait(%d)", n))
	}
	// The stages computed at once come first: the runner holds the
	// rest, from stage b.stages − b.pend on.
	if k := n - (b.stages - b.pend); k > 0 {
		b.r.Wait(k)
	}
}

// Finish waits for every stage of b and gives b back.
func (b *Batch) Finish() {
	if b.start {
		b.r.Finish()
	} else {
		b.flush()
	}
	runners.Put(b.r)
	*b = Batch{}
	batches.Put(b)
}
