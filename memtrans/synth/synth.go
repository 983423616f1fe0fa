package synth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/metrans"
	"github.com/radgen/radgen/memtrans/metrics"
	"github.com/radgen/radgen/memtrans/metrics/chexpert"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/vision"
)

// Provenance is what a model trained by [Run] records about its data: the
// synthetic films of package data, not radiographs of patients.
var Provenance = memtrans.Provenance{Data: "synthetic chest films (memtrans/data.GenerateStudy)", Synthetic: true}

// Options describe a run. Zero fields take the values of [Defaults].
type Options struct {
	Dir         string // working directory (required): annotation.json and images/
	Train, Test int    // synthetic studies per split (the validation split has Test/2)
	Size        int    // film size in pixels
	Epochs      int
	BatchSize   int
	LR          float64
	Seed        uint64 // of the films, the weights and the shuffling
	// Variant is R2Gen's configuration (r2gen.VariantR2Gen, …).
	Variant r2gen.Variant
	// Architecture selects the encoder–decoder's preset: memtrans.ArchR2Gen
	// (also the zero value), ArchM2 or ArchMETransformer.
	Architecture string
	Beam         int // beam size of the held-out reports
	// Progress, when set, receives the trainer's progress after every
	// batch.
	Progress func(memtrans.Progress)
	// AttentionExample makes the held-out reports carry their attention
	// maps (memtrans.WithAttention).
	AttentionExample bool
	// Configure, when set, edits R2Gen's configuration after Variant and
	// the run's defaults are applied: the way to select the other papers'
	// variants (r2gen.Config's Routing, Memory, Mem2Mem…). It is not
	// called for the other architectures.
	Configure func(*r2gen.Config)
	// ConfigureModel, when set, edits the whole model configuration last:
	// the way to configure M² and METransformer, or to put an
	// encoder–decoder of the caller's own in EncoderDecoder (its vocabulary
	// is the preset's EncoderDecoder.Dims().Words).
	ConfigureModel func(*memtrans.ModelConfig)
	// Init, when set, is a trained model of the same films and tokenizer
	// that the run continues from (continued learning, Liu et al. §3.3.2):
	// its frozen extractor and every tensor of the single-view R2Gen
	// architecture are copied (memtrans.Model.ContinueFrom), the variant's
	// new modules keep their initialisation, and the extractor is not
	// calibrated again.
	Init *memtrans.Model
}

// Defaults are the quickstart's settings: 320 training and 80 test studies
// of 128-pixel films, 30 epochs of batches of 16 at a learning rate of
// 2e-3, R2Gen, beam 3.
var Defaults = Options{Train: 320, Test: 80, Size: 128, Epochs: 30, BatchSize: 16, LR: 2e-3, Seed: 1, Variant: r2gen.VariantR2Gen, Beam: 3}

// withDefaults returns o with its zero fields set from Defaults.
func (o Options) withDefaults() Options {
	d := Defaults
	set := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	set(&o.Train, d.Train)
	set(&o.Test, d.Test)
	set(&o.Size, d.Size)
	set(&o.Epochs, d.Epochs)
	set(&o.BatchSize, d.BatchSize)
	set(&o.Beam, d.Beam)
	if o.LR == 0 {
		o.LR = d.LR
	}
	if o.Variant == "" {
		o.Variant = d.Variant
	}
	return o
}

// Films is a synthetic data set on disk and R2Gen's tokenizer of its
// training reports.
type Films struct {
	// Dir holds annotation.json and the films under images/.
	Dir        string
	Annotation *data.Annotation
	Tokenizer  *data.Tokenizer
}

// ImageDir is the folder of the films, as the annotation's image paths are
// relative to it.
func (f *Films) ImageDir() string { return filepath.Join(f.Dir, "images") }

// Prepare writes o.Train training, o.Test/2 validation and o.Test test
// studies of o.Size-pixel films into o.Dir, or reads the data set an earlier
// call wrote there (its sizes then win over o's), and builds R2Gen's
// IU X-Ray tokenizer (threshold 3) from the training reports.
func Prepare(ctx context.Context, o Options) (*Films, error) {
	o = o.withDefaults()
	if o.Dir == "" {
		return nil, errors.New("synth: no working directory")
	}
	path := filepath.Join(o.Dir, "annotation.json")
	var ann *data.Annotation
	var err error
	if _, serr := os.Stat(path); serr == nil {
		ann, err = data.LoadAnnotation(path)
	} else {
		ann, err = data.WriteSynthetic(ctx, o.Dir, data.SynthConfig{Train: o.Train, Val: max(1, o.Test/2), Test: o.Test,
			Width: o.Size, Height: o.Size, Seed: o.Seed})
	}
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	reports, err := ann.Reports("train")
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	tok, err := data.BuildTokenizer(data.IUXray, 3, reports)
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	return &Films{Dir: o.Dir, Annotation: ann, Tokenizer: tok}, nil
}

// ModelConfig returns the model configuration o selects for films of
// words-id reports (the tokenizer's size + 1): the architecture's tiny
// preset at o.Size pixels, edited by Variant, Configure and ConfigureModel.
// R2Gen's embedding dropout is 0.1 rather than the paper's 0.5, which suits
// 2048-wide pretrained features, not the tiny extractor's.
func (o Options) ModelConfig(words int) (memtrans.ModelConfig, error) {
	o = o.withDefaults()
	var cfg memtrans.ModelConfig
	switch o.Architecture {
	case memtrans.ArchM2:
		cfg = memtrans.M2Tiny(words)
	case memtrans.ArchMETransformer:
		cfg = memtrans.METransTiny(words)
	case "", memtrans.ArchR2Gen:
		cfg = memtrans.R2GenTiny(words)
		r2 := cfg.EncoderDecoder.(r2gen.Config)
		r2.Variant = o.Variant
		r2.EmbedDrop = 0.1
		if o.Configure != nil {
			o.Configure(&r2)
		}
		cfg.EncoderDecoder = r2
	default:
		return cfg, fmt.Errorf("synth: unknown architecture %q", o.Architecture)
	}
	cfg.ImageSize, cfg.ResizeTo = o.Size, o.Size
	if mt, ok := cfg.EncoderDecoder.(metrans.Config); ok {
		mt.Patches = cfg.PatchesPerStudy()
		cfg.EncoderDecoder = mt
	}
	if o.ConfigureModel != nil {
		o.ConfigureModel(&cfg)
	}
	return cfg, nil
}

// Loader returns a shuffled loader of the training split for a model of
// cfg: batches of batchSize, the evaluation transform without flips (the
// reports name the side), shuffled by seed.
func (f *Films) Loader(cfg memtrans.ModelConfig, batchSize int, seed uint64) (*data.Loader, error) {
	ds, err := data.NewDataset(f.Annotation, "train", f.Tokenizer, data.DatasetConfig{ImageDir: f.ImageDir(), Views: cfg.Views})
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	return data.NewLoader(ds, data.WithBatchSize(batchSize), data.WithShuffle(true), data.WithSeed(seed),
		data.WithTransform(vision.TestTransform(cfg.ImageSize)))
}

// Evaluation is what a model wrote for the test split and how it scored.
type Evaluation struct {
	Studies    []memtrans.Study
	References []string // R2Gen's references: cleaned, cut at the model's MaxSeqLen
	Reports    []memtrans.Report
	Scores     *metrics.Scores
	// Efficacy is the labeler's reading of the reports against the films'
	// own findings.
	Efficacy chexpert.Efficacy
}

// Evaluate generates reports for the test split with m and opts, and scores
// them against the references (BLEU, ROUGE-L, CIDEr-D, METEOR) and against
// the films' findings (clinical efficacy).
func (f *Films) Evaluate(ctx context.Context, m *memtrans.Model, opts ...memtrans.GenerateOption) (*Evaluation, error) {
	test, err := f.Annotation.Split("test")
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	ev := &Evaluation{}
	var refs [][]string
	var truth []chexpert.Labels
	for _, s := range test {
		st, err := m.StudyFromAnnotation(s, f.ImageDir())
		if err != nil {
			return nil, err
		}
		ev.Studies = append(ev.Studies, st)
		ref := f.Tokenizer.Reference(s.Report, m.Config().MaxSeqLen())
		ev.References = append(ev.References, ref)
		refs = append(refs, []string{ref})
		truth = append(truth, findingLabels(s.Labels))
	}
	if ev.Reports, err = m.Generate(ctx, ev.Studies, opts...); err != nil {
		return nil, err
	}
	hyps := make([]string, len(ev.Reports))
	for i, r := range ev.Reports {
		hyps[i] = r.Text
	}
	scorer, err := metrics.NewEvaluator()
	if err != nil {
		return nil, err
	}
	if ev.Scores, err = scorer.Evaluate(ctx, refs, hyps); err != nil {
		return nil, err
	}
	lab, err := chexpert.New()
	if err != nil {
		return nil, err
	}
	read := make([]chexpert.Labels, len(hyps))
	for i, h := range hyps {
		read[i] = lab.Label(h)
	}
	if ev.Efficacy, err = chexpert.ClinicalEfficacy(truth, read); err != nil {
		return nil, err
	}
	return ev, nil
}

// Result is what a run measured.
type Result struct {
	// Model is the trained model; the caller closes it.
	Model     *memtrans.Model
	Params    int // trainable parameters of the encoder–decoder
	History   []memtrans.EpochResult
	TrainTime time.Duration
	// Evaluation holds the held-out reports and their scores.
	Evaluation
}

// Run prepares the films of o.Dir (see [Prepare]), trains a model of the
// configuration o selects (see [Options.ModelConfig]) with a frozen,
// calibrated extractor (the model records [Provenance]), and evaluates its beam-search reports on the test
// split (see [Films.Evaluate]).
func Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	films, err := Prepare(ctx, o)
	if err != nil {
		return nil, err
	}
	cfg, err := o.ModelConfig(films.Tokenizer.Len() + 1)
	if err != nil {
		return nil, err
	}
	model, err := memtrans.New(cfg, films.Tokenizer, o.Seed, memtrans.WithProvenance(Provenance))
	if err != nil {
		return nil, err
	}
	res, err := train(ctx, o, films, model)
	if err != nil {
		model.Close()
		return nil, err
	}
	return res, nil
}

// train trains model on films as o says and evaluates it.
func train(ctx context.Context, o Options, films *Films, model *memtrans.Model) (*Result, error) {
	calibrate := 8
	if o.Init != nil {
		if err := model.ContinueFrom(o.Init); err != nil {
			return nil, fmt.Errorf("synth: continuing from a trained model: %w", err)
		}
		calibrate = 0
	}
	res := &Result{Model: model}
	for _, p := range radgen.Trainable(model.EncoderDecoder()) {
		res.Params += p.Tensor.Len()
	}
	loader, err := films.Loader(model.Config(), o.BatchSize, o.Seed)
	if err != nil {
		return nil, err
	}
	tc := memtrans.TrainConfig{Epochs: o.Epochs, LR: o.LR, WeightDecay: 5e-5, AMSGrad: true, ClipValue: 0.1,
		StepSize: max(1, o.Epochs*2/3), Gamma: 0.1, Seed: o.Seed, FreezeExtractor: true, CalibrateBatches: calibrate}
	var topts []memtrans.TrainerOption
	if o.Progress != nil {
		topts = append(topts, memtrans.WithProgress(o.Progress))
	}
	trainer, err := memtrans.NewTrainer(model, tc, loader, topts...)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := trainer.Run(ctx); err != nil {
		return nil, err
	}
	res.TrainTime = time.Since(start)
	res.History = trainer.History()
	gopts := []memtrans.GenerateOption{memtrans.WithBeamSize(o.Beam)}
	if o.AttentionExample {
		gopts = append(gopts, memtrans.WithAttention())
	}
	ev, err := films.Evaluate(ctx, model, gopts...)
	if err != nil {
		return nil, err
	}
	res.Evaluation = *ev
	return res, nil
}

// findingLabels maps a synthetic study's labels (in data.LabelNames order)
// to the labeler's observations by name: the two orders differ (Lung
// Opacity and Lung Lesion are swapped).
func findingLabels(labels []int8) chexpert.Labels {
	var out chexpert.Labels
	for i, v := range labels {
		if v != 1 || i >= len(data.LabelNames) {
			continue
		}
		for o := chexpert.Observation(0); o < chexpert.NumObservations; o++ {
			if o.String() == data.LabelNames[i] {
				out[o] = chexpert.Positive
			}
		}
	}
	return out
}
