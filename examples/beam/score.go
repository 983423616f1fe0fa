package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/textio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"

	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/metrics"
	"github.com/radgen/radgen/memtrans/metrics/chexpert"
	"github.com/radgen/radgen/memtrans/metrics/meteor"
)

// ScoreConfig configures the score pipeline; its fields mean what the
// flags of examples/score of the same names mean.
type ScoreConfig struct {
	Reports  string // JSONL of {id, report} (glob allowed), e.g. generate's out/reports-*.jsonl
	Ann      string // R2Gen annotation.json
	Split    string
	Refs     string // r2gen, clean or as-is
	Corpus   string
	NoMETEOR bool
	// METEORModules are METEOR's modules as the jar's -m option takes them;
	// "" is "exact stem synonym". scores.json names them (METEOR_name).
	METEORModules string
	NoCE          bool
	Out           string // folder for scores.json and the dead letters
}

// buildScore adds the score pipeline to s: report lines → per-study
// sufficient statistics (metrics.SampleStats; reports of unknown studies
// and malformed lines to the dead letters) → one metrics.Partial by a
// combine of mergeable statistics (BLEU, METEOR and clinical-efficacy
// counts, the ROUGE-L sum, CIDEr-D's document frequencies) → each study's
// CIDEr-D against the corpus-wide frequencies (the Partial as a side
// input), summed → out/scores.json, as examples/score -json writes it.
func buildScore(s beam.Scope, c ScoreConfig) {
	lines := textio.Read(s, c.Reports)
	samples, bad := beam.ParDo2(s, &StatsFn{Config: c}, lines)
	partial := beam.Combine(s, &PartialFn{}, samples)
	cider := beam.ParDo(s, &CIDErFn{}, samples, beam.SideInput{Input: partial})
	ciderSum := stats.Sum(s, cider)
	beam.ParDo0(s, &ScoresFn{Config: c}, beam.Impulse(s), beam.SideInput{Input: partial}, beam.SideInput{Input: ciderSum})
	writeShards(s.Scope("DeadLetters"), joinPath(c.Out, "deadletter"), 1, bad)
}

// scorer is what a worker process builds once per score configuration: the
// references of the split and the Evaluator.
type scorer struct {
	once  sync.Once
	refs  map[string]string
	split int
	ev    *metrics.Evaluator
	err   error
}

var scorers sync.Map // ScoreConfig key → *scorer

func scorerFor(ctx context.Context, c ScoreConfig) (*scorer, error) {
	key := strings.Join([]string{c.Ann, c.Split, c.Refs, c.Corpus, c.METEORModules, fmt.Sprint(c.NoMETEOR, c.NoCE)}, "\x00")
	v, _ := scorers.LoadOrStore(key, &scorer{})
	sc := v.(*scorer)
	sc.once.Do(func() { sc.err = sc.build(ctx, c) })
	return sc, sc.err
}

func (sc *scorer) build(ctx context.Context, c ScoreConfig) error {
	b, err := readAll(ctx, c.Ann, 4<<30)
	if err != nil {
		return err
	}
	ann, err := data.ReadAnnotation(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: %w", c.Ann, err)
	}
	studies, err := ann.Split(c.Split)
	if err != nil {
		return err
	}
	refOf, err := ann.ReferenceFunc(c.Refs, data.Corpus(c.Corpus))
	if err != nil {
		return err
	}
	sc.split = len(studies)
	sc.refs = make(map[string]string, len(studies))
	for _, s := range studies {
		sc.refs[s.ID] = refOf(s.Report)
	}
	var opts []metrics.Option
	if c.NoMETEOR {
		opts = append(opts, metrics.WithoutMETEOR())
	} else {
		mods := meteor.DefaultModules
		if c.METEORModules != "" {
			if mods, err = meteor.ParseModules(c.METEORModules); err != nil {
				return err
			}
		}
		m, err := meteor.New(meteor.WithModules(mods...))
		if err != nil {
			return err
		}
		opts = append(opts, metrics.WithMETEOR(m))
	}
	if c.NoCE {
		opts = append(opts, metrics.WithoutClinicalEfficacy())
	}
	sc.ev, err = metrics.NewEvaluator(opts...)
	return err
}

// StatsFn computes each report's sufficient statistics against its
// reference.
type StatsFn struct {
	Config ScoreConfig
}

// ProcessElement scores one report line.
func (f *StatsFn) ProcessElement(ctx context.Context, line string, emit func(metrics.SampleStats), dead func(string)) error {
	if strings.TrimSpace(line) == "" {
		return nil
	}
	sc, err := scorerFor(ctx, f.Config)
	if err != nil {
		return err
	}
	var r Report
	if err := json.Unmarshal([]byte(line), &r); err != nil || r.ID == "" {
		if err == nil {
			err = errors.New("record without id")
		}
		studiesFailed.Inc(ctx, 1)
		dead(DeadLetter{File: f.Config.Reports, Error: fmt.Sprintf("malformed report line %q: %v", clip(line), err)}.line())
		return nil
	}
	ref, ok := sc.refs[r.ID]
	if !ok {
		studiesFailed.Inc(ctx, 1)
		dead(DeadLetter{ID: r.ID, File: f.Config.Reports, Error: fmt.Sprintf("study is not in split %q", f.Config.Split)}.line())
		return nil
	}
	st, err := sc.ev.SampleStats([]string{ref}, r.Report)
	if err != nil {
		return err
	}
	studiesDone.Inc(ctx, 1)
	emit(st)
	return nil
}

// PartialFn combines per-study statistics into one metrics.Partial.
type PartialFn struct{}

// CreateAccumulator returns an empty Partial.
func (PartialFn) CreateAccumulator() metrics.Partial { return metrics.Partial{DF: map[string]int{}} }

// AddInput folds one study in.
func (PartialFn) AddInput(p metrics.Partial, s metrics.SampleStats) metrics.Partial {
	p.Add(s)
	return p
}

// MergeAccumulators merges two Partials.
func (PartialFn) MergeAccumulators(a, b metrics.Partial) metrics.Partial {
	a.Merge(&b)
	return a
}

// ExtractOutput returns the Partial.
func (PartialFn) ExtractOutput(p metrics.Partial) metrics.Partial { return p }

// CIDErFn scores one study's CIDEr-D against the corpus's frequencies.
type CIDErFn struct{}

// ProcessElement emits the study's CIDEr-D.
func (CIDErFn) ProcessElement(s metrics.SampleStats, corpus metrics.Partial, emit func(float64)) {
	emit(corpus.CIDErD(s))
}

// ScoresFn writes the corpus scores.
type ScoresFn struct {
	Config ScoreConfig
}

// ProcessElement writes out/scores.json.
func (f *ScoresFn) ProcessElement(ctx context.Context, _ []byte, partial func(*metrics.Partial) bool, ciderSum func(*float64) bool) error {
	sc, err := scorerFor(ctx, f.Config)
	if err != nil {
		return err
	}
	var p metrics.Partial
	if !partial(&p) || p.N == 0 {
		return fmt.Errorf("%s: no report of split %q to score", f.Config.Reports, f.Config.Split)
	}
	var sum float64
	ciderSum(&sum)
	res, err := sc.ev.ScoresFromPartial(&p, sum)
	if err != nil {
		return err
	}
	b, err := scoresJSON(f.Config, res, sc.split-res.N)
	if err != nil {
		return err
	}
	return writeAtomic(ctx, joinPath(f.Config.Out, "scores.json"), b)
}

// scoresJSON lays the scores out as examples/score -json does.
func scoresJSON(c ScoreConfig, sc *metrics.Scores, missing int) ([]byte, error) {
	out := map[string]any{
		"split": c.Split, "references": c.Refs, "n": sc.N, "skipped": missing,
		"BLEU_1": sc.BLEU[0], "BLEU_2": sc.BLEU[1], "BLEU_3": sc.BLEU[2], "BLEU_4": sc.BLEU[3],
		"ROUGE_L": sc.ROUGEL, "CIDEr": sc.CIDErD,
	}
	if sc.METEORName != "" {
		out["METEOR"] = sc.METEOR
		out["METEOR_name"] = sc.METEORName
	}
	if sc.CE != nil {
		per := map[string]chexpert.PRF{}
		for i, p := range sc.CE.PerObservation {
			per[chexpert.Observation(i).String()] = p
		}
		out["CE"] = map[string]any{
			"labeler": "radgen CheXpert-style surface rules",
			"micro":   sc.CE.Micro, "macro": sc.CE.Macro, "per_observation": per,
		}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	return append(b, '\n'), err
}
