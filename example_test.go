package radgen_test

import (
	"fmt"

	"github.com/radgen/radgen"
)

// A recording graph differentiates: here d/dw Σ (x·w)² at x = [1, 2],
// w = [3, 4] is 2·(x·w)·x = [22, 44].
func ExampleGraph_Backward() {
	w := radgen.FromFloat32([]float32{3, 4}, 2, 1).SetRequiresGrad(true)
	x := radgen.FromFloat32([]float32{1, 2}, 1, 2)
	g := radgen.NewGraph()
	y := g.MatMul(x, w, false) // (1, 1): 11
	loss := g.Sum(g.Mul(y, y))
	if err := g.Backward(loss); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(loss.Data(), w.Grad().Data())
	// Output: [121] [22 44]
}

// Inference runs on a NoGrad graph: ops execute eagerly and record nothing.
func ExampleNoGrad() {
	g := radgen.NoGrad()
	p := g.Softmax(radgen.FromFloat32([]float32{0, 0, 0, 0}, 1, 4))
	fmt.Println(p.Data(), p.RequiresGrad())
	// Output: [0.25 0.25 0.25 0.25] false
}

// An incremental computation takes each step's results from an arena: a
// step's tensors stay valid through the next step, so a running state
// (here a sum) may be carried from one step to the next, and once the
// arena has grown the steps allocate nothing.
func ExampleArena() {
	g := radgen.NoGrad()
	arena := radgen.NewArena()
	g.SetArena(arena)
	state := radgen.FromFloat32([]float32{0, 0}, 1, 2) // made before: not the arena's
	for step := 1; step <= 3; step++ {
		arena.Next()
		x := g.Scale(radgen.FromFloat32([]float32{1, 10}, 1, 2), float64(step))
		state = g.Add(state, x) // reads the previous step's state
	}
	fmt.Println(state.Data())
	// Output: [6 60]
}

// A weight matrix stored in half precision halves what a product reads;
// Linear reads it in a graph that records no gradient, here in place of
// the float32 weight through SubstituteWeights.
func ExampleSubstituteWeights() {
	w := radgen.FromFloat32([]float32{0.1, 0.2, 0.3, 0.4}, 2, 2) // out × in
	x := radgen.FromFloat32([]float32{1, 1}, 1, 2)
	half := map[*radgen.Tensor]*radgen.Tensor{w: w.ToHalf()}
	g := radgen.NoGrad(radgen.SubstituteWeights(half))
	y := g.Linear(x, w, nil)
	fmt.Printf("%.4f %v\n", y.Data(), half[w])
	// Output: [0.2999 0.7000] Tensor[2 2](float16, cpu)
}

// On a graph that records nothing, the CPU engine defers a decoding
// step's products: here a two-layer MLP, whose second layer reads the
// first's result, is computed when its result is read — both layers in
// one batch, the ReLU and the sum as parts of the products — while the
// caller's other ops run as they are issued.
func ExampleGraph_Linear_deferred() {
	l0 := &radgen.Linear{Weight: radgen.FromFloat32([]float32{1, 0, 0, 1, 1, 1}, 3, 2)} // 2 → 3
	l1 := &radgen.Linear{Weight: radgen.FromFloat32([]float32{1, 1, 1}, 1, 3)}          // 3 → 1
	x := radgen.FromFloat32([]float32{2, -3}, 1, 2)
	g := radgen.NoGrad()
	h := g.ReLU(l0.Forward(g, x))                                       // ReLU(l0·x)
	y := g.Add(radgen.FromFloat32([]float32{0.5}, 1), l1.Forward(g, h)) // 0.5 + l1·h
	other := g.Scale(x, 10)                                             // runs now
	fmt.Println(y.Data(), h.Data(), other.Data())
	// Output: [2.5] [2 0 0] [20 -30]
}

// A recurrent state carried from step to step, its rows reordered between
// steps as a beam search keeps and repeats them. The step's products of
// the carried rows (here q = m·Wᵀ) are computed ahead for the next value
// as soon as it is set, and served reordered: the results are those of
// the same products issued on the reordered value.
func ExampleCarried() {
	w := radgen.FromFloat32([]float32{1, 0, 0, 2}, 2, 2) // q = (m₀, 2·m₁)
	proj := &radgen.Linear{Weight: w}
	g := radgen.NoGrad()
	var memory radgen.Carried
	memory.Set(g, radgen.FromFloat32([]float32{1, 1, 2, 2}, 2, 2))
	for range 3 {
		m := memory.Value(g)
		q := proj.Forward(g, m)
		fmt.Println(q.Data())
		memory.Set(g, g.Add(m, q))  // the next memory
		memory.Reorder([]int{1, 1}) // both rows continue the second
	}
	// Output:
	// [1 2 2 4]
	// [4 12 4 12]
	// [8 36 8 36]
}
