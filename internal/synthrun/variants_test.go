package synthrun

import (
	"context"
	"testing"
)

// TestVariantsTrain runs the whole comparison on a small budget: every
// configuration must learn (its training loss falls) and write reports
// that score above a floor. The full table is examples/variants.
func TestVariantsTrain(t *testing.T) {
	if testing.Short() {
		t.Skip("trains six models; skipped with -short")
	}
	o := Options{Dir: t.TempDir(), Train: 48, Test: 12, Size: 64, Epochs: 4, BatchSize: 8, Seed: 2}
	specs := Specs(6) // the continued row trains 2 epochs
	rows, err := Compare(context.Background(), o, specs, func(r Row) {
		t.Logf("%-26s epochs %d params %7d loss %.3f → %.3f BLEU-1 %.3f BLEU-4 %.3f ROUGE-L %.3f CE F1 %.3f",
			r.Name, r.Epochs, r.Params, r.FirstLoss, r.LastLoss, r.BLEU1, r.BLEU4, r.ROUGEL, r.CEF1)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(specs) {
		t.Fatalf("%d rows for %d specs", len(rows), len(specs))
	}
	params := map[string]int{}
	for _, r := range rows {
		params[r.Name] = r.Params
		if !(r.LastLoss < r.FirstLoss) {
			t.Errorf("%s: training loss %.3f → %.3f", r.Name, r.FirstLoss, r.LastLoss)
		}
		if r.BLEU1 < 0.1 || r.ROUGEL < 0.15 {
			t.Errorf("%s: BLEU-1 %.3f, ROUGE-L %.3f below the floor (0.1, 0.15)", r.Name, r.BLEU1, r.ROUGEL)
		}
	}
	// GCA adds one LayerNorm per decoder layer and nothing else.
	if d := params["multi-view GCA"] - params["BASE+RM+MCLN (R2Gen)"]; d != 2*64*2 {
		t.Errorf("GCA adds %d parameters, want %d", d, 2*64*2)
	}
	if rows[4].Epochs != 4+2 {
		t.Errorf("continued row counts %d epochs, want 6", rows[4].Epochs)
	}
}
