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

// A decoding prepares the memory's next step ahead, beside its other work,
// then steps from the prepared memory.
func ExampleRelational_Prepare() {
	rm := relmem.New(3, 16, 4, 0, rand.New(rand.NewPCG(1, 2)))
	g := radgen.NoGrad()
	var next relmem.Prepared
	g.Ahead(func() { next = rm.Prepare(g, rm.InitMemory(2)) }) // M W_q, M W_k, M W_v and U·tanh(M)
	// ... other work on g ...
	memory := rm.StepPrepared(g, radgen.Zeros(2, 16), next)
	fmt.Println(memory.Shape())
	// Output: [2 3 16]
}
