package decode

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Greedy decodes each study by taking the most likely token at every step,
// as R2Gen's _sample with sample_method 'greedy' (torch.max: the first of
// equal maxima). A row stops after EOS; decoding stops when every row has, or
// after MaxLen tokens. It returns one hypothesis per study.
//
// The zero value is not usable: MaxLen must be set. Zero BOS and EOS are
// R2Gen's (id 0 is both).
type Greedy struct {
	// MaxLen is the largest number of tokens generated, EOS included
	// (R2Gen's max_seq_length: 60 for IU X-Ray, 100 for MIMIC-CXR).
	MaxLen int

	// BOS is fed at the first step; EOS ends a row.
	BOS, EOS int

	// BlockTrigrams is R2Gen's block_trigrams (default on in R2Gen, off
	// here): before choosing token t ≥ 3, every trigram (a, b, c) that the
	// row already contains with (a, b) equal to its last two tokens adds
	// ln(1/2)·2 = -0.693·2 to c's log-probability, once per occurrence.
	BlockTrigrams bool

	// DecodingConstraint is R2Gen's decoding_constraint: the previous token
	// gets log-probability -Inf, so no token follows itself.
	DecodingConstraint bool

	// Attention returns each token's attention weights; the model must
	// implement [AttentionRecorder].
	Attention bool
}

// Decode implements [Strategy].
func (g Greedy) Decode(ctx context.Context, m Model) ([][]Hypothesis, error) {
	s, err := begin(ctx, m, common{maxLen: g.MaxLen, bos: g.BOS, eos: g.EOS, attention: g.Attention})
	if err != nil {
		return nil, err
	}
	defer s.end()
	return s.rows(rowSettings{n: 1, blockTrigrams: g.BlockTrigrams, constraint: g.DecodingConstraint})
}

// String names the settings, as benchmarks do: "greedy", "greedy+block3+noRepeat".
func (g Greedy) String() string {
	var b strings.Builder
	b.WriteString("greedy")
	if g.BlockTrigrams {
		b.WriteString("+block3")
	}
	if g.DecodingConstraint {
		b.WriteString("+noRepeat")
	}
	return b.String()
}

// Sample draws N hypotheses per study from the model's distribution, as
// R2Gen's _sample with sample_n = N: the log-probabilities (after the
// decoding constraint and trigram blocking) are divided by the temperature,
// optionally restricted to the TopK most likely tokens and then to the
// smallest set of most likely tokens whose probability reaches TopP, and a
// token is drawn from what remains. Samples of a study are rows
// study·N + j; the hypotheses come back in that order, not ranked.
//
// Draws come from Rand, or from a PCG source seeded with Seed, one Float64
// per unfinished row per step in row order, so a seed fixes the result. A
// draw u picks the token where u·total falls in the running sum of the kept
// tokens' probabilities, taken in id order without top-k or top-p, and in
// rank order (then id) with them.
type Sample struct {
	// MaxLen, BOS, EOS, BlockTrigrams, DecodingConstraint and Attention are
	// as in [Greedy].
	MaxLen             int
	BOS, EOS           int
	BlockTrigrams      bool
	DecodingConstraint bool
	Attention          bool

	// N is the number of samples per study (R2Gen's sample_n); 0 means 1.
	N int

	// Temperature divides the log-probabilities before sampling; 0 means 1.
	Temperature float32

	// TopK keeps the TopK most likely tokens (ties: lower id first); 0 keeps
	// all (R2Gen's sample_method 'topK').
	TopK int

	// TopP, in (0, 1), keeps the most likely tokens while the probability of
	// those before them is below TopP (the first is always kept), as
	// R2Gen's sample_method 'top0.p'; 0 or 1 keeps all. With TopK as well,
	// TopK applies first.
	TopP float64

	// Seed seeds rand.NewPCG(Seed, Seed) when Rand is nil.
	Seed uint64

	// Rand, if not nil, is the source of draws.
	Rand *rand.Rand
}

// Decode implements [Strategy].
func (o Sample) Decode(ctx context.Context, m Model) ([][]Hypothesis, error) {
	n := o.N
	if n == 0 {
		n = 1
	}
	temp := o.Temperature
	if temp == 0 {
		temp = 1
	}
	switch {
	case n < 0:
		return nil, fmt.Errorf("%w: %d samples", ErrOption, o.N)
	case !(temp > 0) || temp > maxFinite:
		return nil, fmt.Errorf("%w: temperature %v", ErrOption, o.Temperature)
	case o.TopK < 0:
		return nil, fmt.Errorf("%w: top-k %d", ErrOption, o.TopK)
	case !(o.TopP >= 0 && o.TopP <= 1):
		return nil, fmt.Errorf("%w: top-p %v", ErrOption, o.TopP)
	}
	s, err := begin(ctx, m, common{maxLen: o.MaxLen, bos: o.BOS, eos: o.EOS, attention: o.Attention})
	if err != nil {
		return nil, err
	}
	defer s.end()
	rng := o.Rand
	if rng == nil {
		rng = rand.New(rand.NewPCG(o.Seed, o.Seed))
	}
	smp := &s.w.smp
	smp.rng, smp.temp, smp.topK, smp.topP = rng, temp, o.TopK, o.TopP
	defer func() { smp.rng = nil }()
	return s.rows(rowSettings{n: n, blockTrigrams: o.BlockTrigrams, constraint: o.DecodingConstraint, sampler: smp})
}

// String names the settings: "sample", "sample4-t0.7-k10-p0.9".
func (o Sample) String() string {
	var b strings.Builder
	b.WriteString("sample")
	if o.N > 1 {
		fmt.Fprint(&b, o.N)
	}
	if o.Temperature != 0 && o.Temperature != 1 {
		fmt.Fprintf(&b, "-t%g", o.Temperature)
	}
	if o.TopK > 0 {
		fmt.Fprintf(&b, "-k%d", o.TopK)
	}
	if o.TopP > 0 && o.TopP < 1 {
		fmt.Fprintf(&b, "-p%g", o.TopP)
	}
	if o.BlockTrigrams {
		b.WriteString("+block3")
	}
	if o.DecodingConstraint {
		b.WriteString("+noRepeat")
	}
	return b.String()
}

const maxFinite = 3.4028234663852886e38 // math.MaxFloat32

// rowSettings configure the loop shared by greedy decoding and sampling.
type rowSettings struct {
	n             int // rows per study
	blockTrigrams bool
	constraint    bool
	sampler       *sampler // nil: argmax
}

// R2Gen's trigram penalty: logprobs + mask·(-0.693)·alpha, alpha = 2.
const (
	trigramLogHalf = -0.693
	trigramAlpha   = 2
)

// rows runs R2Gen's _sample loop: the B study rows are stepped once, expanded
// to B·n rows if n > 1, and every row then chooses its own next token until
// it emits EOS. Finished rows are fed EOS (R2Gen feeds pad, the same id 0)
// until every row has finished or MaxLen tokens are out.
func (s *session) rows(o rowSettings) ([][]Hypothesis, error) {
	B, V, n := s.B, s.V, o.n
	if B == 0 {
		return [][]Hypothesis{}, nil
	}
	if n > maxRows {
		return nil, fmt.Errorf("%w: %d samples per study", ErrOption, n)
	}
	R := B * n
	if err := s.checkRows(R); err != nil {
		return nil, err
	}
	w := s.w
	w.hist.reset(R, s.A)
	w.tok, w.next = grow(w.tok, R), grow(w.next, R)
	w.fin, w.ends = grow(w.fin, R), grow(w.ends, R)
	clear(w.fin)
	for i := range B {
		w.tok[i] = s.c.bos
	}
	left := R
	for t := 0; t < s.c.maxLen; t++ {
		lp, _, err := s.step(t, w.tok)
		if err != nil {
			return nil, err
		}
		for r := range R {
			if w.fin[r] {
				continue
			}
			src := r
			if t == 0 {
				src = r / n // the study row, before the expansion
			}
			x := lp[src*V : (src+1)*V]
			// At t = 0 the rows of a study share x; nothing below changes
			// x before t = 1, when every row has its own.
			if o.constraint && t > 0 {
				prev := w.hist.token(t-1, r)
				x[prev] += negInf
			}
			if o.blockTrigrams && t >= 3 {
				s.blockTrigrams(x, r, t)
			}
			var tok int
			if o.sampler != nil {
				tok = o.sampler.choose(x)
			} else {
				tok = argmax(x)
			}
			w.hist.set(t, r, tok, src, x[tok])
			w.next[r] = tok
			w.ends[r] = int32(t)
			if tok == s.c.eos {
				w.fin[r] = true
				left--
			}
		}
		if left == 0 || t == s.c.maxLen-1 {
			break
		}
		if t == 0 && n > 1 {
			w.src = grow(w.src, R)
			for r := range R {
				w.src[r] = r / n
			}
			if err := s.reorder(w.src); err != nil {
				return nil, err
			}
		}
		for r := range R {
			if w.fin[r] {
				w.next[r] = s.c.eos
			}
		}
		w.tok, w.next = w.next, w.tok
	}
	w.picks = grow(w.picks, R)
	for r := range R {
		w.picks[r] = pick{t: int(w.ends[r]), row: r}
	}
	out := s.results(w.picks, n, false)
	for _, hs := range out {
		for i := range hs {
			sum := 0.0
			for _, v := range hs[i].LogProbs {
				sum += float64(v)
			}
			hs[i].Score = sum
		}
	}
	return out, nil
}

// blockTrigrams applies R2Gen's trigram penalty to x, the log-probabilities
// of row r at step t ≥ 3. R2Gen keeps, per row, a map from each pair (a, b)
// to the list of tokens c that followed it (one entry per occurrence) and
// adds count·(-0.693)·2 to every listed c, in float32 as torch does.
func (s *session) blockTrigrams(x []float32, r, t int) {
	h := &s.w.hist
	a, b := h.token(t-2, r), h.token(t-1, r)
	m := s.w.matches[:0]
	for j := 0; j+2 < t; j++ {
		if h.token(j, r) == a && h.token(j+1, r) == b {
			m = append(m, h.token(j+2, r))
		}
	}
	s.w.matches = m
	for i, c := range m {
		if slices.Index(m, c) != i {
			continue
		}
		count := 0
		for _, d := range m[i:] {
			if d == c {
				count++
			}
		}
		pen := float32(float32(count)*float32(trigramLogHalf)) * trigramAlpha
		x[c] += pen
	}
}

// argmax returns the index of the first largest value, as torch.max.
func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
