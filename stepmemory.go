package radgen

import "sync"

// StepMemory keeps the memory of a training step for the step after it: a
// recording graph made with InStepMemory takes the float32 CPU results of
// its ops, their views and the gradients of its backward pass (those of
// the parameters included) from the step memory, and once the step memory has
// grown to a step's size, a step of the same shapes allocates no storage
// for them: no fresh pages for the kernel to zero, no garbage for the
// collector. It is memory reuse only: the values computed are those of a
// graph without a step memory, bit for bit.
//
// A step memory serves one graph at a time. Making the next graph with it
// starts a step: the results of the graph made with it before, and the
// gradients of those results, are overwritten from then on, and that
// graph's Backward returns an error. So a training step reads what it needs
// of its results (the loss) and runs its optimiser before the next step's
// graph is made, as memtrans's Trainer does. A gradient that outlives the
// step stays valid: when the next graph is made, the gradient of every
// tensor the previous graph did not make (a parameter) that is still held
// is first copied into memory of its own, so that gradients accumulated
// over several steps add up as without a step memory. A trainer that drops
// the gradients after every optimiser step (ZeroGrad) pays no copy.
//
// Float64 tensors and tensors on other devices take their memory as
// without a step memory. A StepMemory, like its graphs, belongs to one
// goroutine at a time.
type StepMemory struct {
	mu     sync.Mutex // a concurrent backward pass takes memory from several goroutines
	mem    arenaHalf
	graph  *Graph    // the graph of the current step
	tape   []step    // the tape's storage, kept for the next graph
	ins    []*Tensor // the tape's inputs' (Graph.ins)
	sched  schedule  // the backward pass's, kept for the next graph
	leaves []*Tensor // tensors not made from mem whose gradients may be in it
}

// NewStepMemory returns an empty step memory; it grows during the first step.
func NewStepMemory() *StepMemory { return &StepMemory{} }

// InStepMemory makes a recording graph take the memory of its results and
// their gradients from w, starting a step of w (see StepMemory). A graph
// that records nothing (NoGrad) takes no step memory: with it, InStepMemory
// panics, as does a nil w.
func InStepMemory(w *StepMemory) GraphOption {
	return func(g *Graph) {
		if !g.record {
			panic("radgen: InStepMemory on a graph that records nothing (an Arena serves those)")
		}
		if w == nil {
			panic("radgen: InStepMemory(nil)")
		}
		if g.ws != nil && g.ws != w {
			g.ws.end()
		}
		w.start(g)
	}
}

// start ends the step of the graph using w and begins g's.
func (w *StepMemory) start(g *Graph) {
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
	w.mem.reset(0)
	w.graph = g
	g.ws = w
	g.tape, g.ins = w.tape[:0], w.ins[:0]
	w.tape, w.ins = nil, nil
}

// end detaches the graph of w's current step, whose memory the next step
// takes: its tape (if Backward has not consumed it) is dropped.
func (w *StepMemory) end() {
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
func (w *StepMemory) zeros(shape []int, dirty bool) *Tensor {
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
func (w *StepMemory) view(data []float32, shape []int) *Tensor {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.viewLocked(data, shape)
}

func (w *StepMemory) viewLocked(data []float32, shape []int) *Tensor {
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
func (w *StepMemory) adopt(t *Tensor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t.ws = w
	w.leaves = append(w.leaves, t)
}
