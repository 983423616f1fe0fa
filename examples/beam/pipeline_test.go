package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/vision"
)

var (
	genOnce   sync.Once
	genOut    string
	genCounts map[string]int64
)

// generated runs the generate pipeline once over the test split with the
// bad studies.
func generated(t *testing.T) (*fixture, string, map[string]int64) {
	t.Helper()
	f := getFixture(t)
	genOnce.Do(func() {
		genOut = filepath.Join(f.dir, "gen")
		genCounts = runPipeline(t, func(s beam.Scope) {
			buildGenerate(s, GenerateConfig{Manifest: f.all, Model: f.model, Out: genOut, Beam: 3, Batch: 16, Shards: 3})
		})
	})
	if genOut == "" || genCounts == nil {
		t.Fatal("generate pipeline failed earlier")
	}
	return f, genOut, genCounts
}

// The pipeline's reports are radgen's, byte for byte in text and bit for
// bit in log-probability; the bad studies are dead letters naming their
// file and error; every other study is written.
func TestGenerateMatchesCLI(t *testing.T) {
	f, out, counts := generated(t)
	sum := fileSHA(t, f.model)
	got := readReports(t, filepath.Join(out, "reports-*-of-00003.jsonl"))
	if len(got) != len(f.testIDs) {
		t.Fatalf("%d reports, want %d", len(got), len(f.testIDs))
	}
	if counts["studies_done"] != int64(len(f.testIDs)) || counts["dead_letters"] != 4 || counts["studies_skipped"] != 0 {
		t.Errorf("counters %v", counts)
	}

	cli, _ := f.commands(t)
	cliOut := filepath.Join(f.dir, "cli.json")
	if b, err := exec.Command(cli, "generate", "-model", f.model, "-manifest", f.good, "-o", cliOut).CombinedOutput(); err != nil {
		t.Fatalf("radgen generate: %v\n%s", err, b)
	}
	var want []struct {
		ID      string  `json:"id"`
		Report  string  `json:"report"`
		LogProb float64 `json:"log_prob"`
	}
	b, err := os.ReadFile(cliOut)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(f.testIDs) {
		t.Fatalf("radgen wrote %d reports", len(want))
	}
	distinct := map[string]bool{}
	for _, w := range want {
		g, ok := got[w.ID]
		switch {
		case !ok:
			t.Errorf("%s: no report", w.ID)
		case g.Report != w.Report || g.LogProb != w.LogProb:
			t.Errorf("%s: %q (%v), radgen %q (%v)", w.ID, g.Report, g.LogProb, w.Report, w.LogProb)
		case g.Model != sum:
			t.Errorf("%s: model %s, want %s", w.ID, g.Model, sum)
		}
		distinct[w.Report] = true
		if w.Report == "" || w.LogProb >= 0 {
			t.Errorf("%s: degenerate report %q %v", w.ID, w.Report, w.LogProb)
		}
	}
	t.Logf("%d reports equal to radgen's (%d distinct texts)", len(want), len(distinct))

	dead := map[string]DeadLetter{}
	for _, l := range readLines(t, filepath.Join(out, "deadletter-*.jsonl")) {
		var d DeadLetter
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatal(err)
		}
		dead[d.ID] = d
	}
	for id, file := range f.bad {
		d, ok := dead[id]
		if !ok || d.File != file || d.Error == "" {
			t.Errorf("%s: dead letter %+v, want file %s", id, d, file)
			continue
		}
		t.Logf("dead letter %s: %s: %s", id, filepath.Base(d.File), d.Error)
	}
	if d := dead[""]; d.File != f.all || !strings.Contains(d.Error, "malformed") {
		t.Errorf("malformed line: %+v", d)
	}
	if len(dead) != 4 {
		t.Errorf("%d dead letters: %v", len(dead), dead)
	}
	if !strings.Contains(dead["bad-missing"].Error, "no such file") || !strings.Contains(dead["bad-hostile"].Error, vision.ErrTooLarge.Error()) {
		t.Errorf("errors: %q, %q", dead["bad-missing"].Error, dead["bad-hostile"].Error)
	}
}

// A run killed after part of its studies (simulated: some results already
// written, one half-written temporary file and one corrupt result left
// behind) regenerates only the missing studies, leaves the finished ones
// untouched, and ends with the output of an uninterrupted run; a third run
// generates nothing.
func TestGenerateResumes(t *testing.T) {
	f, full, _ := generated(t)
	out := filepath.Join(t.TempDir(), "gen")
	var files []string
	if err := filepath.WalkDir(filepath.Join(full, "studies"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	if len(files) != len(f.testIDs) {
		t.Fatalf("%d study files, want %d", len(files), len(f.testIDs))
	}
	const kept = 15
	type stamp struct {
		path string
		info os.FileInfo
	}
	var before []stamp
	for i, src := range files[:kept+1] {
		rel, _ := filepath.Rel(full, src)
		dst := filepath.Join(out, rel)
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if i == kept {
			b = b[:len(b)/2] // a corrupt result: regenerated
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if i < kept {
			info, _ := os.Stat(dst)
			before = append(before, stamp{dst, info})
		} else if err := os.WriteFile(filepath.Join(filepath.Dir(dst), ".tmp-half-written"), b[:3], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gen := func() map[string]int64 {
		return runPipeline(t, func(s beam.Scope) {
			buildGenerate(s, GenerateConfig{Manifest: f.all, Model: f.model, Out: out, Beam: 3, Batch: 16, Shards: 3})
		})
	}
	counts := gen()
	if counts["studies_skipped"] != kept || counts["studies_done"] != int64(len(f.testIDs)-kept) {
		t.Errorf("resumed run: %v, want %d skipped and %d done", counts, kept, len(f.testIDs)-kept)
	}
	for _, s := range before {
		info, err := os.Stat(s.path)
		if err != nil || !os.SameFile(info, s.info) || !info.ModTime().Equal(s.info.ModTime()) {
			t.Errorf("%s rewritten", s.path)
		}
	}
	sameOutput(t, full, out)
	counts = gen()
	if counts["studies_skipped"] != int64(len(f.testIDs)) || counts["studies_done"] != 0 {
		t.Errorf("complete run again: %v", counts)
	}
	sameOutput(t, full, out)
}

func sameOutput(t *testing.T, want, got string) {
	t.Helper()
	for _, glob := range []string{"reports-*.jsonl", "deadletter-*.jsonl"} {
		ws, _ := filepath.Glob(filepath.Join(want, glob))
		gs, _ := filepath.Glob(filepath.Join(got, glob))
		if len(ws) == 0 || len(ws) != len(gs) {
			t.Fatalf("%s: %d and %d files", glob, len(ws), len(gs))
		}
		for i := range ws {
			a, _ := os.ReadFile(ws[i])
			b, _ := os.ReadFile(gs[i])
			if filepath.Base(ws[i]) != filepath.Base(gs[i]) || !bytes.Equal(a, b) {
				t.Errorf("%s differs from %s", gs[i], ws[i])
			}
		}
	}
	// Every study's result is there once.
	n := 0
	filepath.WalkDir(filepath.Join(got, "studies"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			n++
		}
		return nil
	})
	if wantN := len(readLines(t, filepath.Join(want, "reports-*.jsonl"))); n != wantN {
		t.Errorf("%d study files, want %d", n, wantN)
	}
}

// The corpus metrics of the score pipeline (a Beam combine of per-study
// statistics) equal examples/score's on the same reports to 1e-12: on the
// generated reports, and on reports made from the references (so that
// every metric is far from zero).
func TestScoreMatchesScoreCommand(t *testing.T) {
	f, gen, _ := generated(t)
	_, scoreCmd := f.commands(t)
	ann, err := data.LoadAnnotation(f.ann)
	if err != nil {
		t.Fatal(err)
	}
	test, _ := ann.Split("test")
	var near []string
	for i, s := range test {
		w := strings.Fields(data.IUXray.Clean(s.Report))
		w = w[:max(1, len(w)-i%5)] // drop up to four words
		b, _ := json.Marshal(map[string]string{"id": s.ID, "report": strings.Join(w, " ")})
		near = append(near, string(b))
	}
	near = append(near, `{"id": "not-in-split", "report": "heart size is normal"}`)
	nearPath := filepath.Join(t.TempDir(), "near.jsonl")
	if err := os.WriteFile(nearPath, []byte(strings.Join(near, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	genPath := filepath.Join(t.TempDir(), "generated.jsonl")
	if err := os.WriteFile(genPath, []byte(strings.Join(readLines(t, filepath.Join(gen, "reports-*.jsonl")), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, reports, single string }{
		{"generated", filepath.Join(gen, "reports-*.jsonl"), genPath},
		{"near-references", nearPath, nearPath},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			counts := runPipeline(t, func(s beam.Scope) {
				buildScore(s, ScoreConfig{Reports: c.reports, Ann: f.ann, Split: "test", Refs: "r2gen", Corpus: "iu_xray", Out: out})
			})
			if counts["studies_done"] != int64(len(test)) {
				t.Errorf("counters %v", counts)
			}
			var got, want map[string]any
			b, err := os.ReadFile(filepath.Join(out, "scores.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			cmdOut, err := exec.Command(scoreCmd, "-ann", f.ann, "-gen", c.single, "-json").Output()
			if err != nil {
				t.Fatalf("score: %v", err)
			}
			if err := json.Unmarshal(cmdOut, &want); err != nil {
				t.Fatal(err)
			}
			if name := got["METEOR_name"]; name != "METEOR (exact+stem+synonym; no paraphrase)" {
				t.Errorf("METEOR_name %v: scores.json must name the METEOR modules in use", name)
			}
			worst := compareJSON(t, "", got, want)
			t.Logf("%d keys equal, largest difference %.3g; BLEU-4 %.4f CIDEr-D %.4f METEOR %.4f", len(want), worst, want["BLEU_4"], want["CIDEr"], want["METEOR"])
			if c.name == "near-references" {
				for _, k := range []string{"BLEU_4", "CIDEr", "METEOR", "ROUGE_L"} {
					if v, _ := want[k].(float64); v < 0.1 {
						t.Errorf("%s = %v: not a discriminating check", k, v)
					}
				}
				dead := readLines(t, filepath.Join(out, "deadletter-*.jsonl"))
				if len(dead) != 1 || !strings.Contains(dead[0], "not-in-split") {
					t.Errorf("dead letters %v", dead)
				}
			}
		})
	}
}

// compareJSON checks that numbers agree to 1e-12 and everything else is
// equal, returning the largest numeric difference.
func compareJSON(t *testing.T, path string, got, want any) float64 {
	t.Helper()
	worst := 0.0
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			t.Errorf("%s: %v, want %v", path, got, want)
			return 0
		}
		for k := range w {
			worst = max(worst, compareJSON(t, path+"/"+k, g[k], w[k]))
		}
	case float64:
		g, ok := got.(float64)
		if !ok || math.Abs(g-w) > 1e-12 {
			t.Errorf("%s: %v, want %v", path, got, w)
		}
		worst = math.Abs(g - w)
	default:
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
	return worst
}

// The features pipeline writes what a frozen-extractor Trainer caches, file
// for file, and a rerun computes nothing.
func TestFeaturesMatchTrainerCache(t *testing.T) {
	f := getFixture(t)
	out := filepath.Join(t.TempDir(), "features")
	build := func(s beam.Scope) {
		buildFeatures(s, FeaturesConfig{Manifest: f.train, Model: f.model, Out: out, Batch: 16, Shards: 2})
	}
	counts := runPipeline(t, build)
	if counts["studies_done"] != int64(len(f.trainIDs)) {
		t.Fatalf("counters %v", counts)
	}

	ctx := context.Background()
	m, err := memtrans.LoadFile(f.model)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ann, err := data.LoadAnnotation(f.ann)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := data.NewDataset(ann, "train", m.Tokenizer(), data.DatasetConfig{ImageDir: filepath.Join(f.dir, "images"), Views: m.Config().Views})
	if err != nil {
		t.Fatal(err)
	}
	loader, err := data.NewLoader(ds, data.WithBatchSize(5), data.WithTransform(vision.TestTransform(m.Config().ImageSize)))
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "trainer")
	tc := memtrans.R2GenIUXrayTraining()
	tc.Epochs, tc.FreezeExtractor, tc.FeatureCache = 1, true, cache
	tr, err := memtrans.NewTrainer(m, tc, loader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.RunEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range f.trainIDs {
		want, err := os.ReadFile(data.FeatureCachePath(cache, id))
		if err != nil {
			t.Fatalf("trainer cache: %v", err)
		}
		got, err := os.ReadFile(data.FeatureCachePath(out, id))
		if err != nil {
			t.Fatalf("pipeline: %v", err)
		}
		if !bytes.Equal(got, want) {
			a, _ := data.ReadFeatureCache(out, id)
			b, _ := data.ReadFeatureCache(cache, id)
			diff := math.Inf(1)
			if a != nil && b != nil && a.Len() == b.Len() {
				diff = 0
				for i, v := range a.Data() {
					diff = max(diff, math.Abs(float64(v-b.Data()[i])))
				}
			}
			t.Errorf("%s: features differ from the trainer's cache (max |Δ| %g)", id, diff)
		}
	}
	if idx := readLines(t, filepath.Join(out, "index-*-of-00002.jsonl")); len(idx) != len(f.trainIDs) {
		t.Errorf("index of %d lines", len(idx))
	}
	counts = runPipeline(t, build)
	if counts["studies_done"] != 0 || counts["studies_skipped"] != int64(len(f.trainIDs)) {
		t.Errorf("rerun: %v", counts)
	}
}
