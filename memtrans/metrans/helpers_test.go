package metrans

import (
	"context"
	"math"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/metrics"
)

// randomFeats returns (b, n, d) features uniform in [0, 1).
func randomFeats(b, n, d int, seed uint64) *radgen.Tensor {
	r := rand.New(rand.NewPCG(seed, 1))
	x := radgen.Zeros(b, n, d)
	for i := range x.Data() {
		x.Data()[i] = float32(r.Float64())
	}
	return x
}

// noEOS forces full-length reports: it forbids the end token after every
// step.
type noEOS struct{ decode.Model }

func (n noEOS) Step(ctx context.Context, tokens []int, dst []float32) error {
	if err := n.Model.Step(ctx, tokens, dst); err != nil {
		return err
	}
	V := n.VocabSize()
	for r := 0; r < n.Rows(); r++ {
		dst[r*V] = float32(math.Inf(-1))
	}
	return nil
}

// cidErDReward is corpus CIDEr-D over token ids, the voting score the
// tests compare with BLEU's.
var cidErDReward decode.Scorer = metrics.CIDErDOfIDs
