package radgen

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Graph records the ops applied to tensors so that Backward can compute
// gradients by reverse-mode differentiation. There are no globals: every op
// is a method of the Graph it is recorded on.
//
// A Graph made by NoGrad records nothing; it is what inference uses. Its
// ops run as they are issued, but for the products that the CPU engine
// defers and batches (see Linear): their results are computed when they
// are first read. A recording Graph (NewGraph) is for one forward/backward
// pass; make a new one per training step. A graph of either kind belongs
// to one goroutine at a time; graphs cost nothing to make, so concurrent
// work (a model serving many requests) makes one per goroutine, sharing
// the parameters, which ops only read.
type Graph struct {
	record bool
	train  bool
	rng    *rand.Rand
	tape   []step
	stored map[*Tensor]*Tensor // SubstituteWeights
	arena  *Arena              // SetArena
	ws     *StepMemory         // InStepMemory, while the step is the step memory's current one
	ended  bool                // a later graph took its step memory
	// ins holds the inputs that require gradients of the tape's ops, each
	// step's from its lo to its hi; inLo is where needs put the next op's.
	ins  []*Tensor
	inLo int
	// The CPU engine's deferred products (deferral.go): the batch that
	// products join, the one running beside the caller, and computed ones
	// kept for reuse.
	open, running *batch
	spare         []*batch
}

// GraphOption configures a Graph.
type GraphOption func(*Graph)

// Train puts the graph in training mode: Dropout draws masks from a PCG
// generator seeded with seed. Without it the graph is in evaluation mode and
// Dropout is the identity.
func Train(seed uint64) GraphOption {
	return func(g *Graph) {
		g.train = true
		g.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	}
}

// TrainWithRand is Train with a caller-owned generator (for resumable runs
// that save the generator's state).
func TrainWithRand(r *rand.Rand) GraphOption {
	return func(g *Graph) { g.train = true; g.rng = r }
}

// NewGraph returns a graph that records ops for Backward.
func NewGraph(opts ...GraphOption) *Graph {
	g := &Graph{record: true}
	for _, o := range opts {
		o(g)
	}
	return g
}

// NoGrad returns a graph that records nothing: its results do not require
// gradients, and its ops run as they are issued, but for the CPU engine's
// deferred products (see Linear). Options such as Train still apply.
func NoGrad(opts ...GraphOption) *Graph {
	g := &Graph{}
	for _, o := range opts {
		o(g)
	}
	return g
}

// Training reports whether dropout is active.
func (g *Graph) Training() bool { return g.train }

// Recording reports whether ops are recorded for Backward.
func (g *Graph) Recording() bool { return g.record }

// needs reports whether an op on inputs must be recorded. Nil inputs (an
// absent optional bias, say) are ignored.
func (g *Graph) needs(inputs ...*Tensor) bool {
	if !g.record {
		return false
	}
	need := false
	g.inLo = len(g.ins)
	for _, t := range inputs {
		if t != nil && t.requiresGrad {
			need = true
			g.ins = append(g.ins, t) // the op's, if it is pushed next
			if g.ws != nil && t.ws != g.ws {
				g.ws.adopt(t) // a parameter, say, whose gradient will come from the step memory
			}
		}
	}
	return need
}

// step is an op's entry on the tape: its result, the backward pass that
// sends the result's gradient on to the op's inputs, and those inputs
// (g.ins[lo:hi], the ones needs saw requiring gradients).
type step struct {
	out      *Tensor
	backward func()
	lo, hi   int32
}

// push records backward for out, an op's result, whose inputs are those
// of the last call of needs; out is marked as requiring gradients.
func (g *Graph) push(out *Tensor, backward func()) {
	out.requiresGrad = true
	g.inLo = min(g.inLo, len(g.ins))
	g.tape = append(g.tape, step{out, backward, int32(g.inLo), int32(len(g.ins))})
	g.inLo = len(g.ins)
}

// ErrNotScalar is returned by Backward when the loss has more than one element.
var ErrNotScalar = errors.New("radgen: backward from a non-scalar")

// Backward computes the gradient of loss (a one-element tensor) with respect
// to every tensor that requires gradients and was used to compute it,
// accumulating into their Grad. The tape is consumed: a second call returns
// an error.
func (g *Graph) Backward(loss *Tensor) error {
	if !g.record {
		return errors.New("radgen: backward on a graph that does not record")
	}
	if loss.Len() != 1 {
		return fmt.Errorf("%w: shape %v", ErrNotScalar, loss.shape)
	}
	if !loss.requiresGrad {
		return errors.New("radgen: loss does not depend on any tensor that requires gradients")
	}
	if g.ended {
		return errors.New("radgen: backward on a graph whose step memory a later graph took")
	}
	if g.tape == nil {
		return errors.New("radgen: graph already consumed by Backward")
	}
	seed := g.like(loss, loss.shape)
	setAll(seed, 1)
	give(loss, seed) // a temporary: it becomes the loss's gradient
	if workers := backwardWorkers(g, loss); workers > 1 {
		g.backwardConcurrent(workers)
	} else {
		for i := len(g.tape) - 1; i >= 0; i-- {
			g.backwardStep(i)
		}
	}
	clear(g.ins)
	if g.ws != nil {
		g.ws.tape = g.tape[:0] // for the step memory's next graph
		g.ws.ins = g.ins[:0]
	}
	g.tape, g.ins = nil, nil
	return nil
}

// backwardStep runs the backward pass of the tape's step i.
func (g *Graph) backwardStep(i int) {
	st := g.tape[i]
	st.backward()
	// The result's gradient has been sent on, and its storage may now be
	// an input's gradient (give): an op's result keeps none.
	st.out.grad = nil
	g.tape[i] = step{}
}

// gradOf returns t's gradient buffer, allocating zeros on first use.
func gradOf(t *Tensor) *Tensor {
	if t.grad == nil {
		t.grad = zerosLike(t, t.shape)
	}
	return t.grad
}

// gradTarget returns t's gradient as the destination of a product that
// writes all of it, and the β that product needs: 1 to add to a gradient
// already there, 0 for one made now, zeros whose values the product need
// not read (zeros all the same, for a product with an empty inner
// dimension).
func gradTarget(t *Tensor) (*Tensor, float64) {
	if t.grad != nil {
		return t.grad, 1
	}
	t.grad = zerosLike(t, t.shape)
	return t.grad, 0
}

// zerosLike returns a tensor of zeros of shape, of t's element type on
// t's device: a gradient of t, from the step memory of t's graph where it
// has one.
func zerosLike(t *Tensor, shape []int) *Tensor {
	switch {
	case t.device != CPU:
		return devFull(t, shape, 0)
	case t.ws != nil && !t.Is64():
		return t.ws.zeros(shape, false)
	}
	return like(t, shape)
}

// give adds g into t's gradient, g a tensor of t's size that no one else
// holds or will write (a temporary, or the gradient of an op's result
// during that op's backward pass): where t has no gradient yet, g becomes
// it (viewed with t's shape), without a copy. It reports whether it did.
func give(t *Tensor, g *Tensor) bool { return send(t, g, 1, true) }

// send adds alpha·g into t's gradient (g of t's size), taking g itself as
// the gradient where own allows it (see give).
func send(t *Tensor, g *Tensor, alpha float64, own bool) (taken bool) {
	if !t.requiresGrad {
		return false
	}
	p := primsOf("backward", t, g)
	if t.grad == nil {
		if own && alpha == 1 {
			if w := g.ws; w != nil && t.ws != w {
				w.adopt(t) // its gradient is now memory of the step memory
			}
			t.grad = g
			if !slices.Equal(g.shape, t.shape) {
				t.grad = reshapeGrad(g, t.shape)
			}
			return true
		}
		t.grad = zerosLike(t, t.shape)
	}
	p.axpy(t.grad.at(0), g.at(0), alpha, g.Len())
	keep(t.grad, g)
	return false
}

func setAll(t *Tensor, v float64) {
	primsOf("Fill", t).fill(t.at(0), v, t.Len())
	keep(t)
}
