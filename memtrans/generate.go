package memtrans

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"path/filepath"
	"slices"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/vision"
)

// Study is one examination to report on: its views in the order the model
// was trained with (IU X-Ray: frontal, then lateral).
type Study struct {
	ID string
	// Views are the study's images: any image.Image; those the library
	// decodes are *vision.Pixels, which the preprocessing reads as they
	// are.
	Views []image.Image
	// DICOM, for a study read from DICOM files (StudiesFromDICOMDir),
	// identifies the files of its views, so that reports can refer back
	// to the source study, series and instances; nil otherwise.
	DICOM *vision.DICOMStudy
}

// StudyFromFiles decodes image files into a Study: PNG or JPEG (8- or
// 16-bit, gray or colour), or DICOM, recognised from the file's bytes
// whatever its name (vision.Sniff), and rendered by vision.DecodeDICOM (rescale, VOI window, MONOCHROME1 inversion), with the
// default limits: vision.DefaultMaxPixels pixels and
// vision.DefaultMaxFileBytes bytes a file, FIFOs and devices refused (a
// [Model]'s StudyFromPaths and StudyFromAnnotation take its limits,
// [WithMaxPixels] and [WithImageOptions]).
func StudyFromFiles(id string, paths ...string) (Study, error) {
	return studyFromFilesWith(id, paths)
}

// studyFromFilesWith is StudyFromFiles with decoding options
// (vision.WithMaxPixels, vision.WithMaxFileBytes,
// vision.WithNonRegularFiles). Views are decoded one at a time and keep 8
// bits a sample (1 byte a pixel for gray films, 3 for colour).
func studyFromFilesWith(id string, paths []string, opts ...vision.Option) (Study, error) {
	return studyFromFiles(id, paths, opts, 0)
}

// studyFromFiles decodes the views; with size > 0 each is resized to
// size×size (the evaluation transform's Resize) as soon as it is decoded,
// so that a study keeps size²·C bytes a view, not the film's full
// resolution.
func studyFromFiles(id string, paths []string, opts []vision.Option, size int) (Study, error) {
	s := Study{ID: id}
	for _, p := range paths {
		px, err := vision.DecodeFile(p, opts...) // DICOM or not, by its bytes
		if err != nil {
			return Study{}, fmt.Errorf("memtrans: study %s: decoding %w", id, err)
		}
		if size > 0 && (px.W != size || px.H != size) {
			px = vision.Resize(nil, px, size, size)
		} else if cap(px.Pix) > len(px.Pix)+len(px.Pix)/4 {
			// The decoder's buffer was wider (16-bit or RGBA): keep 8 bits
			// a sample only.
			px.Pix = slices.Clone(px.Pix)
		}
		s.Views = append(s.Views, px)
	}
	return s, nil
}

// asPixels returns img's samples as vision.Pixels, sharing them when img is
// decoded pixels (a view read by the library) or an 8-bit gray image at the
// origin, converting otherwise.
func asPixels(img image.Image) *vision.Pixels {
	switch m := img.(type) {
	case *vision.Pixels:
		return m
	case *image.Gray:
		w, h := m.Rect.Dx(), m.Rect.Dy()
		if m.Rect.Min == (image.Point{}) && m.Stride == w && len(m.Pix) >= w*h {
			return &vision.Pixels{W: w, H: h, C: 1, Pix: m.Pix[:w*h]}
		}
	}
	return vision.FromImage(nil, img)
}

// StudyFromAnnotation decodes the images of an annotation.json entry,
// relative to imageDir, keeping the first views the model takes (R2Gen uses
// both IU X-Ray views and the first MIMIC-CXR image), with the model's
// image limits (WithMaxPixels, WithImageOptions). Each view is resized to
// the model's ImageSize as soon as it is decoded, exactly as Generate's
// preprocessing would, so the reports are the same and a study costs the
// largest of its views decoded (at most the pixel limit times 1 byte for
// 8-bit gray, 2 for 16-bit gray, 4 for 8-bit colour, 8 for 16-bit colour:
// 32 MiB for a 4096² 16-bit radiograph) plus ImageSize²·3 bytes a view.
func (m *Model) StudyFromAnnotation(s data.Study, imageDir string) (Study, error) {
	paths := make([]string, 0, min(len(s.ImagePath), m.cfg.Views))
	for _, p := range s.ImagePath[:min(len(s.ImagePath), m.cfg.Views)] {
		paths = append(paths, filepath.Join(imageDir, p))
	}
	return studyFromFiles(s.ID, paths, m.imageOptions(), m.cfg.ImageSize)
}

// StudyFromPaths decodes image files into a Study for this model, as
// StudyFromFiles does but with the model's image limits (WithMaxPixels,
// WithImageOptions), each view resized to the model's ImageSize as soon as
// it is decoded (see StudyFromAnnotation: same reports, a study keeps
// ImageSize² a view).
func (m *Model) StudyFromPaths(id string, paths ...string) (Study, error) {
	return studyFromFiles(id, paths, m.imageOptions(), m.cfg.ImageSize)
}

// imageOptions returns the model's decoding options.
func (m *Model) imageOptions() []vision.Option {
	return append([]vision.Option{vision.WithMaxPixels(m.maxPixels)}, m.imageOpts...)
}

// Report is a generated report.
type Report struct {
	StudyID       string
	Text          string  // words joined by spaces, as R2Gen's tokenizer decodes
	Tokens        []int   // ids, ending with 0 (eos) when the model ended the report
	LogProb       float64 // the hypothesis score: its summed log-probability
	TokenLogProbs []float32
	// Attention holds, when requested, one row per token: the last decoder
	// layer's cross-attention over the study's patches (views concatenated,
	// view-major, each a Grid×Grid raster), averaged over heads.
	Attention [][]float32
	Grid      int // patches per side of each view

	// Candidates holds, for an architecture that writes several candidate
	// reports per study (METransformer: one per expert), each candidate's
	// text; Expert indexes the chosen one and Votes[j] is candidate j's
	// score against the others (sentence BLEU-4, which depends on the study
	// alone). Nil for the other architectures.
	Candidates []string
	Expert     int
	Votes      []float64

	// Truncated is set when the report reached the maximum length
	// (WithMaxLength) before the model ended it: its last sentence may be
	// cut off.
	Truncated bool
}

// GenerateOption configures Generate.
type GenerateOption func(*genOptions) error

type genOptions struct {
	strategy  string
	beam      int
	maxLen    int
	attention bool
	trigrams  bool
	temp      float32
	topK      int
	topP      float32
	seed      uint64
	batch     int

	// stored holds the half-precision copies of the step matrices that
	// the decoding's Linear ops read in their place (WithHalfWeights).
	stored map[*radgen.Tensor]*radgen.Tensor
}

// WithBeamSize decodes by beam search of width k (R2Gen's default, 3).
func WithBeamSize(k int) GenerateOption {
	return func(o *genOptions) error {
		if k <= 0 {
			return fmt.Errorf("%w: beam size %d", decode.ErrBeamSize, k)
		}
		o.strategy, o.beam = "beam", k
		return nil
	}
}

// WithGreedy decodes greedily; blockTrigrams applies R2Gen's trigram
// penalty.
func WithGreedy(blockTrigrams bool) GenerateOption {
	return func(o *genOptions) error { o.strategy, o.trigrams = "greedy", blockTrigrams; return nil }
}

// WithSampling samples with a temperature, an optional top-k (0 = off) and
// top-p (1 = off), from a generator seeded with seed.
func WithSampling(temperature float32, topK int, topP float32, seed uint64) GenerateOption {
	return func(o *genOptions) error {
		if temperature <= 0 || topK < 0 || topP <= 0 || topP > 1 {
			return fmt.Errorf("%w: temperature %v, top-k %d, top-p %v", decode.ErrOption, temperature, topK, topP)
		}
		o.strategy, o.temp, o.topK, o.topP, o.seed = "sample", temperature, topK, topP, seed
		return nil
	}
}

// WithMaxLength bounds the tokens of a report, eos included (default: the
// model's max_seq_length).
func WithMaxLength(n int) GenerateOption {
	return func(o *genOptions) error {
		if n <= 0 {
			return &maxLenError{fmt.Sprintf("memtrans: WithMaxLength(%d): the length must be positive", n)}
		}
		o.maxLen = n
		return nil
	}
}

// maxLenError is a bad WithMaxLength: errors.Is(err, decode.ErrMaxLen)
// holds, and the message says what is wrong with the length.
type maxLenError struct{ msg string }

func (e *maxLenError) Error() string        { return e.msg }
func (e *maxLenError) Is(target error) bool { return target == decode.ErrMaxLen }

// WithAttention returns each word's attention over the image patches.
func WithAttention() GenerateOption {
	return func(o *genOptions) error { o.attention = true; return nil }
}

// WithBatchSize sets how many studies are encoded and decoded together
// (default 16).
func WithBatchSize(n int) GenerateOption {
	return func(o *genOptions) error {
		if n <= 0 {
			return fmt.Errorf("memtrans: batch size %d", n)
		}
		o.batch = n
		return nil
	}
}

// ErrStudy is wrapped by errors about a study's input.
var ErrStudy = errors.New("memtrans: bad study")

// Generate writes a report for each study, in order. It is safe to call
// from many goroutines at once. Decoding stops promptly with ctx.Err() when
// ctx is done.
func (m *Model) Generate(ctx context.Context, studies []Study, opts ...GenerateOption) ([]Report, error) {
	o, err := m.genOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := m.acquire(); err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	out := make([]Report, 0, len(studies))
	for start := 0; start < len(studies); start += o.batch {
		batch := studies[start:min(start+o.batch, len(studies))]
		reps, err := m.generateBatch(ctx, batch, o)
		if err != nil {
			return nil, err
		}
		out = append(out, reps...)
	}
	return out, nil
}

// generateBatch runs the extractor and the decoder on one batch in one of
// the model's concurrency slots (see WithMaxConcurrency).
func (m *Model) generateBatch(ctx context.Context, batch []Study, o genOptions) ([]Report, error) {
	release, err := m.takeSlot(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	feats, err := m.encodeImages(ctx, batch)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil { // between the extractor and the decoder
		return nil, err
	}
	return m.decodeBatch(ctx, batch, feats, o)
}

// testHookSlot, when set, runs after a batch takes its slot.
var testHookSlot func()

// takeSlot waits for one of the model's concurrency slots, or for ctx: a
// caller queued behind others returns ctx.Err() as soon as ctx is done,
// without waiting for them, and the batches that run share the cores among
// few, so each reaches its next cancellation check (every decoder step and
// layer, every extractor stage) soon.
func (m *Model) takeSlot(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case m.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if testHookSlot != nil {
		testHookSlot()
	}
	return func() { <-m.slots }, nil
}

// Preprocess turns a study's views into the evaluation tensors the extractor
// takes (R2Gen's test transform).
func (m *Model) Preprocess(s Study) ([]*vision.Image, error) {
	if len(s.Views) != m.cfg.Views {
		return nil, fmt.Errorf("%w %q: %d views, the model takes %d", ErrStudy, s.ID, len(s.Views), m.cfg.Views)
	}
	tr := vision.TestTransform(m.cfg.ImageSize)
	out := make([]*vision.Image, len(s.Views))
	for i, img := range s.Views {
		if img == nil {
			return nil, fmt.Errorf("%w %q: view %d is nil", ErrStudy, s.ID, i)
		}
		b := img.Bounds()
		if b.Dx() <= 0 || b.Dy() <= 0 || int64(b.Dx())*int64(b.Dy()) > m.maxPixels {
			return nil, fmt.Errorf("%w %q: view %d is %dx%d: %w", ErrStudy, s.ID, i, b.Dx(), b.Dy(), vision.ErrTooLarge)
		}
		x, err := tr.Apply(nil, asPixels(img), nil)
		if err != nil {
			return nil, fmt.Errorf("%w %q: view %d: %w", ErrStudy, s.ID, i, err)
		}
		out[i] = x
	}
	return out, nil
}

// encodeImages runs the extractor: patch features (B, V·P, C).
func (m *Model) encodeImages(ctx context.Context, studies []Study) (*radgen.Tensor, error) {
	views := make([][]*vision.Image, len(studies))
	for i, s := range studies {
		v, err := m.Preprocess(s)
		if err != nil {
			return nil, err
		}
		views[i] = v
	}
	imgs, err := vision.StackStudies(views)
	if err != nil {
		return nil, err
	}
	patches, _, err := m.extractor.Extract(ctx, imgs.To(m.device))
	return patches, err
}

// genOptions applies opts to the model's defaults (beam 3, reports of up to
// the configured length, batches of 16) and checks them.
func (m *Model) genOptions(opts []GenerateOption) (genOptions, error) {
	o := genOptions{strategy: "beam", beam: 3, maxLen: m.cfg.MaxSeqLen(), batch: 16}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	if limit := m.cfg.maxDecodeLen(); o.maxLen > limit {
		return o, &maxLenError{fmt.Sprintf("memtrans: WithMaxLength(%d): this model writes at most %d tokens (its positional table)", o.maxLen, limit)}
	}
	if o.strategy == "beam" && o.beam > m.cfg.vocab() {
		return o, fmt.Errorf("%w: beam size %d exceeds the vocabulary (%d)", decode.ErrBeamSize, o.beam, m.cfg.vocab())
	}
	return o, nil
}

func (m *Model) decodeBatch(ctx context.Context, studies []Study, feats *radgen.Tensor, o genOptions) ([]Report, error) {
	var res []studyResult
	var width int
	var err error
	feats = feats.To(m.device)
	if m.half != nil && m.device == radgen.CPU {
		o.stored = m.half.current(m.net)
	}
	res, width, err = m.decodeStudies(ctx, feats, o)
	if err != nil {
		return nil, err
	}
	patches := feats.Dim(1) / m.cfg.Views
	grid := int(math.Round(math.Sqrt(float64(patches))))
	out := make([]Report, len(studies))
	for i, s := range studies {
		h := res[i].best
		r := Report{StudyID: s.ID, Tokens: h.Tokens, LogProb: h.Score, TokenLogProbs: h.LogProbs, Text: m.tokenizer.Decode(h.Tokens), Grid: grid,
			Expert: res[i].expert, Votes: res[i].scores, Truncated: len(h.Tokens) > 0 && h.Tokens[len(h.Tokens)-1] != 0}
		for _, c := range res[i].candidates {
			r.Candidates = append(r.Candidates, m.tokenizer.Decode(c.Tokens))
		}
		if o.attention {
			for t := range h.Tokens {
				r.Attention = append(r.Attention, h.Attention[t*width:(t+1)*width])
			}
		}
		out[i] = r
	}
	return out, nil
}

// GenerateFeatures writes reports from precomputed visual features
// (B, N, d_vf) — the patch features of the studies' views, as the extractor
// gives them or as cached by a frozen-extractor trainer. ids names the
// studies (len B).
func (m *Model) GenerateFeatures(ctx context.Context, ids []string, feats *radgen.Tensor, opts ...GenerateOption) ([]Report, error) {
	o, err := m.genOptions(opts)
	if err != nil {
		return nil, err
	}
	if feats == nil || feats.Rank() != 3 || feats.Dim(0) != len(ids) || feats.Dim(2) != m.cfg.visualWidth() {
		shape := []int(nil)
		if feats != nil {
			shape = feats.Shape()
		}
		return nil, fmt.Errorf("%w: features %v for %d studies, want (B, N, %d)", ErrStudy, shape, len(ids), m.cfg.visualWidth())
	}
	for i, v := range feats.Data() {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("%w: non-finite feature at %d", ErrStudy, i)
		}
	}
	if err := m.acquire(); err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	studies := make([]Study, len(ids))
	for i, id := range ids {
		studies[i].ID = id
	}
	release, err := m.takeSlot(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return m.decodeBatch(ctx, studies, feats, o)
}
