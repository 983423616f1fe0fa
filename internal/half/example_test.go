package half_test

import (
	"fmt"

	"github.com/radgen/radgen/internal/half"
)

// A linear layer y = x·Wᵀ + b over two rows, with W (3×4) stored in half
// precision and in float32, batched in one Runner.
func Example() {
	w := []float32{
		1, 0, 0, 0.1,
		0, 2, 0, 0,
		0, 0, -3, 0,
	}
	x := []float32{
		1, 1, 1, 1,
		0.5, 0, 2, -1,
	}
	bias := []float32{0, 0.5, 1}
	h := half.NewWeights(3, 4, w) // a snapshot: 0.1 becomes 0.0999755859375
	yh := make([]float32, 2*3)
	yf := make([]float32, 2*3)
	var r half.Runner
	r.Add(half.Op{M: 2, X: x, W: h, Bias: bias, Y: yh})
	r.Add(half.Op{M: 2, X: x, W: half.Float32(3, 4, w), Bias: bias, Y: yf, ReLU: true})
	r.Run()
	fmt.Println(yh)
	fmt.Println(yf)
	fmt.Println(h.At(0, 3), half.ToFloat32(half.FromFloat32(65504)), half.ToFloat32(half.FromFloat32(70000)))
	// Output:
	// [1.0999756 2.5 -2 0.4000244 0.5 -5]
	// [1.1 2.5 0 0.4 0.5 0]
	// 0.099975586 65504 +Inf
}
