package metrics

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Samples split over several Partials, merged in another order (after a
// JSON round trip, as a distributed runner ships them), give the scores of
// one Evaluate over all of them.
func TestPartialMergeEqualsEvaluate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	words := strings.Fields("the heart is normal in size no focal consolidation pleural effusion pneumothorax " +
		"mild cardiomegaly is seen lungs are clear there is a small left right basilar opacity atelectasis")
	sentence := func() string {
		n := 3 + rng.IntN(14)
		w := make([]string, n)
		for i := range w {
			w[i] = words[rng.IntN(len(words))]
		}
		return strings.Join(w, " ")
	}
	const n = 57
	refs := make([][]string, n)
	hyps := make([]string, n)
	for i := range hyps {
		refs[i] = []string{sentence()}
		if i%5 == 0 {
			refs[i] = append(refs[i], sentence())
		}
		hyps[i] = sentence()
	}
	hyps[3] = "" // an empty hypothesis
	ev, err := NewEvaluator()
	if err != nil {
		t.Fatal(err)
	}
	want, err := ev.Evaluate(context.Background(), refs, hyps)
	if err != nil {
		t.Fatal(err)
	}

	stats := make([]SampleStats, n)
	parts := make([]*Partial, 4)
	for i := range parts {
		parts[i] = &Partial{}
	}
	for i := range hyps {
		s, err := ev.SampleStats(refs[i], hyps[i])
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &stats[i]); err != nil {
			t.Fatal(err)
		}
		parts[(i*7)%4].Add(stats[i])
	}
	var total Partial
	for _, i := range []int{2, 0, 3, 1} {
		total.Merge(parts[i])
	}
	var ciderSum float64
	for i := n - 1; i >= 0; i-- {
		ciderSum += total.CIDErD(stats[i])
	}
	got, err := ev.ScoresFromPartial(&total, ciderSum)
	if err != nil {
		t.Fatal(err)
	}
	if got.N != want.N || got.METEORName != want.METEORName {
		t.Fatalf("N %d name %q, want %d %q", got.N, got.METEORName, want.N, want.METEORName)
	}
	check := func(name string, g, w float64) {
		t.Helper()
		if math.Abs(g-w) > 1e-12 {
			t.Errorf("%s = %.17g, want %.17g", name, g, w)
		}
	}
	for k := range want.BLEU {
		check("BLEU", got.BLEU[k], want.BLEU[k])
	}
	check("ROUGE-L", got.ROUGEL, want.ROUGEL)
	check("CIDEr-D", got.CIDErD, want.CIDErD)
	check("METEOR", got.METEOR, want.METEOR)
	if want.CIDErD == 0 || want.BLEU[0] == 0 || want.METEOR == 0 {
		t.Errorf("degenerate scores %+v", want)
	}
	if *got.CE != *want.CE {
		t.Errorf("CE %+v, want %+v", *got.CE, *want.CE)
	}
	if _, err := ev.ScoresFromPartial(&Partial{}, 0); err == nil {
		t.Error("empty Partial scored")
	}
	if _, err := ev.SampleStats(nil, "a"); err == nil {
		t.Error("sample without references accepted")
	}
}
