package metrics

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
)

// goldenFile is the format of ../shared/golden/metrics/cases.json: sets of
// references and hypotheses with the coco-caption scores R2Gen's scorers gave.
type goldenFile struct {
	Scorer string      `json:"scorer"`
	Sets   []goldenSet `json:"sets"`
}

type goldenSet struct {
	Name   string                     `json:"name"`
	Refs   [][]string                 `json:"refs"`
	Hyps   []string                   `json:"hyps"`
	Scores map[string]json.RawMessage `json:"scores"`
}

const goldenTol = 1e-6

// TestGoldenCocoCaption checks every number of every set in the golden file
// ($RADGEN_GOLDEN_METRICS, default ../shared/golden/metrics/cases.json)
// against BLEU, ROUGEL and CIDErD, and against the Evaluator, within 1e-6.
// Score keys it does not know are reported, not failed, so a file that adds
// other metrics still checks the ones implemented here.
func TestGoldenCocoCaption(t *testing.T) {
	path := testutil.File(t, "RADGEN_GOLDEN_METRICS", "golden/metrics/cases.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var gf goldenFile
	if err := json.Unmarshal(raw, &gf); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(gf.Sets) == 0 {
		t.Fatalf("%s: no sets", path)
	}
	for _, set := range gf.Sets {
		t.Run(set.Name, func(t *testing.T) {
			checkGoldenSet(t, set)
		})
	}
}

func checkGoldenSet(t *testing.T, set goldenSet) {
	bleu, err := BLEU(set.Refs, set.Hyps)
	if err != nil {
		t.Fatal(err)
	}
	rouge, err := ROUGEL(set.Refs, set.Hyps)
	if err != nil {
		t.Fatal(err)
	}
	cider, err := CIDErD(set.Refs, set.Hyps)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := NewEvaluator(WithoutMETEOR(), WithoutClinicalEfficacy(), WithPerSample(true))
	if err != nil {
		t.Fatal(err)
	}
	all, err := ev.Evaluate(t.Context(), set.Refs, set.Hyps)
	if err != nil {
		t.Fatal(err)
	}

	got := map[string]any{
		"BLEU_1": bleu.Corpus[0], "BLEU_2": bleu.Corpus[1], "BLEU_3": bleu.Corpus[2], "BLEU_4": bleu.Corpus[3],
		"BLEU_per_sentence":    bleu.PerSentence,
		"ROUGE_L":              rouge.Corpus,
		"ROUGE_L_per_sentence": rouge.PerSentence,
		"CIDEr":                cider.Corpus,
		"CIDEr_per_sentence":   cider.PerSentence,
	}
	fromEvaluator := map[string]any{
		"BLEU_1": all.BLEU[0], "BLEU_2": all.BLEU[1], "BLEU_3": all.BLEU[2], "BLEU_4": all.BLEU[3],
		"BLEU_per_sentence":    all.PerSample.BLEU,
		"ROUGE_L":              all.ROUGEL,
		"ROUGE_L_per_sentence": all.PerSample.ROUGEL,
		"CIDEr":                all.CIDErD,
		"CIDEr_per_sentence":   all.PerSample.CIDErD,
	}
	checked := 0
	for key, rawWant := range set.Scores {
		g, ok := got[key]
		if !ok {
			t.Logf("score %q in the golden file is not checked here", key)
			continue
		}
		want := flatten(t, key, rawWant)
		for src, v := range map[string]any{"function": g, "Evaluator": fromEvaluator[key]} {
			have := flattenGo(v)
			if len(have) != len(want) {
				t.Errorf("%s (%s): %d numbers, golden has %d", key, src, len(have), len(want))
				continue
			}
			maxDiff, at := 0.0, 0
			for i := range want {
				if d := math.Abs(have[i] - want[i]); d > maxDiff || math.IsNaN(d) {
					maxDiff, at = d, i
				}
			}
			if maxDiff > goldenTol || math.IsNaN(maxDiff) {
				t.Errorf("%s (%s): max |diff| %.3g at element %d (got %.17g, want %.17g)", key, src, maxDiff, at, have[at], want[at])
			} else {
				t.Logf("%s (%s): max |diff| %.3g over %d numbers", key, src, maxDiff, len(want))
			}
		}
		checked++
	}
	if checked == 0 {
		t.Errorf("set %q: no known score keys (have %v)", set.Name, keys(set.Scores))
	}
}

// flatten reads a golden value: a number, a list of numbers or a list of
// lists of numbers, in row-major order.
func flatten(t *testing.T, key string, raw json.RawMessage) []float64 {
	t.Helper()
	var x any
	if err := json.Unmarshal(raw, &x); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	var out []float64
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case float64:
			out = append(out, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		default:
			t.Fatalf("%s: unexpected value %T", key, v)
		}
	}
	walk(x)
	return out
}

func flattenGo(v any) []float64 {
	switch v := v.(type) {
	case float64:
		return []float64{v}
	case []float64:
		return v
	case [][4]float64:
		out := make([]float64, 0, 4*len(v))
		for _, r := range v {
			out = append(out, r[:]...)
		}
		return out
	}
	return nil
}

func keys(m map[string]json.RawMessage) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return strings.Join(ks, ", ")
}
