package mesh_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mesh"
)

// With granularity consistent attention, decoder layer i of three reads the
// encoder level S_{N−i+1} beside the global view S_N (Eq. 8).
func ExampleMultiView_gca() {
	rng := rand.New(rand.NewPCG(1, 1))
	var levels []*radgen.Tensor
	for j := range 3 {
		s := radgen.Zeros(1, 5, 8) // (B, N, D)
		radgen.Fill(s, float64(j+1))
		levels = append(levels, s)
	}
	for i, v := range mesh.NewMultiViews(mesh.RoutingGCA, 3, 3, 8, rng) {
		g := v.Route(radgen.NoGrad(), levels)
		src := v.Forward(radgen.NoGrad(), levels)
		fmt.Printf("decoder layer %d reads S_%.0f, source %v\n", i+1, g.Data()[0], src.Shape())
	}
	// Output:
	// decoder layer 1 reads S_3, source [1 5 8]
	// decoder layer 2 reads S_2, source [1 5 8]
	// decoder layer 3 reads S_1, source [1 5 8]
}
