package memtrans

import (
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/goldentest"
)

// randomizeVectors draws every one-dimensional parameter of m (biases,
// norm gains, gates) from U(−0.3, 0.3) with PCG(seed, seed), so that no
// term is trivially neutral.
func randomizeVectors(m radgen.Module, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	for _, p := range radgen.Params(m) {
		if p.Tensor.Rank() == 1 {
			radgen.Uniform(p.Tensor, rng, 0.3)
		}
	}
}

// The golden files, read as every architecture's tests read them.
type golden = goldentest.R2Gen

var (
	loadGolden      = goldentest.LoadR2Gen
	openSafetensors = goldentest.Open
	fileTensor      = goldentest.Tensor
	fileInts        = goldentest.Ints
)
