package radgen_test

import (
	"fmt"
	"math"

	"github.com/radgen/radgen"
)

// One Adam step (β = 0.9, 0.999, learning rate 0.1) of a parameter in
// place, as an optimiser calls it; the same call runs on any device.
func ExampleTensor_AdamUpdate() {
	p := radgen.FromFloat32([]float32{1, -2}, 2)
	g := radgen.FromFloat32([]float32{0.5, -0.25}, 2)
	m, v := radgen.Zeros(2), radgen.Zeros(2)
	const lr, b1, b2, step = 0.1, 0.9, 0.999, 1
	p.AdamUpdate(g, m, v, nil, radgen.AdamConsts{
		Beta1: b1, OneMinusB1: float32(1 - b1),
		Beta2: b2, OneMinusB2: float32(1 - b2),
		BC2Sqrt:    float32(math.Sqrt(1 - math.Pow(b2, step))),
		Eps:        1e-8,
		NegStepLen: float32(-lr / (1 - math.Pow(b1, step))),
	})
	fmt.Printf("%.4f %.4f\n", p.Data(), m.Data())
	// Output: [0.9000 -1.9000] [0.0500 -0.0250]
}
