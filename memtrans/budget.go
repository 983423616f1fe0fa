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

// checkBudget returns an error when cost(…) exceeds b, naming the field
// that, brought down to its value in the papers' models, would shrink the
// model most.
func checkBudget(what string, b Budget, fields []arch.Field, costOf func() arch.Cost) error {
	b = b.orDefault()
	c := costOf()
	overP, overA := c.Params > float64(b.MaxParams), c.Activations > float64(b.MaxActivations)
	if !overP && !overA {
		return nil
	}
	measure := func(c arch.Cost) float64 {
		if overP {
			return c.Params
		}
		return c.Activations
	}
	worst, best := "", math.Inf(1)
	for _, f := range fields {
		v := *f.Value
		*f.Value = min(v, f.Reference)
		if m := measure(costOf()); m < best {
			worst, best = fmt.Sprintf("%s = %d", f.Name, v), m
		}
		*f.Value = v
	}
	if overP {
		return fmt.Errorf("%w: %w: %s: %s gives about %.3g parameters, over the budget of %d (WithBudget)", ErrConfig, ErrBudget, what, worst, c.Params, b.MaxParams)
	}
	return fmt.Errorf("%w: %w: %s: %s gives about %.3g activation values per study, over the budget of %d (WithBudget)", ErrConfig, ErrBudget, what, worst, c.Activations, b.MaxActivations)
}

// checkArchBudget is checkBudget over an encoder–decoder configuration's
// fields alone, for patches visual tokens.
func checkArchBudget(what string, b Budget, c arch.FieldCoster, patches int) error {
	fields, costOf := c.FieldCost()
	return checkBudget(what, b, fields, func() arch.Cost { return costOf(patches) })
}

// nominalPatches is the patch count assumed when a sub-configuration is
// checked on its own: two 224² views of a ResNet (2·7·7).
const nominalPatches = 98

// cost estimates the whole generator: the extractor over its views and the
// encoder–decoder over the patches it gives.
func (c ModelConfig) cost() arch.Cost { return c.costWith(c.EncoderDecoder.Cost) }

// costWith is cost with the encoder–decoder's estimate archCost.
func (c ModelConfig) costWith(archCost func(patches int) arch.Cost) arch.Cost {
	s, views := float64(c.ImageSize), float64(c.Views)
	// The largest feature maps of a ResNet are 16·s² values (64 channels
	// at s/2, or a bottleneck's 256 at s/4); a training step keeps about
	// twice that per view.
	ext := arch.Cost{Params: float64(c.Vision.NumParams()), Activations: views * 32 * s * s}
	k := archCost(c.PatchesPerStudy())
	return arch.Cost{Params: ext.Params + k.Params, Activations: ext.Activations + k.Activations}
}

// checkModelBudget reports whether a model of c fits b (the zero fields of b
// meaning their defaults); it does not check anything else (see
// Validate). The error wraps ErrConfig and ErrBudget and names the field
// responsible, among the encoder–decoder's where its configuration lists
// them (arch.FieldCoster).
func (c ModelConfig) checkModelBudget(b Budget) error {
	fields := []arch.Field{{Name: "views", Value: &c.Views, Reference: 2}, {Name: "image_size", Value: &c.ImageSize, Reference: 224}}
	archCost := c.EncoderDecoder.Cost
	if f, ok := c.EncoderDecoder.(arch.FieldCoster); ok {
		more, own := f.FieldCost() // a copy of the configuration, whose cost follows its fields
		fields, archCost = append(fields, more...), own
	}
	return checkBudget("model", b, fields, func() arch.Cost { return c.costWith(archCost) })
}
