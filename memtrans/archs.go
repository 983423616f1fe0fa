package memtrans

// The facade's architectures: a Model holds one encoder–decoder behind
// arch.EncoderDecoder, so that generation, training, calibration and
// checkpoints are written once for R2Gen (and its variants), the
// Meshed-Memory Transformer, METransformer and any registered variant;
// this file holds the presets and the strategies.

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/m2"
	"github.com/radgen/radgen/memtrans/metrans"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/vision"
)

// The names the library's architectures are registered under (see
// arch.Register): a checkpoint records its architecture's name.
const (
	// ArchR2Gen is R2Gen's memory-driven Transformer (an [r2gen.Config]) and
	// every variant its Config composes: BASE, +RM, +MCLN, layer-wise
	// multi-view routing, Mem2Mem.
	ArchR2Gen = r2gen.Name
	// ArchM2 is the Meshed-Memory Transformer (an [m2.Config], seed 001):
	// its patches are M²'s regions, and beam search follows M²'s rules.
	ArchM2 = m2.Name
	// ArchMETransformer is METransformer (a [metrans.Config], seed 003):
	// each expert writes a candidate report and expert voting chooses one.
	ArchMETransformer = metrans.Name
)

// The library's architectures register as any other does.
func init() {
}

// Architecture returns the name c's encoder–decoder is registered under,
// or "" when it is not set or not registered.
func (c ModelConfig) Architecture() string {
	name, _ := arch.Name(c.EncoderDecoder)
	return name
}

// M2IUXray returns the Meshed-Memory Transformer of the M² paper (d_model
// 512, 8 heads, 3 encoder and 3 decoder layers, 40 memory slots) over
// ResNet-101 patch features of two 224² IU X-Ray views. vocab is the
// tokenizer size + 1.
func M2IUXray(vocab int) ModelConfig {
	meshed := m2.COCO(vocab).ForReports(vocab, r2gen.IUXray(vocab).MaxSeqLen)
	return ModelConfig{EncoderDecoder: meshed, Vision: vision.ResNet101, Corpus: R2GenIUXray(vocab).Corpus, Views: 2, ImageSize: 224, ResizeTo: 256}
}

// METransIUXray returns a METransformer over ResNet-101 patch features of
// two 224² IU X-Ray views (98 visual tokens): 6 experts, d_model 512, 8
// heads, 3 ViT blocks, 1 bilinear encoder layer and 3 bilinear decoder
// layers. The seed notes give no sizes; these follow R2Gen's scale.
func METransIUXray(vocab int) ModelConfig {
	c := metrans.Config{DIn: 2048, Patches: 2 * 7 * 7, Experts: 6, DModel: 512, Heads: 8, DFF: 2048, DMid: 256,
		ViTLayers: 3, BilinearLayers: 1, DecoderLayers: 3, Vocab: vocab, MaxSeqLen: r2gen.IUXray(vocab).MaxSeqLen, Lambda: 1, Dropout: 0.1}
	return ModelConfig{EncoderDecoder: c, Vision: vision.ResNet101, Corpus: R2GenIUXray(vocab).Corpus, Views: 2, ImageSize: 224, ResizeTo: 256}
}

// M2Tiny returns R2GenTiny's extractor and images with a small
// Meshed-Memory Transformer (m2.Tiny) in place of R2Gen's encoder–decoder.
func M2Tiny(vocab int) ModelConfig {
	c := R2GenTiny(vocab)
	meshed := m2.Tiny(vocab, c.Vision.OutChannels()).ForReports(vocab, c.EncoderDecoder.Dims().MaxSeqLen)
	c.EncoderDecoder = meshed
	return c
}

// METransTiny returns R2GenTiny's extractor and images with a small
// METransformer in place of R2Gen's encoder–decoder, as wide and deep as
// R2GenTiny's decoder (d_model 64, 2 decoder layers; 3 experts). After
// changing ImageSize or Views, set its metrans.Config's Patches to
// PatchesPerStudy.
func METransTiny(vocab int) ModelConfig {
	c := R2GenTiny(vocab)
	r2 := c.EncoderDecoder.(r2gen.Config)
	mt := metrans.Tiny(vocab, c.Vision.OutChannels(), c.PatchesPerStudy())
	mt.DModel, mt.DFF, mt.DMid = r2.DModel, 2*r2.DModel, r2.DModel/2
	mt.MaxSeqLen = r2.MaxSeqLen
	c.EncoderDecoder = mt
	return c
}

// PatchesPerStudy returns the visual tokens the extractor gives per study:
// Views × G², where G = ⌈ImageSize / 32⌉ is the side of the ResNet's last
// feature map (every stride-2 stage rounds up).
func (c ModelConfig) PatchesPerStudy() int {
	g := c.ImageSize
	for range 5 {
		g = (g + 1) / 2
	}
	return c.Views * g * g
}

// dims returns the encoder–decoder's sizes (zero when none is set).
func (c ModelConfig) dims() arch.Dims {
	if c.EncoderDecoder == nil {
		return arch.Dims{}
	}
	return c.EncoderDecoder.Dims()
}

// vocab returns the ids the tokenizer side uses: tokenizer size + 1.
func (c ModelConfig) vocab() int { return c.dims().Words }

// visualWidth returns the feature width the encoder–decoder takes.
func (c ModelConfig) visualWidth() int { return c.dims().VisualWidth }

// MaxSeqLen returns the longest report, in tokens, that the model is
// trained on and writes by default (R2Gen's max_seq_length).
func (c ModelConfig) MaxSeqLen() int { return c.dims().MaxSeqLen }

// maxDecodeLen returns the longest report the positional table allows.
func (c ModelConfig) maxDecodeLen() int { return c.dims().MaxLen }

// validateArchitecture checks the encoder–decoder part of c: registered,
// valid for the extractor's patches, and with consistent sizes.
func (c ModelConfig) validateArchitecture() error {
	if c.EncoderDecoder == nil {
		return fmt.Errorf("%w: no encoder–decoder configured", ErrConfig)
	}
	if _, err := arch.Name(c.EncoderDecoder); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := c.EncoderDecoder.Validate(c.PatchesPerStudy()); err != nil {
		if !errors.Is(err, ErrConfig) {
			err = fmt.Errorf("%w: %s: %w", ErrConfig, c.Architecture(), err)
		}
		return err
	}
	d := c.EncoderDecoder.Dims()
	switch {
	case d.Words < 2 || d.Vocab < d.Words:
		return fmt.Errorf("%w: %s: vocabulary of %d ids with %d report words", ErrConfig, c.Architecture(), d.Vocab, d.Words)
	case d.BOS < 0 || d.BOS >= d.Vocab:
		return fmt.Errorf("%w: %s: start id %d outside the vocabulary [0, %d)", ErrConfig, c.Architecture(), d.BOS, d.Vocab)
	case d.VisualWidth <= 0 || d.MaxSeqLen <= 0 || d.MaxLen < d.MaxSeqLen:
		return fmt.Errorf("%w: %s: visual width %d, reports of %d tokens, positions %d", ErrConfig, c.Architecture(), d.VisualWidth, d.MaxSeqLen, d.MaxLen)
	case d.Semantics != decode.R2Gen && d.Semantics != decode.M2:
		return fmt.Errorf("%w: %s: unknown beam search semantics %v", ErrConfig, c.Architecture(), d.Semantics)
	}
	return nil
}

// studyResult is one study's decoded report.
type studyResult struct {
	best       decode.Hypothesis
	candidates []decode.Hypothesis // METransformer: every expert's report
	expert     int
	scores     []float64
}

// strategyFor returns the decode strategy of o for a model whose reports
// start with bos and end with eos, following semantics in beam search.
func strategyFor(o genOptions, bos, eos int, semantics decode.Semantics) decode.Strategy {
	switch o.strategy {
	case "greedy":
		return decode.Greedy{MaxLen: o.maxLen, BOS: bos, EOS: eos, BlockTrigrams: o.trigrams, Attention: o.attention}
	case "sample":
		return decode.Sample{MaxLen: o.maxLen, BOS: bos, EOS: eos, Temperature: o.temp, TopK: o.topK, TopP: float64(o.topP), Seed: o.seed, Attention: o.attention}
	}
	return decode.BeamSearch{Size: o.beam, MaxLen: o.maxLen, BOS: bos, EOS: eos, Attention: o.attention, Semantics: semantics}
}

// decodeStudies writes each study's report from features feats with the
// strategy settings o, through the encoder–decoder's decoding (or its own
// StudyDecoder), and returns the width of the attention rows.
func (m *Model) decodeStudies(ctx context.Context, feats *radgen.Tensor, o genOptions) ([]studyResult, int, error) {
	d := m.cfg.dims()
	var gopts []radgen.GraphOption
	if o.stored != nil {
		gopts = append(gopts, radgen.SubstituteWeights(o.stored))
	}
	strategy := strategyFor(o, d.BOS, 0, d.Semantics)
	if sd, ok := m.net.(arch.StudyDecoder); ok {
		if o.attention {
			return nil, 0, fmt.Errorf("%w: the %s architecture records no attention maps", decode.ErrNoAttention, m.cfg.Architecture())
		}
		decs, err := sd.DecodeStudies(ctx, feats, strategy, gopts...)
		if err != nil {
			return nil, 0, err
		}
		if len(decs) != feats.Dim(0) {
			return nil, 0, fmt.Errorf("memtrans: %s decoded %d of %d studies", m.cfg.Architecture(), len(decs), feats.Dim(0))
		}
		out := make([]studyResult, len(decs))
		for i, r := range decs {
			out[i] = studyResult{best: r.Best, candidates: r.Candidates, expert: r.Chosen, scores: r.Scores}
		}
		return out, 0, nil
	}
	dec, err := m.net.StartDecoding(feats, gopts...)
	if err != nil {
		return nil, 0, err
	}
	if r, ok := dec.(arch.Releaser); ok {
		defer r.Release()
	}
	if dec.Rows() != feats.Dim(0) {
		return nil, 0, fmt.Errorf("memtrans: %s decodes %d rows for %d studies", m.cfg.Architecture(), dec.Rows(), feats.Dim(0))
	}
	width := 0
	if rec, ok := dec.(decode.AttentionRecorder); ok {
		width = rec.AttentionWidth()
	} else if o.attention {
		return nil, 0, fmt.Errorf("%w: the %s architecture records no attention maps", decode.ErrNoAttention, m.cfg.Architecture())
	}
	hyps, err := strategy.Decode(ctx, reportWords(dec, d))
	if err != nil {
		return nil, 0, err
	}
	res, err := bestOf(hyps)
	return res, width, err
}

// wordsOnly forbids an architecture's own ids (M²'s <bos> and <pad>), the
// ids from words on, as report words: their log-probabilities become −Inf
// after every step.
type wordsOnly struct {
	decode.Model
	words int
}

func (w wordsOnly) Step(ctx context.Context, tokens []int, dst []float32) error {
	if err := w.Model.Step(ctx, tokens, dst); err != nil {
		return err
	}
	v := w.VocabSize()
	inf := float32(math.Inf(-1))
	for r := range w.Rows() {
		row := dst[r*v : (r+1)*v]
		for i := w.words; i < v; i++ {
			row[i] = inf
		}
	}
	return nil
}

// reportWords returns dec restricted to the report vocabulary of d (see
// wordsOnly), still recording attention where dec does; dec itself when
// the architecture has no ids of its own.
func reportWords(dec decode.Model, d arch.Dims) decode.Model {
	if d.Words >= d.Vocab {
		return dec
	}
	if rec, ok := dec.(decode.AttentionRecorder); ok {
		return wordsOnlyRecorder{wordsOnly{rec, d.Words}, rec}
	}
	return wordsOnly{dec, d.Words}
}

// wordsOnlyRecorder is wordsOnly over a decoding that records attention.
type wordsOnlyRecorder struct {
	wordsOnly
	rec decode.AttentionRecorder
}

func (w wordsOnlyRecorder) AttentionWidth() int           { return w.rec.AttentionWidth() }
func (w wordsOnlyRecorder) Attention(dst []float32) error { return w.rec.Attention(dst) }

// bestOf keeps each study's best hypothesis.
func bestOf(hyps [][]decode.Hypothesis) ([]studyResult, error) {
	out := make([]studyResult, len(hyps))
	for i, h := range hyps {
		if len(h) == 0 {
			return nil, fmt.Errorf("memtrans: study %d decoded nothing", i)
		}
		out[i].best = h[0]
	}
	return out, nil
}

var (
	_ arch.EncoderDecoder = (*r2gen.Model)(nil)
	_ arch.EncoderDecoder = (*metrans.Model)(nil)
	_ arch.StudyDecoder   = (*metrans.Model)(nil)
)
