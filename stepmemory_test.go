package radgen

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// wsNet is a small network whose step exercises the ops of a training
// step: products, a norm, an activation, dropout, views, a softmax and a
// parameter used twice in one step.
type wsNet struct {
	w1, w2      *Linear
	gamma, beta *Tensor
	x, x2       *Tensor
	onehot      *Tensor
}

func newWSNet(rows, in, hidden, out int) *wsNet {
	rng := rand.New(rand.NewPCG(1, 2))
	n := &wsNet{w1: NewLinear(in, hidden, true, rng), w2: NewLinear(hidden, out, true, rng),
		gamma: NewParam(hidden), beta: NewParam(hidden), x: Zeros(rows, in), x2: Zeros(rows, in), onehot: Zeros(rows, out)}
	Fill(n.gamma, 1)
	Uniform(n.beta, rng, 0.1)
	Uniform(n.x, rng, 1)
	Uniform(n.x2, rng, 1)
	for r := range rows {
		n.onehot.Data()[r*out+r%out] = 1
	}
	return n
}

func (n *wsNet) params() []*Tensor {
	return []*Tensor{n.w1.Weight, n.w1.Bias, n.w2.Weight, n.w2.Bias, n.gamma, n.beta}
}

// loss records the network's loss on g.
func (n *wsNet) loss(g *Graph) *Tensor {
	h := g.Dropout(g.ReLU(n.w1.Forward(g, n.x)), 0.2)
	h2 := n.w1.Forward(g, n.x2) // w1 a second time: its gradient accumulates within the step
	h = g.LayerNorm(g.Add(h, h2), n.gamma, n.beta, 1e-5, NormStandard)
	rows, hidden := h.Shape()[0], h.Shape()[1]
	v := g.Reshape(h, rows/2, 2*hidden) // a view of a step memory result
	h = g.Reshape(g.Mul(v, v), rows, hidden)
	logp := g.LogSoftmax(n.w2.Forward(g, h))
	return g.Scale(g.Sum(g.Mul(logp, n.onehot)), -1/float64(rows))
}

// sgd takes a step of gradient descent on every parameter.
func (n *wsNet) sgd() {
	for _, p := range n.params() {
		d, gd := p.Data(), p.Grad().Data()
		for i := range d {
			d[i] -= 0.05 * gd[i]
		}
	}
}

// wsRun is the trajectory of a run: every graph's loss, the gradients
// before the last update and the parameters after it.
type wsRun struct {
	losses        []float32
	grads, params [][]float32
}

// runWS trains n for steps optimiser steps, each accumulating the
// gradients of accum graphs (made with w, if not nil) before the update;
// the gradients are dropped after it.
func runWS(t *testing.T, n *wsNet, w *StepMemory, steps, accum int) wsRun {
	t.Helper()
	var r wsRun
	for s := range steps {
		for a := range accum {
			opts := []GraphOption{Train(uint64(s*accum + a))}
			if w != nil {
				opts = append(opts, InStepMemory(w))
			}
			g := NewGraph(opts...)
			loss := n.loss(g)
			if err := g.Backward(loss); err != nil {
				t.Fatal(err)
			}
			r.losses = append(r.losses, loss.Data()[0])
		}
		if s == steps-1 {
			for _, p := range n.params() {
				r.grads = append(r.grads, slices.Clone(p.Grad().Data()))
			}
		}
		n.sgd()
		for _, p := range n.params() {
			p.ZeroGrad()
		}
	}
	for _, p := range n.params() {
		r.params = append(r.params, slices.Clone(p.Data()))
	}
	return r
}

// equalBits32 reports whether a and b hold the same float32 values bit for
// bit.
func equalBits32(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func (r wsRun) equal(t *testing.T, want wsRun) {
	t.Helper()
	if !equalBits32(r.losses, want.losses) {
		t.Fatalf("losses %v, want %v", r.losses, want.losses)
	}
	for i := range want.params {
		if !equalBits32(r.grads[i], want.grads[i]) {
			t.Errorf("parameter %d: the last step's gradient differs", i)
		}
		if !equalBits32(r.params[i], want.params[i]) {
			t.Errorf("parameter %d differs after the run", i)
		}
	}
}

// A graph in a step memory computes the losses, gradients and parameters of
// a graph with memory of its own, bit for bit, over several steps, also
// when gradients accumulate over several graphs of one step memory before an
// update; and the step memory's memory is what its steps take.
func TestStepMemory(t *testing.T) {
	for _, accum := range []int{1, 3} {
		want := runWS(t, newWSNet(8, 6, 10, 3), nil, 5, accum)
		w := NewStepMemory()
		got := runWS(t, newWSNet(8, 6, 10, 3), w, 5, accum)
		got.equal(t, want)
		if len(w.mem.floats.buf) == 0 || w.mem.floats.used == 0 || w.mem.floats.used > len(w.mem.floats.buf) {
			t.Fatalf("accumulating %d: the step memory holds %d floats, of which its last step took %d", accum, len(w.mem.floats.buf), w.mem.floats.used)
		}
	}
}

// A warm step in a step memory allocates a small fraction of the bytes of a
// step with memory of its own: the storage of results and gradients, the
// parameters' included, comes from the step memory.
func TestStepMemoryWarmStepAllocs(t *testing.T) {
	n := newWSNet(64, 96, 256, 32)
	w := NewStepMemory()
	step := func(w *StepMemory) {
		var opts []GraphOption // evaluation mode: Dropout draws no mask
		if w != nil {
			opts = append(opts, InStepMemory(w))
		}
		g := NewGraph(opts...)
		if err := g.Backward(n.loss(g)); err != nil {
			t.Fatal(err)
		}
		for _, p := range n.params() {
			p.ZeroGrad()
		}
	}
	bytes := func(w *StepMemory) uint64 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		step(w)
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	step(w)
	step(w) // the step memory grows to the step's size at the start of the second
	fresh := bytes(nil)
	// A fresh step takes every result and gradient anew: over 64·256
	// floats for each of several; a warm step only its ops' small records
	// (the least of a few steps: a pool of the products' buffers that a
	// collection emptied refills itself now and then).
	warm := bytes(w)
	for range 2 {
		warm = min(warm, bytes(w))
	}
	t.Logf("a step allocates %d bytes, a warm step in a step memory %d", fresh, warm)
	if fresh < 1<<20 || warm > fresh/20 {
		t.Fatalf("a warm step in a step memory allocates %d bytes, a step without %d", warm, fresh)
	}
}

// A graph whose step memory a later graph took refuses Backward, and only a
// recording graph takes a step memory.
func TestStepMemoryEnds(t *testing.T) {
	n := newWSNet(4, 3, 5, 2)
	w := NewStepMemory()
	g1 := NewGraph(InStepMemory(w))
	l1 := n.loss(g1)
	g2 := NewGraph(InStepMemory(w))
	l2 := n.loss(g2)
	if err := g1.Backward(l1); err == nil || !strings.Contains(err.Error(), "step memory") {
		t.Fatalf("backward on a graph whose step memory was taken: %v", err)
	}
	if err := g2.Backward(l2); err != nil {
		t.Fatal(err)
	}
	if err := g2.Backward(l2); err == nil {
		t.Fatal("a second backward succeeded")
	}
	for _, f := range []func(){
		func() { NoGrad(InStepMemory(w)) },
		func() { NewGraph(InStepMemory(nil)) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(r.(string), "radgen: ") {
					t.Errorf("recovered %v, want a radgen panic", r)
				}
			}()
			f()
		}()
	}
}

// longTape records a loss whose tape is long enough for a concurrent
// backward pass: a recurrence of many steps through shared weights beside
// an independent branch, joined at the end.
func longTape(g *Graph, n *wsNet, steps int) *Tensor {
	rows := n.x.Shape()[0]
	h := g.ReLU(n.w1.Forward(g, n.x))
	var hs []*Tensor
	for range steps {
		z := g.Add(n.w1.Forward(g, n.x2), h) // w1 and its bias at every step
		h = g.LayerNorm(g.ReLU(z), n.gamma, n.beta, 1e-5, NormStandard)
		hs = append(hs, g.Reshape(h, rows, 1, h.Shape()[1]))
	}
	branch := n.x
	for range 8 {
		branch = g.Softmax(g.MatMul(branch, n.x2, true)) // (rows, rows)
		branch = g.MatMul(branch, n.x, false)
	}
	all := g.Concat(1, hs...) // (rows, steps, hidden)
	y := g.LogSoftmax(n.w2.Forward(g, g.Reshape(g.Mul(all, all), rows*steps, -1)))
	b := g.Sum(g.Mul(branch, branch))
	return g.Add(g.Scale(g.Sum(y), -1/float64(rows*steps)), g.Scale(b, 1e-3))
}

// A backward pass on several goroutines computes every gradient that a
// pass on one computes, bit for bit, with and without a step memory.
func TestBackwardConcurrent(t *testing.T) {
	run := func(procs int, w *StepMemory) [][]float32 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		n := newWSNet(6, 5, 12, 4)
		n.x.SetRequiresGrad(true) // a leaf that is not a parameter
		var grads [][]float32
		for s := range 2 {
			opts := []GraphOption{Train(uint64(s))}
			if w != nil {
				opts = append(opts, InStepMemory(w))
			}
			g := NewGraph(opts...)
			loss := longTape(g, n, 40)
			if len(g.tape) < minConcurrentTape {
				t.Fatalf("a tape of %d steps, want at least %d", len(g.tape), minConcurrentTape)
			}
			if err := g.Backward(loss); err != nil {
				t.Fatal(err)
			}
			grads = append(grads, []float32{loss.Data()[0]})
			for _, p := range append(n.params(), n.x) {
				grads = append(grads, slices.Clone(p.Grad().Data()))
			}
			n.sgd()
			for _, p := range append(n.params(), n.x) {
				p.ZeroGrad()
			}
		}
		return grads
	}
	want := run(1, nil)
	for _, procs := range []int{2, 4} {
		for _, w := range []*StepMemory{nil, NewStepMemory()} {
			got := run(procs, w)
			for i := range want {
				if !equalBits32(got[i], want[i]) {
					t.Fatalf("%d goroutines, step memory %v: gradient %d differs", procs, w != nil, i)
				}
			}
		}
	}
}
