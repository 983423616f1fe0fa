package decode

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"
)

// common holds the settings that every strategy shares.
type common struct {
	maxLen    int
	bos, eos  int
	attention bool
}

// session is one Decode call: the model, its sizes and the pooled buffers.
type session struct {
	ctx context.Context
	m   Model
	rec AttentionRecorder // nil unless attention was requested
	V   int               // vocabulary size
	B   int               // studies (rows when the model was handed over)
	A   int               // attention width, 0 without attention
	cur int               // rows the model has now
	c   common
	w   *workspace
}

// workspace holds the buffers of one Decode call; a pool keeps them between
// calls so that decoding allocates nothing per step once warm.
type workspace struct {
	lp          []float32 // (rows, V) log-probabilities of the last step
	tok, next   []int     // (rows) tokens fed this step, tokens chosen for the next
	src         []int     // (rows) Reorder indices
	sums, sums2 []float32 // (rows) running beam scores (R2Gen beam_logprobs_sum, M² seq_logprob)
	fin, fin2   []bool    // (rows) finished rows
	ends        []int32   // (rows) step of each row's last token
	hist        history
	top         topK
	change      []float32   // (V) diversity penalty per word
	touched     []int       // words with a nonzero change
	done        []doneEntry // (B, groups, k/groups) saved beams, best first
	doneN       []int       // (B, groups) saved beams kept
	picks       []pick      // (B, n) the hypotheses to return
	order       []int       // (k) beam order for M²'s final sort
	matches     []int       // trigram continuations of one row
	smp         sampler
}

var workspaces = sync.Pool{New: func() any { return new(workspace) }}

// grow returns s resliced to n elements, reallocating (with room to grow
// further) when its capacity is short. The contents are not cleared.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, max(n, 2*cap(s)))
	}
	return s[:n]
}

// begin validates the model and the shared settings and takes a workspace.
// The caller must call end.
func begin(ctx context.Context, m Model, c common) (*session, error) {
	if isNil(m) {
		return nil, ErrNilModel
	}
	if ctx == nil {
		ctx = context.Background()
	}
	V := m.VocabSize()
	if V <= 0 {
		return nil, fmt.Errorf("%w: %d", ErrVocab, V)
	}
	if c.maxLen <= 0 {
		return nil, fmt.Errorf("%w: %d", ErrMaxLen, c.maxLen)
	}
	if c.bos < 0 || c.bos >= V {
		return nil, fmt.Errorf("%w: BOS %d with vocabulary %d", ErrToken, c.bos, V)
	}
	if c.eos < 0 || c.eos >= V {
		return nil, fmt.Errorf("%w: EOS %d with vocabulary %d", ErrToken, c.eos, V)
	}
	B := m.Rows()
	if B < 0 {
		return nil, fmt.Errorf("%w: %d rows", ErrModel, B)
	}
	s := &session{ctx: ctx, m: m, V: V, B: B, cur: B, c: c}
	if c.attention {
		rec, ok := m.(AttentionRecorder)
		if !ok {
			return nil, ErrNoAttention
		}
		s.rec, s.A = rec, rec.AttentionWidth()
		if s.A < 0 {
			return nil, fmt.Errorf("%w: attention width %d", ErrModel, s.A)
		}
	}
	s.w = workspaces.Get().(*workspace)
	return s, nil
}

// Limits on the rows a strategy asks of a model, so that a huge N or batch
// is an error rather than an allocation that cannot succeed.
const (
	maxRows     = 1 << 24 // rows (studies × beams or samples)
	maxLogProbs = 1 << 32 // rows × V
)

// checkRows verifies that rows rows of V log-probabilities stay within the
// limits.
func (s *session) checkRows(rows int) error {
	if s.B > 0 && (rows/s.B < 1 || rows > maxRows || rows > maxLogProbs/s.V) {
		return fmt.Errorf("%w: %d rows of %d log-probabilities is too many", ErrOption, rows, s.V)
	}
	return nil
}

func (s *session) end() {
	workspaces.Put(s.w)
	s.w = nil
}

func isNil(m Model) bool {
	if m == nil {
		return true
	}
	switch v := reflect.ValueOf(m); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// step checks the context, records a history slot for step t, feeds
// tokens[:s.cur] to the model and returns its log-probabilities, (cur, V),
// after checking them. It also reports whether any value is positive (not a
// log-probability), which voids beam search's early stop.
func (s *session) step(t int, tokens []int) (lp []float32, positive bool, err error) {
	if err := s.ctx.Err(); err != nil {
		return nil, false, err
	}
	s.w.hist.push()
	n := s.cur * s.V
	s.w.lp = grow(s.w.lp, n)
	lp = s.w.lp
	if err := s.m.Step(s.ctx, tokens[:s.cur], lp); err != nil {
		if cerr := s.ctx.Err(); cerr != nil {
			return nil, false, cerr
		}
		return nil, false, fmt.Errorf("decode: step %d: %w", t, err)
	}
	if s.rec != nil {
		if err := s.rec.Attention(s.w.hist.attnAt(t)[:s.cur*s.A]); err != nil {
			return nil, false, fmt.Errorf("decode: attention of step %d: %w", t, err)
		}
	}
	hi := float32(math.Inf(-1))
	for i, v := range lp {
		if v != v || v > math.MaxFloat32 {
			return nil, false, fmt.Errorf("%w: log-probability %v at step %d, row %d, token %d", ErrModel, v, t, i/s.V, i%s.V)
		}
		hi = max(hi, v)
	}
	return lp, hi > 0, nil
}

// reorder asks the model to gather its rows by src (skipping the identity)
// and checks the row count it reports afterwards.
func (s *session) reorder(src []int) error {
	if len(src) == s.cur {
		identity := true
		for i, v := range src {
			if v != i {
				identity = false
				break
			}
		}
		if identity {
			return nil
		}
	}
	if err := s.m.Reorder(src); err != nil {
		return fmt.Errorf("decode: reorder: %w", err)
	}
	if r := s.m.Rows(); r != len(src) {
		return fmt.Errorf("%w: %d rows after Reorder to %d", ErrModel, r, len(src))
	}
	s.cur = len(src)
	return nil
}

// history records every step's choices as back-pointers, so that no
// sequence is copied while beams are reselected.
type history struct {
	stride int       // row slots per step
	A      int       // attention width
	steps  int       // steps recorded
	tok    []int     // (steps, stride) token chosen into each row
	par    []int     // (steps, stride) row it extends, in the layout the step ran with
	lp     []float32 // (steps, stride) its log-probability, as reported
	attn   []float32 // (steps, stride, A) attention of the rows as the step ran them
}

func (h *history) reset(stride, A int) {
	h.stride, h.A, h.steps = stride, A, 0
	h.tok, h.par, h.lp, h.attn = h.tok[:0], h.par[:0], h.lp[:0], h.attn[:0]
}

// push adds the slot of the next step.
func (h *history) push() {
	h.steps++
	n := h.steps * h.stride
	h.tok = slices.Grow(h.tok, h.stride)[:n]
	h.par = slices.Grow(h.par, h.stride)[:n]
	h.lp = slices.Grow(h.lp, h.stride)[:n]
	if h.A > 0 {
		h.attn = slices.Grow(h.attn, h.stride*h.A)[:n*h.A]
	}
}

// set records that step t put token (log-probability lp) into row r,
// extending row par of the layout that step ran with.
func (h *history) set(t, r, token, par int, lp float32) {
	i := t*h.stride + r
	h.tok[i], h.par[i], h.lp[i] = token, par, lp
}

// token returns the token that step t put into row r.
func (h *history) token(t, r int) int { return h.tok[t*h.stride+r] }

func (h *history) attnAt(t int) []float32 {
	return h.attn[t*h.stride*h.A : (t+1)*h.stride*h.A]
}

// pathLen returns the length of the hypothesis that ends in row r at step t:
// t+1, or less when cut at its first EOS.
func (h *history) pathLen(t, r int, cutEOS bool, eos int) int {
	n := t + 1
	for s := t; s >= 0; s-- {
		i := s*h.stride + r
		if cutEOS && h.tok[i] == eos {
			n = s + 1
		}
		r = h.par[i]
	}
	return n
}

// trace writes the first len(toks) tokens of the hypothesis that ends in
// row r at step t, with their log-probabilities and attention rows.
func (h *history) trace(t, r int, toks []int, lps []float32, attn []float32) {
	for s := t; s >= 0; s-- {
		i := s*h.stride + r
		p := h.par[i]
		if s < len(toks) {
			toks[s], lps[s] = h.tok[i], h.lp[i]
			if attn != nil {
				copy(attn[s*h.A:(s+1)*h.A], h.attn[(s*h.stride+p)*h.A:])
			}
		}
		r = p
	}
}

// pick names a hypothesis to return: the row it ends in at step t.
type pick struct {
	t, row int
	score  float64
}

// results builds the hypotheses of picks, n per study in order, cutting each
// at its first EOS if cutEOS. A few allocations in all, none per token.
func (s *session) results(picks []pick, n int, cutEOS bool) [][]Hypothesis {
	h := &s.w.hist
	total := 0
	for _, p := range picks {
		total += h.pathLen(p.t, p.row, cutEOS, s.c.eos)
	}
	toks := make([]int, total)
	lps := make([]float32, total)
	var attn []float32
	if s.A > 0 {
		attn = make([]float32, total*s.A)
	}
	hyps := make([]Hypothesis, len(picks))
	out := make([][]Hypothesis, len(picks)/max(n, 1))
	off := 0
	for i, p := range picks {
		l := h.pathLen(p.t, p.row, cutEOS, s.c.eos)
		hy := Hypothesis{
			Tokens:   toks[off : off+l : off+l],
			LogProbs: lps[off : off+l : off+l],
			Score:    p.score,
		}
		if attn != nil {
			hy.Attention = attn[off*s.A : (off+l)*s.A : (off+l)*s.A]
		}
		h.trace(p.t, p.row, hy.Tokens, hy.LogProbs, hy.Attention)
		hyps[i] = hy
		off += l
	}
	for b := range out {
		out[b] = hyps[b*n : (b+1)*n : (b+1)*n]
	}
	return out
}

// topK keeps the k best (value, index) pairs offered, best first. Pairs are
// offered in increasing index order and an equal value never displaces an
// earlier one, so ties fall to the lower index, as in a stable descending
// sort.
type topK struct {
	v []float32
	i []int
	n int
}

func (q *topK) reset(k int) {
	q.v, q.i, q.n = grow(q.v, k), grow(q.i, k), 0
}

// full reports whether v cannot enter: k pairs are kept and v is not
// greater than the last.
func (q *topK) full(v float32) bool {
	return q.n == len(q.v) && !(v > q.v[q.n-1])
}

func (q *topK) offer(v float32, i int) {
	k := len(q.v)
	var pos int
	if q.n == k {
		if !(v > q.v[k-1]) {
			return
		}
		pos = k - 1
	} else {
		pos = q.n
		q.n++
	}
	for pos > 0 && q.v[pos-1] < v {
		q.v[pos], q.i[pos] = q.v[pos-1], q.i[pos-1]
		pos--
	}
	q.v[pos], q.i[pos] = v, i
}

// offerRow offers base + x[w] for every w, with index off + w. Adding in
// float32 matches torch's candidate_logprobs = beam_sum + logprobs.
func (q *topK) offerRow(base float32, x []float32, off int) {
	k := len(q.v)
	for w, v := range x {
		c := base + v
		if q.n == k && !(c > q.v[k-1]) {
			continue
		}
		q.offer(c, off+w)
	}
}

// negInf is float32 -Inf, R2Gen's float('-inf') for the decoding constraint.
var negInf = float32(math.Inf(-1))
