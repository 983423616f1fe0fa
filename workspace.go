package radgen

import "sync"

// Workspace keeps the memory of a training step for the step after it: a
// recording graph made with InWorkspace takes the float32 CPU results of
// its ops, their views and the gradients of its backward pass (those of
// the parameters included) from the workspace, and once the workspace has
// grown to a step's size, a step of the same shapes allocates no storage
// for them: no fresh pages for the kernel to zero, no garbage for the
// collector. It is memory reuse only: the values computed are those of a
// graph without a workspace, bit for bit.
//
// A workspace serves one graph at a time. Making the next graph with it
// starts a step: the results of the graph made with it before, and the
// gradients of those results, are overwritten from then on, and that
// graph's Backward returns an error. So a training step reads what it needs
// of its results (the loss) and runs its optimiser before the next step's
// graph is made, as memtrans's Trainer does. A gradient that outlives the
// step stays valid: when the next graph is made, the gradient of every
// tensor the previous graph did not make (a parameter) that is still held
// is first copied into memory of its own, so that gradients accumulated
// over several steps add up as without a workspace. A trainer that drops
// the gradients after every optimiser step (ZeroGrad) pays no copy.
//
// Float64 tensors and tensors on other devices take their memory as
// without a workspace. A Workspace, like its graphs, belongs to one
// goroutine at a time.
type Workspace struct {
	mu     sync.Mutex // a concurrent backward pass takes memory from several goroutines
	mem    arenaHalf
	graph  *Graph    // the graph of the current step
	tape   []step    // the tape's storage, kept for the next graph
	ins    []*Tensor // the tape's inputs' (Graph.ins)
	sched  schedule  // the backward pass's, kept for the next graph
	leaves []*Tensor // tensors not made from mem whose gradients may be in it
}

// NewWorkspace returns an empty workspace; it grows during the first step.
func NewWorkspace() *Workspace { return &Workspace{} }

// InWorkspace makes a recording graph take the memory of its results and
// their gradients from w, starting a step of w (see Workspace). A graph
// that records nothing (NoGrad) takes no workspace: with it, InWorkspace
// panics, as does a nil w.
func InWorkspace(w *Workspace) GraphOption {
	return func(g *Graph) {
		if !g.record {
			panic("radgen: InWorkspace on a graph that records nothing (an Arena serves those)")
		}
		if w == nil {
			panic("radgen: InWorkspace(nil)")
		}
		if g.ws != nil && g.ws != w {
			g.ws.end()
		}
		w.start(g)
	}
}

// start ends the step of the graph using w and begins g's.
func (w *Workspace) start(g *Graph) {
	w.end()
	for i, t := range w.leaves {
		if t.grad != nil && t.grad.device == CPU && !t.grad.Is64() {
			c := newTensor(t.grad.dtype(), t.shape)
			copy(hostValues[float32](c), hostValues[float32](t.grad))
			t.grad = c
		}
		if t.ws == w {
			t.ws = nil
		}
		w.leaves[i] = nil
	}
	w.leaves = w.leaves[:0]
	w.mem.floats.reset()
	w.mem.tensors.reset()
	w.mem.shapes.reset()
	w.mem.headers.reset()
	w.graph = g
	g.ws = w
	g.tape, g.ins = w.tape[:0], w.ins[:0]
	w.tape, w.ins = nil, nil
}

// end detaches the graph of w's current step, whose memory the next step
// takes: its tape (if Backward has not consumed it) is dropped.
func (w *Workspace) end() {
	if g := w.graph; g != nil {
		if g.tape != nil {
			clear(g.tape)
			clear(g.ins)
			w.tape, w.ins = g.tape[:0], g.ins[:0]
		}
		g.tape, g.ins = nil, nil
		g.ws = nil
		g.ended = true
		w.graph = nil
	}
}

// zeros returns a float32 CPU tensor of shape from w, filled with zeros,
// or with whatever w held when dirty is set (for an op that writes every
// value); its gradient will come from w too.
func (w *Workspace) zeros(shape []int, dirty bool) *Tensor {
	n := checkShape(shape)
	w.mu.Lock()
	data := w.mem.floats.take(n, false)
	t := w.viewLocked(data, shape)
	w.mu.Unlock()
	if !dirty {
		clear(data) // outside the lock: a concurrent backward pass's other ops go on
	}
	return t
}

// view returns a CPU tensor of shape over data, from w.
func (w *Workspace) view(data []float32, shape []int) *Tensor {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.viewLocked(data, shape)
}

func (w *Workspace) viewLocked(data []float32, shape []int) *Tensor {
	h := &w.mem
	t := &h.tensors.take(1, true)[0]
	hdr := &h.headers.take(1, true)[0]
	*hdr = data
	t.host = hdr
	t.shape = h.shapes.take(len(shape), false)
	copy(t.shape, shape)
	t.device = CPU
	t.ws = w
	return t
}

// adopt notes that t, which w did not make, may come to hold a gradient
// in w's memory, to be copied out before the next step overwrites it.
func (w *Workspace) adopt(t *Tensor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t.ws = w
	w.leaves = append(w.leaves, t)
}
