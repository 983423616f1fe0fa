package relmem_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/relmem"
)

// The encoder memory bank condenses L encoder states into r slots, which
// become the decoder's initial memory; each decoding position writes into
// it and reads from it.
func ExampleMem2Mem() {
	rng := rand.New(rand.NewPCG(1, 1))
	m := relmem.NewMem2Mem(3, 8, 16, rng) // r = 3 slots, D = 8, d_a = 16
	h := radgen.Zeros(2, 10, 8)           // encoder states (B, L, D)
	x := radgen.Zeros(2, 5, 8)            // embedded tokens (B, T, D)
	for i := range h.Data() {
		h.Data()[i] = float32(rng.NormFloat64())
	}
	g := radgen.NoGrad()
	bank, attn := m.Bank(g, h)
	states, reads := m.Forward(g, x, h, bank)
	fmt.Println("bank", bank.Shape(), "attention", attn.Shape())
	fmt.Println("states", states.Shape(), "reads", reads.Shape())
	fmt.Println("penalty positive:", relmem.BankPenalty(g, attn).Data()[0] > 0)
	// Output:
	// bank [2 3 8] attention [2 3 10]
	// states [2 5 24] reads [2 5 8]
	// penalty positive: true
}
