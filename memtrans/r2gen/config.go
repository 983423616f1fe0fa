package r2gen

import (
	"fmt"

	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/mesh"
)

// Variant selects how the relational memory reaches the decoder: the
// ablations of R2Gen's Table 2.
type Variant string

const (
	// VariantBase is the plain Transformer: layer norms, no memory.
	VariantBase Variant = "base"
	// VariantBaseRM adds the relational memory, whose state is concatenated
	// to the decoder output before the logit layer (Table 2, BASE+RM).
	VariantBaseRM Variant = "base+rm"
	// VariantR2Gen is the full model: the memory conditions every decoder
	// layer norm through MCLN (Table 2, BASE+RM+MCLN).
	VariantR2Gen Variant = "r2gen"
)

// MemoryKind selects the memory module of the memory variants.
type MemoryKind string

const (
	// MemoryRelational is R2Gen's relational memory (relmem.Relational),
	// starting from the padded identity.
	MemoryRelational MemoryKind = ""
	// MemoryMem2Mem is Mem2Mem (relmem.Mem2Mem): the encoder memory bank of
	// MemorySlots rows, built from the encoder output by structured
	// self-attention, is each study's initial memory; every position writes
	// its token into it through gates, reads it by attention, and feeds the
	// decoder W_m[x_t; m_t] in place of its embedding. The memory states
	// reach the decoder as the relational memory's do (MCLN in VariantR2Gen,
	// the logit layer in VariantBaseRM).
	MemoryMem2Mem MemoryKind = "mem2mem"
)

// Config holds the architecture of a memory-driven Transformer. Sizes are
// data, not options: they travel with the weights.
type Config struct {
	Variant     Variant `json:"variant"`
	DModel      int     `json:"d_model"`        // model width (R2Gen: 512)
	DFF         int     `json:"d_ff"`           // feed-forward width (R2Gen: 512)
	Heads       int     `json:"num_heads"`      // attention heads (8)
	Layers      int     `json:"num_layers"`     // encoder and decoder layers (3)
	DVisual     int     `json:"d_vf"`           // visual feature width (2048 for ResNet-101)
	Vocab       int     `json:"vocab"`          // output size: tokens + 1 (id 0 is bos/eos/pad)
	MemorySlots int     `json:"rm_num_slots"`   // relational memory rows (3)
	MemoryHeads int     `json:"rm_num_heads"`   // relational memory heads (8)
	Dropout     float64 `json:"dropout"`        // 0.1
	EmbedDrop   float64 `json:"drop_prob_lm"`   // dropout after att_embed (0.5)
	MaxSeqLen   int     `json:"max_seq_length"` // longest report in tokens incl. bos (60 IU, 100 MIMIC)
	PositionLen int     `json:"pe_len"`         // rows of the positional table (5000)

	// The fields below select the variants of the other papers. Their zero
	// values are R2Gen, so configurations and checkpoints written before
	// they existed load unchanged.

	// Routing is layer-wise multi-view decoding (mesh.MultiView): decoder
	// layer i attends to LN(g_i(S) + S_N) over the encoder levels instead of
	// S_N alone. The empty routing is R2Gen's single view.
	Routing mesh.Routing `json:"routing,omitempty"`
	// Memory selects the memory module of the memory variants.
	Memory MemoryKind `json:"memory,omitempty"`
	// Mem2MemHidden is d_a, the hidden size of Mem2Mem's attentions
	// (Eqs. 7, 9–10); 0 means DModel.
	Mem2MemHidden int `json:"m2m_hidden,omitempty"`
	// Mem2MemPenalty weighs the bank penalty ‖AAᵀ − I‖²_F (Eq. 12) in the
	// training loss (see Model.AuxLoss); 0 leaves it out.
	Mem2MemPenalty float64 `json:"m2m_penalty,omitempty"`
}

// mem2memHidden returns d_a.
func (c Config) mem2memHidden() int {
	if c.Mem2MemHidden > 0 {
		return c.Mem2MemHidden
	}
	return c.DModel
}

// IUXray returns R2Gen's configuration for IU X-Ray with a vocabulary of
// vocab entries (tokens + 1).
func IUXray(vocab int) Config {
	return Config{Variant: VariantR2Gen, DModel: 512, DFF: 512, Heads: 8, Layers: 3, DVisual: 2048, Vocab: vocab,
		MemorySlots: 3, MemoryHeads: 8, Dropout: 0.1, EmbedDrop: 0.5, MaxSeqLen: 60, PositionLen: 5000}
}

// MIMICCXR returns R2Gen's configuration for MIMIC-CXR.
func MIMICCXR(vocab int) Config {
	c := IUXray(vocab)
	c.MaxSeqLen = 100
	return c
}

// Tiny returns a small configuration for demos and tests.
func Tiny(vocab, dVisual int) Config {
	return Config{Variant: VariantR2Gen, DModel: 64, DFF: 64, Heads: 4, Layers: 2, DVisual: dVisual, Vocab: vocab,
		MemorySlots: 3, MemoryHeads: 4, Dropout: 0.1, EmbedDrop: 0.5, MaxSeqLen: 60, PositionLen: 512}
}

// validateHard is validateShape and the constructors' hard budget: 2^34
// parameters and 2^36 activation values over two views of patches, beyond
// which tensor shapes could overflow (the facade's budget is far lower).
func (c Config) validateHard() error {
	if err := c.validateShape(); err != nil {
		return err
	}
	return c.Cost(nominalPatches).CheckHard("R2Gen")
}

// nominalPatches is the patch count assumed when a configuration is
// checked on its own: two 224² views of a ResNet (2·7·7).
const nominalPatches = 98

// maxLayers bounds every layer count of a configuration: far beyond any
// published model, and small enough that a forged count of tiny layers
// cannot exhaust memory on per-layer bookkeeping.
const maxLayers = 1024

// validateShape reports the first inconsistency in c other than its size.
func (c Config) validateShape() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{arch.ErrConfig}, a...)...)
	}
	switch c.Variant {
	case VariantBase, VariantBaseRM, VariantR2Gen:
	default:
		return bad("unknown variant %q", c.Variant)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"d_model", c.DModel}, {"d_ff", c.DFF}, {"num_heads", c.Heads}, {"num_layers", c.Layers}, {"d_vf", c.DVisual},
		{"vocab", c.Vocab}, {"max_seq_length", c.MaxSeqLen}, {"pe_len", c.PositionLen}} {
		if f.v <= 0 || f.v > 1<<20 {
			return bad("%s = %d", f.name, f.v)
		}
	}
	if c.Layers > maxLayers {
		return bad("num_layers = %d (at most %d)", c.Layers, maxLayers)
	}
	if c.DModel%c.Heads != 0 {
		return bad("d_model %d not divisible by %d heads", c.DModel, c.Heads)
	}
	if !c.Routing.Valid() {
		return bad("unknown multi-view routing %q", c.Routing)
	}
	switch c.Memory {
	case MemoryRelational:
	case MemoryMem2Mem:
		if c.Variant == VariantBase {
			return bad("the %q memory needs a memory variant, not %q", c.Memory, c.Variant)
		}
		if c.MemorySlots <= 0 || c.MemorySlots > 1024 || c.Mem2MemHidden < 0 || c.Mem2MemHidden > 1<<16 {
			return bad("Mem2Mem of %d slots and hidden size %d", c.MemorySlots, c.Mem2MemHidden)
		}
		if c.Mem2MemPenalty < 0 || c.Mem2MemPenalty != c.Mem2MemPenalty || c.Mem2MemPenalty > 1e6 {
			return bad("Mem2Mem penalty weight %v", c.Mem2MemPenalty)
		}
	default:
		return bad("unknown memory %q", c.Memory)
	}
	if c.Memory == MemoryRelational && c.Mem2MemPenalty != 0 {
		return bad("a Mem2Mem penalty weight without the Mem2Mem memory")
	}
	if c.Variant != VariantBase && c.Memory == MemoryRelational {
		if c.MemorySlots <= 0 || c.MemorySlots > 1024 || c.MemoryHeads <= 0 || c.DModel%c.MemoryHeads != 0 {
			return bad("memory of %d slots and %d heads for width %d", c.MemorySlots, c.MemoryHeads, c.DModel)
		}
	}
	if c.MaxSeqLen > c.PositionLen {
		return bad("max_seq_length %d exceeds the positional table (%d)", c.MaxSeqLen, c.PositionLen)
	}
	if c.Dropout < 0 || c.Dropout >= 1 || c.EmbedDrop < 0 || c.EmbedDrop >= 1 {
		return bad("dropout %v / %v outside [0, 1)", c.Dropout, c.EmbedDrop)
	}
	return nil
}
