package mcln_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mcln"
)

// R2Gen's LayerNorm divides by the unbiased standard deviation plus eps.
func ExampleLayerNorm() {
	ln := mcln.NewLayerNorm(4)
	y := ln.Forward(radgen.NoGrad(), radgen.FromFloat32([]float32{1, 2, 3, 4}, 1, 4))
	fmt.Printf("%.4f\n", y.Data())
	// Output: [-1.1619 -0.3873 0.3873 1.1619]
}

// A conditional layer norm takes one memory state per position.
func ExampleConditional() {
	c := mcln.NewConditional(8, 3*8, rand.New(rand.NewPCG(1, 1)))
	x := radgen.Zeros(2, 5, 8)       // decoder states (B, T, D)
	memory := radgen.Zeros(2, 5, 24) // relational memory (B, T, S·D)
	fmt.Println(c.Forward(radgen.NoGrad(), x, memory).Shape())
	// Output: [2 5 8]
}

// A decoding step issues every sublayer norm's γ̂ and β̂ from the memory
// before its layers run (on the CPU the engine computes them beside the
// layers' work); each norm then applies its own.
func ExampleConditional_Deltas() {
	rng := rand.New(rand.NewPCG(1, 1))
	norms := []*mcln.Conditional{mcln.NewConditional(8, 24, rng), mcln.NewConditional(8, 24, rng)}
	g := radgen.NoGrad()
	memory := radgen.Zeros(3, 24) // three rows' memory (R, S·D)
	gammas, betas := make([]*radgen.Tensor, 2), make([]*radgen.Tensor, 2)
	for i, c := range norms {
		gammas[i], betas[i] = c.Deltas(g, memory)
	}
	x := norms[0].Apply(g, radgen.Zeros(3, 8), gammas[0], betas[0])
	x = norms[1].Apply(g, x, gammas[1], betas[1])
	fmt.Println(gammas[0].Shape(), x.Shape())
	fmt.Printf("%.4f\n", betas[0].Data()[:3])
	// Output:
	// [3 8] [3 8]
	// [0.2052 0.0804 0.1355]
}
