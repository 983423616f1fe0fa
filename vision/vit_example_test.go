package vision_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/vision"
)

// A 32×32 gray image is cut into sixteen 8×8 patches, which a small ViT with
// three expert tokens encodes. The orthogonal loss of the experts is below
// its maximum M(M−1) = 6: freshly initialised experts are far from parallel.
func ExampleViT() {
	rng := rand.New(rand.NewPCG(1, 1))
	vit, err := vision.NewViT(vision.ViTConfig{DIn: 64, Patches: 16, Experts: 3, D: 32, Heads: 4, DFF: 64, Layers: 2}, rng)
	if err != nil {
		panic(err)
	}
	g := radgen.NoGrad()
	img := radgen.Zeros(1, 1, 32, 32)
	radgen.Uniform(img, rng, 1)
	visual, experts := vit.Forward(g, vision.Patchify(g, img, 8))
	loss := vision.OrthogonalLoss(g, experts).Data()[0]
	fmt.Println(visual.Shape(), experts.Shape(), loss < 6)
	// Output: [1 16 32] [1 3 32] true
}
