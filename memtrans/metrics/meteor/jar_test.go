package meteor

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans/data"
)

// The goldens in testdata/jar were made by the METEOR 1.5 jar built from
// its source, run as coco-caption runs it (testdata/jar/README.md has the
// commands). radgen must give every segment's score and the corpus score
// within 1e-6, and the same segment statistics.
const jarTolerance = 1e-6

type jarSegment struct {
	Hyp  string   `json:"hyp"`
	Refs []string `json:"refs"`
	HypI int      `json:"hyp_index"`
	RefI []int    `json:"ref_indices"`
}

type jarRun struct {
	Variant  string    `json:"variant"`
	Modules  string    `json:"modules"`
	Segments []float64 `json:"segment_scores"`
	Stats    []string  `json:"segment_stats"`
	Corpus   float64   `json:"corpus"`
}

type jarGolden struct {
	AnnotationHash string       `json:"annotation_sha256"`
	Segments       []jarSegment `json:"segments"`
	Runs           []jarRun     `json:"runs"`
}

func readJarGolden(t *testing.T, name string) jarGolden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "jar", name))
	if err != nil {
		t.Fatal(err)
	}
	var g jarGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(g.Runs) == 0 || len(g.Segments) == 0 {
		t.Fatalf("%s: no runs or no segments", name)
	}
	return g
}

// jarStats writes st as the jar's MeteorStats.toString does (word counts,
// then exact, stem, synonym and paraphrase matches, chunks, matched words).
func jarStats(st Stats) string {
	f := func(n int) string { return strconv.Itoa(n) + ".0" }
	parts := []string{f(st.TestLength), f(st.RefLength), f(st.TestFunctionWords), f(st.RefFunctionWords)}
	for i := range 4 {
		if i < len(st.TestContent) {
			parts = append(parts, f(st.TestContent[i]), f(st.RefContent[i]), f(st.TestFunction[i]), f(st.RefFunction[i]))
		} else {
			parts = append(parts, "0.0", "0.0", "0.0", "0.0")
		}
	}
	parts = append(parts, f(st.Chunks), f(st.TestMatches), f(st.RefMatches))
	return strings.Join(parts, " ")
}

// checkJarRun scores the segments with the run's modules and compares with
// the jar (the corpus score too unless the run's is NaN). It returns the
// largest segment and corpus differences.
func checkJarRun(t *testing.T, run jarRun, hyps []string, refs [][]string) (segDiff, corpusDiff float64) {
	t.Helper()
	mods, err := ParseModules(run.Modules)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(WithModules(mods...))
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Segments) != len(hyps) {
		t.Fatalf("%d scores for %d segments", len(run.Segments), len(hyps))
	}
	// Segments in parallel (a Scorer is safe for concurrent use); the sum
	// in order, as the jar's EVAL.
	stats := make([]Stats, len(hyps))
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(hyps); i += workers {
				stats[i] = s.SegmentStats(CleanHypothesis(hyps[i]), refs[i])
			}
		})
	}
	wg.Wait()
	var total Stats
	bad := 0
	for i, st := range stats {
		total.Add(st)
		got := s.Score(st)
		d := math.Abs(got - run.Segments[i])
		segDiff = max(segDiff, d)
		statsDiffer := run.Stats != nil && jarStats(st) != run.Stats[i]
		if d > jarTolerance || statsDiffer {
			if bad++; bad <= 10 {
				msg := fmt.Sprintf("segment %d: %.12f, the jar %.12f", i, got, run.Segments[i])
				if run.Stats != nil {
					msg += fmt.Sprintf("\n  stats %s\n  jar   %s", jarStats(st), run.Stats[i])
				}
				if hyps[i] != "" || len(refs[i]) > 0 {
					msg += fmt.Sprintf("\n  hyp %q\n  refs %q", hyps[i], refs[i])
				}
				t.Error(msg)
			}
		}
	}
	corpus := s.Score(total)
	corpusDiff = math.Abs(corpus - run.Corpus)
	if !math.IsNaN(run.Corpus) && corpusDiff > jarTolerance {
		t.Errorf("corpus %.12f, the jar %.12f", corpus, run.Corpus)
	}
	if bad > 0 {
		t.Errorf("%d of %d segments differ", bad, len(hyps))
	}
	return segDiff, corpusDiff
}

func TestJarSynthetic(t *testing.T) {
	g := readJarGolden(t, "synthetic.json")
	var hyps []string
	var refs [][]string
	for _, s := range g.Segments {
		hyps, refs = append(hyps, s.Hyp), append(refs, s.Refs)
	}
	for _, run := range g.Runs {
		if testing.Short() && run.Modules != "exact stem" && run.Modules != "exact stem synonym" {
			continue // the race detector's run: the two module sets coco-caption's readers compare
		}
		t.Run(strings.ReplaceAll(run.Modules, " ", "+"), func(t *testing.T) {
			seg, corpus := checkJarRun(t, run, hyps, refs)
			t.Logf("%d segments: largest segment difference %.3g, corpus difference %.3g (corpus %.6f)", len(hyps), seg, corpus, run.Corpus)
		})
	}
}

// TestJarIUXray compares with the jar on real IU X-Ray reports, paired as
// hypotheses and references by index (the golden stores indices and
// scores, no text). It needs the annotation in ../shared (or
// $RADGEN_IU_ANNOTATION), the very file the golden was made from.
func TestJarIUXray(t *testing.T) {
	path := testutil.File(t, "RADGEN_IU_ANNOTATION", "data/iu_xray/annotation.json")
	g := readJarGolden(t, "iu_xray.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != g.AnnotationHash {
		t.Skipf("%s is not the annotation the golden was made from (sha256 %s)", path, g.AnnotationHash)
	}
	ann, err := data.ReadAnnotation(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	var reports []string
	for _, split := range []string{"train", "val", "test"} {
		studies, err := ann.Split(split)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range studies {
			reports = append(reports, s.Report)
		}
	}
	segs := g.Segments
	if testing.Short() {
		segs = segs[:150] // the race detector's run: enough to catch a regression
	}
	for _, run := range g.Runs {
		t.Run(run.Variant+"/"+strings.ReplaceAll(run.Modules, " ", "+"), func(t *testing.T) {
			text := func(i int) string {
				if i < 1 || i > len(reports) {
					t.Fatalf("report index %d out of range", i)
				}
				if run.Variant == "clean" {
					return data.CleanIUXray(reports[i-1])
				}
				return reports[i-1]
			}
			var hyps []string
			var refs [][]string
			for _, s := range segs {
				var r []string
				for _, j := range s.RefI {
					r = append(r, text(j))
				}
				hyps, refs = append(hyps, text(s.HypI)), append(refs, r)
			}
			if len(segs) < len(g.Segments) {
				// A prefix of the corpus: compare the segments only.
				run.Segments, run.Corpus = run.Segments[:len(segs)], math.NaN()
			}
			seg, corpus := checkJarRun(t, run, hyps, refs)
			t.Logf("%d segments: largest segment difference %.3g, corpus difference %.3g (corpus %.6f)", len(hyps), seg, corpus, run.Corpus)
		})
	}
}

// The embedded data are the jar's files, byte for byte (data/README.md).
func TestEmbeddedDataIsTheJars(t *testing.T) {
	want := map[string]string{
		"english.words":         "2ae0d5b8c29e2993a0f442b065b946d1a17fbfe8538e66bf5931c4a248cf4c3a",
		"english.prefixes":      "bd909f364224748976f9b8b7cdeb4f9be3bf7c8e66a10f1ed268b12d904ab876",
		"english.synsets.gz":    "20b7cf6ae1cba2395d714d8c2ec2992e88c6d1c75c7c30aa480c6a2a9bb8fef9",
		"english.exceptions.gz": "5feb8fcb5b349d035df1a448149c2ccc860bf32e4b9eea8c8e4f113e90a5a962",
	}
	for name, sum := range want {
		b, err := os.ReadFile(filepath.Join("data", name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if b, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: sha256 %x, the jar's file has %s", name, got, sum)
		}
	}
}
