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
