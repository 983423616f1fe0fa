package decode

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// strategies returns one of each strategy with the given length and EOS, for
// the tests that run every strategy.
func strategies(maxLen, eos int) []Strategy {
	return []Strategy{
		Greedy{MaxLen: maxLen, EOS: eos, BlockTrigrams: true},
		Sample{MaxLen: maxLen, EOS: eos, N: 2, Seed: 3},
		BeamSearch{Size: 3, N: 2, MaxLen: maxLen, EOS: eos},
		BeamSearch{Size: 4, Groups: 2, Diversity: 0.5, N: 3, MaxLen: maxLen, EOS: eos},
		BeamSearch{Semantics: M2, Size: 3, N: 2, MaxLen: maxLen, EOS: eos},
	}
}

// Each returned token carries the attention of the step that produced it,
// from the row that step ran: attending reports (prefix length, last token
// fed, study) as its weights.
func TestAttention(t *testing.T) {
	lm := hashLM{V: 11, seed: 17, eos: 0, eosBias: 0.35, scale: 4}
	const B, bos = 3, 5
	for _, s := range strategies(12, 0) {
		switch o := s.(type) {
		case Greedy:
			o.Attention, o.BOS = true, bos
			s = o
		case Sample:
			o.Attention, o.BOS = true, bos
			s = o
		case BeamSearch:
			o.Attention, o.BOS = true, bos
			s = o
		}
		got, err := s.Decode(context.Background(), attending{newIncremental(lm, B)})
		if err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		for b, hs := range got {
			for _, h := range hs {
				if len(h.Attention) != 3*len(h.Tokens) {
					t.Fatalf("%v: %d weights for %d tokens", s, len(h.Attention), len(h.Tokens))
				}
				for i := range h.Tokens {
					prev := bos
					if i > 0 {
						prev = h.Tokens[i-1]
					}
					want := []float32{float32(i + 1), float32(prev), float32(b)}
					if a := h.Attention[3*i : 3*i+3]; !slices.Equal(a, want) {
						t.Fatalf("%v study %d %v token %d: attention %v, want %v", s, b, h.Tokens, i, a, want)
					}
				}
			}
		}
	}
	_, err := Greedy{MaxLen: 3, Attention: true}.Decode(context.Background(), newIncremental(lm, 1))
	if !errors.Is(err, ErrNoAttention) {
		t.Errorf("attention from a model without it: %v, want ErrNoAttention", err)
	}
}

// badModel breaks one rule of the contract on request.
type badModel struct {
	*incremental
	vocab      int     // if nonzero, VocabSize
	rows       int     // if nonzero, Rows
	nanAt      int     // step at which a log-probability is NaN (1-based)
	value      float32 // the bad value
	stepErr    error
	lieReorder bool // Rows stays put after Reorder
	attnWidth  int
}

func (m *badModel) VocabSize() int {
	if m.vocab != 0 {
		return m.vocab
	}
	return m.incremental.VocabSize()
}
func (m *badModel) Rows() int {
	if m.rows != 0 {
		return m.rows
	}
	return m.incremental.Rows()
}
func (m *badModel) Step(ctx context.Context, tokens []int, dst []float32) error {
	if m.stepErr != nil {
		return m.stepErr
	}
	if err := m.incremental.Step(ctx, tokens, dst); err != nil {
		return err
	}
	if m.steps == m.nanAt {
		dst[len(dst)-1] = m.value
	}
	return nil
}
func (m *badModel) Reorder(src []int) error {
	if m.lieReorder {
		return nil
	}
	return m.incremental.Reorder(src)
}
func (m *badModel) AttentionWidth() int           { return m.attnWidth }
func (m *badModel) Attention(dst []float32) error { return nil }

func TestBadInput(t *testing.T) {
	lm := hashLM{V: 6, seed: 1, eos: 0, eosBias: 0.1, scale: 2}
	good := func() Model { return newIncremental(lm, 2) }
	var nilIncremental *incremental
	var nilRecompute *Recompute
	errStep := errors.New("model failed")
	cases := []struct {
		name string
		s    Strategy
		m    Model
		want error
	}{
		{"nil model", Greedy{MaxLen: 3}, nil, ErrNilModel},
		{"typed nil model", BeamSearch{Size: 2, MaxLen: 3}, nilIncremental, ErrNilModel},
		{"nil Recompute", Sample{MaxLen: 3}, nilRecompute, ErrNilModel},
		{"empty vocabulary", Greedy{MaxLen: 3}, &badModel{incremental: newIncremental(lm, 1), vocab: -1}, ErrVocab},
		{"negative rows", Greedy{MaxLen: 3}, &badModel{incremental: newIncremental(lm, 1), rows: -2}, ErrModel},
		{"beam 0", BeamSearch{MaxLen: 3}, good(), ErrBeamSize},
		{"beam -1", BeamSearch{Size: -1, MaxLen: 3}, good(), ErrBeamSize},
		{"beam > V", BeamSearch{Size: 7, MaxLen: 3}, good(), ErrBeamSize},
		{"m2 beam > V", BeamSearch{Semantics: M2, Size: 7, MaxLen: 3}, good(), ErrBeamSize},
		{"groups do not divide", BeamSearch{Size: 5, Groups: 2, MaxLen: 3}, good(), ErrBeamSize},
		{"negative groups", BeamSearch{Size: 2, Groups: -1, MaxLen: 3}, good(), ErrOption},
		{"N > beam", BeamSearch{Size: 2, N: 3, MaxLen: 3}, good(), ErrOption},
		{"N < 0", BeamSearch{Size: 2, N: -1, MaxLen: 3}, good(), ErrOption},
		{"NaN diversity", BeamSearch{Size: 2, Groups: 2, Diversity: float32(math.NaN()), MaxLen: 3}, good(), ErrOption},
		{"beam temperature < 0", BeamSearch{Size: 2, Temperature: -1, MaxLen: 3}, good(), ErrOption},
		{"beam temperature NaN", BeamSearch{Size: 2, Temperature: float32(math.NaN()), MaxLen: 3}, good(), ErrOption},
		{"beam temperature Inf", BeamSearch{Size: 2, Temperature: float32(math.Inf(1)), MaxLen: 3}, good(), ErrOption},
		{"m2 with groups", BeamSearch{Semantics: M2, Size: 2, Groups: 2, MaxLen: 3}, good(), ErrOption},
		{"m2 with penalty", BeamSearch{Semantics: M2, Size: 2, LengthPenalty: AvgPenalty(), MaxLen: 3}, good(), ErrOption},
		{"m2 with constraint", BeamSearch{Semantics: M2, Size: 2, DecodingConstraint: true, MaxLen: 3}, good(), ErrOption},
		{"unknown semantics", BeamSearch{Semantics: 7, Size: 2, MaxLen: 3}, good(), ErrOption},
		{"greedy maxLen 0", Greedy{}, good(), ErrMaxLen},
		{"sample maxLen -1", Sample{MaxLen: -1}, good(), ErrMaxLen},
		{"beam maxLen 0", BeamSearch{Size: 2}, good(), ErrMaxLen},
		{"BOS < 0", Greedy{MaxLen: 3, BOS: -1}, good(), ErrToken},
		{"BOS ≥ V", BeamSearch{Size: 2, MaxLen: 3, BOS: 6}, good(), ErrToken},
		{"EOS ≥ V", Sample{MaxLen: 3, EOS: 6}, good(), ErrToken},
		{"EOS < 0", BeamSearch{Semantics: M2, Size: 2, MaxLen: 3, EOS: -3}, good(), ErrToken},
		{"samples < 0", Sample{MaxLen: 3, N: -1}, good(), ErrOption},
		{"sample temperature < 0", Sample{MaxLen: 3, Temperature: -0.5}, good(), ErrOption},
		{"sample temperature NaN", Sample{MaxLen: 3, Temperature: float32(math.NaN())}, good(), ErrOption},
		{"top-k < 0", Sample{MaxLen: 3, TopK: -1}, good(), ErrOption},
		{"top-p < 0", Sample{MaxLen: 3, TopP: -0.1}, good(), ErrOption},
		{"top-p > 1", Sample{MaxLen: 3, TopP: 1.5}, good(), ErrOption},
		{"top-p NaN", Sample{MaxLen: 3, TopP: math.NaN()}, good(), ErrOption},
		{"samples overflow", Sample{MaxLen: 3, N: math.MaxInt}, good(), ErrOption},
		{"too many samples", Sample{MaxLen: 3, N: 1 << 30}, good(), ErrOption},
		{"NaN log-prob", BeamSearch{Size: 2, MaxLen: 5}, &badModel{incremental: newIncremental(lm, 2), nanAt: 2, value: float32(math.NaN())}, ErrModel},
		{"+Inf log-prob", Greedy{MaxLen: 5}, &badModel{incremental: newIncremental(lm, 2), nanAt: 1, value: float32(math.Inf(1))}, ErrModel},
		{"step error", Sample{MaxLen: 5}, &badModel{incremental: newIncremental(lm, 2), stepErr: errStep}, errStep},
		{"rows after reorder", BeamSearch{Size: 2, MaxLen: 5, FullLength: true}, &badModel{incremental: newIncremental(lm, 2), lieReorder: true}, ErrModel},
		{"negative attention width", Greedy{MaxLen: 3, Attention: true}, &badModel{incremental: newIncremental(lm, 2), attnWidth: -1}, ErrModel},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.s.Decode(context.Background(), c.m)
			if !errors.Is(err, c.want) {
				t.Fatalf("%v: error %v, want %v", c.s, err, c.want)
			}
			if got != nil {
				t.Errorf("results %v with an error", got)
			}
		})
	}

	// A model with no rows has nothing to decode.
	for _, s := range strategies(3, 0) {
		got, err := s.Decode(context.Background(), newIncremental(lm, 0))
		if err != nil || len(got) != 0 {
			t.Errorf("%v with no studies: %v, %v", s, got, err)
		}
	}
	// A nil context is treated as Background.
	//lint:ignore SA1012 deliberately nil
	if _, err := (Greedy{MaxLen: 2}).Decode(nil, good()); err != nil { //nolint:staticcheck
		t.Errorf("nil context: %v", err)
	}
}

func TestParsePenalty(t *testing.T) {
	for _, s := range []string{"wu", "wu_", "wu_x", "avg_1_2", "nope_0.5", "wu_NaN", "wu_Inf"} {
		if _, err := ParsePenalty(s); !errors.Is(err, ErrOption) {
			t.Errorf("ParsePenalty(%q): %v, want ErrOption", s, err)
		}
	}
	p, err := ParsePenalty("")
	if p != nil || err != nil {
		t.Errorf(`ParsePenalty(""): %v, %v`, p, err)
	}
	wu, err := ParsePenalty("wu_0.7")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := wu(10, -3), -3/(math.Pow(15, 0.7)/math.Pow(6, 0.7)); got != want {
		t.Errorf("wu_0.7: %v, want %v", got, want)
	}
	avg, err := ParsePenalty("avg_3")
	if err != nil {
		t.Fatal(err)
	}
	if got := avg(4, -2); got != -0.5 {
		t.Errorf("avg: %v, want -0.5", got)
	}
}

// stepper counts steps and can cancel or block.
type stepper struct {
	*incremental
	cancelAt int
	cancel   context.CancelFunc
	block    chan struct{} // if not nil, Step signals here and waits for ctx
}

func (m *stepper) Step(ctx context.Context, tokens []int, dst []float32) error {
	if m.block != nil {
		m.block <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	if err := m.incremental.Step(ctx, tokens, dst); err != nil {
		return err
	}
	if m.steps == m.cancelAt {
		m.cancel()
	}
	return nil
}

func TestContextCancellation(t *testing.T) {
	lm := hashLM{V: 50, seed: 2, eos: 0, eosBias: -1, scale: 1} // never ends
	for _, s := range strategies(1000, 0) {
		// Already cancelled: no step at all.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		m := &stepper{incremental: newIncremental(lm, 2)}
		if _, err := s.Decode(ctx, m); !errors.Is(err, context.Canceled) {
			t.Errorf("%v, cancelled: %v", s, err)
		}
		if m.steps != 0 {
			t.Errorf("%v ran %d steps under a cancelled context", s, m.steps)
		}

		// Cancelled during step 4: no step 5.
		ctx, cancel = context.WithCancel(context.Background())
		m = &stepper{incremental: newIncremental(lm, 2), cancelAt: 4, cancel: cancel}
		got, err := s.Decode(ctx, m)
		if err != context.Canceled || got != nil {
			t.Errorf("%v, cancelled at step 4: %v, %v", s, got, err)
		}
		if m.steps != 4 {
			t.Errorf("%v ran %d steps, want 4", s, m.steps)
		}

		// A step that waits on the context returns when it is cancelled.
		ctx, cancel = context.WithCancel(context.Background())
		m = &stepper{incremental: newIncremental(lm, 2), block: make(chan struct{})}
		done := make(chan error)
		go func() {
			_, err := s.Decode(ctx, m)
			done <- err
		}()
		<-m.block
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("%v, blocked step: %v", s, err)
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), time0)
	defer cancel()
	if _, err := (BeamSearch{Size: 2, MaxLen: 4}).Decode(ctx, newIncremental(lm, 1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("past deadline: %v", err)
	}
}

func TestRecompute(t *testing.T) {
	lm := hashLM{V: 7, seed: 4, eos: 0, eosBias: 0.2, scale: 3}
	if _, err := NewRecompute(1, 7, nil); !errors.Is(err, ErrNilModel) {
		t.Errorf("nil scorer: %v", err)
	}
	if _, err := NewRecompute(1, 0, lm.score); !errors.Is(err, ErrVocab) {
		t.Errorf("vocabulary 0: %v", err)
	}
	if _, err := NewRecompute(-1, 7, lm.score); !errors.Is(err, ErrShape) {
		t.Errorf("-1 studies: %v", err)
	}
	r, err := NewRecompute(2, 7, lm.score)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, 3*7)
	for _, c := range []struct {
		tokens []int
		dst    []float32
		want   error
	}{
		{[]int{1}, dst, ErrShape},
		{[]int{1, 2, 3}, dst, ErrShape},
		{[]int{1, 7}, dst, ErrToken},
		{[]int{-1, 2}, dst, ErrToken},
		{[]int{1, 2}, dst[:13], ErrShape},
	} {
		if err := r.Step(context.Background(), c.tokens, c.dst); !errors.Is(err, c.want) {
			t.Errorf("Step(%v, %d): %v, want %v", c.tokens, len(c.dst), err, c.want)
		}
	}
	for _, src := range [][]int{{2}, {-1}, {0, 5}} {
		if err := r.Reorder(src); !errors.Is(err, ErrShape) {
			t.Errorf("Reorder(%v): %v, want ErrShape", src, err)
		}
	}
	if r.length != 0 || r.Rows() != 2 {
		t.Fatalf("failed calls changed the state: length %d, rows %d", r.length, r.Rows())
	}

	// Random steps, expansions, shuffles and shrinks: Recompute and the
	// incremental model must agree bit for bit, and track the studies.
	rng := rand.New(rand.NewPCG(21, 22))
	for range 50 {
		B := 1 + rng.IntN(3)
		r, _ := NewRecompute(B, 7, lm.score)
		inc := newIncremental(lm, B)
		for range 1 + rng.IntN(12) {
			if rng.IntN(3) == 0 {
				src := make([]int, 1+rng.IntN(6))
				for i := range src {
					src[i] = rng.IntN(r.Rows())
				}
				if err := r.Reorder(src); err != nil {
					t.Fatal(err)
				}
				inc.Reorder(src)
			}
			tokens := make([]int, r.Rows())
			for i := range tokens {
				tokens[i] = rng.IntN(7)
			}
			a, b := make([]float32, 7*len(tokens)), make([]float32, 7*len(tokens))
			if err := r.Step(context.Background(), tokens, a); err != nil {
				t.Fatal(err)
			}
			inc.Step(context.Background(), tokens, b)
			if !slices.Equal(a, b) {
				t.Fatalf("Recompute and incremental disagree:\n%v\n%v", a, b)
			}
			if !slices.Equal(r.study, inc.study) {
				t.Fatalf("studies %v, want %v", r.study, inc.study)
			}
		}
	}
}

// The strategies allocate per call, not per step: decoding 60 steps costs
// the same allocations as decoding 5.
func TestNoAllocationPerStep(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops buffers at random under the race detector")
	}
	m := newTrivial(64, 4)
	for _, s := range []Strategy{
		Greedy{BlockTrigrams: true, DecodingConstraint: true},
		Sample{N: 2, TopK: 10, TopP: 0.9},
		BeamSearch{Size: 3, FullLength: true},
		BeamSearch{Size: 4, Groups: 2, Diversity: 0.5, Temperature: 0.8, FullLength: true},
		BeamSearch{Semantics: M2, Size: 3, FullLength: true},
	} {
		allocs := func(maxLen int) float64 {
			s := withMaxLen(s, maxLen)
			return testing.AllocsPerRun(50, func() {
				m.reset(4)
				if _, err := s.Decode(context.Background(), m); err != nil {
					t.Fatal(err)
				}
			})
		}
		short, long := allocs(5), allocs(60)
		if long > short || long > 12 {
			t.Errorf("%v: %v allocations for 60 steps, %v for 5", s, long, short)
		}
	}
}

func withMaxLen(s Strategy, n int) Strategy {
	switch o := s.(type) {
	case Greedy:
		o.MaxLen = n
		return o
	case Sample:
		o.MaxLen = n
		return o
	case BeamSearch:
		o.MaxLen = n
		return o
	}
	panic("unknown strategy")
}
