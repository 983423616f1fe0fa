package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/m2"
	"github.com/radgen/radgen/memtrans/metrans"
	"github.com/radgen/radgen/memtrans/metrics"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/mesh"
	"github.com/radgen/radgen/vision"
)

// Main runs the radgen command with args, the arguments after the
// program's name (os.Args[1:]): a subcommand (train, generate, convert,
// eval, watch, serve) and its flags, or version (also -version), which
// prints "radgen" and radgen.Version. The command's output goes to stdout,
// its progress, logs and errors to stderr; nothing else is written to. It
// returns the exit status: 0 on success, 1 when the subcommand failed, 2
// for a usage error. It never exits the process.
//
// ctx stops a subcommand in progress (training between steps, generation
// between studies); a program passes one that a signal cancels. watch and
// serve also stop gracefully on SIGINT and SIGTERM while they run.
//
// Checkpoints of any architecture registered with arch.Register in the
// program load: a program that imports an architecture's package runs the
// whole command for it.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand(stdout, stderr)
	if len(args) < 1 {
		c.usage()
		return 2
	}
	var err error
	switch args[0] {
	case "train":
		err = c.train(ctx, args[1:])
	case "generate":
		err = c.generate(ctx, args[1:])
	case "convert":
		err = c.convert(ctx, args[1:])
	case "eval":
		err = c.eval(ctx, args[1:])
	case "watch":
		err = c.watch(ctx, args[1:])
	case "serve":
		err = c.serve(ctx, args[1:])
	case "version", "-version", "--version":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "radgen version: unexpected argument %q\n", args[1])
			return 2
		}
		fmt.Fprintf(stdout, "radgen %s\n", radgen.Version)
		return 0
	default:
		c.usage()
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 2 // the flag set printed the usage
	}
	if err != nil {
		fmt.Fprintf(stderr, "radgen %s: %v\n", args[0], explain(err))
		return 1
	}
	return 0
}

// command is one run of the radgen command: where its output, its
// progress and its logs go.
type command struct {
	stdout, stderr io.Writer
	log            *slog.Logger // to stderr, without timestamps
}

func newCommand(stdout, stderr io.Writer) *command {
	h := slog.NewTextHandler(stderr, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			return slog.Attr{}
		}
		return a
	}})
	return &command{stdout: stdout, stderr: stderr, log: slog.New(h)}
}

// explain adds to err what to do about it where the command knows better
// than the library: a checkpoint of an architecture this program does not
// register needs a program that imports its package.
func explain(err error) error {
	if errors.Is(err, arch.ErrUnregistered) {
		return fmt.Errorf("%w (build a radgen whose main imports the architecture's package and calls cli.Main, as examples/variant/radgen does)", err)
	}
	return err
}

func (c *command) usage() {
	fmt.Fprintln(c.stderr, `usage:
  radgen train    -ann annotation.json -images dir -out dir [-config tiny|iu|mimic] [-arch r2gen|m2|metransformer]
                  [-routing gca|gpa|fga|fma|ama] [-epochs n] [-freeze] [-resume last.radgen]
  radgen generate -model model.radgen|model_best.pth|weights.safetensors
                  (-ann annotation.json -images dir [-split test] | -manifest studies.jsonl | image files... | DICOM folders...) [-beam 3]
                  [-device cpu|cuda:N|reference] [-half] [-o reports.json] [-fhir out.json|dir] [-sr out.dcm|dir] [-hl7 out.hl7|dir]
  radgen convert  -model model_best.pth|weights.safetensors -vocab annotation.json -out model.radgen
  radgen eval     -ann annotation.json -reports reports.json [-split test] [-corpus iu_xray] [-threshold n] [-max-seq-length n]
  radgen watch    -pacs http://host:8042/dicom-web -model model.radgen [-user u | -token] [-once] [-dead-letter f.jsonl] [-mllp host:port] [-metrics addr]
  radgen serve    [-model model.radgen] [-addr 127.0.0.1:8080] [-pacs http://host:8042/dicom-web] [-json-logs]
  radgen version  (also -version: prints radgen's version)
R2Gen weights (.pth or safetensors) for generate, convert and watch: -vocab annotation.json (generate: default -ann)
                  [-corpus iu_xray|mimic_cxr] [-threshold n] [-max-seq-length n] [-views n] [-heads 8] [-memory-heads 8]
every command but serve: [-max-params n] [-max-activations n] [-max-model-bytes n] [-max-ann-bytes n] [-max-reports-bytes n]
               [-max-image-bytes n] [-max-pixels n] [-allow-nonregular]; flags may follow the file names`)
}

// trainTokenizer rebuilds R2Gen's tokenizer from the train split, as R2Gen
// does at every start (its checkpoints carry no vocabulary): the words of
// at least threshold occurrences, the corpus's threshold when 0.
func trainTokenizer(ann *data.Annotation, c data.Corpus, threshold int) (*data.Tokenizer, error) {
	trainSet, err := ann.Split("train")
	if err != nil {
		return nil, err
	}
	reports := make([]string, len(trainSet))
	for i, s := range trainSet {
		reports[i] = s.Report
	}
	if threshold == 0 {
		threshold = c.Threshold()
	}
	return data.BuildTokenizer(c, threshold, reports)
}

func (c *command) train(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	annPath := fs.String("ann", "", "annotation.json")
	images := fs.String("images", "", "image directory")
	out := fs.String("out", "", "checkpoint directory (best.radgen, last.radgen)")
	config := fs.String("config", "tiny", "size: tiny, iu (the papers' IU X-Ray sizes) or mimic (MIMIC-CXR)")
	arch := fs.String("arch", "r2gen", "encoder–decoder: r2gen, m2 (Meshed-Memory Transformer) or metransformer")
	routing := fs.String("routing", "", "layer-wise multi-view routing of r2gen or m2: gca, gpa, fga, fma or ama")
	corpusName := fs.String("corpus", "iu_xray", "report cleaner and tokenizer defaults: iu_xray or mimic_cxr")
	epochs := fs.Int("epochs", 0, "epochs (default: R2Gen's for the corpus)")
	batch := fs.Int("batch", 16, "batch size")
	freeze := fs.Bool("freeze", false, "keep the visual extractor frozen (cache its features)")
	resume := fs.String("resume", "", "resume from a last.radgen written by an earlier run")
	seed := fs.Uint64("seed", 9223, "seed")
	lim := limitFlags(fs)
	rest, err := c.parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q (train takes flags only)", rest[0])
	}
	if err := lim.check(); err != nil {
		return err
	}
	if *images == "" || *out == "" {
		return errors.New("-images and -out are required")
	}
	ann, err := lim.annotation(*annPath)
	if err != nil {
		return err
	}
	corpus := data.Corpus(*corpusName)
	tc := memtrans.R2GenIUXrayTraining()
	if corpus == data.MIMICCXR {
		tc = memtrans.R2GenMIMICCXRTraining()
	}
	if *epochs > 0 {
		tc.Epochs = *epochs
	}
	tc.Seed, tc.CheckpointDir, tc.FreezeExtractor = *seed, *out, *freeze

	tok, err := trainTokenizer(ann, corpus, 0)
	if err != nil {
		return err
	}
	cfg, err := modelConfig(*config, *arch, mesh.Routing(*routing), corpus, tok.Len()+1)
	if err != nil {
		return err
	}
	transform := vision.TrainTransform(cfg.ResizeTo, cfg.ImageSize)
	if *freeze {
		transform = vision.TestTransform(cfg.ImageSize)
	}
	ds, err := data.NewDataset(ann, "train", tok, data.DatasetConfig{ImageDir: *images, Views: cfg.Views})
	if err != nil {
		return err
	}
	loader, err := data.NewLoader(ds, data.WithBatchSize(*batch), data.WithShuffle(true), data.WithSeed(*seed), data.WithTransform(transform))
	if err != nil {
		return err
	}
	bar := newBar(c.stderr)
	opts := []memtrans.TrainerOption{memtrans.WithProgress(func(p memtrans.Progress) {
		bar.set(p.Batch, p.Batches, fmt.Sprintf("epoch %d/%d loss %.3f", p.Epoch+1, p.Epochs, p.Loss))
	})}
	if _, err := ann.Split("val"); err == nil {
		v, err := memtrans.BLEUValidator(ann, "val", *images, 3)
		if err != nil {
			return err
		}
		opts = append(opts, memtrans.WithValidator(v))
	}
	var trainer *memtrans.Trainer
	var model *memtrans.Model
	if *resume != "" {
		f, err := lim.open(*resume)
		if err != nil {
			return err
		}
		model, trainer, err = memtrans.ResumeTrainer(f, loader, tc, opts...)
		f.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "resumed after epoch %d\n", trainer.Epoch())
	} else {
		if model, err = memtrans.New(cfg, tok, *seed, lim.modelOptions()...); err != nil {
			return err
		}
		if trainer, err = memtrans.NewTrainer(model, tc, loader, opts...); err != nil {
			return err
		}
	}
	defer model.Close()
	for trainer.Epoch() < tc.Epochs {
		res, err := trainer.RunEpoch(ctx)
		bar.done()
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "epoch %d: loss %.4f", res.Epoch+1, res.Loss)
		if len(res.Scores) > 0 {
			fmt.Fprintf(c.stdout, "  val BLEU-4 %.4f", res.Monitor)
		}
		if res.Improved {
			fmt.Fprint(c.stdout, "  (best)")
		}
		fmt.Fprintln(c.stdout)
	}
	fmt.Fprintf(c.stdout, "checkpoints in %s\n", *out)
	return nil
}

// modelConfig assembles the architecture the train flags name.
func modelConfig(size string, arch string, routing mesh.Routing, c data.Corpus, vocab int) (memtrans.ModelConfig, error) {
	var cfg memtrans.ModelConfig
	switch arch {
	case memtrans.ArchR2Gen, memtrans.ArchM2, memtrans.ArchMETransformer:
	default:
		return cfg, fmt.Errorf("unknown -arch %q (r2gen, m2 or metransformer)", arch)
	}
	switch size {
	case "tiny":
		switch arch {
		case memtrans.ArchR2Gen:
			cfg = memtrans.R2GenTiny(vocab)
		case memtrans.ArchM2:
			cfg = memtrans.M2Tiny(vocab)
		case memtrans.ArchMETransformer:
			cfg = memtrans.METransTiny(vocab)
		}
		cfg.Corpus, cfg.Views = c, c.Views()
	case "iu", "mimic":
		switch arch {
		case memtrans.ArchR2Gen:
			cfg = memtrans.R2GenIUXray(vocab)
			if size == "mimic" {
				cfg = memtrans.R2GenMIMICCXR(vocab)
			}
		case memtrans.ArchM2:
			cfg = memtrans.M2IUXray(vocab)
		case memtrans.ArchMETransformer:
			cfg = memtrans.METransIUXray(vocab)
		}
		if size == "mimic" && arch != memtrans.ArchR2Gen {
			// One view and reports of up to MIMIC-CXR's length.
			mimic := memtrans.R2GenMIMICCXR(vocab)
			cfg.Corpus, cfg.Views = mimic.Corpus, mimic.Views
			switch ed := cfg.EncoderDecoder.(type) {
			case m2.Config:
				cfg.EncoderDecoder = ed.ForReports(vocab, mimic.MaxSeqLen())
			case metrans.Config:
				ed.MaxSeqLen = mimic.MaxSeqLen()
				cfg.EncoderDecoder = ed
			}
		}
	default:
		return cfg, fmt.Errorf("unknown -config %q (tiny, iu or mimic)", size)
	}
	if cfg.Views == 0 {
		return cfg, fmt.Errorf("unknown -arch %q (r2gen, m2 or metransformer)", arch)
	}
	if mt, ok := cfg.EncoderDecoder.(metrans.Config); ok {
		mt.Patches = cfg.PatchesPerStudy()
		cfg.EncoderDecoder = mt
	}
	if routing != mesh.RoutingNone {
		if !routing.Valid() {
			return cfg, fmt.Errorf("unknown -routing %q", routing)
		}
		switch ed := cfg.EncoderDecoder.(type) {
		case m2.Config:
			ed.Routing = routing
			cfg.EncoderDecoder = ed
		case r2gen.Config:
			ed.Routing = routing
			cfg.EncoderDecoder = ed
		default:
			return cfg, errors.New("-routing applies to r2gen and m2")
		}
	}
	return cfg, cfg.Validate()
}

// parseDevice reads -device: cpu, reference or cuda:N.
func parseDevice(s string) (radgen.Device, error) {
	d, err := radgen.ParseDevice(s)
	if err != nil {
		return radgen.CPU, fmt.Errorf("-device: %w", err)
	}
	return d, nil
}

type generated struct {
	ID     string  `json:"id"`
	Report string  `json:"report"`
	LogP   float64 `json:"log_prob"`
}

func (c *command) generate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	mf := c.newModelFlags(fs)
	annPath := fs.String("ann", "", "annotation.json (instead of image files)")
	manifest := fs.String("manifest", "", "JSON Lines of {id, images} (instead of -ann or image files)")
	images := fs.String("images", "", "image directory of the annotation")
	split := fs.String("split", "test", "split of the annotation")
	beam := fs.Int("beam", 3, "beam size (1 = greedy)")
	outPath := fs.String("o", "", "write reports as JSON to this file (default: print)")
	device := fs.String("device", "cpu", "where to decode: cpu, cuda:N (a build with -tags cuda) or reference")
	halfWeights := fs.Bool("half", false, "decode with half-precision weight copies (faster on the CPU; log-probs within ~2e-3)")
	hosp := hospitalFlags(fs)
	lim := limitFlags(fs)
	rest, err := c.parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := lim.check(); err != nil {
		return err
	}
	if *mf.path == "" {
		return errors.New("-model is required")
	}
	dev, err := parseDevice(*device)
	if err != nil {
		return err
	}
	mopts := []memtrans.Option{memtrans.WithDevice(dev)}
	if *halfWeights {
		mopts = append(mopts, memtrans.WithHalfWeights())
	}
	model, err := mf.load(lim, *annPath, mopts...)
	if err != nil {
		return err
	}
	defer model.Close()
	var studies []memtrans.Study
	if *manifest != "" {
		if studies, err = manifestStudies(*manifest, model.Config().Views); err != nil {
			return err
		}
	} else if *annPath != "" {
		ann, err := lim.annotation(*annPath)
		if err != nil {
			return err
		}
		list, err := ann.Split(*split)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return fmt.Errorf("%s: split %q has no studies", *annPath, *split)
		}
		for _, s := range list {
			st, err := model.StudyFromAnnotation(s, *images)
			if err != nil {
				return err
			}
			studies = append(studies, st)
		}
	} else if hosp.folders(rest) {
		if studies, err = hosp.studies(ctx, rest, model.Config().Views); err != nil {
			return err
		}
	} else {
		if len(rest) == 0 {
			return errors.New("give -ann, -manifest, image files or DICOM folders")
		}
		st, err := model.StudyFromPaths(filepath.Base(rest[0]), rest...)
		if err != nil {
			return err
		}
		studies = append(studies, st)
	}
	if len(studies) == 0 {
		return errors.New("no studies to report on")
	}
	opt := memtrans.WithBeamSize(*beam)
	if *beam == 1 {
		opt = memtrans.WithGreedy(false)
	}
	bar := newBar(c.stderr)
	var out []generated
	const chunk = 16
	for i := 0; i < len(studies); i += chunk {
		reps, err := model.Generate(ctx, studies[i:min(i+chunk, len(studies))], opt)
		if err != nil {
			return err
		}
		hosp.keep(reps)
		for _, r := range reps {
			out = append(out, generated{r.StudyID, r.Text, r.LogProb})
		}
		bar.set(len(out), len(studies), "reports")
	}
	bar.done()
	if err := hosp.write(*mf.path, model.Config().Architecture(), studies); err != nil {
		return err
	}
	if *outPath == "" {
		for _, g := range out {
			fmt.Fprintf(c.stdout, "%s\t%s\n", g.ID, g.Report)
		}
		return nil
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		return err
	}
	return writeFile(*outPath, append(b, '\n'))
}

func (c *command) eval(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	annPath := fs.String("ann", "", "annotation.json with the references")
	repPath := fs.String("reports", "", "reports.json written by radgen generate -o")
	split := fs.String("split", "test", "split of the annotation")
	corpusName := fs.String("corpus", "iu_xray", "report cleaner and tokenizer: iu_xray or mimic_cxr")
	threshold := fs.Int("threshold", 0, "the references' vocabulary: R2Gen's --threshold (default: the corpus's, 3 for iu_xray and 10 for mimic_cxr); rarer words read <unk>")
	maxSeqLen := fs.Int("max-seq-length", 0, "the references' length: R2Gen's --max_seq_length (default: the corpus's, 60 for iu_xray and 100 for mimic_cxr)")
	lim := limitFlags(fs)
	rest, err := c.parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q (eval takes flags only)", rest[0])
	}
	if err := lim.check(); err != nil {
		return err
	}
	gens, err := lim.readReports(*repPath)
	if err != nil {
		return err
	}
	if len(gens) == 0 {
		return fmt.Errorf("%s: no reports", *repPath)
	}
	ann, err := lim.annotation(*annPath)
	if err != nil {
		return err
	}
	corpus := data.Corpus(*corpusName)
	if *threshold < 0 || *maxSeqLen < 0 {
		return fmt.Errorf("-threshold %d, -max-seq-length %d: 0 (the corpus's) or more", *threshold, *maxSeqLen)
	}
	if *maxSeqLen == 0 {
		*maxSeqLen = corpus.MaxSeqLen()
	}
	tok, err := trainTokenizer(ann, corpus, *threshold)
	if err != nil {
		return err
	}
	list, err := ann.Split(*split)
	if err != nil {
		return err
	}
	byID := map[string]string{}
	for _, s := range list {
		byID[s.ID] = tok.Reference(s.Report, *maxSeqLen)
	}
	var refs [][]string
	var hyps []string
	for _, g := range gens {
		ref, ok := byID[g.ID]
		if !ok {
			return fmt.Errorf("report for %q, which is not in split %q", g.ID, *split)
		}
		refs = append(refs, []string{ref})
		hyps = append(hyps, g.Report)
	}
	ev, err := metrics.NewEvaluator()
	if err != nil {
		return err
	}
	sc, err := ev.Evaluate(ctx, refs, hyps)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%d reports\nBLEU-1 %.4f  BLEU-2 %.4f  BLEU-3 %.4f  BLEU-4 %.4f\nROUGE-L %.4f  CIDEr-D %.4f  %s %.4f\n",
		sc.N, sc.BLEU[0], sc.BLEU[1], sc.BLEU[2], sc.BLEU[3], sc.ROUGEL, sc.CIDErD, sc.METEORName, sc.METEOR)
	if sc.CE != nil {
		fmt.Fprintf(c.stdout, "CE (labeler on both sides) micro P %.4f R %.4f F1 %.4f; macro F1 %.4f\n",
			sc.CE.Micro.Precision, sc.CE.Micro.Recall, sc.CE.Micro.F1, sc.CE.Macro.F1)
	}
	return nil
}
