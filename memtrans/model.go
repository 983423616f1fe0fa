package memtrans

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/vision"
)

// ModelConfig is the whole architecture of a report generator: the visual
// extractor, the encoder–decoder and how images are prepared. It is saved
// with the weights.
//
// The encoder–decoder is any registered architecture's configuration (see
// package arch): R2Gen and the variants its [r2gen.Config] composes, the
// Meshed-Memory Transformer ([m2.Config]), METransformer
// ([metrans.Config]), or a researcher's own.
type ModelConfig struct {
	EncoderDecoder arch.Config
	Vision         vision.ResNetConfig
	Corpus         data.Corpus // report cleaner and tokenizer defaults
	Views          int         // images per study (2 for IU X-Ray)
	ImageSize      int         // evaluation Resize((s, s)); training crop
	ResizeTo       int         // training Resize on the shorter side
}

// modelConfigJSON is ModelConfig's saved form: the encoder–decoder by its
// registered name and configuration. Configurations saved before the
// registry (API record v0.2.0) name theirs by field: "transformer" (R2Gen),
// "m2" or "metrans".
type modelConfigJSON struct {
	Architecture   string              `json:"architecture,omitempty"`
	EncoderDecoder json.RawMessage     `json:"encoder_decoder,omitempty"`
	Transformer    json.RawMessage     `json:"transformer,omitempty"`
	M2             json.RawMessage     `json:"m2,omitempty"`
	METrans        json.RawMessage     `json:"metrans,omitempty"`
	Vision         vision.ResNetConfig `json:"vision"`
	Corpus         data.Corpus         `json:"corpus"`
	Views          int                 `json:"views"`
	ImageSize      int                 `json:"image_size"`
	ResizeTo       int                 `json:"resize_to"`
}

// MarshalJSON writes the configuration with its encoder–decoder's
// registered name; an unregistered one is an error.
func (c ModelConfig) MarshalJSON() ([]byte, error) {
	name, err := arch.Name(c.EncoderDecoder)
	if err != nil {
		return nil, err
	}
	ed, err := json.Marshal(c.EncoderDecoder)
	if err != nil {
		return nil, err
	}
	return json.Marshal(modelConfigJSON{Architecture: name, EncoderDecoder: ed, Vision: c.Vision, Corpus: c.Corpus, Views: c.Views, ImageSize: c.ImageSize, ResizeTo: c.ResizeTo})
}

// UnmarshalJSON reads a configuration written by MarshalJSON, or by an
// earlier version; an unregistered architecture is an error wrapping
// arch.ErrUnregistered.
func (c *ModelConfig) UnmarshalJSON(b []byte) error {
	var j modelConfigJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	name, raw := j.Architecture, j.EncoderDecoder
	legacy := 0
	for _, l := range []struct {
		name string
		raw  json.RawMessage
	}{{ArchR2Gen, j.Transformer}, {ArchM2, j.M2}, {ArchMETransformer, j.METrans}} {
		if len(l.raw) > 0 && string(l.raw) != "null" {
			name, raw = l.name, l.raw
			legacy++
		}
	}
	switch {
	case legacy > 1 || legacy == 1 && j.Architecture != "":
		return fmt.Errorf("%w: more than one encoder–decoder configured", ErrConfig)
	case name == "":
		return fmt.Errorf("%w: no encoder–decoder configured", ErrConfig)
	}
	ed, err := arch.Decode(name, raw)
	if err != nil {
		return err
	}
	*c = ModelConfig{EncoderDecoder: ed, Vision: j.Vision, Corpus: j.Corpus, Views: j.Views, ImageSize: j.ImageSize, ResizeTo: j.ResizeTo}
	return nil
}

// R2GenIUXray returns the paper's IU X-Ray generator: ResNet-101 over two
// 224² views, d_model 512, 3 layers, 3 memory slots. vocab is the tokenizer
// size + 1.
func R2GenIUXray(vocab int) ModelConfig {
	return ModelConfig{EncoderDecoder: r2gen.IUXray(vocab), Vision: vision.ResNet101, Corpus: data.IUXray, Views: 2, ImageSize: 224, ResizeTo: 256}
}

// R2GenMIMICCXR returns the paper's MIMIC-CXR generator (one view, reports
// up to 100 tokens).
func R2GenMIMICCXR(vocab int) ModelConfig {
	return ModelConfig{EncoderDecoder: r2gen.MIMICCXR(vocab), Vision: vision.ResNet101, Corpus: data.MIMICCXR, Views: 1, ImageSize: 224, ResizeTo: 256}
}

// R2GenTiny returns a small generator for demos and tests: a ResNet with one
// basic block per stage over two 64² views and a 64-wide, 2-layer
// memory-driven decoder. It trains on a laptop CPU in minutes.
func R2GenTiny(vocab int) ModelConfig {
	v := vision.ResNetConfig{Block: vision.BasicBlock, Layers: [4]int{1, 1, 1, 1}}
	t := r2gen.Tiny(vocab, v.OutChannels())
	return ModelConfig{EncoderDecoder: t, Vision: v, Corpus: data.IUXray, Views: 2, ImageSize: 64, ResizeTo: 72}
}

// Validate reports the first inconsistency in c, including a model beyond
// DefaultBudget (see checkModelBudget; New and the loaders take WithBudget).
func (c ModelConfig) Validate() error { return c.validate(DefaultBudget()) }

func (c ModelConfig) validate(b Budget) error {
	if c.Views <= 0 || c.Views > 16 {
		return fmt.Errorf("%w: %d views per study", ErrConfig, c.Views)
	}
	if c.ImageSize < 32 || c.ImageSize > 4096 || c.ResizeTo < c.ImageSize || c.ResizeTo > 4096 {
		return fmt.Errorf("%w: image size %d, training resize %d", ErrConfig, c.ImageSize, c.ResizeTo)
	}
	if err := c.validateArchitecture(); err != nil {
		return err
	}
	if err := c.Vision.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.Vision.OutChannels() != c.visualWidth() {
		return fmt.Errorf("%w: the extractor gives %d channels, the %s encoder–decoder wants %d", ErrConfig, c.Vision.OutChannels(), c.Architecture(), c.visualWidth())
	}
	if c.Corpus != data.IUXray && c.Corpus != data.MIMICCXR {
		return fmt.Errorf("%w: unknown corpus %q", ErrConfig, c.Corpus)
	}
	return c.checkModelBudget(b)
}

// ErrConfig is wrapped by every configuration error (arch.ErrConfig).
var ErrConfig = arch.ErrConfig

// Model is a report generator: a visual extractor, an encoder–decoder
// (R2Gen's memory-driven Transformer or a variant, M² or METransformer; see
// [ModelConfig]) and the tokenizer that maps its ids to words.
//
// A Model is safe for concurrent use: any number of goroutines may call
// Generate at once. Training (a Trainer) takes the model exclusively while it
// updates the weights, and Close waits for calls in flight.
type Model struct {
	cfg        ModelConfig
	extractor  *vision.Extractor
	net        arch.EncoderDecoder
	tokenizer  *data.Tokenizer
	logger     *slog.Logger
	maxPixels  int64
	budget     Budget
	imageOpts  []vision.Option
	slots      chan struct{} // one token per batch being generated
	device     radgen.Device // where the weights live (WithDevice)
	half       *halfState    // nil unless WithHalfWeights
	provenance Provenance    // what it was trained on (WithProvenance, the checkpoint)

	mu     sync.RWMutex
	closed bool
}

// Option configures a Model.
type Option func(*Model) error

// WithLogger sends the model's logs to l (by default they are discarded).
func WithLogger(l *slog.Logger) Option {
	return func(m *Model) error {
		if l == nil {
			return errors.New("memtrans: nil logger")
		}
		m.logger = l
		return nil
	}
}

// WithMaxPixels bounds the pixels of any image the model decodes (default
// vision.DefaultMaxPixels), refusing decompression bombs.
func WithMaxPixels(n int64) Option {
	return func(m *Model) error {
		if n <= 0 {
			return fmt.Errorf("memtrans: pixel limit %d", n)
		}
		m.maxPixels = n
		return nil
	}
}

// WithImageOptions passes decoding options (vision.WithMaxFileBytes,
// vision.WithNonRegularFiles, vision.WithMaxPixels) to the files the model
// reads (StudyFromAnnotation); they are checked now.
func WithImageOptions(opts ...vision.Option) Option {
	return func(m *Model) error {
		if _, err := vision.DecodeFile("", opts...); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("memtrans: image options: %w", err)
		}
		m.imageOpts = append(m.imageOpts, opts...)
		return nil
	}
}

// WithMaxConcurrency bounds the batches Generate and GenerateFeatures run
// at once, over all callers (default GOMAXPROCS): the others wait, and
// return as soon as their context is done. Fewer batches at once share the
// cores among fewer, so each reaches its next cancellation check sooner.
func WithMaxConcurrency(n int) Option {
	return func(m *Model) error {
		if n <= 0 {
			return fmt.Errorf("memtrans: concurrency %d", n)
		}
		m.slots = make(chan struct{}, n)
		return nil
	}
}

// ErrClosed is returned by a Model after Close.
var ErrClosed = errors.New("memtrans: model is closed")

// New returns a freshly initialised model for cfg and tokenizer tok, its
// weights drawn from a generator seeded with seed.
func New(cfg ModelConfig, tok *data.Tokenizer, seed uint64, opts ...Option) (*Model, error) {
	if tok == nil {
		return nil, errors.New("memtrans: nil tokenizer")
	}
	b, err := budgetOf(opts)
	if err != nil {
		return nil, err
	}
	if err := cfg.validate(b); err != nil {
		return nil, err
	}
	if cfg.vocab() != tok.Len()+1 {
		return nil, fmt.Errorf("%w: vocabulary %d for a tokenizer of %d tokens (want %d)", ErrConfig, cfg.vocab(), tok.Len(), tok.Len()+1)
	}
	ext, err := vision.NewExtractor(cfg.Vision, rand.New(rand.NewPCG(seed, 0x76697331)))
	if err != nil {
		return nil, err
	}
	net, err := cfg.EncoderDecoder.New(seed)
	if err != nil {
		return nil, err
	}
	return newModel(cfg, ext, net, tok, opts)
}

func newModel(cfg ModelConfig, ext *vision.Extractor, net arch.EncoderDecoder, tok *data.Tokenizer, opts []Option) (*Model, error) {
	m := &Model{cfg: cfg, extractor: ext, net: net, tokenizer: tok, logger: slog.New(slog.DiscardHandler), maxPixels: vision.DefaultMaxPixels, budget: DefaultBudget()}
	for _, o := range opts {
		if err := o(m); err != nil {
			return nil, err
		}
	}
	if m.slots == nil {
		m.slots = make(chan struct{}, runtime.GOMAXPROCS(0))
	}
	if err := m.moveToDevice(); err != nil {
		return nil, err
	}
	if m.half != nil && m.device == radgen.CPU && !slices.ContainsFunc(stepMatrices(net), halfEligible) {
		return nil, fmt.Errorf("%w: WithHalfWeights: architecture %s has no float32 matrix for its steps to read in half precision", ErrConfig, cfg.Architecture())
	}
	return m, nil
}

// Config returns the model's architecture.
func (m *Model) Config() ModelConfig { return m.cfg }

// Tokenizer returns the model's tokenizer.
func (m *Model) Tokenizer() *data.Tokenizer { return m.tokenizer }

// ContinueFrom loads the extractor and the encoder–decoder tensors that
// m's architecture continues from prev's, and leaves the rest as
// initialised: the continued learning of multi-view decoding (Liu et al.
// §3.3.2), where a trained single-view model is fine-tuned with its new
// routing. m's architecture must implement arch.Continuer (R2Gen and its
// variants do, from an R2Gen model); on error m is unchanged. It takes m
// exclusively.
func (m *Model) ContinueFrom(prev *Model) error {
	if prev == nil {
		return fmt.Errorf("%w: continued learning from a nil model", ErrConfig)
	}
	cont, ok := m.net.(arch.Continuer)
	if !ok {
		return fmt.Errorf("%w: architecture %s does not continue another model's training (arch.Continuer)", ErrConfig, m.cfg.Architecture())
	}
	prev.mu.RLock()
	ext := radgen.StateDict(prev.extractor, "")
	net := radgen.StateDict(prev.net, "")
	prev.mu.RUnlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := cont.ContinueFrom(net, ""); err != nil {
		return err
	}
	if err := radgen.LoadParams(m.extractor, ext, ""); err != nil {
		return err
	}
	m.extractor.ResNet.Refold()
	if m.half != nil {
		m.half.markStale()
	}
	return nil
}

// EncoderDecoder returns the model's encoder–decoder, whatever its
// architecture: its parameters are the model's under "encoder_decoder.".
// Calling its methods while the model trains or closes is the caller's
// race to avoid.
func (m *Model) EncoderDecoder() arch.EncoderDecoder { return m.net }

// VisitParams implements radgen.Module with the names of R2Gen's full
// state_dict: "visual_extractor.model.…" and "encoder_decoder.…" (for M²
// and METransformer, their own names under the same prefix).
func (m *Model) VisitParams(visit func(string, *radgen.Tensor)) {
	m.extractor.VisitParams(radgen.Prefixed("visual_extractor.", visit))
	m.net.VisitParams(radgen.Prefixed("encoder_decoder.", visit))
}

// Close releases the model: it waits for Generate calls in flight, frees
// the weights' device memory (WithDevice), and later calls return
// ErrClosed. Close is idempotent.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.device != radgen.CPU {
		radgen.Release(m) // device memory goes back now, not at the next GC
	}
	return nil
}

// acquire takes the model for reading (generation).
func (m *Model) acquire() error {
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

var _ radgen.Module = (*Model)(nil)
