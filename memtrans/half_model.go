package memtrans

import (
	"context"
	"sync"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
)

// WithHalfWeights makes the model decode with half-precision (IEEE binary16)
// copies of the decoder's weight matrices: about 55% of the bytes each step reads, so memory-bound small-batch
// decoding on the CPU runs faster (beam 3, one IU study: 266 against 448
// ms on two cores). Log-probabilities move by up to about 2e-3; the
// relational memory's matrices stay in float32 because the recurrence
// would compound the rounding. It applies to R2Gen's Transformer on the
// CPU; other architectures and WithDevice ignore it.
//
// The snapshot is taken at the first generation and again after the
// weights change through the model (a Trainer, SCST, ContinueFrom).
func WithHalfWeights() Option {
	return func(m *Model) error {
		m.half = &halfState{}
		return nil
	}
}

// halfState is a model's fp16 snapshot.
type halfState struct {
	mu    sync.Mutex
	hw    *halfWeights
	stale bool
}

// current returns the snapshot of tr's weights, taking or refreshing it
// first if needed. The caller holds the model for reading, so no training
// step runs and no decoding reads a snapshot being refreshed (a refresh
// only follows a training step, which excludes generation).
func (h *halfState) current(tr *r2genModel) *halfWeights {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.hw == nil:
		h.hw = tr.halfSnapshot()
	case h.stale:
		h.hw.refresh()
	}
	h.stale = false
	return h.hw
}

func (h *halfState) markStale() {
	h.mu.Lock()
	h.stale = true
	h.mu.Unlock()
}

// decodeHalf is decodeStudies of the R2Gen Transformer with the fp16
// snapshot.
func (m *Model) decodeHalf(ctx context.Context, feats *radgen.Tensor, o genOptions) ([]studyResult, int, error) {
	dec, err := m.transformer.startDecodingWith(feats, m.half.current(m.transformer))
	if err != nil {
		return nil, 0, err
	}
	return decodeBest(ctx, dec, strategyFor(o, 0, 0, decode.R2Gen))
}
