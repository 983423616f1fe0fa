//go:build ignore

// Command gen writes the checkpoints and expected reports under
// memtrans/testdata/compat/<release>/. It is run from a checkout of the
// release (see README.md): it uses that release's public API only.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/vision"
)

// Expected is the file of expected reports (expected.json).
type Expected struct {
	Release string  `json:"release"`
	Commit  string  `json:"commit"`
	Models  []Model `json:"models"`
}

// Model is one checkpoint and its reports.
type Model struct {
	Architecture string `json:"architecture"`
	Checkpoint   string `json:"checkpoint"`
	Runs         []Run  `json:"runs"`
}

// Run is one decoding of every study.
type Run struct {
	Decoding string   `json:"decoding"` // "greedy" or "beam3"
	Reports  []Report `json:"reports"`
}

// Report is one study's report.
type Report struct {
	Study         string    `json:"study"`
	Text          string    `json:"text"`
	Tokens        []int     `json:"tokens"`
	LogProb       float64   `json:"log_prob"`
	TokenLogProbs []float32 `json:"token_log_probs"`
}

func main() {
	out := flag.String("out", "", "output directory (memtrans/testdata/compat/<release>)")
	studies := flag.String("studies", "", "directory of the input studies (<id>/0.png, <id>/1.png)")
	release := flag.String("release", "", "release name")
	commit := flag.String("commit", "", "release commit")
	archs := flag.String("archs", "r2gen,m2,metransformer", "architectures")
	writeStudies := flag.Bool("write-studies", false, "write the films of inputStudies into -studies")
	flag.Parse()
	log.SetFlags(0)
	if err := run(context.Background(), *out, *studies, *release, *commit, strings.Split(*archs, ","), *writeStudies); err != nil {
		log.Fatal(err)
	}
}

const seed = 41

// inputStudies are the studies reported on, three of the 16 the models
// are fitted to (a heart enlarged with an effusion, a pacemaker, a heart
// enlarged with a catheter and an opacity), which they report on less
// alike than on studies they have not seen.
var inputStudies = []string{"SYN00001", "SYN00004", "SYN00008"}

// levels is the largest multiple of its scale a quantized weight is.
const levels = 31

func run(ctx context.Context, out, studyDir, release, commit string, archs []string, writeStudies bool) error {
	work, err := os.MkdirTemp("", "compatgen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	ann, err := data.WriteSynthetic(ctx, work, data.SynthConfig{Train: 16, Val: 1, Test: 1, Width: 64, Height: 64, Seed: seed})
	if err != nil {
		return err
	}
	imgDir := filepath.Join(work, "images")
	if writeStudies {
		train, err := ann.Split("train")
		if err != nil {
			return err
		}
		for _, s := range train {
			if !slices.Contains(inputStudies, s.ID) {
				continue
			}
			for _, p := range s.ImagePath {
				b, err := os.ReadFile(filepath.Join(imgDir, p))
				if err != nil {
					return err
				}
				if err := os.MkdirAll(filepath.Dir(filepath.Join(studyDir, p)), 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(studyDir, p), b, 0o644); err != nil {
					return err
				}
			}
		}
	}
	var input []memtrans.Study
	ids, err := os.ReadDir(studyDir)
	if err != nil {
		return err
	}
	for _, id := range ids {
		s, err := memtrans.StudyFromFiles(id.Name(), filepath.Join(studyDir, id.Name(), "0.png"), filepath.Join(studyDir, id.Name(), "1.png"))
		if err != nil {
			return err
		}
		input = append(input, s)
	}
	train, err := ann.Split("train")
	if err != nil {
		return err
	}
	var texts []string
	for _, s := range train {
		texts = append(texts, s.Report)
	}
	tok, err := data.BuildTokenizer(data.IUXray, 3, texts)
	if err != nil {
		return err
	}
	exp := Expected{Release: release, Commit: commit}
	for _, a := range archs {
		var cfg memtrans.ModelConfig
		switch a {
		case "r2gen":
			cfg = memtrans.R2GenTiny(tok.Len() + 1)
		case "m2":
			cfg = memtrans.M2Tiny(tok.Len() + 1)
		case "metransformer":
			cfg = memtrans.METransTiny(tok.Len() + 1)
		default:
			return fmt.Errorf("architecture %q", a)
		}
		m, err := memtrans.New(cfg, tok, seed)
		if err != nil {
			return err
		}
		// The extractor's fixed widths make most of the file: the
		// residual branches' convolutions of every stage are zeroed (the
		// blocks pass their shortcut on), so that zstd stores them in a
		// few bytes.
		m.VisitParams(func(name string, t *radgen.Tensor) {
			if isBranchConv(name) {
				clear(t.Data())
			}
		})
		ds, err := data.NewDataset(ann, "train", tok, data.DatasetConfig{ImageDir: imgDir})
		if err != nil {
			return err
		}
		loader, err := data.NewLoader(ds, data.WithBatchSize(16), data.WithShuffle(true), data.WithSeed(seed),
			data.WithTransform(vision.TestTransform(cfg.ImageSize)))
		if err != nil {
			return err
		}
		tc := memtrans.TrainConfig{Epochs: 60, LR: 2e-3, WeightDecay: 5e-5, AMSGrad: true, ClipValue: 0.1,
			StepSize: 50, Gamma: 0.1, Seed: seed, FreezeExtractor: true, CalibrateBatches: 2}
		tr, err := memtrans.NewTrainer(m, tc, loader)
		if err != nil {
			return err
		}
		if err := tr.Run(ctx); err != nil {
			return err
		}
		h := tr.History()
		log.Printf("%s: loss %.3f after %d epochs", a, h[len(h)-1].Loss, len(h))
		// Every tensor is rounded to 63 levels of its own scale, so
		// that zstd stores a weight in about a byte.
		m.VisitParams(func(name string, t *radgen.Tensor) {
			quantize(t.Data())
		})
		file := a + ".radgen"
		path := filepath.Join(out, file)
		if err := m.SaveFile(path); err != nil {
			return err
		}
		m.Close()
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		log.Printf("%s: %d bytes", path, st.Size())
		// The reports are those of the file as this release loads it.
		m, err = memtrans.LoadFile(path)
		if err != nil {
			return err
		}
		em := Model{Architecture: a, Checkpoint: file}
		for _, d := range []struct {
			name string
			opt  memtrans.GenerateOption
		}{{"greedy", memtrans.WithGreedy(false)}, {"beam3", memtrans.WithBeamSize(3)}} {
			reps, err := m.Generate(ctx, input, d.opt)
			if err != nil {
				return err
			}
			r := Run{Decoding: d.name}
			for _, rep := range reps {
				r.Reports = append(r.Reports, Report{Study: rep.StudyID, Text: rep.Text, Tokens: rep.Tokens, LogProb: rep.LogProb, TokenLogProbs: rep.TokenLogProbs})
				log.Printf("%s %s %s: %s", a, d.name, rep.StudyID, rep.Text)
			}
			em.Runs = append(em.Runs, r)
		}
		m.Close()
		exp.Models = append(exp.Models, em)
	}
	b, err := json.MarshalIndent(exp, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "expected.json"), append(b, '\n'), 0o644)
}

// quantize rounds x to multiples of a power of two s, the smallest with
// max|x| ≤ levels·s: each value is a small integer times s, whose float32 has
// its low 16 bits zero.
func quantize(x []float32) {
	var top float64
	for _, v := range x {
		top = max(top, math.Abs(float64(v)))
	}
	if top == 0 {
		return
	}
	s := math.Exp2(math.Ceil(math.Log2(top / levels)))
	for i, v := range x {
		x[i] = float32(math.Round(float64(v)/s) * s)
	}
}

// isBranchConv reports whether name is a convolution of a residual block's
// branch in the extractor (torchvision's layer1–layer4 are model.4–model.7
// of R2Gen's visual_extractor), not of its shortcut (downsample).
func isBranchConv(name string) bool {
	for _, stage := range []string{"4", "5", "6", "7"} {
		if strings.HasPrefix(name, "visual_extractor.model."+stage+".") && strings.Contains(name, ".conv") {
			return true
		}
	}
	return false
}
