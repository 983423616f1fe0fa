package memtrans

import (
	"sync"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/arch"
)

// WithHalfWeights makes the model decode on the CPU with half-precision
// (IEEE binary16) copies of the weight matrices that every decoding step
// reads: the decoder layers' attention projections, feed-forward layers and
// conditional-norm MLPs, and the logit layer. They are about 54% of the
// bytes a step reads in float32, which is most of a step's cost at small
// batch sizes; the arithmetic stays float32. Every architecture takes it.
//
// The copies are a weight storage of the backend (radgen.Tensor.ToHalf)
// that the modules' Linear ops read through radgen.SubstituteWeights: the
// decoding runs the same module steps as in float32. What a step reads once
// per study (the encoder, the source keys and values) and the recurrences
// (R2Gen's relational memory, Mem2Mem's memory), whose rounding errors
// would compound from step to step, stay float32. On the paper's IU X-Ray
// model log-probabilities move by up to about 2e-3 over 60 steps.
//
// An architecture names the matrices its steps read by implementing
// arch.StepWeighted (the built-ins do). One that does not gets half copies
// of all its float32 matrices, recurrences included, whose rounding then
// compounds from step to step: implement StepWeighted to choose. A model
// whose architecture has no float32 matrix for it is refused by New and
// Load with an error, never decoded in float32 silently.
//
// The snapshot is taken at the first generation and again after the
// weights change through the model (a Trainer, SCST, ContinueFrom).
// WithDevice ignores it: devices decode in float32.
func WithHalfWeights() Option {
	return func(m *Model) error {
		m.half = &halfState{}
		return nil
	}
}

// halfState is a model's half-precision snapshot.
type halfState struct {
	mu     sync.Mutex
	stored map[*radgen.Tensor]*radgen.Tensor // float32 weight → binary16 copy
	stale  bool
}

// current returns the snapshot of net's step matrices, taking it again
// first if the weights changed. A decoding keeps the map it was given: a
// new snapshot is a new map, so a decoding in flight is never disturbed.
func (h *halfState) current(net arch.EncoderDecoder) map[*radgen.Tensor]*radgen.Tensor {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stored == nil || h.stale {
		h.stored = halfSnapshot(stepMatrices(net))
		h.stale = false
	}
	return h.stored
}

func (h *halfState) markStale() {
	h.mu.Lock()
	h.stale = true
	h.mu.Unlock()
}

// stepMatrices returns the matrices of net's decoding steps that
// WithHalfWeights stores in half precision: those it names
// (arch.StepWeighted), or else all its float32 CPU matrices.
func stepMatrices(net arch.EncoderDecoder) []*radgen.Tensor {
	if sw, ok := net.(arch.StepWeighted); ok {
		return sw.StepWeights()
	}
	var ws []*radgen.Tensor
	net.VisitParams(func(_ string, t *radgen.Tensor) { ws = append(ws, t) })
	return ws
}

// halfSnapshot returns half-precision copies of the float32 CPU matrices
// ws, keyed by the matrix.
func halfSnapshot(ws []*radgen.Tensor) map[*radgen.Tensor]*radgen.Tensor {
	stored := make(map[*radgen.Tensor]*radgen.Tensor, len(ws))
	for _, w := range ws {
		if halfEligible(w) {
			stored[w] = w.ToHalf()
		}
	}
	return stored
}

// halfEligible reports whether WithHalfWeights stores a copy of w: a
// float32 matrix on the CPU.
func halfEligible(w *radgen.Tensor) bool {
	return w.Device() == radgen.CPU && !w.Is64() && w.Rank() == 2
}
