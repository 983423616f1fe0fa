package memtrans

import (
	"errors"
	"fmt"
	"math"
)

// Every size of a model comes from input: a configuration file, a
// checkpoint's metadata, the shapes of a state_dict. A Budget bounds what
// such input may ask for, and it is checked before anything is allocated:
// a configuration whose parameters or activations exceed it is refused with
// an error wrapping [ErrConfig] and [ErrBudget] that names the field
// responsible and the budget. The counts are upper estimates computed in
// float64 from the configuration alone, so no configuration can overflow
// them; the paper's models are far below the defaults.

// Default budget: about four times the largest model of the papers
// (R2Gen on MIMIC-CXR: a ResNet-101 of 42.5 M parameters and an
// encoder–decoder of about 20 M).
const (
	// DefaultMaxParams bounds the parameter values of a model: 2^28
	// (1 GiB of float32).
	defaultMaxParams = 1 << 28
	// DefaultMaxActivations bounds the float32 values of the activations
	// one study needs in a training step (the extractor's feature maps,
	// attention scores, logits): 2^28 (1 GiB). R2Gen on two 224² views
	// needs about 2^23.
	defaultMaxActivations = 1 << 28
)

// ErrBudget is wrapped, together with ErrConfig, by the error for a
// configuration beyond its Budget.
var ErrBudget = errors.New("memtrans: model exceeds the size budget")

// Budget bounds the size of a model that input can describe (see
// [WithBudget]). The zero value of a field means its default.
type Budget struct {
	MaxParams          int64 // parameter values; default 2^28
	MaxActivations     int64 // float32 activation values per study; default 2^28
	MaxCheckpointBytes int64 // decompressed bytes of a checkpoint the loaders read; default 8 GiB
}

// DefaultBudget returns the budget used when none is given.
func DefaultBudget() Budget {
	return Budget{MaxParams: defaultMaxParams, MaxActivations: defaultMaxActivations, MaxCheckpointBytes: defaultMaxCheckpointBytes}
}

func (b Budget) orDefault() Budget {
	if b.MaxParams <= 0 {
		b.MaxParams = defaultMaxParams
	}
	if b.MaxActivations <= 0 {
		b.MaxActivations = defaultMaxActivations
	}
	if b.MaxCheckpointBytes <= 0 {
		b.MaxCheckpointBytes = defaultMaxCheckpointBytes
	}
	return b
}

// WithBudget sets the size budget that New, Load, LoadFile, LoadR2Gen and
// LoadR2GenFile check a configuration against before building the model
// (default DefaultBudget). Raise it for models larger than the papers'.
func WithBudget(b Budget) Option {
	return func(m *Model) error {
		if b.MaxParams < 0 || b.MaxActivations < 0 || b.MaxCheckpointBytes < 0 {
			return fmt.Errorf("memtrans: budget of %d parameters, %d activations, %d checkpoint bytes", b.MaxParams, b.MaxActivations, b.MaxCheckpointBytes)
		}
		m.budget = b.orDefault()
		return nil
	}
}

// budgetOf returns the budget set by opts, applying them to a scratch
// model (options only record their values).
func budgetOf(opts []Option) (Budget, error) {
	var m Model
	for _, o := range opts {
		if err := o(&m); err != nil {
			return Budget{}, err
		}
	}
	return m.budget.orDefault(), nil
}

// cost is a model's size: parameter and activation values (upper
// estimates).
type cost struct{ params, acts float64 }

func (c cost) add(o cost) cost { return cost{c.params + o.params, c.acts + o.acts} }

// sizeField is an integer field of a configuration, for naming the field
// that makes a model too large.
type sizeField struct {
	name string
	p    *int
	ref  int // the value in the papers' models
}

// checkBudget returns an error when cost(…) exceeds b, naming the field
// that, brought down to its value in the papers' models, would shrink the
// model most.
func checkBudget(what string, b Budget, fields []sizeField, costOf func() cost) error {
	b = b.orDefault()
	c := costOf()
	overP, overA := c.params > float64(b.MaxParams), c.acts > float64(b.MaxActivations)
	if !overP && !overA {
		return nil
	}
	measure := func(c cost) float64 {
		if overP {
			return c.params
		}
		return c.acts
	}
	worst, best := "", math.Inf(1)
	for _, f := range fields {
		v := *f.p
		*f.p = min(v, f.ref)
		if m := measure(costOf()); m < best {
			worst, best = fmt.Sprintf("%s = %d", f.name, v), m
		}
		*f.p = v
	}
	if overP {
		return fmt.Errorf("%w: %w: %s: %s gives about %.3g parameters, over the budget of %d (WithBudget)", ErrConfig, ErrBudget, what, worst, c.params, b.MaxParams)
	}
	return fmt.Errorf("%w: %w: %s: %s gives about %.3g activation values per study, over the budget of %d (WithBudget)", ErrConfig, ErrBudget, what, worst, c.acts, b.MaxActivations)
}

// nominalPatches is the patch count assumed when a sub-configuration is
// checked on its own: two 224² views of a ResNet (2·7·7).
const nominalPatches = 98

// cost estimates R2Gen's encoder–decoder over p patches.
func (c Config) cost(p int) cost {
	d, f, l := float64(c.DModel), float64(c.DFF), float64(c.Layers)
	v, s, h := float64(c.Vocab), float64(max(c.MemorySlots, 0)), float64(c.Heads)
	da, t, n := float64(c.mem2memHidden()), float64(c.MaxSeqLen), float64(p)
	params := float64(c.DVisual)*d + d + // att_embed
		l*(12*d*d+4*d*f+40*d+2*f) + // encoder and decoder layers
		v*d*(2+s) + 2*v + float64(c.PositionLen)*d + // embeddings, logits, positional table
		16*d*d + 8*d*da + 4*s*d + // memory
		l*l*4*d*d // multi-view routing
	if c.Variant == VariantR2Gen {
		params += l * 3 * 2 * (s*d*d + d*d + 2*d) // MCLN's MLPs
	}
	// A training step keeps every layer's attention and feed-forward
	// values for the backward pass.
	acts := l*(h*(n*n+t*n+t*t)+(n+t)*(f+12*d)) + t*v*3 + t*s*d*6
	return cost{params, acts}
}

func (c *Config) sizeFields() []sizeField {
	return []sizeField{{"d_model", &c.DModel, 512}, {"d_ff", &c.DFF, 2048}, {"num_heads", &c.Heads, 8}, {"num_layers", &c.Layers, 3},
		{"d_vf", &c.DVisual, 2048}, {"vocab", &c.Vocab, 10000}, {"rm_num_slots", &c.MemorySlots, 40}, {"m2m_hidden", &c.Mem2MemHidden, 512},
		{"max_seq_length", &c.MaxSeqLen, 100}, {"pe_len", &c.PositionLen, 5000}}
}

func (c Config) checkBudget(b Budget, patches int) error {
	return checkBudget("R2Gen", b, c.sizeFields(), func() cost { return c.cost(patches) })
}

// cost estimates the Meshed-Memory Transformer over p regions.
func (c M2Config) cost(p int) cost {
	d, f, h := float64(c.DModel), float64(c.DFF), float64(c.Heads)
	qk, vv, s := h*float64(c.DK), h*float64(c.DV), float64(c.MemorySlots)
	ne, nd, v := float64(c.EncLayers), float64(c.DecLayers), float64(c.Vocab)
	t, n := float64(c.MaxLen+1), float64(p)
	att := 2*d*qk + 2*d*vv + 2*qk + 2*vv + 4*d
	params := float64(c.DIn)*d + d +
		ne*(att+s*(qk+vv)+2*d*f+f+7*d) +
		nd*(2*att+ne*(2*d*d+d)+2*d*f+f+7*d) +
		v*d + t*d + d*v + v
	acts := ne*(h*n*(n+s)+n*(f+8*d)) + nd*(h*t*(t+ne*n)+t*(f+(8+2*ne)*d)) + 3*t*v
	return cost{params, acts}
}

func (c *M2Config) sizeFields() []sizeField {
	return []sizeField{{"d_model", &c.DModel, 512}, {"d_k", &c.DK, 64}, {"d_v", &c.DV, 64}, {"heads", &c.Heads, 8}, {"d_ff", &c.DFF, 2048},
		{"enc_layers", &c.EncLayers, 3}, {"dec_layers", &c.DecLayers, 3}, {"memory_slots", &c.MemorySlots, 40},
		{"d_in", &c.DIn, 2048}, {"vocab", &c.Vocab, 10000}, {"max_len", &c.MaxLen, 101}}
}

func (c M2Config) checkBudget(b Budget, patches int) error {
	return checkBudget("M²", b, c.sizeFields(), func() cost { return c.cost(patches) })
}

// cost estimates METransformer (its visual tokens are c.Patches).
func (c METransConfig) cost() cost {
	d, f, h := float64(c.DModel), float64(c.DFF), float64(c.Heads)
	n, m, t, v := float64(c.Patches), float64(c.Experts), float64(c.MaxSeqLen+1), float64(c.Vocab)
	mid, lv, lb, ld := float64(c.DMid), float64(c.ViTLayers), float64(c.BilinearLayers), float64(c.DecoderLayers)
	k := n + m
	acts := lv*(h*k*k+k*(f+8*d)) + lb*m*n*(mid+4*d) + ld*m*t*(n+m+t)*(mid+4*d)/8 + ld*m*t*8*d + 3*m*t*v
	return cost{c.paramCount(), acts}
}

func (c *METransConfig) sizeFields() []sizeField {
	return []sizeField{{"d_in", &c.DIn, 2048}, {"patches", &c.Patches, 98}, {"experts", &c.Experts, 6}, {"d_model", &c.DModel, 512},
		{"heads", &c.Heads, 8}, {"d_ff", &c.DFF, 2048}, {"d_mid", &c.DMid, 256}, {"vit_layers", &c.ViTLayers, 3},
		{"bilinear_layers", &c.BilinearLayers, 1}, {"decoder_layers", &c.DecoderLayers, 3}, {"vocab", &c.Vocab, 10000},
		{"max_seq_length", &c.MaxSeqLen, 100}}
}

func (c METransConfig) checkBudget(b Budget) error {
	return checkBudget("METransformer", b, c.sizeFields(), func() cost { return c.cost() })
}

// hardBudget is what the constructors (NewTransformer, newM2Transformer,
// newMETransformer) accept whatever the facade's budget: 2^34 parameters
// (64 GiB of float32) and 2^36 activation values. Beyond it tensor shapes
// could overflow; below it they cannot.
var hardBudget = Budget{MaxParams: 1 << 34, MaxActivations: 1 << 36}

// cost estimates the whole generator: the extractor over its views and the
// encoder–decoder over the patches it gives.
func (c ModelConfig) cost() cost {
	s, views := float64(c.ImageSize), float64(c.Views)
	// The largest feature maps of a ResNet are 16·s² values (64 channels
	// at s/2, or a bottleneck's 256 at s/4); a training step keeps about
	// twice that per view.
	ext := cost{float64(c.Vision.NumParams()), views * 32 * s * s}
	if c.EncoderDecoder == nil {
		return ext
	}
	k := c.EncoderDecoder.Cost(c.PatchesPerStudy())
	return ext.add(cost{k.Params, k.Activations})
}

// budgetFielded is implemented by the library's configurations, whose
// budget errors name the field that makes a model too large: it returns
// the integer fields of a copy of the configuration and the cost of that
// copy over patches.
type budgetFielded interface {
	budgetFields(patches int) ([]sizeField, func() cost)
}

func (c Config) budgetFields(p int) ([]sizeField, func() cost) {
	return c.sizeFields(), func() cost { return c.cost(p) }
}

func (c M2Config) budgetFields(p int) ([]sizeField, func() cost) {
	return c.sizeFields(), func() cost { return c.cost(p) }
}

func (c METransConfig) budgetFields(p int) ([]sizeField, func() cost) {
	c.Patches = p
	return c.sizeFields(), func() cost { return c.cost() }
}

// checkModelBudget reports whether a model of c fits b (the zero fields of b
// meaning their defaults); it does not check anything else (see
// Validate). The error wraps ErrConfig and ErrBudget and names the field
// responsible where the configuration says which it is.
func (c ModelConfig) checkModelBudget(b Budget) error {
	fields := []sizeField{{"views", &c.Views, 2}, {"image_size", &c.ImageSize, 224}}
	ext := func() cost { return ModelConfig{Vision: c.Vision, Views: c.Views, ImageSize: c.ImageSize}.cost() }
	archCost := func() cost {
		k := c.EncoderDecoder.Cost(c.PatchesPerStudy())
		return cost{k.Params, k.Activations}
	}
	if f, ok := c.EncoderDecoder.(budgetFielded); ok {
		var own func() cost
		var more []sizeField
		more, own = f.budgetFields(c.PatchesPerStudy())
		fields = append(fields, more...)
		// The copy's cost follows its fields; the patches follow views and
		// image_size only through the copy's fixed count, as before.
		archCost = own
	}
	return checkBudget("model", b, fields, func() cost { return ext().add(archCost()) })
}
