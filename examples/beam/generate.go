package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/radgen/radgen/memtrans"
)

// Report is one line of generate's output.
type Report struct {
	ID      string  `json:"id"`
	Report  string  `json:"report"`   // the generated text
	LogProb float64 `json:"log_prob"` // the tokens' summed log-probability
	Model   string  `json:"model"`    // SHA-256 of the model checkpoint
}

// GenerateConfig configures the generate pipeline.
type GenerateConfig struct {
	Manifest string // JSONL of Study (glob allowed)
	Model    string // checkpoint path or URL
	Device   string // cpu, cuda:N or reference
	Out      string // output folder
	Beam     int    // beam size; 1 decodes greedily
	Batch    int    // studies per Generate call, grouped as radgen does (16 gives its reports exactly)
	Shards   int    // files of reports
}

// Beam metrics of the pipelines (namespace "radgen").
var (
	studiesDone    = beam.NewCounter("radgen", "studies_done")    // results written by this run
	studiesSkipped = beam.NewCounter("radgen", "studies_skipped") // results already there from an earlier run
	studiesFailed  = beam.NewCounter("radgen", "dead_letters")    // studies sent to the dead-letter output
	studyMillis    = beam.NewDistribution("radgen", "study_ms")   // wall time per study of a batch
)

// touchCounters reports every counter (by 0) as a bundle starts, so that a
// runner learns the counters' ids from the bundle's first progress report:
// Prism 2.77 keeps only the last of several payloads that arrive for a
// counter it does not know yet, which loses counts when parallel bundles
// finish together.
func touchCounters(ctx context.Context) {
	studiesDone.Inc(ctx, 0)
	studiesSkipped.Inc(ctx, 0)
	studiesFailed.Inc(ctx, 0)
}

// buildGenerate adds the generate pipeline to s: manifest → studies keyed
// by batch (malformed lines to the dead letters) → grouped, batches spread
// over the workers → reports, each written under its study's id as soon
// as its batch is done, so a rerun regenerates only the batches with
// missing studies and rewrites no finished study → sorted report shards
// (out/reports-*.jsonl) and dead letters (out/deadletter-*.jsonl).
func buildGenerate(s beam.Scope, c GenerateConfig) {
	studies, bad := readManifest(s, c.Manifest, c.Batch)
	batches := beam.GroupByKey(s, studies)
	reports, failed := beam.ParDo2(s, &GenerateFn{Model: c.Model, Device: c.Device, Out: c.Out, Beam: c.Beam, Batch: c.Batch}, batches)
	writeShards(s.Scope("Reports"), joinPath(c.Out, "reports"), c.Shards, reports)
	writeShards(s.Scope("DeadLetters"), joinPath(c.Out, "deadletter"), 1, beam.Flatten(s, bad, failed))
}

// GenerateFn writes the reports of one batch of studies. Its fields are
// its whole configuration; the model comes from the worker process's model
// cache, loaded on first use.
type GenerateFn struct {
	Model  string
	Device string
	Out    string
	Beam   int
	Batch  int
}

// ProcessElement generates one batch. Studies whose report an earlier run
// wrote (with the same model) are passed on as written, not rewritten; if
// any study is missing, the batch is decoded whole again so that every
// report comes from the same batch as in an uninterrupted run. A study
// that cannot be read goes to the dead letters, the rest of its batch on.
func (f *GenerateFn) ProcessElement(ctx context.Context, _ string, studies func(*Study) bool, emit, dead func(string)) error {
	touchCounters(ctx)
	m, sum, err := modelFor(ctx, f.Model, f.Device)
	if err != nil {
		return err // the job's fault, not the study's: fail the bundle
	}
	batch := batchOf(studies)
	done := make(map[string]string, len(batch))
	for _, s := range batch {
		if line, ok := f.done(ctx, s.ID, sum); ok {
			done[s.ID] = line
		}
	}
	if len(done) == len(batch) {
		for _, s := range batch {
			studiesSkipped.Inc(ctx, 1)
			emit(done[s.ID])
		}
		return nil
	}
	views := m.Config().Views
	decoded := make([]memtrans.Study, 0, len(batch))
	for _, s := range batch {
		st, err := decodeStudy(ctx, s, views)
		if err == nil && len(st.Views) != views {
			err = fmt.Errorf("%d images, the model takes %d views", len(st.Views), views)
		}
		if err != nil {
			studiesFailed.Inc(ctx, 1)
			dead(deadLetter(s.ID, "", err).line())
			continue
		}
		decoded = append(decoded, st)
	}
	if len(decoded) == 0 {
		return nil
	}
	start := time.Now()
	reps, err := m.Generate(ctx, decoded, f.options()...)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// One bad study fails its batch: generate one by one to find it.
		reps = reps[:0]
		for _, st := range decoded {
			r, err := m.Generate(ctx, []memtrans.Study{st}, f.options()...)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				studiesFailed.Inc(ctx, 1)
				dead(deadLetter(st.ID, "", err).line())
				continue
			}
			reps = append(reps, r[0])
		}
	}
	per := time.Since(start).Milliseconds() / int64(len(decoded))
	for _, r := range reps {
		if line, ok := done[r.StudyID]; ok {
			studiesSkipped.Inc(ctx, 1)
			emit(line)
			continue
		}
		b, err := json.Marshal(Report{ID: r.StudyID, Report: r.Text, LogProb: r.LogProb, Model: sum})
		if err != nil {
			return err
		}
		if err := writeAtomic(ctx, studyFile(joinPath(f.Out, "studies"), r.StudyID, ".json"), append(b, '\n')); err != nil {
			return errors.Join(fmt.Errorf("writing the report of study %q", r.StudyID), err)
		}
		studiesDone.Inc(ctx, 1)
		studyMillis.Update(ctx, per)
		emit(string(b))
	}
	return nil
}

// done returns the report an earlier run wrote for id with the same model.
func (f *GenerateFn) done(ctx context.Context, id, sum string) (string, bool) {
	b, err := readAll(ctx, studyFile(joinPath(f.Out, "studies"), id, ".json"), 1<<24)
	if err != nil {
		return "", false
	}
	var r Report
	if json.Unmarshal(b, &r) != nil || r.ID != id || r.Model != sum {
		return "", false
	}
	return string(bytes.TrimSpace(b)), true
}

func (f *GenerateFn) options() []memtrans.GenerateOption {
	opt := memtrans.WithBeamSize(max(1, f.Beam))
	if f.Beam == 1 {
		opt = memtrans.WithGreedy(false)
	}
	return []memtrans.GenerateOption{opt, memtrans.WithBatchSize(max(1, f.Batch))}
}
