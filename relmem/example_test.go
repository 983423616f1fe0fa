package relmem_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/relmem"
)

// The relational memory consumes one token embedding per step and returns
// every state, flattened per position.
func ExampleRelational_Forward() {
	rm := relmem.New(3, 16, 4, 0, rand.New(rand.NewPCG(1, 2)))
	g := radgen.NoGrad()
	tokens := radgen.Zeros(2, 5, 16) // (B=2, T=5, D=16) embeddings
	states := rm.Forward(g, tokens, rm.InitMemory(2))
	fmt.Println(states.Shape())
	// Output: [2 5 48]
}

// A decoding steps the memory once per token: each step consumes the
// embedding of the token before.
func ExampleRelational_Step() {
	rm := relmem.New(3, 16, 4, 0, rand.New(rand.NewPCG(1, 2)))
	g := radgen.NoGrad()
	memory := rm.InitMemory(2) // M_0 of two rows
	for range 3 {
		memory = rm.Step(g, radgen.Zeros(2, 16), memory)
	}
	fmt.Println(memory.Shape())
	// Output: [2 3 16]
}
