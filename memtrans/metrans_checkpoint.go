package memtrans

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/safetensors"
)

// metaMETransConfig is the metadata key of a METransformer's architecture
// in the native checkpoint format (see checkpoint.go); an R2Gen checkpoint
// has radgen.config instead, so neither loader mistakes one for the other.
const metaMETransConfig = "radgen.metrans.config"

// Save writes the model in the native checkpoint format: every parameter by
// its name (see [METransformer]), the configuration as JSON in the
// metadata, compressed and checksummed. Write it through a temporary file
// and a rename for atomicity, as Model.SaveFile does.
func (m *metransModel) save(w io.Writer) error {
	cfg, err := json.Marshal(m.config)
	if err != nil {
		return err
	}
	return writeCheckpoint(w, m, map[string]string{metaMETransConfig: string(cfg)})
}

// loadMETransformer reads a model written by [METransformer.Save]. Of the
// options only a WithBudget given through WithModelOptions applies. Before any parameter is
// allocated, the configuration must be valid and the file must hold as
// many values as the model has, so a forged header cannot make it allocate
// more than the file's size. Errors wrap ErrCheckpoint.
func loadMETransformer(r io.Reader, opts ...LoadOption) (*metransModel, error) {
	var o loadOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	b, err := budgetOf(o.model)
	if err != nil {
		return nil, err
	}
	o.maxBytes = b.MaxCheckpointBytes
	var m *metransModel
	ck, err := readCheckpoint(r, o.maxBytes, func(f *safetensors.File) error {
		raw, ok := f.Metadata()[metaMETransConfig]
		if !ok {
			return fmt.Errorf("%w: no METransformer configuration (%s)", ErrCheckpoint, metaMETransConfig)
		}
		var cfg METransConfig
		if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
			return fmt.Errorf("%w: config: %v", ErrCheckpoint, err)
		}
		if err := cfg.validateShape(); err != nil {
			return fmt.Errorf("%w: %w", ErrCheckpoint, err)
		}
		if err := checkArchBudget("METransformer", b, cfg, cfg.Patches); err != nil {
			return fmt.Errorf("%w: %w", ErrCheckpoint, err)
		}
		var stored float64
		for _, n := range f.Names() {
			if info, ok := f.Info(n); ok {
				stored += float64(info.Len())
			}
		}
		if want := cfg.paramCount(); want > stored {
			return fmt.Errorf("%w: the configuration has %.0f parameters, the file holds %.0f values", ErrCheckpoint, want, stored)
		}
		var err error
		if m, err = newMETransformer(cfg, 0); err != nil {
			return fmt.Errorf("%w: %w", ErrCheckpoint, err)
		}
		return checkTensors(f, m, 0)
	})
	if err != nil {
		return nil, err
	}
	if err := radgen.LoadParams(m, ck.file, ""); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	return m, nil
}

// paramCount returns the number of parameter values of a model of c, in
// float64 so that no configuration overflows it.
func (c METransConfig) paramCount() float64 {
	d, n, m := float64(c.DModel), float64(c.Patches), float64(c.Experts)
	ff, mid, v := float64(c.DFF), float64(c.DMid), float64(c.Vocab)
	linear := func(in, out float64) float64 { return in*out + out }
	norm := 2 * d
	eba := 4*linear(d, d) + linear(d, mid) + linear(mid, 1) + linear(mid, d)
	vit := linear(float64(c.DIn), d) + m*d + (n+m)*d + 2*d + norm +
		float64(c.ViTLayers)*(2*norm+4*linear(d, d)+linear(d, ff)+linear(ff, d))
	bil := float64(c.BilinearLayers) * (eba + linear(2*d, d) + norm)
	dec := float64(c.DecoderLayers)*(2*eba+2*norm) + float64(c.DecoderLayers-1)*(linear(2*d, d)+norm)
	return vit + bil + 2*linear(d, d) + v*d + float64(c.MaxSeqLen+1)*d + dec + linear(d, v)
}
