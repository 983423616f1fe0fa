package memtrans

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/cpu"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/m2"
)

// TestBatchIndependence: a study's report and token log-probabilities do
// not depend on the studies decoded with it, on its position in the batch,
// or on the number of threads. For R2Gen, M² (zero-row padding, some
// studies padded) and METransformer, every one of 16 studies is generated
// alone and at every position of a batch of 16 (the batch rotated through
// all positions), under GOMAXPROCS 1 and 2: tokens must be equal and
// log-probabilities within 1e-5 of the study alone under GOMAXPROCS 1.
// The batch of one and the batch of 16 take different GEMM kernels (the
// few-row and dot-product kernels against the blocked ones), and the
// threads split the large products, so the test covers the kernels of the
// path it runs on (RADGEN_CPU selects it; CI runs it on each). -short
// checks 4 studies at 4 positions.
func TestBatchIndependence(t *testing.T) {
	t.Logf("kernel path: %s", cpu.Describe())
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{
		"the heart is normal in size. the mediastinum is unremarkable.",
		"no pleural effusion or pneumothorax. the lungs are clear.",
		"there is a small left basilar opacity, likely atelectasis.",
		"mild cardiomegaly with low lung volumes and bibasilar scarring.",
	})
	if err != nil {
		t.Fatal(err)
	}
	const B, maxLen = 16, 16
	studies, rotations := []int{0, 5, 10, 15}, []int{0, 3, 9, 14}
	if !testing.Short() {
		studies, rotations = nil, nil
		for i := range B {
			studies, rotations = append(studies, i), append(rotations, i)
		}
	}
	for _, tc := range []struct {
		arch      string
		configure func(int) ModelConfig
	}{
		{ArchR2Gen, R2GenTiny},
		{ArchM2, func(v int) ModelConfig {
			c := M2Tiny(v)
			editM2(&c, func(c *m2.Config) { c.Padding = m2.PadZeroRows })
			return c
		}},
		{ArchMETransformer, METransTiny},
	} {
		t.Run(string(tc.arch), func(t *testing.T) {
			cfg := tc.configure(tok.Len() + 1)
			m, err := New(cfg, tok, 11)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			n, w := cfg.PatchesPerStudy(), cfg.visualWidth()
			feats := randomFeats(B, n, w, 12)
			if tc.arch == ArchM2 {
				// Odd studies end with two zero-padded patches.
				for i := 1; i < B; i += 2 {
					clear(feats.Data()[(i*n+n-2)*w : (i+1)*n*w])
				}
			}
			ids := make([]string, B)
			for i := range ids {
				ids[i] = fmt.Sprint("study", i)
			}
			opts := []GenerateOption{WithBeamSize(3), WithMaxLength(maxLen)}
			generate := func(procs int, order []int) []Report {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				x := radgen.Zeros(len(order), n, w)
				names := make([]string, len(order))
				for j, i := range order {
					copy(x.Data()[j*n*w:(j+1)*n*w], feats.Data()[i*n*w:(i+1)*n*w])
					names[j] = ids[i]
				}
				reps, err := m.GenerateFeatures(context.Background(), names, x, opts...)
				if err != nil {
					t.Fatal(err)
				}
				return reps
			}
			alone := make([]Report, B)
			for _, i := range studies {
				alone[i] = generate(1, []int{i})[0]
			}
			var worst, worstSum float64
			compared := 0
			check := func(got Report, i int, where string) {
				want := alone[i]
				compared++
				if got.StudyID != want.StudyID || !slices.Equal(got.Tokens, want.Tokens) || len(got.TokenLogProbs) != len(want.TokenLogProbs) {
					t.Fatalf("study %d %s: tokens %v, alone %v", i, where, got.Tokens, want.Tokens)
				}
				for p, v := range got.TokenLogProbs {
					worst = math.Max(worst, math.Abs(float64(v-want.TokenLogProbs[p])))
				}
				worstSum = math.Max(worstSum, math.Abs(got.LogProb-want.LogProb))
				if got.Expert != want.Expert || len(got.Candidates) != len(want.Candidates) {
					t.Fatalf("study %d %s: expert %d of %d candidates, alone %d of %d", i, where, got.Expert, len(got.Candidates), want.Expert, len(want.Candidates))
				}
				for c := range got.Candidates {
					if got.Candidates[c] != want.Candidates[c] || math.Abs(got.Votes[c]-want.Votes[c]) > 1e-9 {
						t.Fatalf("study %d %s: candidate %d %q (vote %v), alone %q (%v)", i, where, c, got.Candidates[c], got.Votes[c], want.Candidates[c], want.Votes[c])
					}
				}
			}
			for _, procs := range []int{1, 2} {
				if procs != 1 {
					for _, i := range studies {
						check(generate(procs, []int{i})[0], i, fmt.Sprintf("alone, GOMAXPROCS %d", procs))
					}
				}
				for _, r := range rotations {
					order := make([]int, B)
					for j := range order {
						order[j] = (j + r) % B
					}
					reps := generate(procs, order)
					for j, i := range order {
						if alone[i].StudyID != "" {
							check(reps[j], i, fmt.Sprintf("at position %d of %d, GOMAXPROCS %d", j, B, procs))
						}
					}
				}
			}
			t.Logf("%d reports of %d studies (%d tokens alone) against the study alone: identical tokens, max |Δ log p| = %.3g per token, %.3g summed",
				compared, len(studies), len(alone[studies[0]].Tokens), worst, worstSum)
			if worst > 1e-5 {
				t.Errorf("token log-probabilities differ by %.3g > 1e-5", worst)
			}
			if limit := 1e-5 * float64(maxLen); worstSum > limit {
				t.Errorf("summed log-probabilities differ by %.3g > %.3g", worstSum, limit)
			}
		})
	}
}
