package vision

import (
	"fmt"
	"testing"

	"github.com/radgen/radgen"
)

// TestEngineMatchesGraph compares the float32 inference engine (channels
// last, fused products, Winograd) with the differentiable path (explicit
// batch norms, channels first, im2col) on odd image sizes, where the tiles,
// the windows and the pooling have ragged edges, for both block kinds.
func TestEngineMatchesGraph(t *testing.T) {
	for _, cfg := range []ResNetConfig{tinyBasic, tinyBottleneck} {
		r := newRandom(t, cfg, 41)
		for _, hw := range [][2]int{{1, 1}, {5, 9}, {33, 17}, {40, 40}} {
			t.Run(fmt.Sprintf("%v/%dx%d", cfg.Block, hw[0], hw[1]), func(t *testing.T) {
				x := randImages(42, 3, 3, hw[0], hw[1])
				got := r.Trunk(radgen.NoGrad(), x)
				want := r.Trunk(radgen.NewGraph(), x)
				if d, scale := maxDiff(got, want), maxAbs(want); d > 1e-5*scale {
					t.Errorf("engine and graph differ by %g (scale %g)", d, scale)
				}
				// Each image alone gives the same features, bit for bit.
				one := r.Trunk(radgen.NoGrad(), radgen.FromFloat32(x.Data()[3*hw[0]*hw[1]:6*hw[0]*hw[1]], 1, 3, hw[0], hw[1]))
				n := one.Len()
				for i, v := range one.Data() {
					if got.Data()[n+i] != v {
						t.Fatalf("image 1 alone: feature %d = %v, in the batch %v", i, v, got.Data()[n+i])
					}
				}
			})
		}
	}
}
