package decode

import (
	"context"
	"math"
	"slices"
	"testing"
)

// L is the float32 log of a probability, as the table models return it.
func L(p float64) float32 { return float32(math.Log(p)) }

func checkHyp[S float32 | float64](t *testing.T, what string, h Hypothesis, tokens []int, lps []float32, score S) {
	t.Helper()
	if !slices.Equal(h.Tokens, tokens) {
		t.Errorf("%s: tokens %v, want %v", what, h.Tokens, tokens)
	}
	if !slices.Equal(h.LogProbs, lps) {
		t.Errorf("%s: log-probs %v, want %v", what, h.LogProbs, lps)
	}
	if h.Score != float64(score) {
		t.Errorf("%s: score %v, want %v", what, h.Score, score)
	}
}

// The first step expands one row per study, so the two beams are the two
// best first words, not the best word twice; a beam ending in EOS is saved
// with its sum, handicapped by 1000 and stepped on; at the last step every
// beam is saved.
func TestBeamSearchByHand(t *testing.T) {
	m := &table{V: 4, def: []float64{.25, .25, .25, .25}, rows: map[string][]float64{
		"":    {.1, .5, .3, .1},
		"1":   {.6, .2, .1, .1},
		"2":   {.05, .05, .1, .8},
		"2,3": {.9, .05, .03, .02},
	}}
	got, err := BeamSearch{Size: 2, N: 2, MaxLen: 3}.Decode(context.Background(), m.model(1))
	if err != nil {
		t.Fatal(err)
	}
	// t=0: beams "1" (.5) and "2" (.3). t=1: "1,0" (.30, ends: saved,
	// then -1000) and "2,3" (.24). t=2, the last: "2,3,0" (.216) and
	// "2,3,1" (.012) are saved; "1,0,x" lost to them.
	checkHyp(t, "best", got[0][0], []int{1, 0}, []float32{L(.5), L(.6)}, L(.5)+L(.6))
	checkHyp(t, "second", got[0][1], []int{2, 3, 0}, []float32{L(.3), L(.8), L(.9)}, L(.3)+L(.8)+L(.9))
	if want := []string{"", "1", "2", "1,0", "2,3"}; !slices.Equal(m.seen, want) {
		t.Errorf("scored prefixes %q, want %q", m.seen, want)
	}

	// With one hypothesis returned, the search stops after step 1: "1,0"
	// is saved at -1.20 and the running sums are -1001.2 and ln .24 = -1.43.
	m.seen = nil
	got, err = BeamSearch{Size: 2, MaxLen: 3}.Decode(context.Background(), m.model(1))
	if err != nil {
		t.Fatal(err)
	}
	checkHyp(t, "early", got[0][0], []int{1, 0}, []float32{L(.5), L(.6)}, L(.5)+L(.6))
	if want := []string{"", "1", "2"}; !slices.Equal(m.seen, want) {
		t.Errorf("early stop scored %q, want %q", m.seen, want)
	}
}

// A beam that emits EOS stays in the beam with 1000 subtracted; when the other
// beams have too few possible words it is still chosen, emits EOS again and
// is saved a second time, 1000 lower.
func TestBeamSearchKeepsFinishedBeamAlive(t *testing.T) {
	m := &table{V: 3, def: []float64{1. / 3, 1. / 3, 1. / 3}, rows: map[string][]float64{
		"":    {.6, .4, 0},
		"0":   {.7, .3, 0},
		"1":   {0, 0, 1},
		"1,2": {.9, .1, 0},
		"0,0": {.5, .5, 0},
	}}
	got, err := BeamSearch{Size: 2, N: 2, MaxLen: 3}.Decode(context.Background(), m.model(1))
	if err != nil {
		t.Fatal(err)
	}
	// Saved: "0" (ln .6), "0,0" (ln .6 - 1000 + ln .7), "1,2,0", "1,2,1".
	checkHyp(t, "best", got[0][0], []int{0}, []float32{L(.6)}, L(.6))
	checkHyp(t, "second", got[0][1], []int{1, 2, 0}, []float32{L(.4), 0, L(.9)}, L(.4)+0+L(.9))
	if want := []string{"", "0", "1", "1,2", "0,0"}; !slices.Equal(m.seen, want) {
		t.Errorf("scored prefixes %q, want %q (the finished beam must be stepped on)", m.seen, want)
	}

	// R2Gen can return a bare EOS (an empty report), and with one
	// hypothesis wanted it is settled after the first step.
	m.seen = nil
	got, err = BeamSearch{Size: 2, MaxLen: 3}.Decode(context.Background(), m.model(1))
	if err != nil {
		t.Fatal(err)
	}
	checkHyp(t, "early", got[0][0], []int{0}, []float32{L(.6)}, L(.6))
	if len(m.seen) != 1 {
		t.Errorf("early stop scored %q, want only the first step", m.seen)
	}

	// The second save of "0,0" is visible through the oracle's full list.
	o := BeamSearch{Size: 2, N: 2, MaxLen: 3}
	ref := refR2GenBeam(func(_ int, p []int) []float32 { return m.lp(p[1:]) }, 1, 3, o, false)
	if err := sameHyps(got[0][:1], ref[0][:1]); err != nil {
		t.Error(err)
	}
}

// M²: a finished beam keeps its score and continues with word 0 (log-prob 0);
// the beams are ranked by final score and cut at EOS.
func TestM2BeamSearchByHand(t *testing.T) {
	const bos, eos = 2, 3
	m := &table{V: 5, def: []float64{.2, .2, .2, .2, .2}, rows: map[string][]float64{
		"":  {.05, .25, .05, .5, .15},
		"1": {.1, .1, .1, .6, .1},
	}}
	for _, full := range []bool{false, true} {
		m.seen = nil
		o := BeamSearch{Semantics: M2, Size: 2, N: 2, MaxLen: 3, BOS: bos, EOS: eos, FullLength: full}
		got, err := o.Decode(context.Background(), m.model(1))
		if err != nil {
			t.Fatal(err)
		}
		// t=0: "3" (.5) and "1" (.25). t=1: "3" finished → "3,0" at ln .5;
		// "1,3" at ln .15. Both finished: ranked by score.
		checkHyp(t, "best", got[0][0], []int{eos}, []float32{L(.5)}, L(.5))
		checkHyp(t, "second", got[0][1], []int{1, eos}, []float32{L(.25), L(.6)}, L(.25)+L(.6))
		want := []string{"", "3", "1"}
		if full {
			want = append(want, "3,0", "1,3")
		}
		if !slices.Equal(m.seen, want) {
			t.Errorf("full=%v: scored %q, want %q", full, m.seen, want)
		}
	}
}

// Greedy with block_trigrams: a bigram model that cycles 1 2 3. The repeated
// trigram (1,2,3) costs 3 ln(1/2)·2 but still wins (t=5); the repeated
// (2,3,1) then loses to 2 (t=6).
func TestGreedyBlockTrigramsByHand(t *testing.T) {
	bigram := map[int][]float64{
		-1: {.01, .9, .05, .04},
		1:  {.05, .05, .8, .1},
		2:  {.05, .05, .1, .8},
		3:  {.1, .6, .2, .1},
	}
	m := &table{V: 4, rows: map[string][]float64{}}
	m.def = bigram[-1]
	// Every prefix of the two runs we look at, keyed by its last token.
	for _, seq := range [][]int{{1, 2, 3, 1, 2, 3, 1, 2, 3}, {1, 2, 3, 1, 2, 3, 2, 3, 1}} {
		for i := 1; i <= len(seq); i++ {
			m.rows[key(seq[:i])] = bigram[seq[i-1]]
		}
	}
	got, err := Greedy{MaxLen: 9}.Decode(context.Background(), m.model(1))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 3, 1, 2, 3, 1, 2, 3}; !slices.Equal(got[0][0].Tokens, want) {
		t.Fatalf("greedy %v, want %v", got[0][0].Tokens, want)
	}
	got, err = Greedy{MaxLen: 9, BlockTrigrams: true}.Decode(context.Background(), m.model(1))
	if err != nil {
		t.Fatal(err)
	}
	h := got[0][0]
	if want := []int{1, 2, 3, 1, 2, 3, 2, 3, 1}; !slices.Equal(h.Tokens, want) {
		t.Fatalf("blocked %v, want %v", h.Tokens, want)
	}
	pen := float32(float32(-0.693) * 2) // one occurrence
	for i, want := range map[int]float32{4: L(.8), 5: L(.8) + pen, 6: L(.2), 8: L(.6) + pen} {
		if h.LogProbs[i] != want {
			t.Errorf("log-prob %d: %v, want %v", i, h.LogProbs[i], want)
		}
	}
}

// Every reported log-probability of a trigram-blocked greedy run is the
// model's plus count·(-0.693)·2, count being the earlier occurrences of the
// same trigram: a check of the penalty that does not follow R2Gen's
// dictionary.
func TestGreedyTrigramPenaltyCounts(t *testing.T) {
	lm := hashLM{V: 4, seed: 3, eos: 0, eosBias: -1, scale: 9}
	m := newIncremental(lm, 2)
	got, err := Greedy{MaxLen: 40, BlockTrigrams: true}.Decode(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	maxCount := 0
	for b, hs := range got {
		seq := hs[0].Tokens
		for i, tok := range seq {
			want := lm.logprobs(b, append([]int{0}, seq[:i]...))[tok]
			count := 0
			for j := 0; i >= 3 && j+2 < i; j++ {
				if seq[j] == seq[i-2] && seq[j+1] == seq[i-1] && seq[j+2] == tok {
					count++
				}
			}
			if count > 0 {
				want += float32(float32(count)*float32(-0.693)) * 2
			}
			maxCount = max(maxCount, count)
			if hs[0].LogProbs[i] != want {
				t.Fatalf("study %d token %d (count %d): log-prob %v, want %v", b, i, count, hs[0].LogProbs[i], want)
			}
		}
	}
	if maxCount < 2 {
		t.Errorf("no trigram repeated twice (max count %d): the test lost its point", maxCount)
	}
}

// decoding_constraint forbids a word to follow itself.
func TestDecodingConstraint(t *testing.T) {
	m := &table{V: 3, def: []float64{.1, .6, .3}, rows: map[string][]float64{"1,2": {.9, .05, .05}}}
	got, err := Greedy{MaxLen: 5}.Decode(context.Background(), m.model(1))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 1, 1, 1, 1}; !slices.Equal(got[0][0].Tokens, want) {
		t.Errorf("unconstrained %v, want %v", got[0][0].Tokens, want)
	}
	got, err = Greedy{MaxLen: 5, DecodingConstraint: true}.Decode(context.Background(), m.model(1))
	if err != nil {
		t.Fatal(err)
	}
	// Greedy scores are float64 sums.
	checkHyp(t, "constrained", got[0][0], []int{1, 2, 0}, []float32{L(.6), L(.3), L(.9)}, float64(L(.6))+float64(L(.3))+float64(L(.9)))

	bs, err := BeamSearch{Size: 1, MaxLen: 5, DecodingConstraint: true}.Decode(context.Background(), m.model(1))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 0}; !slices.Equal(bs[0][0].Tokens, want) {
		t.Errorf("constrained beam %v, want %v", bs[0][0].Tokens, want)
	}
}

// Rows of a batch finish at different steps; each study gets its own tokens.
func TestGreedyBatch(t *testing.T) {
	lm := hashLM{V: 12, seed: 99, eos: 0, eosBias: 0.6, scale: 4}
	B := 9
	got, err := Greedy{MaxLen: 30}.Decode(context.Background(), newIncremental(lm, B))
	if err != nil {
		t.Fatal(err)
	}
	lengths := map[int]bool{}
	for b := range B {
		want := refSample(lm.logprobs, b, Greedy{MaxLen: 30}, argmax)
		if err := sameHyps(got[b], []refHyp{want}); err != nil {
			t.Errorf("study %d: %v", b, err)
		}
		lengths[len(got[b][0].Tokens)] = true
	}
	if len(lengths) < 3 {
		t.Errorf("only %d distinct lengths in the batch: the test lost its point", len(lengths))
	}
}
