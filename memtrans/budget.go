package memtrans

import (
	"fmt"
	"math"

	"github.com/radgen/radgen/memtrans/arch"
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
	// defaultMaxParams bounds the parameter values of a model: 2^28
	// (1 GiB of float32).
	defaultMaxParams = 1 << 28
	// defaultMaxActivations bounds the float32 values of the activations
	// one study needs in a training step (the extractor's feature maps,
	// attention scores, logits): 2^28 (1 GiB). R2Gen on two 224² views
	// needs about 2^23.
	defaultMaxActivations = 1 << 28
)

// ErrBudget is wrapped, together with ErrConfig, by the error for a
// configuration beyond its Budget.
var ErrBudget = arch.ErrBudget

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

// checkArchBudget is checkBudget over an encoder–decoder configuration's
// fields alone, for patches visual tokens.
func checkArchBudget(what string, b Budget, c arch.FieldCoster, patches int) error {
	fs, own := c.FieldCost()
	fields := make([]sizeField, len(fs))
	for i, f := range fs {
		fields[i] = sizeField{f.Name, f.Value, f.Reference}
	}
	return checkBudget(what, b, fields, func() cost {
		k := own(patches)
		return cost{k.Params, k.Activations}
	})
}

// nominalPatches is the patch count assumed when a sub-configuration is
// checked on its own: two 224² views of a ResNet (2·7·7).
const nominalPatches = 98

// hardBudget is what the constructors (r2gen.New, m2.New, metrans.New)
// accept whatever the facade's budget: 2^34 parameters
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

// checkModelBudget reports whether a model of c fits b (the zero fields of b
// meaning their defaults); it does not check anything else (see
// Validate). The error wraps ErrConfig and ErrBudget and names the field
// responsible, among the encoder–decoder's where its configuration lists
// them (arch.FieldCoster).
func (c ModelConfig) checkModelBudget(b Budget) error {
	fields := []sizeField{{"views", &c.Views, 2}, {"image_size", &c.ImageSize, 224}}
	ext := func() cost { return ModelConfig{Vision: c.Vision, Views: c.Views, ImageSize: c.ImageSize}.cost() }
	archCost := func() cost {
		k := c.EncoderDecoder.Cost(c.PatchesPerStudy())
		return cost{k.Params, k.Activations}
	}
	if f, ok := c.EncoderDecoder.(arch.FieldCoster); ok {
		more, own := f.FieldCost()
		for _, m := range more {
			fields = append(fields, sizeField{m.Name, m.Value, m.Reference})
		}
		archCost = func() cost {
			k := own(c.PatchesPerStudy())
			return cost{k.Params, k.Activations}
		}
	}
	return checkBudget("model", b, fields, func() cost { return ext().add(archCost()) })
}
