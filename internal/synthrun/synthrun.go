// Package synthrun trains and evaluates a report generator on synthetic
// chest films end to end: the quickstart, the learning tests and the variant
// comparison all run it, so they measure the same thing.
package synthrun

import (
	"context"
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

// Provenance is what a model trained by Run records about its data: the
// synthetic films of memtrans/data, not radiographs of patients.
var Provenance = memtrans.Provenance{Data: "synthetic chest films (memtrans/data.GenerateStudy)", Synthetic: true}

// Options describe a run. Zero fields take the defaults of Defaults.
type Options struct {
	Dir         string // working directory (required)
	Train, Test int    // synthetic studies per split
	Size        int    // film size in pixels
	Epochs      int
	BatchSize   int
	LR          float64
	Seed        uint64
	Variant     r2gen.Variant
	// Architecture selects the encoder–decoder (the zero value is R2Gen's,
	// configured by Variant and Configure; M² and METransformer take their
	// tiny configurations, memtrans.TinyM2Config and TinyMETransConfig).
	Architecture     string
	Beam             int
	Progress         func(memtrans.Progress)
	AttentionExample bool // generate with attention maps
	// Configure, when set, edits the encoder–decoder's configuration after
	// Variant and the run's defaults are applied: the way to select the
	// other papers' variants (r2gen.Config's Routing, Memory, Mem2Mem…).
	Configure func(*r2gen.Config)
	// ConfigureModel, when set, edits the whole model configuration last:
	// the way to configure M² and METransformer (memtrans.ModelConfig's M2
	// and METrans).
	ConfigureModel func(*memtrans.ModelConfig)
	// Init, when set, is a trained model of the same data and tokenizer
	// that the run continues from (continued learning, Liu et al. §3.3.2):
	// its frozen extractor and every tensor of the single-view R2Gen
	// architecture are copied, the variant's new modules keep their
	// initialisation, and the extractor is not calibrated again.
	Init *memtrans.Model
}

// Defaults are the quickstart's settings.
var Defaults = Options{Train: 320, Test: 80, Size: 128, Epochs: 30, BatchSize: 16, LR: 2e-3, Seed: 1, Variant: r2gen.VariantR2Gen, Beam: 3}

// Result is what a run measured.
type Result struct {
	Model      *memtrans.Model
	Params     int // trainable parameters of the encoder–decoder
	History    []memtrans.EpochResult
	Scores     *metrics.Scores
	Efficacy   chexpert.Efficacy // labeler's reading of the reports vs the films' findings
	Studies    []memtrans.Study
	References []string
	Reports    []memtrans.Report
	TrainTime  time.Duration
}

func (o *Options) defaults() {
	d := Defaults
	if o.Train == 0 {
		o.Train = d.Train
	}
	if o.Test == 0 {
		o.Test = d.Test
	}
	if o.Size == 0 {
		o.Size = d.Size
	}
	if o.Epochs == 0 {
		o.Epochs = d.Epochs
	}
	if o.BatchSize == 0 {
		o.BatchSize = d.BatchSize
	}
	if o.LR == 0 {
		o.LR = d.LR
	}
	if o.Variant == "" {
		o.Variant = d.Variant
	}
	if o.Beam == 0 {
		o.Beam = d.Beam
	}
}

// Run writes the synthetic data set (reused if o.Dir already has one),
// trains a tiny model of o.Variant with a frozen, calibrated extractor, and
// scores its beam-search reports on the test split.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	if o.Dir == "" {
		return nil, fmt.Errorf("synthrun: no working directory")
	}
	imgDir := filepath.Join(o.Dir, "images")
	var ann *data.Annotation
	var err error
	if _, serr := os.Stat(filepath.Join(o.Dir, "annotation.json")); serr == nil {
		ann, err = data.LoadAnnotation(filepath.Join(o.Dir, "annotation.json"))
	} else {
		ann, err = data.WriteSynthetic(ctx, o.Dir, data.SynthConfig{Train: o.Train, Val: max(1, o.Test/2), Test: o.Test, Width: o.Size, Height: o.Size, Seed: o.Seed})
	}
	if err != nil {
		return nil, err
	}
	trainSet, err := ann.Split("train")
	if err != nil {
		return nil, err
	}
	testSet, err := ann.Split("test")
	if err != nil {
		return nil, err
	}
	var reports []string
	for _, s := range trainSet {
		reports = append(reports, s.Report)
	}
	tok, err := data.BuildTokenizer(data.IUXray, 3, reports)
	if err != nil {
		return nil, err
	}
	var cfg memtrans.ModelConfig
	switch o.Architecture {
	case memtrans.ArchM2:
		cfg = memtrans.M2Tiny(tok.Len() + 1)
	case memtrans.ArchMETransformer:
		cfg = memtrans.METransTiny(tok.Len() + 1)
	case "", memtrans.ArchR2Gen:
		cfg = memtrans.R2GenTiny(tok.Len() + 1)
		r2 := cfg.EncoderDecoder.(r2gen.Config)
		r2.Variant = o.Variant
		// R2Gen's 0.5 suits 2048-d pretrained features, not 512-d random ones.
		r2.EmbedDrop = 0.1
		if o.Configure != nil {
			o.Configure(&r2)
		}
		cfg.EncoderDecoder = r2
	default:
		return nil, fmt.Errorf("synthrun: unknown architecture %q", o.Architecture)
	}
	cfg.ImageSize, cfg.ResizeTo = o.Size, o.Size
	if mt, ok := cfg.EncoderDecoder.(metrans.Config); ok {
		mt.Patches = cfg.PatchesPerStudy()
		cfg.EncoderDecoder = mt
	}
	if o.ConfigureModel != nil {
		o.ConfigureModel(&cfg)
	}
	model, err := memtrans.New(cfg, tok, o.Seed, memtrans.WithProvenance(Provenance))
	if err != nil {
		return nil, err
	}
	calibrate := 8
	if o.Init != nil {
		if err := continueFrom(model, o.Init); err != nil {
			model.Close()
			return nil, err
		}
		calibrate = 0
	}
	res := &Result{Model: model}
	for _, p := range radgen.Trainable(model.EncoderDecoder()) {
		res.Params += p.Tensor.Len()
	}

	// The ResNet is untrained (no ImageNet weights offline), so it stays
	// frozen: its batch norm and att_embed are calibrated on the training
	// films first, its features are computed once per film and cached, and
	// the evaluation transform is used without flips (the reports name the
	// side).
	ds, err := data.NewDataset(ann, "train", tok, data.DatasetConfig{ImageDir: imgDir})
	if err != nil {
		return nil, err
	}
	loader, err := data.NewLoader(ds, data.WithBatchSize(o.BatchSize), data.WithShuffle(true), data.WithSeed(o.Seed),
		data.WithTransform(vision.TestTransform(cfg.ImageSize)))
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

	var refs [][]string
	var truth []chexpert.Labels
	for _, s := range testSet {
		st, err := model.StudyFromAnnotation(s, imgDir)
		if err != nil {
			return nil, err
		}
		res.Studies = append(res.Studies, st)
		ref := tok.Reference(s.Report, cfg.MaxSeqLen())
		res.References = append(res.References, ref)
		refs = append(refs, []string{ref})
		truth = append(truth, FindingLabels(s.Labels))
	}
	gopts := []memtrans.GenerateOption{memtrans.WithBeamSize(o.Beam)}
	if o.AttentionExample {
		gopts = append(gopts, memtrans.WithAttention())
	}
	res.Reports, err = model.Generate(ctx, res.Studies, gopts...)
	if err != nil {
		return nil, err
	}
	hyps := make([]string, len(res.Reports))
	for i, r := range res.Reports {
		hyps[i] = r.Text
	}
	ev, err := metrics.NewEvaluator()
	if err != nil {
		return nil, err
	}
	if res.Scores, err = ev.Evaluate(ctx, refs, hyps); err != nil {
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
	if res.Efficacy, err = chexpert.ClinicalEfficacy(truth, read); err != nil {
		return nil, err
	}
	return res, nil
}

// continueFrom copies prev's extractor and single-view encoder–decoder
// into m.
func continueFrom(m, prev *memtrans.Model) error {
	if err := m.ContinueFrom(prev); err != nil {
		return fmt.Errorf("synthrun: continuing from a trained model: %w", err)
	}
	return nil
}

// FindingLabels maps a synthetic study's labels (data.LabelNames order) to
// the labeler's observations by name: the two orders differ (Lung Opacity
// and Lung Lesion are swapped).
func FindingLabels(labels []int8) chexpert.Labels {
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
