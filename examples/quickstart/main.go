// Command quickstart is radgen's first run: on a fresh machine, with nothing
// downloaded, it writes a set of synthetic chest films with known findings,
// trains a tiny memory-driven Transformer on them, writes reports for the
// held-out films, prints their scores and a sample, and saves attention maps.
//
//	go run ./examples/quickstart [-out dir] [-epochs n]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/metrics"
	"github.com/radgen/radgen/memtrans/metrics/chexpert"
	"github.com/radgen/radgen/vision"
)

func main() {
	out := flag.String("out", "", "working directory (default: a new temporary directory)")
	epochs := flag.Int("epochs", 30, "training epochs")
	train := flag.Int("train", 320, "synthetic training studies")
	test := flag.Int("test", 80, "synthetic test studies")
	seed := flag.Uint64("seed", 1, "seed of the data set and the model")
	flag.IntVar(&size, "size", 128, "film size in pixels")
	flag.Parse()
	log.SetFlags(0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *out, *epochs, *train, *test, *seed); err != nil {
		log.Fatal(err)
	}
}

var size int

func run(ctx context.Context, dir string, epochs, nTrain, nTest int, seed uint64) error {
	start := time.Now()
	if dir == "" {
		d, err := os.MkdirTemp("", "radgen-quickstart-")
		if err != nil {
			return err
		}
		dir = d
	}
	fmt.Printf("radgen quickstart — working in %s\n", dir)

	// 1. Synthetic chest films with known findings, in R2Gen's layout.
	imgDir := filepath.Join(dir, "images") // WriteSynthetic puts the films here
	ann, err := data.WriteSynthetic(ctx, dir, data.SynthConfig{Train: nTrain, Val: nTest / 2, Test: nTest, Width: size, Height: size, Seed: seed})
	if err != nil {
		return err
	}
	trainSet, _ := ann.Split("train")
	testSet, _ := ann.Split("test")
	fmt.Printf("wrote %d training and %d test studies (two %d×%d views each)\n", len(trainSet), len(testSet), size, size)

	// 2. R2Gen's tokenizer, built from the training reports.
	var reports []string
	for _, s := range trainSet {
		reports = append(reports, s.Report)
	}
	tok, err := data.BuildTokenizer(data.IUXray, 3, reports)
	if err != nil {
		return err
	}

	// 3. A tiny memory-driven Transformer.
	cfg := memtrans.TinyConfig(tok.Len() + 1)
	cfg.ImageSize, cfg.ResizeTo = size, size
	cfg.Transformer.EmbedDrop = 0.1 // R2Gen's 0.5 suits 2048-d pretrained features, not 512-d random ones
	model, err := memtrans.New(cfg, tok, seed)
	if err != nil {
		return err
	}
	defer model.Close()

	// 4. Training. The ResNet is untrained (no ImageNet weights offline), so it
	// stays frozen: its batch norm and att_embed are calibrated on the
	// training films first (TrainConfig.CalibrateBatches), its features are
	// computed once per film and cached, and the evaluation transform is used
	// without flips (the reports name the side).
	ds, err := data.NewDataset(ann, "train", tok, data.DatasetConfig{ImageDir: imgDir})
	if err != nil {
		return err
	}
	loader, err := data.NewLoader(ds, data.WithBatchSize(16), data.WithShuffle(true), data.WithSeed(seed),
		data.WithTransform(vision.TestTransform(cfg.ImageSize)))
	if err != nil {
		return err
	}
	tc := memtrans.TrainConfig{Epochs: epochs, LR: 2e-3, WeightDecay: 5e-5, AMSGrad: true, ClipValue: 0.1,
		StepSize: max(1, epochs*2/3), Gamma: 0.1, Seed: seed, FreezeExtractor: true, CalibrateBatches: 20}
	bar := newBar(epochs * loader.Len())
	trainer, err := memtrans.NewTrainer(model, tc, loader, memtrans.WithProgress(func(p memtrans.Progress) {
		bar.set(p.Epoch*p.Batches+p.Batch, fmt.Sprintf("epoch %d/%d loss %.3f", p.Epoch+1, p.Epochs, p.Loss))
	}))
	if err != nil {
		return err
	}
	if err := trainer.Run(ctx); err != nil {
		return err
	}
	bar.done()

	// 5. Reports for the held-out films.
	var studies []memtrans.Study
	var refs [][]string
	var truth []chexpert.Labels
	for _, s := range testSet {
		paths := make([]string, len(s.ImagePath))
		for i, p := range s.ImagePath {
			paths[i] = filepath.Join(imgDir, p)
		}
		st, err := memtrans.StudyFromFiles(s.ID, paths...)
		if err != nil {
			return err
		}
		studies = append(studies, st)
		refs = append(refs, []string{tok.Decode(tok.Encode(nil, s.Report, cfg.Transformer.MaxSeqLen)[1:])})
		truth = append(truth, findingLabels(s.Labels))
	}
	gen, err := model.Generate(ctx, studies, memtrans.WithBeamSize(3), memtrans.WithAttention())
	if err != nil {
		return err
	}
	hyps := make([]string, len(gen))
	for i, r := range gen {
		hyps[i] = r.Text
	}

	// 6. Scores: language metrics against the references, clinical efficacy
	// of the labeler's reading of each report against the films' findings.
	ev, err := metrics.NewEvaluator()
	if err != nil {
		return err
	}
	sc, err := ev.Evaluate(ctx, refs, hyps)
	if err != nil {
		return err
	}
	lab, err := chexpert.New()
	if err != nil {
		return err
	}
	var read []chexpert.Labels
	for _, h := range hyps {
		read = append(read, lab.Label(h))
	}
	ce, err := chexpert.ClinicalEfficacy(truth, read)
	if err != nil {
		return err
	}
	fmt.Printf("\nheld-out scores (%d studies, beam 3):\n", len(gen))
	fmt.Printf("  BLEU-1 %.3f  BLEU-2 %.3f  BLEU-3 %.3f  BLEU-4 %.3f\n", sc.BLEU[0], sc.BLEU[1], sc.BLEU[2], sc.BLEU[3])
	fmt.Printf("  ROUGE-L %.3f  CIDEr-D %.3f  %s %.3f\n", sc.ROUGEL, sc.CIDErD, sc.METEORName, sc.METEOR)
	fmt.Printf("  clinical efficacy vs the films' findings: micro P %.3f R %.3f F1 %.3f\n", ce.Micro.Precision, ce.Micro.Recall, ce.Micro.F1)
	for o := chexpert.Observation(0); o < chexpert.NumObservations; o++ {
		if ce.Support[o] > 0 {
			fmt.Printf("    %-28s support %3d  F1 %.3f\n", o, ce.Support[o], ce.PerObservation[o].F1)
		}
	}
	fmt.Printf("\nsample (%s):\n  reference: %s\n  generated: %s\n", gen[0].StudyID, refs[0][0], gen[0].Text)

	// 7. Attention maps of the first study's words over its frontal view.
	attDir := filepath.Join(dir, "attention")
	if err := os.MkdirAll(attDir, 0o755); err != nil {
		return err
	}
	words := strings.Fields(gen[0].Text)
	n := 0
	for t, w := range words {
		if w == "." || n == 6 {
			continue
		}
		f, err := os.Create(filepath.Join(attDir, fmt.Sprintf("%02d_%s.png", t, w)))
		if err != nil {
			return err
		}
		err = memtrans.WriteAttentionPNG(f, studies[0].Views[0], gen[0], t, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		n++
	}
	fmt.Printf("\nattention maps of %d words in %s\n", n, attDir)
	fmt.Printf("done in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// findingLabels maps the synthetic films' labels (data.LabelNames order) to
// the labeler's observations, by name: the two orders differ.
func findingLabels(labels []int8) chexpert.Labels {
	var out chexpert.Labels
	for i, v := range labels {
		if v != 1 {
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

// bar is a minimal terminal progress bar on stderr.
type bar struct {
	total int
	start time.Time
}

func newBar(total int) *bar { return &bar{total: max(total, 1), start: time.Now()} }

func (b *bar) set(n int, msg string) {
	const width = 30
	fill := n * width / b.total
	if n%10 != 0 && n != b.total {
		return
	}
	fmt.Fprintf(os.Stderr, "\r[%s%s] %3d%% %s %s", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
		n*100/b.total, msg, time.Since(b.start).Round(time.Second))
}

func (b *bar) done() { fmt.Fprintln(os.Stderr) }
