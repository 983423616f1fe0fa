package radgen

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Every length has a class whose buffers hold it, at most a quarter more,
// and the class below holds less.
func TestBufClass(t *testing.T) {
	for n := 1; n < 1<<20; n += 1 + n/97 {
		c := bufClass(n)
		if got := bufClassCap(c); got < n || (n > 8 && got > n+n/4+1) {
			t.Fatalf("n %d: class %d of capacity %d", n, c, got)
		}
		if c > 0 && bufClassCap(c-1) >= n {
			t.Fatalf("n %d: class %d, but class %d holds %d", n, c, c-1, bufClassCap(c-1))
		}
	}
}

// trainSteps runs steps of gradient descent on a small MLP, each on a
// graph of its own (with bufs, if not nil), and returns the losses, the
// parameters' final values, and the gradients of the last step.
func trainSteps(t *testing.T, bufs *Buffers, steps int) (losses []float32, params, grads [][]float32) {
	rng := rand.New(rand.NewPCG(1, 2))
	w1, w2 := NewLinear(6, 8, true, rng), NewLinear(8, 3, true, rng)
	x := Zeros(5, 6)
	Uniform(x, rng, 1)
	ps := []*Tensor{w1.Weight, w1.Bias, w2.Weight, w2.Bias}
	for s := range steps {
		var opts []GraphOption
		if bufs != nil {
			opts = append(opts, ReuseBuffers(bufs))
		}
		g := NewGraph(append(opts, Train(uint64(s)))...)
		h := g.Dropout(g.ReLU(w1.Forward(g, x)), 0.2)
		y := g.Reshape(w2.Forward(g, h), 15) // a view of a pooled result
		loss := g.Scale(g.Sum(g.Mul(y, y)), 1.0/15)
		if err := g.Backward(loss); err != nil {
			t.Fatal(err)
		}
		losses = append(losses, loss.Data()[0])
		if s == steps-1 {
			for _, p := range ps {
				grads = append(grads, slices.Clone(p.Grad().Data()))
			}
		}
		for _, p := range ps {
			d, gd := p.Data(), p.Grad().Data()
			for i := range d {
				d[i] -= 0.1 * gd[i]
			}
			p.ZeroGrad()
		}
		if bufs != nil {
			if !bufs.owns(y.Data()) {
				t.Fatal("the graph's results do not come from its buffers")
			}
			bufs.Recycle()
		}
	}
	for _, p := range ps {
		params = append(params, slices.Clone(p.Data()))
	}
	return losses, params, grads
}

// A graph that reuses the buffers of the steps before it computes what a
// graph with fresh memory computes, bit for bit, and once warm takes no
// new buffer.
func TestReuseBuffers(t *testing.T) {
	wantLoss, wantParams, wantGrads := trainSteps(t, nil, 6)
	bufs := NewBuffers()
	gotLoss, gotParams, gotGrads := trainSteps(t, bufs, 6)
	if !slices.Equal(gotLoss, wantLoss) {
		t.Fatalf("losses %v, want %v", gotLoss, wantLoss)
	}
	for i := range wantParams {
		if !slices.Equal(gotParams[i], wantParams[i]) || !slices.Equal(gotGrads[i], wantGrads[i]) {
			t.Fatalf("parameter %d differs", i)
		}
	}
	kept := bufs.kept
	trainSteps(t, bufs, 3)
	if bufs.kept != kept {
		t.Fatalf("the pool grew from %d to %d floats on steps of the same shapes", kept, bufs.kept)
	}
}
