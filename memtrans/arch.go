package memtrans

// The facade's architectures: a Model holds one encoder–decoder behind the
// encoderDecoder interface, so that generation, training, calibration and
// checkpoints are written once for R2Gen (and its variants), the
// Meshed-Memory Transformer and METransformer.

import (
	"context"
	"fmt"
	"math"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/mesh"
	"github.com/radgen/radgen/vision"
)

// Architecture names the encoder–decoder of a [ModelConfig].
type Architecture string

const (
	// ArchR2Gen is R2Gen's memory-driven Transformer (ModelConfig.Transformer)
	// and every variant its Config composes: BASE, +RM, +MCLN, layer-wise
	// multi-view routing, Mem2Mem.
	ArchR2Gen Architecture = "r2gen"
	// ArchM2 is the Meshed-Memory Transformer (ModelConfig.M2, seed 001):
	// its patches are M²'s regions, and beam search follows M²'s rules.
	ArchM2 Architecture = "m2"
	// ArchMETransformer is METransformer (ModelConfig.METrans, seed 003):
	// each expert writes a candidate report and expert voting chooses one.
	ArchMETransformer Architecture = "metransformer"
)

// Architecture reports which encoder–decoder c describes: ArchM2 when M2 is
// set, ArchMETransformer when METrans is set, ArchR2Gen otherwise.
func (c ModelConfig) Architecture() Architecture {
	switch {
	case c.M2 != nil:
		return ArchM2
	case c.METrans != nil:
		return ArchMETransformer
	}
	return ArchR2Gen
}

// ForReports returns c adapted to the facade's report vocabulary: the
// tokenizer's vocab ids (vocab = tokenizer size + 1; id 0 ends a report, as
// in R2Gen) followed by two ids of M²'s own, <bos> at vocab and <pad> at
// vocab+1, and a positional table for reports of maxSeqLen tokens (the
// decoder reads <bos> and up to maxSeqLen words).
func (c M2Config) ForReports(vocab, maxSeqLen int) M2Config {
	c.Vocab, c.BOS, c.Pad, c.EOS = vocab+2, vocab, vocab+1, 0
	c.MaxLen = maxSeqLen + 1
	// Every patch is a real region: nothing to mask.
	c.Padding = mesh.PadNone
	return c
}

// M2IUXray returns the Meshed-Memory Transformer of the M² paper (d_model
// 512, 8 heads, 3 encoder and 3 decoder layers, 40 memory slots) over
// ResNet-101 patch features of two 224² IU X-Ray views. vocab is the
// tokenizer size + 1.
func M2IUXray(vocab int) ModelConfig {
	m2 := m2COCO(vocab).ForReports(vocab, iuXRayTransformer(vocab).MaxSeqLen)
	return ModelConfig{M2: &m2, Vision: vision.ResNet101, Corpus: R2GenIUXray(vocab).Corpus, Views: 2, ImageSize: 224, ResizeTo: 256}
}

// METransIUXray returns a METransformer over ResNet-101 patch features of
// two 224² IU X-Ray views (98 visual tokens): 6 experts, d_model 512, 8
// heads, 3 ViT blocks, 1 bilinear encoder layer and 3 bilinear decoder
// layers. The seed notes give no sizes; these follow R2Gen's scale.
func METransIUXray(vocab int) ModelConfig {
	c := METransConfig{DIn: 2048, Patches: 2 * 7 * 7, Experts: 6, DModel: 512, Heads: 8, DFF: 2048, DMid: 256,
		ViTLayers: 3, BilinearLayers: 1, DecoderLayers: 3, Vocab: vocab, MaxSeqLen: iuXRayTransformer(vocab).MaxSeqLen, Lambda: 1, Dropout: 0.1}
	return ModelConfig{METrans: &c, Vision: vision.ResNet101, Corpus: R2GenIUXray(vocab).Corpus, Views: 2, ImageSize: 224, ResizeTo: 256}
}

// M2Tiny returns R2GenTiny's extractor and images with a small
// Meshed-Memory Transformer (tinyM2Preset) in place of R2Gen's decoder.
func M2Tiny(vocab int) ModelConfig {
	c := R2GenTiny(vocab)
	m2 := tinyM2Preset(vocab, c.Vision.OutChannels()).ForReports(vocab, c.Transformer.MaxSeqLen)
	c.Transformer, c.M2 = Config{}, &m2
	return c
}

// METransTiny returns R2GenTiny's extractor and images with a small
// METransformer in place of R2Gen's encoder–decoder, as wide and deep as
// R2GenTiny's decoder (d_model 64, 2 decoder layers; 3 experts). After
// changing ImageSize or Views, set METrans.Patches to PatchesPerStudy.
func METransTiny(vocab int) ModelConfig {
	c := R2GenTiny(vocab)
	mt := tinyMETransPreset(vocab, c.Vision.OutChannels(), c.PatchesPerStudy())
	mt.DModel, mt.DFF, mt.DMid = c.Transformer.DModel, 2*c.Transformer.DModel, c.Transformer.DModel/2
	mt.MaxSeqLen = c.Transformer.MaxSeqLen
	c.Transformer, c.METrans = Config{}, &mt
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

// vocab returns the ids the tokenizer side uses: tokenizer size + 1.
func (c ModelConfig) vocab() int {
	switch c.Architecture() {
	case ArchM2:
		return c.M2.Vocab - 2
	case ArchMETransformer:
		return c.METrans.Vocab
	}
	return c.Transformer.Vocab
}

// visualWidth returns the feature width the encoder–decoder takes.
func (c ModelConfig) visualWidth() int {
	switch c.Architecture() {
	case ArchM2:
		return c.M2.DIn
	case ArchMETransformer:
		return c.METrans.DIn
	}
	return c.Transformer.DVisual
}

// MaxSeqLen returns the longest report, in tokens, that the model is
// trained on and writes by default (R2Gen's max_seq_length).
func (c ModelConfig) MaxSeqLen() int {
	switch c.Architecture() {
	case ArchM2:
		return c.M2.MaxLen - 1
	case ArchMETransformer:
		return c.METrans.MaxSeqLen
	}
	return c.Transformer.MaxSeqLen
}

// maxDecodeLen returns the longest report the positional table allows.
func (c ModelConfig) maxDecodeLen() int {
	switch c.Architecture() {
	case ArchM2:
		return c.M2.MaxLen
	case ArchMETransformer:
		return c.METrans.MaxSeqLen + 1
	}
	return c.Transformer.PositionLen
}

// validateArchitecture checks the encoder–decoder part of c.
func (c ModelConfig) validateArchitecture() error {
	set := 0
	for _, ok := range []bool{c.M2 != nil, c.METrans != nil} {
		if ok {
			set++
		}
	}
	if set > 1 || set == 1 && c.Transformer != (Config{}) {
		return fmt.Errorf("%w: more than one encoder–decoder configured (transformer, m2, metrans)", ErrConfig)
	}
	switch c.Architecture() {
	case ArchM2:
		m := c.M2
		if err := m.validateShape(); err != nil {
			return err
		}
		if m.Vocab < 3 || m.EOS != 0 || m.BOS != m.Vocab-2 || m.Pad != m.Vocab-1 {
			return fmt.Errorf("%w: M² ids (vocab %d, bos %d, eos %d, pad %d) are not the facade's (see M2Config.ForReports)", ErrConfig, m.Vocab, m.BOS, m.EOS, m.Pad)
		}
	case ArchMETransformer:
		if err := c.METrans.validateShape(); err != nil {
			return err
		}
		if want := c.PatchesPerStudy(); c.METrans.Patches != want {
			return fmt.Errorf("%w: METransformer takes %d visual tokens, the extractor gives %d per study", ErrConfig, c.METrans.Patches, want)
		}
	default:
		return c.Transformer.validateShape()
	}
	return nil
}

// encoderDecoder is what the facade asks of an architecture. Token ids are
// the tokenizer's (R2Gen's: 0 is BOS, EOS and padding at once).
type encoderDecoder interface {
	radgen.Module

	// trainingLoss returns the objective of a teacher-forced batch of b
	// studies: in and targets are (b, t) ids, mask is 1 where a target
	// counts.
	trainingLoss(g *radgen.Graph, feats *radgen.Tensor, in, targets []int, mask []float32, b, t int) (*radgen.Tensor, error)

	// decodeStudies writes each study's report with strategy settings o.
	decodeStudies(ctx context.Context, feats *radgen.Tensor, o genOptions) ([]studyResult, int, error)

	// visualEmbedding returns the first linear map over the visual
	// features, which calibration standardises.
	visualEmbedding() *radgen.Linear

	// stepMatrices returns the weight matrices that every decoding step
	// reads and that may be stored in half precision (WithHalfWeights):
	// neither what a decoding applies once per study nor a recurrence.
	stepMatrices() []*radgen.Tensor
}

// studyResult is one study's decoded report.
type studyResult struct {
	best       decode.Hypothesis
	candidates []decode.Hypothesis // METransformer: every expert's report
	expert     int
	scores     []float64
}

// newEncoderDecoder builds the architecture of c, initialised from seed.
func newEncoderDecoder(c ModelConfig, seed uint64) (encoderDecoder, error) {
	switch c.Architecture() {
	case ArchM2:
		m, err := newM2Transformer(*c.M2, seed)
		if err != nil {
			return nil, err
		}
		return m2Facade{m}, nil
	case ArchMETransformer:
		return newMETransformer(*c.METrans, seed)
	}
	return newR2GenModel(c.Transformer, seed)
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

// checkStep validates a decode.Model.Step call: ctx still live, one token
// per row, each in [0, vocab), room for rows·vocab outputs, and position
// pos inside a positional table of positions rows.
func checkStep(ctx context.Context, tokens []int, dst []float32, rows, vocab, pos, positions int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(tokens) != rows || len(dst) < rows*vocab {
		return fmt.Errorf("%w: %d tokens and %d outputs for %d rows", decode.ErrShape, len(tokens), len(dst), rows)
	}
	for _, tok := range tokens {
		if tok < 0 || tok >= vocab {
			return fmt.Errorf("%w: token %d outside [0, %d)", decode.ErrToken, tok, vocab)
		}
	}
	if pos >= positions {
		return fmt.Errorf("memtrans: position %d beyond the positional table (%d)", pos, positions)
	}
	return nil
}

// decodeBest runs strategy over dec and keeps each study's best hypothesis,
// with the width of dec's attention rows.
func decodeBest(ctx context.Context, dec decode.AttentionRecorder, strategy decode.Strategy) ([]studyResult, int, error) {
	hyps, err := strategy.Decode(ctx, dec)
	if err != nil {
		return nil, 0, err
	}
	res, err := bestOf(hyps)
	return res, dec.AttentionWidth(), err
}

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

// --- R2Gen ---

func (m *r2genModel) trainingLoss(g *radgen.Graph, feats *radgen.Tensor, in, targets []int, mask []float32, b, t int) (*radgen.Tensor, error) {
	f, err := m.teacherForce(g, feats, in, b, t)
	if err != nil {
		return nil, err
	}
	loss := languageModelLoss(g, f.LogProbs, targets, mask)
	if aux := m.auxLoss(g, f); aux != nil { // e.g. Mem2Mem's penalty (seed 002, Eq. 12)
		loss = g.Add(loss, aux)
	}
	return loss, nil
}

func (m *r2genModel) decodeStudies(ctx context.Context, feats *radgen.Tensor, o genOptions) ([]studyResult, int, error) {
	dec, err := m.startModuleDecoding(feats, radgen.SubstituteWeights(o.stored))
	if err != nil {
		return nil, 0, err
	}
	defer dec.release()
	return decodeBest(ctx, dec, strategyFor(o, 0, 0, decode.R2Gen))
}

func (m *r2genModel) visualEmbedding() *radgen.Linear { return m.AttEmbed }

// --- M² ---

// m2Facade adapts an M2Transformer to the facade's ids: R2Gen's
// vocabulary, 0 ending a report, and M²'s <bos> and <pad> past it (see
// M2Config.ForReports).
type m2Facade struct{ *m2Model }

// m2Input maps R2Gen decoder inputs to M²'s: the first id of each row
// (R2Gen's BOS 0) becomes <bos>, a later 0 (the end or padding) <pad>.
func (f m2Facade) m2Input(in []int, t int) []int {
	c := f.Config
	out := make([]int, len(in))
	for i, id := range in {
		switch {
		case i%t == 0:
			out[i] = c.BOS
		case id == 0:
			out[i] = c.Pad
		default:
			out[i] = id
		}
	}
	return out
}

func (f m2Facade) trainingLoss(g *radgen.Graph, feats *radgen.Tensor, in, targets []int, mask []float32, b, t int) (*radgen.Tensor, error) {
	enc, err := f.encode(g, feats)
	if err != nil {
		return nil, err
	}
	lp, err := f.teacherForce(g, enc, f.m2Input(in, t), b, t)
	if err != nil {
		return nil, err
	}
	// M²'s NLLLoss ignores <pad> targets; here the batch mask says which
	// targets count, so the end id 0 is learned as a word, as in R2Gen.
	return languageModelLoss(g, lp, targets, mask), nil
}

func (f m2Facade) decodeStudies(ctx context.Context, feats *radgen.Tensor, o genOptions) ([]studyResult, int, error) {
	dec, err := f.startModuleDecoding(feats, radgen.SubstituteWeights(o.stored))
	if err != nil {
		return nil, 0, err
	}
	defer dec.release()
	return f.decodeWith(ctx, dec, o)
}

func (f m2Facade) visualEmbedding() *radgen.Linear { return f.Encoder.FC }

// m2Words forbids M²'s <bos> and <pad> as report words: their
// log-probabilities become −Inf after every step.
type m2Words struct {
	decode.AttentionRecorder
	bos, pad int
}

func (w m2Words) Step(ctx context.Context, tokens []int, dst []float32) error {
	if err := w.AttentionRecorder.Step(ctx, tokens, dst); err != nil {
		return err
	}
	v := w.VocabSize()
	inf := float32(math.Inf(-1))
	for r := range w.Rows() {
		dst[r*v+w.bos], dst[r*v+w.pad] = inf, inf
	}
	return nil
}

// decodeWith decodes dec, an M² decoding of the facade's ids, with o.
func (f m2Facade) decodeWith(ctx context.Context, dec decode.AttentionRecorder, o genOptions) ([]studyResult, int, error) {
	c := f.Config
	return decodeBest(ctx, m2Words{dec, c.BOS, c.Pad}, strategyFor(o, c.BOS, 0, decode.M2))
}

// --- METransformer ---

func (m *metransModel) trainingLoss(g *radgen.Graph, feats *radgen.Tensor, in, targets []int, mask []float32, b, t int) (*radgen.Tensor, error) {
	f, err := m.teacherForce(g, feats, in, b, t)
	if err != nil {
		return nil, err
	}
	total, _, _ := m.loss(g, f, targets, mask) // every expert's NLL + λ·orthogonal loss
	return total, nil
}

func (m *metransModel) decodeStudies(ctx context.Context, feats *radgen.Tensor, o genOptions) ([]studyResult, int, error) {
	if o.attention {
		return nil, 0, fmt.Errorf("%w: METransformer records no attention maps", decode.ErrNoAttention)
	}
	// The experts vote by sentence BLEU-4 against the study's other
	// candidates, which depends on the study alone: a study's report is the
	// same alone and in any batch. CIDEr-D (metrics.CIDErDOfIDs) would take its
	// document frequencies from the whole batch, and gives every candidate
	// of a study scored alone 0.
	score, err := bleuReward(4)
	if err != nil {
		return nil, 0, err
	}
	reps, err := m.generate(ctx, feats, strategyFor(o, 0, 0, decode.R2Gen), decode.Vote{Score: score}, radgen.SubstituteWeights(o.stored))
	if err != nil {
		return nil, 0, err
	}
	out := make([]studyResult, len(reps))
	for i, r := range reps {
		out[i] = studyResult{best: r.Best, candidates: r.Candidates, expert: r.Expert, scores: r.Scores}
	}
	return out, 0, nil
}

func (m *metransModel) visualEmbedding() *radgen.Linear { return m.ViT.Embed }

var (
	_ encoderDecoder = (*r2genModel)(nil)
	_ encoderDecoder = m2Facade{}
	_ encoderDecoder = (*metransModel)(nil)
)
