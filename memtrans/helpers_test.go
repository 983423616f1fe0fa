package memtrans

import (
	"math/rand/v2"
	"testing"

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

// skipUnderRace skips a test of a file format, which runs on one
// goroutine, under the race detector: the normal run has it.
func skipUnderRace(t testing.TB) {
	if raceEnabled {
		t.Skip("a file format, one goroutine: checked without the race detector")
	}
}

// SkipUnderRace is skipUnderRace for the package's external tests.
var SkipUnderRace = skipUnderRace
