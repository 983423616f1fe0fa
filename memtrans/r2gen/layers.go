package r2gen

import (
	"fmt"

	"github.com/radgen/radgen"
)

// LayerConfig holds the sizes of one encoder or decoder layer, for building
// a layer alone ([NewEncoderLayer], [NewDecoderLayer]) outside a whole
// R2Gen model.
type LayerConfig struct {
	DModel  int     // model width D
	Heads   int     // attention heads; they divide D
	DFF     int     // feed-forward width
	Dropout float64 // in [0, 1)
	// MemoryWidth is the width of the memory states that condition a
	// decoder layer's norms through MCLN (S·D for S memory slots); 0
	// gives R2Gen's plain LayerNorm (the BASE ablations). Encoder layers
	// ignore it.
	MemoryWidth int
}

// check panics on sizes no layer can have: a programmer's error, as a
// shape error in numeric code is.
func (c LayerConfig) check() {
	if c.DModel <= 0 || c.Heads <= 0 || c.DModel%c.Heads != 0 || c.DFF <= 0 || c.MemoryWidth < 0 || c.Dropout < 0 || c.Dropout >= 1 {
		panic(fmt.Sprintf("r2gen: layer of width %d, %d heads, feed-forward %d, memory width %d, dropout %v", c.DModel, c.Heads, c.DFF, c.MemoryWidth, c.Dropout))
	}
}

// EncoderLayer returns the sizes of c's encoder layers.
func (c Config) EncoderLayer() LayerConfig {
	return LayerConfig{DModel: c.DModel, Heads: c.Heads, DFF: c.DFF, Dropout: c.Dropout}
}

// DecoderLayer returns the sizes of c's decoder layers: their norms are
// MCLNs over the memory's S·D values in the full model (VariantR2Gen),
// plain elsewhere.
func (c Config) DecoderLayer() LayerConfig {
	l := c.EncoderLayer()
	if c.Variant == VariantR2Gen {
		l.MemoryWidth = c.MemorySlots * c.DModel
	}
	return l
}

// SourceMask returns the mask (B, 1, N) of b studies of n visual tokens,
// all ones (every patch is real), on device dev: the srcMask of
// [DecoderLayer.Forward] and the encoder's mask.
func SourceMask(b, n int, dev radgen.Device) *radgen.Tensor {
	mask := radgen.Zeros(b, 1, n)
	radgen.Fill(mask, 1)
	return mask.To(dev)
}

// TargetMask returns R2Gen's self-attention mask (B, T, T) of teacher
// forcing for b reports of t input ids each (b·t ids, row-major): position
// q sees positions k ≤ q, except padding (id 0) anywhere but at position 0,
// which is the start. It panics if len(tokens) is not b·t.
func TargetMask(tokens []int, b, t int) *radgen.Tensor {
	if len(tokens) != b*t {
		panic(fmt.Sprintf("r2gen: target mask of %d ids for (%d, %d)", len(tokens), b, t))
	}
	mask := radgen.Zeros(b, t, t)
	md := mask.Data()
	for i := 0; i < b; i++ {
		for q := 0; q < t; q++ {
			for k := 0; k <= q; k++ {
				if k == 0 || tokens[i*t+k] > 0 {
					md[(i*t+q)*t+k] = 1
				}
			}
		}
	}
	return mask
}

// CausalMask returns the self-attention mask (B, T, T) that hides future
// positions only, as R2Gen's sampler does (subsequent_mask, no padding).
func CausalMask(b, t int) *radgen.Tensor {
	mask := radgen.Zeros(b, t, t)
	md := mask.Data()
	for r := 0; r < b; r++ {
		for q := 0; q < t; q++ {
			for k := 0; k <= q; k++ {
				md[(r*t+q)*t+k] = 1
			}
		}
	}
	return mask
}
