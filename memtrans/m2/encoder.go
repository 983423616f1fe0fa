package m2

// M²'s memory-augmented encoder (Cornia et al. 2020, §3.1, Eqs. 4–5).
// Mirrors aimagelab/meshed-memory-transformer models/transformer/encoders.py
// (EncoderLayer, MultiLevelEncoder, MemoryAugmentedEncoder).

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mesh"
)

// EncoderLayer is one memory-augmented encoding layer (Cornia et al. 2020,
// Eq. 5): Z = AddNorm(M_mem(X)), X̃ = AddNorm(F(Z)). Names: mhatt.*, pwff.*.
type EncoderLayer struct {
	MHAtt *AttentionLayer
	PWFF  *PositionWiseFeedForward
}

// Forward encodes x (B, N, D) with the encoder mask (B, 1, 1, N), zero =
// masked, or nil.
func (l *EncoderLayer) Forward(g *radgen.Graph, x, mask *radgen.Tensor) *radgen.Tensor {
	return l.PWFF.Forward(g, l.MHAtt.Forward(g, x, x, x, mask))
}

// VisitParams implements radgen.Module.
func (l *EncoderLayer) VisitParams(visit func(string, *radgen.Tensor)) {
	l.MHAtt.VisitParams(radgen.Prefixed("mhatt.", visit))
	l.PWFF.VisitParams(radgen.Prefixed("pwff.", visit))
}

// PaddingRule says which input regions the encoder masks.
type PaddingRule int

const (
	// PadAfterNorm is the published code's rule: a region is masked when
	// the sum of its embedding after fc → ReLU → Dropout → LayerNorm is
	// exactly zero (MultiLevelEncoder computes the mask from its input,
	// which MemoryAugmentedEncoder has already normalised).
	// [AfterNormMask] computes that LayerNorm and sum as torch's CPU
	// kernels do, bit for bit, so that the same LayerNorm input gives the
	// published code's mask.
	//
	// The exact sum of a layer-normalised row is Σβ + Σ(γᵢ−γ̄)·zᵢ (z the
	// normalised row), which with a fresh LayerNorm (γ = 1, β = 0) is zero
	// for every row: which rows land on exactly 0.0 is then decided by
	// float32 rounding, in the LayerNorm and in the product fc before it.
	// That product rounds differently on each kernel path radgen picks
	// from the CPU (AVX-512, AVX2 or pure Go: different blocking of the
	// sum, with or without fused multiply-adds) and may change with the
	// batch's size (the kernels are chosen by shape), so the same study
	// can be masked differently on two machines or in two batches. On the
	// M² parity golden (60 regions, 13 of them zero padding) the AVX2 path
	// masks the reference's 3 regions, the AVX-512 and pure-Go paths
	// others, and no path masks a zero-padded region. With trained
	// LayerNorm vectors the sums are far from zero and almost no region
	// is masked, padded or not. Only the regions whose LayerNorm input is
	// computed exactly (zero rows: their input is ReLU(bias)) are masked
	// alike everywhere.
	//
	// Choose it only to reproduce the published code's numbers. For real
	// data choose [PadZeroRows] when padding regions come as all-zero
	// feature rows (detections padded to a fixed count), or [PadNone] when
	// every region is real (a CNN's patch features): their masks depend
	// on the input alone, on every CPU and in every batch.
	PadAfterNorm PaddingRule = iota

	// PadZeroRows masks regions whose raw input features are all zero:
	// what the zero-padding of the detections is meant to achieve. The
	// mask depends on the input alone, the same on every CPU.
	PadZeroRows

	// PadNone masks nothing.
	PadNone
)

// String returns "after-norm", "zero-rows" or "none".
func (p PaddingRule) String() string {
	switch p {
	case PadAfterNorm:
		return "after-norm"
	case PadZeroRows:
		return "zero-rows"
	case PadNone:
		return "none"
	}
	return fmt.Sprintf("PaddingRule(%d)", int(p))
}

// MemoryEncoder is M²'s memory-augmented encoder (Cornia et al. 2020,
// §3.1): the input regions (B, N, d_in) are embedded as
//
//	X = LayerNorm(Dropout(ReLU(fc(input))))
//
// and passed through a stack of [EncoderLayer]s whose outputs, all of
// them, form the multi-level encoding X̃ = (X̃¹, …, X̃ᴺ). Names: fc.*,
// layer_norm.*, layers.i.*.
type MemoryEncoder struct {
	FC      *radgen.Linear  // d_in → D
	Norm    *mesh.LayerNorm // the input LayerNorm (layer_norm)
	Layers  []*EncoderLayer // one per encoding level
	Dropout float64         // after the input ReLU (and inside every layer)
	Padding PaddingRule     // which regions are masked; the zero value is M²'s
}

// EncoderConfig sizes a [MemoryEncoder].
type EncoderConfig struct {
	DIn     int     // region feature width d_in (2048 in M²)
	D       int     // model width (512)
	DK, DV  int     // query/key and value widths per head (64, 64)
	Heads   int     // attention heads h (8)
	DFF     int     // feed-forward width (2048)
	Layers  int     // encoding layers N, also the number of levels (3)
	Slots   int     // memory slots m per layer (40)
	Dropout float64 // 0.1
}

// NewMemoryEncoder returns an encoder initialised as M² does (PyTorch's
// default for fc, then Xavier-uniform on every matrix and slot tensor).
func NewMemoryEncoder(c EncoderConfig, rng *rand.Rand) *MemoryEncoder {
	if c.Layers <= 0 || c.DIn <= 0 {
		panic(fmt.Sprintf("m2: encoder of %d layers over %d inputs", c.Layers, c.DIn))
	}
	e := &MemoryEncoder{FC: radgen.NewLinear(c.DIn, c.D, true, rng), Norm: mesh.NewLayerNorm(c.D), Dropout: c.Dropout}
	radgen.XavierUniform(e.FC.Weight, rng)
	for range c.Layers {
		e.Layers = append(e.Layers, &EncoderLayer{
			MHAtt: NewAttentionLayer(mesh.NewMemoryAttention(c.D, c.DK, c.DV, c.Heads, c.Slots, rng), c.Dropout),
			PWFF:  NewPositionWiseFeedForward(c.D, c.DFF, c.Dropout, rng),
		})
	}
	return e
}

// VisitParams implements radgen.Module.
func (e *MemoryEncoder) VisitParams(visit func(string, *radgen.Tensor)) {
	e.FC.VisitParams(radgen.Prefixed("fc.", visit))
	e.Norm.VisitParams(radgen.Prefixed("layer_norm.", visit))
	for i, l := range e.Layers {
		l.VisitParams(radgen.Prefixed(fmt.Sprintf("layers.%d.", i), visit))
	}
}

// Embed returns LayerNorm(Dropout(ReLU(fc(input)))) for input (B, N, d_in).
func (e *MemoryEncoder) Embed(g *radgen.Graph, input *radgen.Tensor) *radgen.Tensor {
	out, _ := e.embed(g, input)
	return out
}

// embed returns the embedding and the LayerNorm's input.
func (e *MemoryEncoder) embed(g *radgen.Graph, input *radgen.Tensor) (out, pre *radgen.Tensor) {
	if input.Rank() != 3 || input.Dim(2) != e.FC.Weight.Dim(1) {
		panic(fmt.Sprintf("m2: encoder input %v, want (B, N, %d)", input.Shape(), e.FC.Weight.Dim(1)))
	}
	pre = g.Dropout(g.ReLU(e.FC.Forward(g, input)), e.Dropout)
	return e.Norm.Forward(g, pre), pre
}

// Mask returns the encoder mask (B, 1, 1, N), 0 = masked, that e.Padding
// gives for the raw input (B, N, d_in) and pre, the input of e's
// LayerNorm (Dropout(ReLU(fc(input)))), or nil for PadNone. The mask is
// decided on the host and lives on input's device.
func (e *MemoryEncoder) Mask(input, pre *radgen.Tensor) *radgen.Tensor {
	var mask *radgen.Tensor
	switch e.Padding {
	case PadNone:
		return nil
	case PadAfterNorm:
		mask = AfterNormMask(pre.To(radgen.CPU), e.Norm)
	case PadZeroRows:
		mask = ZeroRowMask(input.To(radgen.CPU))
	default:
		panic(fmt.Sprintf("m2: unknown %v", e.Padding))
	}
	return mask.To(input.Device())
}

// Forward encodes input (B, N, d_in): it embeds it, computes the mask by
// e.Padding, and returns the stacked layer outputs (B, L, N, D), level i
// at index i, with the mask (B, 1, 1, N), 0 = masked (nil for PadNone).
func (e *MemoryEncoder) Forward(g *radgen.Graph, input *radgen.Tensor) (levels, mask *radgen.Tensor) {
	x, pre := e.embed(g, input)
	mask = e.Mask(input, pre)
	return e.layers(g, x, mask), mask
}

// ForwardMasked is Forward with the caller's mask (B|1, 1, 1, N), zero =
// masked, or nil for none, in place of e.Padding's: for example the mask
// a reference run recorded.
func (e *MemoryEncoder) ForwardMasked(g *radgen.Graph, input, mask *radgen.Tensor) *radgen.Tensor {
	return e.layers(g, e.Embed(g, input), mask)
}

func (e *MemoryEncoder) layers(g *radgen.Graph, x, mask *radgen.Tensor) *radgen.Tensor {
	b, n, d := x.Dim(0), x.Dim(1), x.Dim(2)
	outs := make([]*radgen.Tensor, len(e.Layers))
	for i, l := range e.Layers {
		x = l.Forward(g, x, mask)
		outs[i] = g.Reshape(x, b, 1, n, d)
	}
	return g.Concat(1, outs...)
}

var (
	_ radgen.Module = (*EncoderLayer)(nil)
	_ radgen.Module = (*MemoryEncoder)(nil)
)
