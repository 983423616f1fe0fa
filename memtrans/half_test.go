package memtrans

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
)

// halfTestModel is a small R2Gen model (all of a step's matrix kinds, sizes
// that are not multiples of the kernels' blocks) with random weights.
func halfTestModel(t testing.TB, variant Variant) *r2genModel {
	c := iuXRayTransformer(53)
	c.Variant = variant
	c.DModel, c.DFF, c.Heads, c.MemoryHeads = 40, 72, 4, 4
	c.DVisual, c.MaxSeqLen = 24, 12
	m, err := newR2GenModel(c, 7)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// stepAll feeds tokens[s] at step s to dec, reordering by src[s] after it,
// and returns every step's log-probabilities.
func stepAll(t testing.TB, dec *cpuDecoding, tokens [][]int, src [][]int) [][]float32 {
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

// TestHalfWeightsDecoding decodes with a half-precision snapshot and with
// float32 weights, through beams and reorders, for every variant: the
// log-probabilities agree to the rounding of the weights.
func TestHalfWeightsDecoding(t *testing.T) {
	for _, v := range []Variant{VariantR2Gen, VariantBaseRM, VariantBase} {
		t.Run(string(v), func(t *testing.T) {
			m := halfTestModel(t, v)
			feats := randomFeats(2, 5, m.Config.DVisual, 11)
			hw := m.halfSnapshot()
			if hw.stale() {
				t.Fatal("a fresh snapshot reports stale")
			}
			tokens := [][]int{{0, 0}, {3, 4, 5, 6, 7, 8}, {9, 10, 11, 12, 13, 14}, {1, 2, 3, 4, 5, 6}, {7, 7, 7, 7, 7, 7}}
			src := [][]int{{0, 0, 0, 1, 1, 1}, {2, 0, 1, 3, 3, 5}, nil, {1, 1, 0, 5, 4, 3}, nil}
			f32dec, err := m.startCPUDecoding(feats)
			if err != nil {
				t.Fatal(err)
			}
			f16dec, err := m.startDecodingWith(feats, hw)
			if err != nil {
				t.Fatal(err)
			}
			want, got := stepAll(t, f32dec, tokens, src), stepAll(t, f16dec, tokens, src)
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

func TestHalfWeightsSnapshot(t *testing.T) {
	m := halfTestModel(t, VariantR2Gen)
	feats := randomFeats(1, 5, m.Config.DVisual, 12)
	hw := m.halfSnapshot()
	if n := hw.size(); n < 2*m.Logit.Weight.Len() {
		t.Fatalf("%d bytes", n)
	}
	before, err := m.startDecodingWith(feats, hw)
	if err != nil {
		t.Fatal(err)
	}
	lpBefore := stepAll(t, before, [][]int{{0}, {5}}, [][]int{nil, nil})
	// Change a weight as a training step would: the snapshot does not
	// follow until refreshed.
	w := m.Decoder.Layers[1].FeedForward.W2.Weight.Data()
	w[3] += 0.5
	if !hw.stale() {
		t.Fatal("changed weights not reported")
	}
	same, _ := m.startDecodingWith(feats, hw)
	if lp := stepAll(t, same, [][]int{{0}, {5}}, [][]int{nil, nil}); !equalSteps(lp, lpBefore) {
		t.Fatal("the snapshot changed with the weights")
	}
	hw.refresh()
	if hw.stale() {
		t.Fatal("stale after Refresh")
	}
	after, _ := m.startDecodingWith(feats, hw)
	if lp := stepAll(t, after, [][]int{{0}, {5}}, [][]int{nil, nil}); equalSteps(lp, lpBefore) {
		t.Fatal("Refresh did not take the new weights")
	}
	// Biases are part of the snapshot too.
	m.Logit.Bias.Data()[0] += 1
	if !hw.stale() {
		t.Fatal("changed bias not reported")
	}
	w[3] -= 0.5
	m.Logit.Bias.Data()[0] -= 1
	if hw.refresh(); hw.stale() {
		t.Fatal("stale after Refresh")
	}

	other := halfTestModel(t, VariantR2Gen)
	if _, err := other.startDecodingWith(feats, hw); err == nil {
		t.Fatal("another model's snapshot accepted")
	}
	if dec, err := m.startDecodingWith(feats, nil); err != nil || dec.w.logit.w.Half() {
		t.Fatalf("nil snapshot: %v", err)
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

// After warm-up a step and a reorder allocate nothing, with float32 and
// with half-precision weights.
func TestDecodingStepAllocs(t *testing.T) {
	if m2Race {
		t.Skip("the race detector's instrumentation allocates")
	}
	m := halfTestModel(t, VariantR2Gen)
	feats := randomFeats(2, 5, m.Config.DVisual, 13)
	for _, hw := range []*halfWeights{nil, m.halfSnapshot()} {
		dec, err := m.startDecodingWith(feats, hw)
		if err != nil {
			t.Fatal(err)
		}
		V := m.Config.Vocab
		lp := make([]float32, 6*V)
		ctx := context.Background()
		if err := dec.Step(ctx, []int{0, 0}, lp); err != nil {
			t.Fatal(err)
		}
		if err := dec.Reorder([]int{0, 0, 0, 1, 1, 1}); err != nil {
			t.Fatal(err)
		}
		tok := []int{5, 6, 7, 8, 9, 10}
		allocs := testing.AllocsPerRun(5, func() {
			if err := dec.Step(ctx, tok, lp); err != nil {
				t.Fatal(err)
			}
			if err := dec.Reorder([]int{2, 0, 1, 5, 3, 4}); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("half=%v: %v allocations per step", hw != nil, allocs)
		}
	}
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
	hw := m.halfSnapshot()
	const studies, maxLen = 3, 60
	feats := randomFeats(studies, 98, 2048, 21)
	beam := decode.BeamSearch{Size: 3, MaxLen: maxLen, FullLength: true}
	decodeWith := func(w *halfWeights) [][]decode.Hypothesis {
		dec, err := m.startDecodingWith(feats, w)
		if err != nil {
			t.Fatal(err)
		}
		hyps, err := beam.Decode(context.Background(), noEOS{dec})
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
		for i, w := range []*halfWeights{nil, hw} {
			dec, err := m.startDecodingWith(one, w)
			if err != nil {
				t.Fatal(err)
			}
			steps := [][]int{{0}}
			for _, tok := range toks[:len(toks)-1] {
				steps = append(steps, []int{tok})
			}
			lps[i] = stepAll(t, dec, steps, make([][]int, len(steps)))
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
		worst, studies, maxLen, m.Config.Vocab, same, studies)
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
		m.halfSnapshot()
	}
}

// The step's exponential, sigmoid and tanh agree with the math package's to
// float32 precision.
func TestFastMath(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	xs := []float64{0, -0, 1, -1, 1e-10, -1e-10, 88.7, -103.9, -109, 89.9, -96.21884, 96.2, math.Ln2 / 64, -math.Ln2 / 64}
	for range 200000 {
		xs = append(xs, (rng.Float64()*2-1)*100, rng.NormFloat64(), rng.NormFloat64()*1e-3)
	}
	for _, x := range xs {
		want := math.Exp(x)
		if got := fastExp(x); math.Abs(got-want) > 1e-14*want {
			t.Fatalf("fastExp(%v) = %v, want %v", x, got, want)
		}
		f := float32(x)
		ulp := func(v float32) float64 {
			return float64(math.Nextafter32(float32(math.Abs(float64(v))), 2) - float32(math.Abs(float64(v))))
		}
		if got, want := sigmoidFast(f), sigmoid(f); math.Abs(float64(got-want)) > ulp(want) {
			t.Fatalf("sigmoidFast(%v) = %v, want %v", f, got, want)
		}
		if got, want := tanhFast(f), float32(math.Tanh(float64(f))); math.Abs(float64(got-want)) > ulp(want) {
			t.Fatalf("tanhFast(%v) = %v, want %v", f, got, want)
		}
	}
	for _, x := range []float64{-708, 709, -700.5, 708.9} {
		if got, want := fastExp(x), math.Exp(x); math.Abs(got-want) > 1e-14*want {
			t.Fatalf("fastExp(%v) = %v, want %v", x, got, want)
		}
	}
	if fastExp(-800) != 0 || !math.IsInf(fastExp(800), 1) || !math.IsNaN(fastExp(math.NaN())) {
		t.Fatal("fastExp out of range")
	}
	if tanhFast(float32(math.NaN())) == tanhFast(float32(math.NaN())) || sigmoidFast(float32(math.Inf(-1))) != 0 || sigmoidFast(float32(math.Inf(1))) != 1 {
		t.Fatal("special values")
	}
	row := []float32{1, 2, float32(math.Inf(-1)), -3, 0.5}
	want := append([]float32(nil), row...)
	softmaxInPlace(want)
	softmaxFast(row)
	for i := range row {
		if math.Abs(float64(row[i]-want[i])) > 1e-7 {
			t.Fatalf("softmaxFast: %v, want %v", row, want)
		}
	}
}
