package decode

import (
	"context"
	"errors"
	"math"
	"testing"
)

// overlap scores a hypothesis by its mean set overlap with each reference,
// |h ∩ r| / max(|h|, |r|): a hand-checkable stand-in for a caption metric.
func overlap(_ context.Context, refs [][][]int, hyps [][]int) ([]float64, error) {
	out := make([]float64, len(hyps))
	for i, h := range hyps {
		for _, r := range refs[i] {
			in := map[int]bool{}
			for _, t := range r {
				in[t] = true
			}
			n := 0
			for _, t := range h {
				if in[t] {
					n++
				}
			}
			out[i] += float64(n) / float64(max(len(h), len(r))) / float64(len(refs[i]))
		}
	}
	return out, nil
}

func TestVoteHandMade(t *testing.T) {
	var calls int
	var seen [][]int
	score := func(ctx context.Context, refs [][][]int, hyps [][]int) ([]float64, error) {
		calls++
		seen = hyps
		return overlap(ctx, refs, hyps)
	}
	cands := [][][]int{
		// Study 0: A and B agree on three words, C is the outlier.
		// A: (3/4 + 1/3)/2 = 0.5417, B: (3/4 + 1/4)/2 = 0.5, C: (1/3 + 1/4)/2.
		{{1, 2, 3, 0}, {1, 2, 3, 4, 0}, {1, 5, 6, 0}},
		// Study 1: the third expert is the consensus.
		{{7, 8}, {9, 10}, {7, 8, 9, 10}},
	}
	ballots, err := Vote{Score: score}.Select(context.Background(), cands)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || len(seen) != 6 {
		t.Fatalf("scorer called %d times with %d hypotheses, want once with 6", calls, len(seen))
	}
	// EOS (0) was dropped before scoring.
	if len(seen[0]) != 3 || len(seen[3]) != 2 {
		t.Fatalf("hypotheses passed to the metric: %v", seen)
	}
	want0 := []float64{(0.75 + 1.0/3) / 2, 0.5, (1.0/3 + 0.25) / 2}
	for j, w := range want0 {
		if math.Abs(ballots[0].Scores[j]-w) > 1e-12 {
			t.Fatalf("study 0 scores %v, want %v", ballots[0].Scores, want0)
		}
	}
	if ballots[0].Winner != 0 || ballots[1].Winner != 2 {
		t.Fatalf("winners %d, %d, want 0, 2", ballots[0].Winner, ballots[1].Winner)
	}

	// With EOS −1 the final 0 is a word: B then shares it with A and C too.
	b2, err := Vote{Score: overlap, EOS: -1}.Select(context.Background(), cands[:1])
	if err != nil {
		t.Fatal(err)
	}
	if w := (4.0/5 + 2.0/4) / 2; math.Abs(b2[0].Scores[0]-w) > 1e-12 {
		t.Fatalf("A with EOS kept: %v, want %v", b2[0].Scores[0], w)
	}
}

func TestVoteTiesGoToTheFirst(t *testing.T) {
	flat := func(_ context.Context, _ [][][]int, hyps [][]int) ([]float64, error) {
		return make([]float64, len(hyps)), nil
	}
	b, err := Vote{Score: flat}.Select(context.Background(), [][][]int{{{1}, {2}, {3}}})
	if err != nil || b[0].Winner != 0 {
		t.Fatalf("winner %v, err %v; want 0", b, err)
	}
}

func TestVoteHypotheses(t *testing.T) {
	experts := [][][]Hypothesis{{
		{{Tokens: []int{5, 6, 0}, Score: -1}, {Tokens: []int{9}, Score: -2}},
		{{Tokens: []int{5, 6, 7, 0}, Score: -3}},
		{{Tokens: []int{8, 0}, Score: -0.5}},
	}}
	best, ballots, err := Vote{Score: overlap}.SelectHypotheses(context.Background(), experts)
	if err != nil {
		t.Fatal(err)
	}
	// [5 6] vs [5 6 7]: 2/3, vs [8]: 0 → 1/3; [5 6 7]: 2/3, 0 → 1/3; tie → expert 0.
	if ballots[0].Winner != 0 || best[0].Score != -1 {
		t.Fatalf("winner %d (%v), want expert 0", ballots[0].Winner, best[0])
	}
	experts[0][1] = nil
	if _, _, err := (Vote{Score: overlap}).SelectHypotheses(context.Background(), experts); !errors.Is(err, ErrVote) {
		t.Fatalf("expert without hypotheses: %v", err)
	}
}

func TestVoteErrors(t *testing.T) {
	ctx := context.Background()
	two := [][][]int{{{1}, {2}}}
	boom := errors.New("boom")
	for _, c := range []struct {
		name  string
		v     Vote
		cands [][][]int
		want  error
	}{
		{"nil scorer", Vote{}, two, ErrVote},
		{"one candidate", Vote{Score: overlap}, [][][]int{{{1}}}, ErrVote},
		{"short scores", Vote{Score: func(context.Context, [][][]int, [][]int) ([]float64, error) { return []float64{1}, nil }}, two, ErrVote},
		{"NaN", Vote{Score: func(context.Context, [][][]int, [][]int) ([]float64, error) { return []float64{1, math.NaN()}, nil }}, two, ErrVote},
		{"metric error", Vote{Score: func(context.Context, [][][]int, [][]int) ([]float64, error) { return nil, boom }}, two, boom},
	} {
		if _, err := c.v.Select(ctx, c.cands); !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := (Vote{Score: overlap}).Select(cctx, two); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
