package memtrans

import (
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/metrics"
)

// cidErDReward is CIDEr-D of token ids, the default reward of
// self-critical training.
var cidErDReward decode.Scorer = metrics.CIDErDOfIDs

// bleuReward is sentence BLEU-n of token ids.
func bleuReward(n int) (decode.Scorer, error) {
	f, err := metrics.BLEUOfIDs(n)
	return decode.Scorer(f), err
}
