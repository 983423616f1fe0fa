package radgen_test

import (
	"fmt"

	"github.com/radgen/radgen"
)

// A convolution prepared once for inference runs on channels-last images
// (B, H, W, C), with its bias, a shortcut and the ReLU in one op: here a
// 3×3 box filter (padding 1) plus a bias of 1 on a 3×3 image, plus the
// image itself as the shortcut. The plain equivalent gives the same values.
func ExamplePreparedConv2d() {
	w := radgen.FromFloat32([]float32{1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, 1, 3, 3) // (Cout, Cin, KH, KW)
	b := radgen.FromFloat32([]float32{1}, 1)
	conv := radgen.PrepareConv2d(w, b, radgen.ConvSquare(1, 1))

	x := radgen.FromFloat32([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, 3, 3, 1) // (B, H, W, C)
	g := radgen.NoGrad()
	y := conv.Forward(g, x, x, true)

	plain := g.Permute(g.Conv2d(g.Permute(x, 0, 3, 1, 2), w, b, radgen.ConvSquare(1, 1)), 0, 2, 3, 1)
	plain = g.ReLU(g.Add(plain, x))
	fmt.Println(y.Shape(), y.Data())
	fmt.Println(plain.Data())
	// Output:
	// [1 3 3 1] [14 24 20 32 51 40 32 48 38]
	// [14 24 20 32 51 40 32 48 38]
}
