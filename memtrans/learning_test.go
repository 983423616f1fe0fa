package memtrans_test

import (
	"context"
	"testing"

	"github.com/radgen/radgen/memtrans/metrics/chexpert"
	"github.com/radgen/radgen/memtrans/synth"
)

// TestLearnsSyntheticFilms trains the quickstart's tiny R2Gen on synthetic
// chest films and requires held-out BLEU-4 ≥ 0.5 and clinical-efficacy
// F1 ≥ 0.8 against the films' own findings.
func TestLearnsSyntheticFilms(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for about two minutes")
	}
	o := synth.Defaults
	o.Dir = t.TempDir()
	res, err := synth.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Model.Close()
	h := res.History
	b4, f1 := res.Scores.BLEU[3], res.Efficacy.Micro.F1
	t.Logf("R2Gen (BASE+RM+MCLN), %d parameters: loss %.3f → %.3f in %s; BLEU-4 %.3f, ROUGE-L %.3f, CE F1 %.3f",
		res.Params, h[0].Loss, h[len(h)-1].Loss, res.TrainTime.Round(1e9), b4, res.Scores.ROUGEL, f1)
	if h[len(h)-1].Loss >= h[0].Loss/4 {
		t.Errorf("training loss fell only from %.3f to %.3f", h[0].Loss, h[len(h)-1].Loss)
	}
	if b4 < 0.5 {
		t.Errorf("BLEU-4 %.3f < 0.5", b4)
	}
	if f1 < 0.8 {
		t.Errorf("clinical-efficacy F1 %.3f < 0.8", f1)
	}
	// Every finding of the held-out films is written at least once (when
	// the films drew pneumothorax faintly, it never was: F1 0, support 8).
	for o, n := range res.Efficacy.Support {
		if n > 0 && res.Efficacy.PerObservation[o].F1 == 0 {
			t.Errorf("%s (support %d) never found", chexpert.Observation(o), n)
		}
	}
}
