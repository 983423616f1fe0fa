package mesh_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mesh"
)

// Meshed cross-attention of 4 word positions over three encoder levels of
// 49 patches, with R2Gen's multi-head attention as the cross-attention C:
// the full pass, then one decoding step per study over the levels
// projected once.
func ExampleMeshedCrossAttention() {
	rng := rand.New(rand.NewPCG(1, 1))
	m := mesh.NewMeshedCrossAttention(mesh.NewMultiHeadAttention(32, 8, 0, rng), 32, 3, rng)
	g := radgen.NoGrad()
	levels := radgen.Zeros(2, 3, 49, 32) // (B, N, R, D)
	radgen.Uniform(levels, rng, 1)
	words := radgen.Zeros(2, 4, 32)
	radgen.Uniform(words, rng, 1)
	fmt.Println(m.Forward(g, words, levels, nil, nil).Shape())

	src := m.Project(g, levels, nil)
	step, probs := m.Step(g, radgen.Zeros(2, 32), nil, src, []int{0, 1}, true)
	fmt.Println(step.Shape(), probs.Shape()) // probabilities: rows, levels, heads, patches
	// Output:
	// [2 4 32]
	// [2 32] [2 3 8 49]
}
