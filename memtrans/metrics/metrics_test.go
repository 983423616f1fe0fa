package metrics

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestBLEUHandComputed(t *testing.T) {
	// hyp "a b c d" vs ref "a b c e": 3/4 unigrams, 2/3 bigrams, 1/2
	// trigrams, 0/1 4-grams. Equal lengths still give the scorer's tiny
	// brevity factor: ratio = (4 + 1e-15)/(4 + 1e-9) < 1.
	got, err := BLEU([][]string{{"a b c e"}}, []string{"a b c d"})
	if err != nil {
		t.Fatal(err)
	}
	p := []float64{
		(3 + bleuTiny) / (4 + bleuSmall), (2 + bleuTiny) / (3 + bleuSmall),
		(1 + bleuTiny) / (2 + bleuSmall), (0 + bleuTiny) / (1 + bleuSmall),
	}
	bp := math.Exp(1 - 1/((4+bleuTiny)/(4+bleuSmall)))
	prod := 1.0
	for k := 0; k < 4; k++ {
		prod *= p[k]
		want := bp * math.Pow(prod, 1/float64(k+1))
		if math.Abs(got.Corpus[k]-want) > 1e-15 {
			t.Errorf("BLEU-%d = %g, want %g", k+1, got.Corpus[k], want)
		}
	}
	// Brevity: hyp of 2 words, closest reference 4 words (of 4 and 6).
	got, _ = BLEU([][]string{{"a b c d", "a b c d e f"}}, []string{"a b"})
	bp = math.Exp(1 - 1/((2+bleuTiny)/(4+bleuSmall)))
	if want := bp * (2 + bleuTiny) / (2 + bleuSmall); math.Abs(got.Corpus[0]-want) > 1e-15 {
		t.Errorf("BLEU-1 with brevity = %g, want %g", got.Corpus[0], want)
	}
}

func TestClosestReferenceTieGoesShorter(t *testing.T) {
	st := cookBLEU([]string{"a b c d e", "a b c"}, "x y z w")
	if st.refLen != 3 {
		t.Errorf("closest reference length %d, want 3 (tie between 3 and 5)", st.refLen)
	}
}

func TestROUGELSpaces(t *testing.T) {
	// Python's split(" "): "a  b" is ["a", "", "b"]; the empty tokens count.
	got, err := ROUGEL([][]string{{"a  b"}}, []string{"a b"})
	if err != nil {
		t.Fatal(err)
	}
	p, r := 2.0/2, 2.0/3
	want := (1 + 1.44) * p * r / (r + 1.44*p)
	if math.Abs(got.Corpus-want) > 1e-15 {
		t.Errorf("ROUGE-L = %.17g, want %.17g", got.Corpus, want)
	}
	// An empty hypothesis is one empty token: no common subsequence.
	got, _ = ROUGEL([][]string{{"a"}}, []string{""})
	if got.Corpus != 0 {
		t.Errorf("empty hypothesis: %g", got.Corpus)
	}
}

func TestCIDErDIdentical(t *testing.T) {
	// Two samples with identical hypothesis and reference: every n-gram
	// cosine is 1 (n-grams found in both samples have idf 0 and drop out,
	// but each order keeps one n-gram unique to its sample), no length
	// penalty, so each score is 10.
	got, err := CIDErD([][]string{{"a b c d e"}, {"a b c d f"}}, []string{"a b c d e", "a b c d f"})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range got.PerSentence {
		if math.Abs(s-10) > 1e-12 {
			t.Errorf("sample %d: CIDEr-D %g, want 10", i, s)
		}
	}
}

func TestNPMean(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{1, 7, 8, 9, 127, 128, 129, 1000, 4099} {
		x := make([]float64, n)
		naive := 0.0
		for i := range x {
			x[i] = rng.Float64()
			naive += x[i]
		}
		if got := npMean(x); math.Abs(got-naive/float64(n)) > 1e-12 {
			t.Errorf("n=%d: %g vs %g", n, got, naive/float64(n))
		}
	}
}

func TestPyFields(t *testing.T) {
	got := pyFields(" a\x1cb\u00a0c\t d ")
	want := []string{"a", "b", "c", "d"}
	if len(got) != len(want) {
		t.Fatalf("%q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%q", got)
		}
	}
}

func TestInputErrors(t *testing.T) {
	if _, err := BLEU(nil, nil); !errors.Is(err, ErrEmpty) {
		t.Error(err)
	}
	if _, err := ROUGEL([][]string{{"a"}}, []string{"a", "b"}); !errors.Is(err, ErrLengthMismatch) {
		t.Error(err)
	}
	if _, err := CIDErD([][]string{{}}, []string{"a"}); !errors.Is(err, ErrNoReference) {
		t.Error(err)
	}
	ev, _ := NewEvaluator()
	if _, err := ev.Evaluate(t.Context(), nil, nil); !errors.Is(err, ErrEmpty) {
		t.Error(err)
	}
}

func TestEvaluatorCancel(t *testing.T) {
	refs, hyps := benchReports(200)
	ev, _ := NewEvaluator()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := ev.Evaluate(ctx, refs, hyps); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

// TestAccumulatorStreamingEqualsBatch: adding samples one by one gives the
// same scores as Evaluate.
func TestAccumulatorStreamingEqualsBatch(t *testing.T) {
	refs, hyps := benchReports(100)
	ev, _ := NewEvaluator(WithPerSample(true))
	batch, err := ev.Evaluate(t.Context(), refs, hyps)
	if err != nil {
		t.Fatal(err)
	}
	acc := ev.NewAccumulator()
	for i := range hyps {
		if err := acc.Add(refs[i], hyps[i]); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := acc.Result(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for name, pair := range map[string][2]float64{
		"BLEU-4": {batch.BLEU[3], stream.BLEU[3]}, "METEOR": {batch.METEOR, stream.METEOR},
		"ROUGE-L": {batch.ROUGEL, stream.ROUGEL}, "CIDEr-D": {batch.CIDErD, stream.CIDErD},
		"CE micro F1": {batch.CE.Micro.F1, stream.CE.Micro.F1},
	} {
		if math.Abs(pair[0]-pair[1]) > 1e-12 {
			t.Errorf("%s: batch %g, streaming %g", name, pair[0], pair[1])
		}
	}
	if batch.METEORName != "METEOR (exact+stem+synonym; no paraphrase)" {
		t.Errorf("METEOR name %q", batch.METEORName)
	}
	if len(batch.PerSample.HypLabels) != 100 || len(batch.PerSample.METEOR) != 100 {
		t.Error("per-sample values missing")
	}
}
