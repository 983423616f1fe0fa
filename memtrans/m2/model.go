package m2

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/vision"
)

// Model is the Meshed-Memory Transformer (Cornia et al., CVPR
// 2020): a memory-augmented encoder over region features whose every layer
// output the meshed decoder reads. Parameter names equal the published
// state_dict (encoder.*, decoder.*), so a checkpoint exported from it loads
// with radgen.LoadParams(m, src, "").
//
// A Model is safe for concurrent use by goroutines that only run
// NoGrad graphs or decode; training mutates it and must be exclusive.
type Model struct {
	Config  Config
	Encoder *MemoryEncoder
	Decoder *MeshedDecoder
}

// New returns a model initialised as the published code
// leaves it (Xavier-uniform on every tensor of more than one dimension,
// memory slots and positional table included), drawing from a PCG
// generator seeded with seed.
func New(c Config, seed uint64) (*Model, error) {
	if err := c.validateHard(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x4d32))
	enc := NewMemoryEncoder(EncoderConfig{
		DIn: c.DIn, D: c.DModel, DK: c.DK, DV: c.DV, Heads: c.Heads, DFF: c.DFF,
		Layers: c.EncLayers, Slots: c.MemorySlots, Dropout: c.Dropout,
	}, rng)
	enc.Padding = c.Padding
	dec := NewMeshedDecoder(DecoderConfig{
		Vocab: c.Vocab, MaxLen: c.MaxLen, Pad: c.Pad, D: c.DModel, DK: c.DK, DV: c.DV, Heads: c.Heads,
		DFF: c.DFF, Layers: c.DecLayers, Levels: c.EncLayers, Dropout: c.Dropout, Routing: c.Routing,
	}, rng)
	return &Model{Config: c, Encoder: enc, Decoder: dec}, nil
}

// Load builds an M² model from weights by the published state_dict names
// (an opened safetensors file, or the "state_dict" of a checkpoint saved by
// the published train.py): sizes are read from the shapes, heads is the
// number of attention heads (8 in the paper), and the special ids are M²'s
// (pad 1, bos 2, eos 3). The published state buffers (running_keys,
// running_seq, …) may be present and are ignored. Every tensor is checked
// before the model is built; errors wrap arch.ErrConfig, radgen.ErrMissingTensor
// or radgen.ErrShapeMismatch.
func Load(src vision.WeightSource, heads int) (*Model, error) {
	shapes := map[string][]int{}
	for _, n := range src.Names() {
		shape, err := vision.WeightShape(src, n)
		if err != nil {
			// Integer buffers (decoder.running_seq) are not float32.
			continue
		}
		shapes[n] = shape
	}
	cfg, err := InferConfig(shapes, heads)
	if err != nil {
		return nil, err
	}
	m, err := New(cfg, 0)
	if err != nil {
		return nil, err
	}
	if err := radgen.LoadParams(m, src, ""); err != nil {
		return nil, err
	}
	return m, nil
}

// VisitParams implements radgen.Module with M²'s state_dict names.
func (m *Model) VisitParams(visit func(string, *radgen.Tensor)) {
	m.Encoder.VisitParams(radgen.Prefixed("encoder.", visit))
	m.Decoder.VisitParams(radgen.Prefixed("decoder.", visit))
}

// Encoded is a batch of studies after the memory-augmented encoder.
type Encoded struct {
	Levels *radgen.Tensor // (B, N, R, D): the output of every encoder layer
	Mask   *radgen.Tensor // (B, 1, 1, R), 0 = masked region; nil when none is
}

// Encode runs the encoder on region features (B, R, d_in), masking regions
// by Config.Padding.
func (m *Model) Encode(g *radgen.Graph, feats *radgen.Tensor) (*Encoded, error) {
	if err := m.checkFeats(feats); err != nil {
		return nil, err
	}
	levels, mask := m.Encoder.Forward(g, feats)
	return &Encoded{Levels: levels, Mask: mask}, nil
}

// EncodeMasked runs the encoder with the caller's region mask (B, 1, 1, R),
// zero = masked, or nil for none, instead of Config.Padding's: to
// reproduce a reference run's mask, or to mask padding by another rule.
func (m *Model) EncodeMasked(g *radgen.Graph, feats, mask *radgen.Tensor) (*Encoded, error) {
	if err := m.checkFeats(feats); err != nil {
		return nil, err
	}
	if mask != nil {
		s := mask.Shape()
		if len(s) != 4 || s[0] != feats.Dim(0) || s[1] != 1 || s[2] != 1 || s[3] != feats.Dim(1) {
			return nil, fmt.Errorf("m2: M² region mask %v for features %v, want (B, 1, 1, R)", s, feats.Shape())
		}
	}
	return &Encoded{Levels: m.Encoder.ForwardMasked(g, feats, mask), Mask: mask}, nil
}

func (m *Model) checkFeats(feats *radgen.Tensor) error {
	if feats.Rank() != 3 || feats.Dim(2) != m.Config.DIn || feats.Dim(0) == 0 || feats.Dim(1) == 0 {
		return fmt.Errorf("m2: M² region features %v, want (B, R, %d)", feats.Shape(), m.Config.DIn)
	}
	return nil
}

// TeacherForce returns the log-probabilities (B, T, V) of the next token at
// every position of tokens (B·T ids, row-major, each row starting with
// bos; padding is Config.Pad), given the encoded studies. As in the
// published code, padding positions use positional row 0, are masked as
// self-attention keys, and output log_softmax(0) (uniform).
func (m *Model) TeacherForce(g *radgen.Graph, enc *Encoded, tokens []int, b, t int) (*radgen.Tensor, error) {
	if len(tokens) != b*t || b <= 0 || t <= 0 {
		return nil, fmt.Errorf("m2: %d tokens for a (%d, %d) batch", len(tokens), b, t)
	}
	if enc == nil || enc.Levels == nil || enc.Levels.Dim(0) != b {
		return nil, fmt.Errorf("m2: M² encoding does not match a batch of %d", b)
	}
	if t > m.Decoder.MaxLen() {
		return nil, fmt.Errorf("m2: %d positions exceed M²'s positional table (%d)", t, m.Decoder.MaxLen())
	}
	for i, id := range tokens {
		if id < 0 || id >= m.Config.Vocab {
			return nil, fmt.Errorf("m2: token %d at %d outside the vocabulary [0, %d)", id, i, m.Config.Vocab)
		}
	}
	return m.Decoder.Forward(g, tokens, b, t, enc.Levels, enc.Mask), nil
}

// NLL is M²'s cross-entropy criterion, NLLLoss(ignore_index = pad):
// the mean negative log-probability of the targets (B·T ids) over the
// positions whose target is not Config.Pad. logProbs is (B, T, V).
func (m *Model) NLL(g *radgen.Graph, logProbs *radgen.Tensor, targets []int) *radgen.Tensor {
	mask := make([]float32, len(targets))
	for i, id := range targets {
		if id != m.Config.Pad {
			mask[i] = 1
		}
	}
	return arch.LanguageModelLoss(g, logProbs, targets, mask)
}

var _ radgen.Module = (*Model)(nil)
