package m2

import (
	"fmt"
	"strconv"

	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/mesh"
)

// Config holds the architecture of a Meshed-Memory Transformer (Cornia et
// al., CVPR 2020). Sizes are data: they travel with the weights, and
// [InferConfig] reads them from a state_dict's shapes.
type Config struct {
	DModel      int     `json:"d_model"`      // model width (M²: 512)
	DK          int     `json:"d_k"`          // query/key width per head (64)
	DV          int     `json:"d_v"`          // value width per head (64)
	Heads       int     `json:"heads"`        // attention heads (8)
	DFF         int     `json:"d_ff"`         // feed-forward width (2048)
	EncLayers   int     `json:"enc_layers"`   // encoder layers = encoding levels N (3)
	DecLayers   int     `json:"dec_layers"`   // decoder layers (3)
	MemorySlots int     `json:"memory_slots"` // memory slots m per encoder layer (40)
	DIn         int     `json:"d_in"`         // region feature width (2048)
	Vocab       int     `json:"vocab"`        // output size
	MaxLen      int     `json:"max_len"`      // longest decoder input; the positional table has MaxLen+1 rows (54)
	Pad         int     `json:"pad"`          // <pad> id (1)
	BOS         int     `json:"bos"`          // <bos> id (2)
	EOS         int     `json:"eos"`          // <eos> id (3)
	Dropout     float64 `json:"dropout"`      // 0.1

	// Padding is the encoder's masking rule. The zero value is the
	// published code's (see PadAfterNorm).
	Padding PaddingRule `json:"padding"`

	// Routing, when set, replaces the meshed connectivity with layer-wise
	// multi-view routing (see MeshedDecoder); it needs DecLayers ≤
	// EncLayers. The zero value is M²'s mesh.
	Routing mesh.Routing `json:"routing,omitempty"`
}

// COCO returns the configuration of the released M² captioner
// (test.py / train.py) for a vocabulary of vocab entries.
func COCO(vocab int) Config {
	return Config{DModel: 512, DK: 64, DV: 64, Heads: 8, DFF: 2048, EncLayers: 3, DecLayers: 3, MemorySlots: 40,
		DIn: 2048, Vocab: vocab, MaxLen: 54, Pad: 1, BOS: 2, EOS: 3, Dropout: 0.1}
}

// Tiny returns a small configuration for demos and tests.
func Tiny(vocab, dIn int) Config {
	return Config{DModel: 64, DK: 16, DV: 16, Heads: 4, DFF: 128, EncLayers: 3, DecLayers: 3, MemorySlots: 8,
		DIn: dIn, Vocab: vocab, MaxLen: 54, Pad: 1, BOS: 2, EOS: 3, Dropout: 0.1}
}

// validateHard is ValidateShape and the constructors' hard budget: 2^34
// parameters and 2^36 activation values over two views of patches, beyond
// which tensor shapes could overflow (the facade's budget is far lower).
func (c Config) validateHard() error {
	if err := c.ValidateShape(); err != nil {
		return err
	}
	return c.Cost(nominalPatches).CheckHard("M²")
}

// nominalPatches is the region count assumed when a configuration is
// checked on its own: two 224² views of a ResNet (2·7·7).
const nominalPatches = 98

// ValidateShape reports the first inconsistency in c as an M² model in its
// own ids, other than its size; Validate adds the facade's ids.
func (c Config) ValidateShape() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: M²: "+format, append([]any{arch.ErrConfig}, a...)...)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"d_model", c.DModel}, {"d_k", c.DK}, {"d_v", c.DV}, {"heads", c.Heads}, {"d_ff", c.DFF},
		{"enc_layers", c.EncLayers}, {"dec_layers", c.DecLayers}, {"memory_slots", c.MemorySlots},
		{"d_in", c.DIn}, {"vocab", c.Vocab}, {"max_len", c.MaxLen}} {
		if f.v <= 0 || f.v > 1<<20 {
			return bad("%s = %d", f.name, f.v)
		}
	}
	if c.EncLayers > maxLayers || c.DecLayers > maxLayers {
		return bad("enc_layers = %d, dec_layers = %d (at most %d)", c.EncLayers, c.DecLayers, maxLayers)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"pad", c.Pad}, {"bos", c.BOS}, {"eos", c.EOS}} {
		if f.v < 0 || f.v >= c.Vocab {
			return bad("%s id %d outside the vocabulary [0, %d)", f.name, f.v, c.Vocab)
		}
	}
	if c.BOS == c.Pad {
		return bad("bos and pad share id %d", c.BOS)
	}
	if c.Dropout < 0 || c.Dropout >= 1 {
		return bad("dropout %v outside [0, 1)", c.Dropout)
	}
	switch c.Padding {
	case PadAfterNorm, PadZeroRows, PadNone:
	default:
		return bad("unknown %v", c.Padding)
	}
	if !c.Routing.Valid() {
		return bad("unknown routing %q", c.Routing)
	}
	if c.Routing != mesh.RoutingNone && c.DecLayers > c.EncLayers {
		return bad("routing %s of %d decoder layers over %d encoder levels", c.Routing, c.DecLayers, c.EncLayers)
	}
	return nil
}

// InferConfig reads an M² configuration from the shapes of a state_dict
// by its published names (encoder.fc.weight, encoder.layers.i.mhatt.
// attention.m_k, decoder.pos_emb.weight, …). The number of heads is not
// visible in the shapes and is given; d_k and d_v follow from it. The
// special ids and dropout are M²'s defaults (pad 1, bos 2, eos 3, 0.1).
func InferConfig(shapes map[string][]int, heads int) (Config, error) {
	c := Config{Heads: heads, Pad: 1, BOS: 2, EOS: 3, Dropout: 0.1}
	get := func(name string, rank int) ([]int, error) {
		s, ok := shapes[name]
		if !ok {
			return nil, fmt.Errorf("%w: M² weights lack %q", arch.ErrConfig, name)
		}
		if len(s) != rank {
			return nil, fmt.Errorf("%w: %q has shape %v", arch.ErrConfig, name, s)
		}
		return s, nil
	}
	if heads <= 0 {
		return c, fmt.Errorf("%w: M²: %d heads", arch.ErrConfig, heads)
	}
	fc, err := get("encoder.fc.weight", 2)
	if err != nil {
		return c, err
	}
	c.DModel, c.DIn = fc[0], fc[1]
	mk, err := get("encoder.layers.0.mhatt.attention.m_k", 3)
	if err != nil {
		return c, err
	}
	c.MemorySlots = mk[1]
	q, err := get("encoder.layers.0.mhatt.attention.fc_q.weight", 2)
	if err != nil {
		return c, err
	}
	v, err := get("encoder.layers.0.mhatt.attention.fc_v.weight", 2)
	if err != nil {
		return c, err
	}
	if q[0]%heads != 0 || v[0]%heads != 0 {
		return c, fmt.Errorf("%w: M²: projections %d, %d not divisible by %d heads", arch.ErrConfig, q[0], v[0], heads)
	}
	c.DK, c.DV = q[0]/heads, v[0]/heads
	ff, err := get("encoder.layers.0.pwff.fc1.weight", 2)
	if err != nil {
		return c, err
	}
	c.DFF = ff[0]
	pos, err := get("decoder.pos_emb.weight", 2)
	if err != nil {
		return c, err
	}
	c.MaxLen = pos[0] - 1
	out, err := get("decoder.fc.weight", 2)
	if err != nil {
		return c, err
	}
	c.Vocab = out[0]
	c.EncLayers = countLayers(shapes, "encoder.layers.", ".mhatt.attention.fc_q.weight")
	c.DecLayers = countLayers(shapes, "decoder.layers.", ".self_att.attention.fc_q.weight")
	levels := 0
	for shapes["decoder.layers.0.fc_alpha"+strconv.Itoa(levels+1)+".weight"] != nil {
		levels++
	}
	if levels != c.EncLayers {
		return c, fmt.Errorf("%w: M²: %d gates per decoder layer for %d encoder levels", arch.ErrConfig, levels, c.EncLayers)
	}
	return c, c.validateHard()
}

// maxLayers bounds every layer count of a configuration: far beyond any
// published model, and small enough that a forged count of tiny layers
// cannot exhaust memory on per-layer bookkeeping.
const maxLayers = 1024

func countLayers(shapes map[string][]int, prefix, suffix string) int {
	n := 0
	for shapes[prefix+strconv.Itoa(n)+suffix] != nil {
		n++
	}
	return n
}
