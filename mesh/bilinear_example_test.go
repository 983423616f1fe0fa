package mesh_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mesh"
)

// Three expert tokens attend over six visual tokens by expert bilinear
// attention; each expert gets one D_B-wide embedding and a spatial
// distribution over the visual tokens.
func ExampleBilinearAttention() {
	rng := rand.New(rand.NewPCG(1, 2))
	eba := mesh.NewBilinearAttention(mesh.BilinearConfig{DQuery: 8, DKey: 8, DValue: 8, DBilinear: 8, DMid: 4}, rng)
	experts := radgen.Zeros(1, 3, 8) // (B, M, D)
	visual := radgen.Zeros(1, 6, 8)  // (B, N, D)
	radgen.Uniform(experts, rng, 1)
	radgen.Uniform(visual, rng, 1)
	out, alpha := eba.ForwardWithWeights(radgen.NoGrad(), experts, visual, visual, nil)
	var sum float64
	for j := range 6 {
		sum += alpha.At(0, 1, j)
	}
	fmt.Println(out.Shape(), alpha.Shape())
	fmt.Printf("expert 1's weights sum to %.3f\n", sum)
	// Output:
	// [1 3 8] [1 3 6]
	// expert 1's weights sum to 1.000
}
