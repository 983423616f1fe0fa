package memtrans_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/radgen/radgen/memtrans"
)

// compatExpected is testdata/compat/<release>/expected.json: the reports a
// release generated from its own checkpoints (see testdata/compat/README.md).
type compatExpected struct {
	Release string `json:"release"`
	Commit  string `json:"commit"`
	Models  []struct {
		Architecture string `json:"architecture"`
		Checkpoint   string `json:"checkpoint"`
		Runs         []struct {
			Decoding string         `json:"decoding"`
			Reports  []compatReport `json:"reports"`
		} `json:"runs"`
	} `json:"models"`
}

// compatReport is a report an earlier release wrote.
type compatReport struct {
	Study         string    `json:"study"`
	Text          string    `json:"text"`
	Tokens        []int     `json:"tokens"`
	LogProb       float64   `json:"log_prob"`
	TokenLogProbs []float32 `json:"token_log_probs"`
}

// compatLogProbTolerance is how far a log-probability may move between
// releases: the engines sum in other orders (folded batch norms, other
// convolution algorithms), not other terms.
const compatLogProbTolerance = 1e-3

// TestCheckpointsOfEarlierReleasesLoad: the checkpoints that v0.2.0 and
// v0.3.0 saved (R2Gen, M² and METransformer, each the tiny preset) load
// with this release's LoadFile and write, greedily and by beam search of
// width 3, the reports those releases wrote from them: the same words and
// token ids, and log-probabilities within compatLogProbTolerance.
func TestCheckpointsOfEarlierReleasesLoad(t *testing.T) {
	memtrans.SkipUnderRace(t)
	dir := filepath.Join("testdata", "compat")
	var studies []memtrans.Study
	ids, err := os.ReadDir(filepath.Join(dir, "studies"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		s, err := memtrans.StudyFromFiles(id.Name(), filepath.Join(dir, "studies", id.Name(), "0.png"), filepath.Join(dir, "studies", id.Name(), "1.png"))
		if err != nil {
			t.Fatal(err)
		}
		studies = append(studies, s)
	}
	if len(studies) != 3 {
		t.Fatalf("%d studies in %s, want 3", len(studies), filepath.Join(dir, "studies"))
	}
	decodings := map[string]memtrans.GenerateOption{"greedy": memtrans.WithGreedy(false), "beam3": memtrans.WithBeamSize(3)}
	for _, release := range []string{"v0.2.0", "v0.3.0"} {
		b, err := os.ReadFile(filepath.Join(dir, release, "expected.json"))
		if err != nil {
			t.Fatal(err)
		}
		var exp compatExpected
		if err := json.Unmarshal(b, &exp); err != nil {
			t.Fatalf("%s: %v", release, err)
		}
		if exp.Release != release || len(exp.Models) != 3 {
			t.Fatalf("%s/expected.json: release %q, %d models", release, exp.Release, len(exp.Models))
		}
		for _, em := range exp.Models {
			t.Run(release+"/"+em.Architecture, func(t *testing.T) {
				m, err := memtrans.LoadFile(filepath.Join(dir, release, em.Checkpoint))
				if err != nil {
					t.Fatalf("%s's %s: %v", release, em.Checkpoint, err)
				}
				defer m.Close()
				if got := m.Config().Architecture(); got != em.Architecture {
					t.Errorf("architecture %q, want %q", got, em.Architecture)
				}
				if len(em.Runs) != 2 {
					t.Fatalf("%d runs, want greedy and beam3", len(em.Runs))
				}
				for _, run := range em.Runs {
					opt, ok := decodings[run.Decoding]
					if !ok {
						t.Fatalf("decoding %q", run.Decoding)
					}
					reps, err := m.Generate(context.Background(), studies, opt)
					if err != nil {
						t.Fatalf("%s: %v", run.Decoding, err)
					}
					sameReports(t, run.Decoding, reps, run.Reports)
				}
			})
		}
	}
}

// sameReports requires the reports decoding wrote to be those an earlier
// release wrote: the same study, words and token ids, and log-probabilities
// within compatLogProbTolerance.
func sameReports(t *testing.T, decoding string, reps []memtrans.Report, wants []compatReport) {
	t.Helper()
	if len(reps) != len(wants) {
		t.Fatalf("%s: %d reports, want %d", decoding, len(reps), len(wants))
	}
	for i, want := range wants {
		got := reps[i]
		if got.StudyID != want.Study || got.Text != want.Text || !slices.Equal(got.Tokens, want.Tokens) {
			t.Errorf("%s, study %s:\n got %s %q %v\nwant %s %q %v", decoding, want.Study, got.StudyID, got.Text, got.Tokens, want.Study, want.Text, want.Tokens)
			continue
		}
		if math.Abs(got.LogProb-want.LogProb) > compatLogProbTolerance || len(got.TokenLogProbs) != len(want.TokenLogProbs) {
			t.Errorf("%s, study %s: log-probability %v, want %v (%d token log-probabilities, want %d)",
				decoding, want.Study, got.LogProb, want.LogProb, len(got.TokenLogProbs), len(want.TokenLogProbs))
			continue
		}
		for j, lp := range want.TokenLogProbs {
			if math.Abs(float64(got.TokenLogProbs[j]-lp)) > compatLogProbTolerance {
				t.Errorf("%s, study %s, token %d: log-probability %v, want %v", decoding, want.Study, j, got.TokenLogProbs[j], lp)
			}
		}
	}
}
