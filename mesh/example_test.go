package mesh_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mesh"
)

// Cross-attention of 4 word positions over 98 image patches.
func ExampleMultiHeadAttention_Forward() {
	att := mesh.NewMultiHeadAttention(32, 8, 0.1, rand.New(rand.NewPCG(1, 1)))
	words := radgen.Zeros(2, 4, 32)
	patches := radgen.Zeros(2, 98, 32)
	out := att.Forward(radgen.NoGrad(), words, patches, patches, nil)
	fmt.Println(out.Shape())
	// Output: [2 4 32]
}
