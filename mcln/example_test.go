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
