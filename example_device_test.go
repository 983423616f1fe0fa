package radgen_test

import (
	"fmt"

	"github.com/radgen/radgen"
)

// A tensor moves to a device with To; ops run there, forward and backward,
// and the result comes back with To(radgen.CPU). The reference engine needs
// no hardware; radgen.CUDA(0) is a GPU in a build with the cuda tag.
func ExampleTensor_To() {
	dev, err := radgen.ParseDevice("reference")
	if err != nil {
		panic(err)
	}
	w := radgen.FromFloat32([]float32{1, 2, 3, 4}, 2, 2).SetRequiresGrad(true).To(dev)
	x := radgen.FromFloat32([]float32{1, 1}, 1, 2).To(dev)
	g := radgen.NewGraph()
	loss := g.Sum(g.ReLU(g.Linear(x, w, nil)))
	if err := g.Backward(loss); err != nil {
		panic(err)
	}
	fmt.Println(dev, loss.To(radgen.CPU).Data(), w.Grad().To(radgen.CPU).Data())
	// Output: reference [10] [1 1 1 1]
}
