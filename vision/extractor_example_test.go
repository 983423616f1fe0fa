package vision_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/vision"
)

// An IU X-Ray study has two views; the extractor runs its trunk on both and
// concatenates their patch features (49 + 49 = 98 for 224² views with
// ResNet-101) and their averaged features. Here a small ResNet on 64² views
// makes 2×2 patches per view.
func ExampleExtractor_Extract() {
	rng := rand.New(rand.NewPCG(1, 2))
	tiny := vision.ResNetConfig{Block: vision.BasicBlock, Layers: [4]int{1, 1, 1, 1}}
	ext, err := vision.NewExtractor(tiny, rng)
	if err != nil {
		fmt.Println(err)
		return
	}
	study := radgen.Zeros(1, 2, 3, 64, 64) // [B, V, 3, H, W]: one study, two views
	patches, avg, err := ext.Extract(context.Background(), study)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("patches", patches.Shape())
	fmt.Println("avg", avg.Shape())
	fmt.Println(radgen.Params(ext)[0].Name)
	// Output:
	// patches [1 8 512]
	// avg [1 1024]
	// model.0.weight
}

// InferResNet reads the architecture from the names of the weights alone.
func ExampleInferResNet() {
	r, err := vision.NewResNet(vision.ResNet18, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		fmt.Println(err)
		return
	}
	var names []string
	for _, p := range radgen.Params(r.Sequential()) {
		names = append(names, "visual_extractor.model."+p.Name)
	}
	cfg, naming, err := vision.InferResNet(names, "visual_extractor.model.")
	fmt.Println(cfg, naming, err)
	// Output: ResNet(BasicBlock, [2, 2, 2, 2]) sequential <nil>
}
