package memtrans

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/half"
)

// halfWeights is a snapshot of the linear layers that a decoding step of a
// Transformer applies, with the weight matrices of the decoder layers
// (attention projections, feed-forward, MCLN MLPs) and of the logit layer
// stored in IEEE half precision (binary16: 11 significant bits, a relative
// rounding error of at most 2⁻¹¹), and the relational memory's matrices and
// all biases in float32. Decoding with it ([Transformer.StartDecodingWith])
// reads 54% of the bytes per step that float32 weights take, which is most
// of a step's cost at small batch sizes; the arithmetic stays float32.
//
// The relational memory stays in float32 because it is a recurrence: its
// rounding errors would compound from step to step. On the paper's IU X-Ray
// model with random weights, log-probabilities differ from float32 decoding
// by at most 1.5·10⁻³ over 60 steps this way, against 0.1 with the memory
// in half precision too (TestHalfWeightsPaperAccuracy).
//
// The rest (embeddings, layer-norm parameters, the encoder and the
// cross-attention key and value projections, applied once per study) is
// read from the Transformer when a decoding starts and steps, in float32.
//
// It is a copy: training, loading a checkpoint or any other change to the
// Transformer's weights does not reach it. Call Refresh after such changes
// (Stale reports whether they happened); until then, decodings with it use
// the weights as they were. A halfWeights is safe for concurrent use by any
// number of decodings, but Refresh must not run while one is under way.
type halfWeights struct {
	m      *r2genModel
	w      *stepWeights
	copies []halfCopy
}

// halfCopy ties one copied tensor to its source: a weight matrix (mat,
// binary16 or float32) or a bias.
type halfCopy struct {
	src  *radgen.Tensor
	mat  half.Weights
	bias []float32
}

// HalfWeights returns a half-precision snapshot of the matrices a decoding
// step applies (see [HalfWeights]). It costs one pass over them (113 MB of
// float32 for the paper's IU X-Ray model, about 0.2 s) and holds 62 MB for
// that model. With Mem2Mem, whose memory step runs on the Transformer's
// float32 weights, the snapshot covers the decoder layers and the logit
// layer.
func (m *r2genModel) oldHalfSnapshot() *halfWeights {
	h := &halfWeights{m: m}
	bias := func(l *radgen.Linear, sl stepLinear) stepLinear {
		if l.Bias != nil {
			sl.bias = slices.Clone(l.Bias.Data())
			h.copies = append(h.copies, halfCopy{src: l.Bias, bias: sl.bias})
		}
		return sl
	}
	toHalf := func(l *radgen.Linear) stepLinear {
		sl := stepLinear{w: half.NewWeights(l.Weight.Dim(0), l.Weight.Dim(1), l.Weight.Data())}
		h.copies = append(h.copies, halfCopy{src: l.Weight, mat: sl.w})
		return bias(l, sl)
	}
	// The relational memory is a recurrence: its rounding errors would
	// compound from step to step (on the paper's model with random
	// weights, to 0.1 in log-probability after 60 steps, against 1.5e-3
	// with these 9% of the weights kept in float32).
	toCopy := func(l *radgen.Linear) stepLinear {
		sl := stepLinear{w: half.Float32(l.Weight.Dim(0), l.Weight.Dim(1), slices.Clone(l.Weight.Data()))}
		h.copies = append(h.copies, halfCopy{src: l.Weight, mat: sl.w})
		return bias(l, sl)
	}
	h.w = newStepWeights(m, toHalf, toCopy)
	return h
}

// Bytes returns the size of the snapshot's matrices.
func (h *halfWeights) size() int {
	n := 0
	for _, c := range h.copies {
		if c.bias == nil {
			n += c.mat.Bytes()
		}
	}
	return n
}

// Refresh converts the Transformer's current weights into the snapshot
// again, in place. It must not run while a decoding uses h.
func (h *halfWeights) refresh() {
	for _, c := range h.copies {
		switch {
		case c.bias != nil:
			copy(c.bias, c.src.Data())
		case c.mat.Half():
			c.mat.Update(c.src.Data())
		default:
			copy(c.mat.F32, c.src.Data())
		}
	}
}

// Stale reports whether the Transformer's weights changed since the
// snapshot was taken or last refreshed: whether any half-precision matrix no
// longer converts to the stored values (a change too small to alter the
// rounding of a weight goes unnoticed, and does not matter to the snapshot)
// or any float32 value differs. It reads every weight, as Refresh does.
func (h *halfWeights) stale() bool {
	for _, c := range h.copies {
		src := c.src.Data()
		switch {
		case c.bias != nil:
			if !sameBits(c.bias, src) {
				return true
			}
		case c.mat.Half():
			if !c.mat.Matches(src) {
				return true
			}
		default:
			if !sameBits(c.mat.F32, src) {
				return true
			}
		}
	}
	return false
}

// sameBits reports whether a and b hold the same float32 values, bit for
// bit (a NaN equals itself).
func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// startDecodingWith is startCPUDecoding with the step's linear layers read
// from w, a half-precision snapshot of m's weights ([WithHalfWeights]);
// a nil w decodes in float32, as startCPUDecoding does.
func (m *r2genModel) startDecodingWith(feats *radgen.Tensor, w *halfWeights) (*cpuDecoding, error) {
	if w == nil {
		return m.startCPUDecoding(feats)
	}
	if w.m != m {
		return nil, errors.New("memtrans: half-precision weights of another Transformer")
	}
	return m.startDecoding(feats, w.w)
}

// stepLinear is a linear layer as a decoding step applies it.
type stepLinear struct {
	w    half.Weights
	bias []float32 // nil without a bias
}

// stepNorm holds the MCLN MLPs of a decoder sublayer norm (zero for a plain
// LayerNorm): γ̂ = γ + g2(ReLU(g0(M))), β̂ = β + b2(ReLU(b0(M))).
type stepNorm struct {
	g0, g2, b0, b2 stepLinear
}

type stepLayer struct {
	self       [4]stepLinear // query, key, value, output
	srcQ, srcO stepLinear
	ff1, ff2   stepLinear
	norms      [3]stepNorm
}

type stepMemory struct {
	q, k, v, o, mlp0, mlp2, w, u stepLinear
}

// stepWeights are the linear layers a decoding step applies: float32 views
// of a Transformer's weights, or a half-precision snapshot.
type stepWeights struct {
	layers []stepLayer
	memory *stepMemory // nil without a relational memory
	logit  stepLinear
}

// newStepWeights collects m's step layers, each through lin, or memLin for
// the relational memory.
func newStepWeights(m *r2genModel, lin, memLin func(*radgen.Linear) stepLinear) *stepWeights {
	w := &stepWeights{logit: lin(m.Logit)}
	for _, l := range m.Decoder.Layers {
		sl := stepLayer{
			srcQ: lin(l.SrcAttn.Linears[0]), srcO: lin(l.SrcAttn.Linears[3]),
			ff1: lin(l.FeedForward.W1), ff2: lin(l.FeedForward.W2),
		}
		for i, a := range l.SelfAttn.Linears {
			sl.self[i] = lin(a)
		}
		for i, n := range l.norms {
			if c := n.cond; c != nil {
				sl.norms[i] = stepNorm{g0: lin(c.MLPGamma.L0), g2: lin(c.MLPGamma.L2), b0: lin(c.MLPBeta.L0), b2: lin(c.MLPBeta.L2)}
			}
		}
		w.layers = append(w.layers, sl)
	}
	if rm := m.Memory; rm != nil {
		a := rm.Attn.Linears
		w.memory = &stepMemory{q: memLin(a[0]), k: memLin(a[1]), v: memLin(a[2]), o: memLin(a[3]),
			mlp0: memLin(rm.MLP0), mlp2: memLin(rm.MLP2), w: memLin(rm.W), u: memLin(rm.U)}
	}
	return w
}

// float32Linear is a float32 view of l (not a copy: training updates reach
// it).
func float32Linear(l *radgen.Linear) stepLinear {
	out, in := l.Weight.Dim(0), l.Weight.Dim(1)
	sl := stepLinear{w: half.Float32(out, in, l.Weight.Data())}
	if l.Bias != nil {
		sl.bias = l.Bias.Data()
	}
	return sl
}

// op returns the product y = act(x·Wᵀ + b) (+ y if add) of l over rows rows.
func (l *stepLinear) op(rows int, x, y []float32, relu, add bool) half.Op {
	if len(x) < rows*l.w.K || len(y) < rows*l.w.N {
		panic(fmt.Sprintf("memtrans: %d rows of %d→%d with %d inputs and %d outputs", rows, l.w.K, l.w.N, len(x), len(y)))
	}
	return half.Op{M: rows, X: x, W: l.w, Bias: l.bias, Y: y, ReLU: relu, Add: add}
}
