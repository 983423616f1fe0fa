package r2gen_test

import (
	"context"
	"math"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// TestIncrementalMatchesTeacherForcing feeds the golden targets one token
// at a time and compares each step's log-probabilities with the
// full-prefix (teacher-forced) computation, up to each report's end.
func TestIncrementalMatchesTeacherForcing(t *testing.T) {
	g := loadGolden(t)
	m := g.Build(t)
	feats, in, _, _, b, steps := g.CaseBatch(t)
	f, err := m.TeacherForce(radgen.NoGrad(), feats, in, b, steps)
	if err != nil {
		t.Fatal(err)
	}
	want := f.LogProbs.Data()
	dec, err := m.StartDecoding(feats)
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config().(r2gen.Config).Vocab
	lp := make([]float32, b*V)
	tok := make([]int, b)
	var worst float64
	for s := 0; s < steps; s++ {
		for i := range tok {
			tok[i] = in[i*steps+s]
		}
		if err := dec.Step(context.Background(), tok, lp); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < b; i++ {
			// After the report's eos the reference masks padding keys and
			// the incremental path (like R2Gen's sampler) does not.
			if s > 0 && in[i*steps+s] == 0 {
				continue
			}
			for v := 0; v < V; v++ {
				worst = math.Max(worst, math.Abs(float64(lp[i*V+v]-want[(i*steps+s)*V+v])))
			}
		}
	}
	t.Logf("incremental vs teacher forcing: max |Δ log p| = %.3g over %d steps", worst, steps)
	if worst > 1e-4 {
		t.Errorf("max |Δ| = %.3g > 1e-4", worst)
	}
}

func TestParityR2GenDecoding(t *testing.T) {
	g := loadGolden(t)
	m := g.Build(t)
	checkGoldenDecoding(t, g, m.Config().(r2gen.Config).MaxSeqLen, "", func(feats *radgen.Tensor) (decode.Model, error) {
		return m.StartDecoding(feats)
	})
}

// checkGoldenDecoding decodes the golden case's studies with every
// strategy of the golden (greedy, greedy with trigram blocking, beam 3,
// beam 2) through the decoding start returns, and requires the published
// tokens and their log-probabilities within 1e-4. label prefixes the
// subtests' names.
func checkGoldenDecoding(t *testing.T, g *golden, maxLen int, label string, start func(feats *radgen.Tensor) (decode.Model, error)) {
	feats := g.Tensor(t, "att_feats")
	strategies := []struct {
		name string
		s    decode.Strategy
	}{
		{"greedy", decode.Greedy{MaxLen: maxLen}},
		{"greedy_block3", decode.Greedy{MaxLen: maxLen, BlockTrigrams: true}},
		{"beam3", decode.BeamSearch{Size: 3, MaxLen: maxLen}},
		{"beam2", decode.BeamSearch{Size: 2, MaxLen: maxLen}},
	}
	for _, st := range strategies {
		t.Run(label+st.name, func(t *testing.T) {
			seq, shape := g.Ints(t, st.name+"_seq")
			wantLP := g.Tensor(t, st.name+"_token_logprob").Data()
			dec, err := start(feats)
			if err != nil {
				t.Fatal(err)
			}
			hyps, err := st.s.Decode(context.Background(), dec)
			if err != nil {
				t.Fatal(err)
			}
			L := shape[1]
			var worst float64
			for i := 0; i < shape[0]; i++ {
				h := hyps[i][0]
				got := make([]int, L)
				copy(got, h.Tokens)
				for j := 0; j < L; j++ {
					if got[j] != seq[i*L+j] {
						t.Fatalf("study %d: tokens differ at %d:\n got %v\nwant %v", i, j, got, seq[i*L:(i+1)*L])
					}
					var lp float32
					if j < len(h.LogProbs) {
						lp = h.LogProbs[j]
					}
					worst = math.Max(worst, math.Abs(float64(lp-wantLP[i*L+j])))
				}
			}
			t.Logf("%s%s: %d studies, identical tokens; max |Δ log p| = %.3g", label, st.name, shape[0], worst)
			if worst > 1e-4 {
				t.Errorf("token log-probabilities: max |Δ| = %.3g > 1e-4", worst)
			}
		})
	}
}

// TestRecomputeMatchesIncremental decodes the golden case both ways.
func TestRecomputeMatchesIncremental(t *testing.T) {
	g := loadGolden(t)
	m := g.Build(t)
	feats := g.Tensor(t, "att_feats")
	st := decode.BeamSearch{Size: 3, MaxLen: 20}
	inc, err := m.StartDecoding(feats)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := m.StartRecompute(feats)
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.Decode(context.Background(), inc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.Decode(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		ha, hb := a[i][0], b[i][0]
		if len(ha.Tokens) != len(hb.Tokens) {
			t.Fatalf("study %d: %v vs %v", i, ha.Tokens, hb.Tokens)
		}
		for j := range ha.Tokens {
			if ha.Tokens[j] != hb.Tokens[j] || math.Abs(float64(ha.LogProbs[j]-hb.LogProbs[j])) > 1e-4 {
				t.Fatalf("study %d differs at %d: %v vs %v", i, j, ha, hb)
			}
		}
	}
}
