package memtrans

import (
	"context"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/m2"
	"github.com/radgen/radgen/memtrans/metrans"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// halfTestModel is a small R2Gen model (all of a step's matrix kinds, sizes
// that are not multiples of the kernels' blocks) with random weights.
func halfTestModel(t testing.TB, variant r2gen.Variant) *r2gen.Model {
	c := r2gen.IUXray(53)
	c.Variant = variant
	c.DModel, c.DFF, c.Heads, c.MemoryHeads = 40, 72, 4, 4
	c.DVisual, c.MaxSeqLen = 24, 12
	m, err := r2gen.New(c, 7)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// stepAll feeds tokens[s] at step s to dec, reordering by src[s] after it,
// and returns every step's log-probabilities.
func stepAll(t testing.TB, dec decode.Model, tokens [][]int, src [][]int) [][]float32 {
	t.Helper()
	var out [][]float32
	V := dec.VocabSize()
	for s, tok := range tokens {
		lp := make([]float32, len(tok)*V)
		if err := dec.Step(context.Background(), tok, lp); err != nil {
			t.Fatal(err)
		}
		out = append(out, lp)
		if src[s] != nil {
			if err := dec.Reorder(src[s]); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// halfDecoding starts m's module decoding of feats reading the
// half-precision copies stored (nil: float32).
func halfDecoding(t testing.TB, m *r2gen.Model, feats *radgen.Tensor, stored map[*radgen.Tensor]*radgen.Tensor) *r2gen.Decoding {
	t.Helper()
	dec, err := m.NewDecoding(feats, radgen.SubstituteWeights(stored))
	if err != nil {
		t.Fatal(err)
	}
	return dec
}

// TestHalfWeightsDecoding decodes with a half-precision snapshot and with
// float32 weights, through beams and reorders, for every variant: the
// log-probabilities agree to the rounding of the weights.
func TestHalfWeightsDecoding(t *testing.T) {
	for _, v := range []r2gen.Variant{r2gen.VariantR2Gen, r2gen.VariantBaseRM, r2gen.VariantBase} {
		t.Run(string(v), func(t *testing.T) {
			m := halfTestModel(t, v)
			feats := randomFeats(2, 5, m.Config().(r2gen.Config).DVisual, 11)
			stored := halfSnapshot(m.StepWeights())
			if len(stored) == 0 {
				t.Fatal("empty snapshot")
			}
			tokens := [][]int{{0, 0}, {3, 4, 5, 6, 7, 8}, {9, 10, 11, 12, 13, 14}, {1, 2, 3, 4, 5, 6}, {7, 7, 7, 7, 7, 7}}
			src := [][]int{{0, 0, 0, 1, 1, 1}, {2, 0, 1, 3, 3, 5}, nil, {1, 1, 0, 5, 4, 3}, nil}
			want := stepAll(t, halfDecoding(t, m, feats, nil), tokens, src)
			got := stepAll(t, halfDecoding(t, m, feats, stored), tokens, src)
			var worst float64
			for s := range want {
				for i := range want[s] {
					worst = math.Max(worst, math.Abs(float64(got[s][i]-want[s][i])))
				}
			}
			t.Logf("half vs float32 weights: max |Δ log p| = %.3g", worst)
			if worst > 2e-2 || worst == 0 {
				t.Errorf("max |Δ log p| = %.3g, want (0, 2e-2]", worst)
			}
		})
	}
}

// The snapshot leaves out the recurrences and what a decoding applies
// once per study, and covers every architecture.
func TestHalfWeightsStepMatrices(t *testing.T) {
	m := halfTestModel(t, r2gen.VariantR2Gen)
	stored := halfSnapshot(m.StepWeights())
	for name, w := range map[string]*radgen.Tensor{
		"relational memory": m.Memory.W.Weight, "source keys": m.Decoder.Layers[0].SrcAttn.Linears[1].Weight,
		"encoder": m.Encoder.Layers[0].FeedForward.W1.Weight,
	} {
		if stored[w] != nil {
			t.Errorf("%s in the snapshot", name)
		}
	}
	for name, w := range map[string]*radgen.Tensor{
		"logit": m.Logit.Weight, "MCLN": m.Decoder.Layers[2].Norms[1].Conditional.MLPBeta.L2.Weight,
		"self-attention": m.Decoder.Layers[1].SelfAttn.Linears[2].Weight,
	} {
		if h := stored[w]; h == nil || !h.IsHalf() {
			t.Errorf("%s not in the snapshot", name)
		}
	}
	for _, c := range []ModelConfig{M2Tiny(30), METransTiny(30)} {
		net, err := c.EncoderDecoder.New(1)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(halfSnapshot(net.(arch.StepWeighted).StepWeights())); n < 5 {
			t.Errorf("%s: %d matrices in the snapshot", c.Architecture(), n)
		}
	}
}

// A model's snapshot is taken once and again only after its weights
// change; a decoding keeps the snapshot it started with.
func TestHalfWeightsSnapshot(t *testing.T) {
	m := halfTestModel(t, r2gen.VariantR2Gen)
	feats := randomFeats(1, 5, m.Config().(r2gen.Config).DVisual, 12)
	var h halfState
	first := h.current(m)
	if again := h.current(m); reflect.ValueOf(again).Pointer() != reflect.ValueOf(first).Pointer() {
		t.Fatal("snapshot taken again without a change")
	}
	before := stepAll(t, halfDecoding(t, m, feats, first), [][]int{{0}, {5}}, [][]int{nil, nil})
	w := m.Decoder.Layers[1].FeedForward.W2.Weight.Data()
	w[3] += 0.5
	h.markStale()
	second := h.current(m)
	if reflect.ValueOf(second).Pointer() == reflect.ValueOf(first).Pointer() {
		t.Fatal("no new snapshot after a change")
	}
	if lp := stepAll(t, halfDecoding(t, m, feats, first), [][]int{{0}, {5}}, [][]int{nil, nil}); !equalSteps(lp, before) {
		t.Fatal("the old snapshot changed with the weights")
	}
	if lp := stepAll(t, halfDecoding(t, m, feats, second), [][]int{{0}, {5}}, [][]int{nil, nil}); equalSteps(lp, before) {
		t.Fatal("the new snapshot did not take the new weights")
	}
}

func equalSteps(a, b [][]float32) bool {
	for s := range a {
		for i := range a[s] {
			if a[s][i] != b[s][i] {
				return false
			}
		}
	}
	return true
}

// TestHalfWeightsPaperAccuracy measures the effect of half-precision
// weights on the paper's IU X-Ray model (random weights): the largest
// difference in log-probabilities from float32 weights along the float32
// beam, and whether beam search (3 beams, 60 tokens, eos forbidden) picks
// the same tokens for a few studies.
func TestHalfWeightsPaperAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes the paper-sized model")
	}
	m := paperModel(t)
	hw := halfSnapshot(m.StepWeights())
	const studies, maxLen = 3, 60
	feats := randomFeats(studies, 98, 2048, 21)
	beam := decode.BeamSearch{Size: 3, MaxLen: maxLen, FullLength: true}
	decodeWith := func(w map[*radgen.Tensor]*radgen.Tensor) [][]decode.Hypothesis {
		hyps, err := beam.Decode(context.Background(), noEOS{halfDecoding(t, m, feats, w)})
		if err != nil {
			t.Fatal(err)
		}
		return hyps
	}
	want, got := decodeWith(nil), decodeWith(hw)
	same := 0
	for b := range want {
		if slices.Equal(want[b][0].Tokens, got[b][0].Tokens) {
			same++
		}
	}
	// Teacher-force the float32 beams through both weight sets.
	var worst float64
	stepWorst := make([]float64, maxLen)
	for b := range want {
		toks := want[b][0].Tokens
		one := radgen.FromFloat32(feats.Data()[b*98*2048:(b+1)*98*2048], 1, 98, 2048)
		var lps [2][][]float32
		for i, w := range []map[*radgen.Tensor]*radgen.Tensor{nil, hw} {
			steps := [][]int{{0}}
			for _, tok := range toks[:len(toks)-1] {
				steps = append(steps, []int{tok})
			}
			lps[i] = stepAll(t, halfDecoding(t, m, one, w), steps, make([][]int, len(steps)))
		}
		for s := range lps[0] {
			for v := range lps[0][s] {
				d := math.Abs(float64(lps[1][s][v] - lps[0][s][v]))
				worst = max(worst, d)
				stepWorst[s] = max(stepWorst[s], d)
			}
		}
	}
	t.Logf("paper model, random weights: max |Δ log p| = %.3g over %d studies × %d steps (all %d tokens); beam-3 best tokens identical for %d of %d studies",
		worst, studies, maxLen, m.Config().(r2gen.Config).Vocab, same, studies)
	t.Logf("per step: %.2g", stepWorst)
	if worst > 5e-3 {
		t.Errorf("max |Δ log p| = %.3g", worst)
	}
}

// BenchmarkHalfWeights times taking the snapshot of the paper's model.
func BenchmarkHalfWeights(b *testing.B) {
	m := paperModel(b)
	b.ResetTimer()
	for range b.N {
		halfSnapshot(m.StepWeights())
	}
}

// Half-precision weights reach M²'s and METransformer's decodings too:
// their log-probabilities move by the rounding of the weights, no more.
func TestHalfWeightsOtherArchitectures(t *testing.T) {
	for _, c := range []ModelConfig{M2Tiny(40), METransTiny(40)} {
		t.Run(string(c.Architecture()), func(t *testing.T) {
			net, err := c.EncoderDecoder.New(3)
			if err != nil {
				t.Fatal(err)
			}
			stored := halfSnapshot(net.(arch.StepWeighted).StepWeights())
			start := func(opts ...radgen.GraphOption) decode.Model {
				var dec decode.Model
				switch n := net.(type) {
				case m2.ReportModel:
					dec, err = n.StartDecoding(randomFeats(2, c.PatchesPerStudy(), c.visualWidth(), 8), opts...)
				case *metrans.Model:
					dec, err = n.StartDecoding(randomFeats(2, c.PatchesPerStudy(), c.visualWidth(), 8), opts...)
				}
				if err != nil {
					t.Fatal(err)
				}
				return dec
			}
			f32 := start()
			rows := f32.Rows()
			tokens := make([][]int, 4)
			for s := range tokens {
				for r := range rows {
					tokens[s] = append(tokens[s], 3+(s*rows+r)%30)
				}
			}
			src := make([][]int, len(tokens))
			want := stepAll(t, f32, tokens, src)
			got := stepAll(t, start(radgen.SubstituteWeights(stored)), tokens, src)
			var worst float64
			for s := range want {
				for i, v := range want[s] {
					if !math.IsInf(float64(v), -1) {
						worst = max(worst, math.Abs(float64(got[s][i]-v)))
					}
				}
			}
			t.Logf("%d matrices in half precision; max |Δ log p| = %.3g", len(stored), worst)
			if worst == 0 || worst > 2e-2 {
				t.Errorf("max |Δ log p| = %.3g, want (0, 2e-2]", worst)
			}
		})
	}
}
