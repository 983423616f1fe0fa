package half

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkProduct times y = x·Wᵀ for the shapes of a decoding step of
// R2Gen's paper model (d = 512, memory 3×512): one 512×512 matrix, one
// 512×1536 MCLN input layer, and a batch of 18 of the latter (all the MCLN
// input layers of a step, 56 MB in float32), for 1, 3 and 9 rows, in
// float32 and binary16. It reports the weight bytes read per second.
func BenchmarkProduct(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, s := range []struct {
		name       string
		n, k, mats int
	}{
		{"512x512", 512, 512, 1},
		{"512x1536", 512, 1536, 1},
		{"18x512x1536", 512, 1536, 18},
	} {
		for _, m := range []int{1, 3, 9} {
			for _, half := range []bool{false, true} {
				ps := make([]*product, s.mats)
				for i := range ps {
					ps[i] = newProduct(rng, half, m, s.n, s.k, 0, true, false, false)
				}
				kind := "f32"
				if half {
					kind = "f16"
				}
				b.Run(fmt.Sprintf("%s/m=%d/%s", s.name, m, kind), func(b *testing.B) {
					var r Runner
					b.SetBytes(int64(s.mats * ps[0].op.W.Bytes()))
					for range b.N {
						for _, p := range ps {
							r.Add(p.op)
						}
						r.Run()
					}
				})
			}
		}
	}
}
