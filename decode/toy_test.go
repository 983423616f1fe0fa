package decode

import (
	"context"
	"fmt"
	"math"
)

// Toy models for the tests. hashLM gives every (study, prefix) a fixed,
// pseudo-random next-token distribution; incremental keeps a running hash per
// row (O(1) per step), while hashLM.score re-hashes the whole prefix, so the
// two are a small-scale version of the incremental-vs-recompute pair.

type hashLM struct {
	V    int
	seed uint64
	// eosBias is added to EOS's logit per token of prefix (BOS included),
	// so that longer prefixes end more often.
	eosBias float64
	eos     int
	// scale spreads the logits: logit = scale·u, u uniform in [0, 1).
	scale float64
}

func mix(h, x uint64) uint64 {
	h ^= x + 0x9e3779b97f4a7c15 + h<<6 + h>>2
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 29
	return h
}

func (m hashLM) start(study int) uint64 { return mix(m.seed, uint64(study)+1) }
func (m hashLM) push(h uint64, tok int) uint64 {
	return mix(h, uint64(tok)+0x51)
}

// row writes the log-probabilities after a prefix with hash h and length n.
func (m hashLM) row(h uint64, n int, dst []float32) {
	logits := make([]float64, m.V)
	hi := math.Inf(-1)
	for w := range m.V {
		u := float64(mix(h, uint64(w)+0x1234)>>11) / (1 << 53)
		l := m.scale * u
		if w == m.eos {
			l += m.eosBias * float64(n)
		}
		logits[w] = l
		hi = max(hi, l)
	}
	sum := 0.0
	for _, l := range logits {
		sum += math.Exp(l - hi)
	}
	for w, l := range logits {
		dst[w] = float32(l - hi - math.Log(sum))
	}
}

// logprobs returns the row for a prefix (BOS included).
func (m hashLM) logprobs(study int, prefix []int) []float32 {
	h := m.start(study)
	for _, t := range prefix {
		h = m.push(h, t)
	}
	dst := make([]float32, m.V)
	m.row(h, len(prefix), dst)
	return dst
}

func (m hashLM) score(_ context.Context, studies []int, prefixes []int, length int, dst []float32) error {
	for r, s := range studies {
		copy(dst[r*m.V:(r+1)*m.V], m.logprobs(s, prefixes[r*length:(r+1)*length]))
	}
	return nil
}

// incremental is hashLM as an incremental Model: one hash per row.
type incremental struct {
	lm    hashLM
	h     []uint64
	n     []int
	last  []int
	study []int
	steps int
}

func newIncremental(lm hashLM, studies int) *incremental {
	m := &incremental{lm: lm}
	for i := range studies {
		m.h = append(m.h, lm.start(i))
		m.n = append(m.n, 0)
		m.last = append(m.last, -1)
		m.study = append(m.study, i)
	}
	return m
}

func (m *incremental) VocabSize() int { return m.lm.V }
func (m *incremental) Rows() int      { return len(m.h) }
func (m *incremental) Step(_ context.Context, tokens []int, dst []float32) error {
	if len(tokens) != len(m.h) {
		return fmt.Errorf("incremental: %d tokens for %d rows", len(tokens), len(m.h))
	}
	m.steps++
	for r, t := range tokens {
		m.h[r] = m.lm.push(m.h[r], t)
		m.n[r]++
		m.last[r] = t
		m.lm.row(m.h[r], m.n[r], dst[r*m.lm.V:(r+1)*m.lm.V])
	}
	return nil
}
func (m *incremental) Reorder(src []int) error {
	h, n, l, st := make([]uint64, len(src)), make([]int, len(src)), make([]int, len(src)), make([]int, len(src))
	for i, s := range src {
		h[i], n[i], l[i], st[i] = m.h[s], m.n[s], m.last[s], m.study[s]
	}
	m.h, m.n, m.last, m.study = h, n, l, st
	return nil
}

// attending is incremental with attention: the weights of a row at a step are
// (prefix length, last token fed, study), so a test can check that each
// returned token carries its own step's row.
type attending struct{ *incremental }

func (m attending) AttentionWidth() int { return 3 }
func (m attending) Attention(dst []float32) error {
	for r := range m.h {
		dst[r*3], dst[r*3+1], dst[r*3+2] = float32(m.n[r]), float32(m.last[r]), float32(m.study[r])
	}
	return nil
}

// table is a hand-written model: log-probabilities by prefix (the generated
// tokens, without BOS, as a string key like "1,2"), with a fallback row.
type table struct {
	V    int
	rows map[string][]float64 // probabilities (or log-probabilities if logs)
	def  []float64
	logs bool
	seen []string // every prefix scored, in order
}

func key(prefix []int) string {
	s := ""
	for i, t := range prefix {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(t)
	}
	return s
}

func (m *table) lp(prefix []int) []float32 {
	p, ok := m.rows[key(prefix)]
	if !ok {
		p = m.def
	}
	out := make([]float32, m.V)
	for i, v := range p {
		if m.logs {
			out[i] = float32(v)
		} else {
			out[i] = float32(math.Log(v))
		}
	}
	return out
}

// score ignores the study and BOS (prefixes[r][0]).
func (m *table) score(_ context.Context, studies []int, prefixes []int, length int, dst []float32) error {
	for r := range studies {
		p := prefixes[r*length+1 : (r+1)*length]
		m.seen = append(m.seen, key(p))
		copy(dst[r*m.V:(r+1)*m.V], m.lp(p))
	}
	return nil
}

func (m *table) model(studies int) *Recompute {
	r, err := NewRecompute(studies, m.V, m.score)
	if err != nil {
		panic(err)
	}
	return r
}

// prefixFn is what the reference ports call: the log-probabilities after
// (study, prefix including BOS).
type prefixFn func(study int, prefix []int) []float32
