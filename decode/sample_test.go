package decode

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Sampling one token many times must follow softmax(log p / T), restricted
// as top-k and top-p say. p is chosen so that every nucleus boundary is
// clear of rounding.
func TestSampleDistribution(t *testing.T) {
	p := []float64{.05, .1, .15, .3, .4}
	pow := func(e float64) []float64 {
		out := make([]float64, len(p))
		for i, v := range p {
			out[i] = math.Pow(v, e)
		}
		return out
	}
	keep := func(q []float64, ids ...int) []float64 {
		out := make([]float64, len(q))
		for _, i := range ids {
			out[i] = q[i]
		}
		return out
	}
	cases := []struct {
		name string
		o    Sample
		want []float64 // unnormalised
	}{
		{"plain", Sample{}, p},
		{"cold", Sample{Temperature: 0.5}, pow(2)},
		{"hot", Sample{Temperature: 2}, pow(0.5)},
		{"top2", Sample{TopK: 2}, keep(p, 3, 4)},
		{"topk=V", Sample{TopK: 5}, p},
		{"top-p .5", Sample{TopP: 0.5}, keep(p, 3, 4)},                               // .4, then .3 (.4 < .5), then stop (.7)
		{"top-p .75", Sample{TopP: 0.75}, keep(p, 2, 3, 4)},                          // .15 kept: .7 < .75
		{"top-p .3", Sample{TopP: 0.3}, keep(p, 4)},                                  // the first is always kept
		{"top3 then p .5", Sample{TopK: 3, TopP: 0.5}, keep(p, 3, 4)},                // renormalised .47, .35
		{"hot top-p .6", Sample{Temperature: 2, TopP: 0.6}, keep(pow(0.5), 2, 3, 4)}, // ∝ √p: .30, .26 (cum .30), .18 (cum .56), stop at .74
	}
	const n = 20000
	m := &table{V: 5, def: p}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			o.MaxLen, o.N, o.Seed = 1, n, 42
			got, err := o.Decode(context.Background(), m.model(1))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || len(got[0]) != n {
				t.Fatalf("got %d×%d hypotheses", len(got), len(got[0]))
			}
			count := make([]float64, 5)
			for _, h := range got[0] {
				count[h.Tokens[0]]++
				if h.LogProbs[0] != L(p[h.Tokens[0]]) {
					t.Fatalf("token %d log-prob %v, want the model's %v", h.Tokens[0], h.LogProbs[0], L(p[h.Tokens[0]]))
				}
			}
			total := 0.0
			for _, v := range c.want {
				total += v
			}
			for i, v := range c.want {
				q := v / total
				sigma := math.Sqrt(q*(1-q)/n) + 1e-9
				if f := count[i] / n; math.Abs(f-q) > 5*sigma {
					t.Errorf("token %d: frequency %.4f, want %.4f (±%.4f)", i, f, q, 5*sigma)
				}
			}
		})
	}
}

func TestSampleSeedAndRand(t *testing.T) {
	lm := hashLM{V: 20, seed: 5, eos: 0, eosBias: 0.2, scale: 3}
	run := func(o Sample) [][]Hypothesis {
		t.Helper()
		got, err := o.Decode(context.Background(), newIncremental(lm, 3))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	tokens := func(r [][]Hypothesis) (out [][]int) {
		for _, hs := range r {
			for _, h := range hs {
				out = append(out, h.Tokens)
			}
		}
		return out
	}
	o := Sample{MaxLen: 25, N: 4, Seed: 7, TopK: 8, Temperature: 0.9}
	a, b := tokens(run(o)), tokens(run(o))
	if !slices.EqualFunc(a, b, slices.Equal) {
		t.Error("the same seed gave different samples")
	}
	o.Seed = 8
	if c := tokens(run(o)); slices.EqualFunc(a, c, slices.Equal) {
		t.Error("different seeds gave the same samples")
	}
	o.Rand = rand.New(rand.NewPCG(7, 7))
	if c := tokens(run(o)); !slices.EqualFunc(a, c, slices.Equal) {
		t.Error("Rand seeded like Seed gave different samples")
	}
}

// Top-1 sampling is greedy decoding, trigram blocking and the decoding
// constraint included.
func TestSampleTopOneIsGreedy(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for range 50 {
		lm := randomLM(rng)
		lm.eosBias /= 4
		g := Greedy{MaxLen: 1 + rng.IntN(20), EOS: lm.eos, BlockTrigrams: rng.IntN(2) == 0, DecodingConstraint: rng.IntN(2) == 0}
		s := Sample{MaxLen: g.MaxLen, EOS: g.EOS, BlockTrigrams: g.BlockTrigrams, DecodingConstraint: g.DecodingConstraint,
			TopK: 1, Seed: rng.Uint64(), N: 3}
		B := 1 + rng.IntN(3)
		want, err := g.Decode(context.Background(), newIncremental(lm, B))
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Decode(context.Background(), newIncremental(lm, B))
		if err != nil {
			t.Fatal(err)
		}
		for b := range B {
			for j := range 3 {
				if !slices.Equal(got[b][j].Tokens, want[b][0].Tokens) || !slices.Equal(got[b][j].LogProbs, want[b][0].LogProbs) {
					t.Fatalf("study %d sample %d: %v, greedy %v", b, j, got[b][j].Tokens, want[b][0].Tokens)
				}
			}
		}
	}
}

// Samples of study b are rows b·N+j: a model whose studies have disjoint
// vocabularies shows whether each sample stayed with its study.
func TestSampleRowsStayWithTheirStudy(t *testing.T) {
	const V, B, N = 9, 3, 4
	score := func(_ context.Context, studies []int, prefixes []int, length int, dst []float32) error {
		for r, s := range studies {
			row := dst[r*V : (r+1)*V]
			for w := range row {
				row[w] = float32(math.Inf(-1))
			}
			if length >= 4 {
				row[0] = 0 // EOS
				continue
			}
			row[1+2*s], row[2+2*s] = L(.5), L(.5) // study s says 1+2s or 2+2s
		}
		return nil
	}
	m, err := NewRecompute(B, V, score)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Sample{MaxLen: 10, N: N, Seed: 1}.Decode(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for b := range B {
		if len(got[b]) != N {
			t.Fatalf("study %d: %d samples", b, len(got[b]))
		}
		for _, h := range got[b] {
			if len(h.Tokens) != 4 || h.Tokens[3] != 0 {
				t.Fatalf("study %d: %v, want three words and EOS", b, h.Tokens)
			}
			for _, tok := range h.Tokens[:3] {
				if tok != 1+2*b && tok != 2+2*b {
					t.Fatalf("study %d sample %v holds another study's word", b, h.Tokens)
				}
				seen[tok] = true
			}
		}
	}
	if len(seen) != 2*B {
		t.Errorf("only words %v were drawn", seen)
	}
}

// The sampler's fast paths (one-pass top-k selection, no sort without
// top-k or top-p) draw exactly what a plain sort-everything reference draws
// from the same random numbers.
func TestSamplerMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for it := range 3000 {
		V := 1 + rng.IntN(80)
		x := make([]float32, V)
		for i := range x {
			x[i] = float32(-8 * rng.Float64())
			if rng.IntN(10) == 0 {
				x[i] = float32(math.Inf(-1))
			}
			if rng.IntN(10) == 0 && i > 0 {
				x[i] = x[rng.IntN(i)] // ties
			}
		}
		s := sampler{temp: []float32{1, 0.5, 2, 1.3}[rng.IntN(4)]}
		switch rng.IntN(4) {
		case 0:
			s.topK = 1 + rng.IntN(V)
		case 1:
			s.topP = rng.Float64()
		case 2:
			s.topK, s.topP = 1+rng.IntN(V), rng.Float64()
		}
		seed := rng.Uint64()
		s.rng = rand.New(rand.NewPCG(seed, 0))
		got := s.choose(slices.Clone(x))
		want := refDraw(x, s.temp, s.topK, s.topP, rand.New(rand.NewPCG(seed, 0)))
		if got != want {
			t.Fatalf("case %d (V %d, T %v, k %d, p %v): drew %d, reference %d", it, V, s.temp, s.topK, s.topP, got, want)
		}
	}
}

func refDraw(x []float32, T float32, k int, p float64, rng *rand.Rand) int {
	type c struct {
		v float32
		w int
	}
	var cs []c
	for w, v := range x {
		if !math.IsInf(float64(v), -1) {
			l := v
			if T != 1 {
				l = v / T
			}
			cs = append(cs, c{l, w})
		}
	}
	if len(cs) == 0 {
		return argmax(x)
	}
	restricted := (k > 0 && k < len(x)) || (p > 0 && p < 1)
	if !restricted {
		// Unrestricted draws walk the tokens in id order.
		total := 0.0
		hi := cs[0].v
		for _, e := range cs {
			hi = max(hi, e.v)
		}
		for _, e := range cs {
			total += math.Exp(float64(e.v - hi))
		}
		u := rng.Float64() * total
		for _, e := range cs {
			q := math.Exp(float64(e.v - hi))
			if u < q {
				return e.w
			}
			u -= q
		}
		return cs[len(cs)-1].w
	}
	slices.SortStableFunc(cs, func(a, b c) int {
		if a.v > b.v {
			return -1
		}
		if a.v < b.v {
			return 1
		}
		return 0
	})
	if k > 0 && k < len(cs) {
		cs = cs[:k]
	}
	w := make([]float64, len(cs))
	total := 0.0
	for i := range cs {
		w[i] = math.Exp(float64(cs[i].v - cs[0].v))
		total += w[i]
	}
	if p > 0 && p < 1 {
		cum := 0.0
		for i := range cs {
			if i > 0 && cum >= p {
				cs, w = cs[:i], w[:i]
				break
			}
			cum += w[i] / total
		}
		total = 0
		for _, v := range w {
			total += v
		}
	}
	u := rng.Float64() * total
	for i := range cs {
		if u < w[i] {
			return cs[i].w
		}
		u -= w[i]
	}
	return cs[len(cs)-1].w
}
