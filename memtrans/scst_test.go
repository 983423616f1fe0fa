package memtrans

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/optim"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// scstToy is a tiny R2Gen model and four studies whose references share
// words pairwise, so that CIDEr-D's idf over the batch is informative.
func scstToy(t *testing.T, seed uint64) (*r2gen.Model, *radgen.Tensor, [][][]int) {
	t.Helper()
	c := r2gen.Config{Variant: r2gen.VariantR2Gen, DModel: 16, DFF: 16, Heads: 2, Layers: 1, DVisual: 6, Vocab: 10,
		MemorySlots: 2, MemoryHeads: 2, MaxSeqLen: 8, PositionLen: 16}
	m, err := r2gen.New(c, seed)
	if err != nil {
		t.Fatal(err)
	}
	feats := radgen.Zeros(4, 3, 6)
	radgen.Uniform(feats, rand.New(rand.NewPCG(seed, 7)), 1)
	refs := [][][]int{
		{{1, 2, 3, 4, 0}},
		{{5, 6, 7, 8, 0}},
		{{1, 6, 3, 8, 0}, {1, 6, 3, 9, 0}},
		{{5, 2, 7, 4, 0}},
	}
	return m, feats, refs
}

func newSCSTAdam(t *testing.T, m *r2gen.Model, lr float64) *optim.Adam {
	t.Helper()
	opt, err := optim.NewAdam([]optim.Group{{Params: radgen.Trainable(m), LR: lr}})
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

// The teacher-forced sequence log-probability equals the sum of the
// per-token log-probabilities that beam search reported for it.
func TestSequenceLogProbsMatchDecoding(t *testing.T) {
	m, feats, _ := scstToy(t, 1)
	dec, err := m.StartDecoding(feats)
	if err != nil {
		t.Fatal(err)
	}
	hyps, err := decode.BeamSearch{Size: 3, N: 3, MaxLen: 8}.Decode(context.Background(), dec)
	if err != nil {
		t.Fatal(err)
	}
	var seqs [][]int
	var studies []int
	var want []float64
	for i, h := range hyps {
		for _, hy := range h {
			seqs = append(seqs, hy.Tokens)
			studies = append(studies, i)
			var s float64
			for _, lp := range hy.LogProbs {
				s += float64(lp)
			}
			want = append(want, s)
		}
	}
	for _, mean := range []bool{false, true} {
		got, err := sequenceLogProbs(m, radgen.NoGrad(), feats, seqs, studies, mean)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			if mean {
				w /= float64(len(seqs[i]))
			}
			if d := math.Abs(got.At(i) - w); d > 1e-4 {
				t.Fatalf("mean=%v: sequence %d %v: log p = %v, decoding gave %v", mean, i, seqs[i], got.At(i), w)
			}
		}
	}
}

// weighted returns J = Σᵢ advᵢ · log p(wⁱ), the objective SCST ascends.
func weighted(t *testing.T, m *r2gen.Model, feats *radgen.Tensor, res SCSTResult, k int) float64 {
	t.Helper()
	studies := make([]int, len(res.Sequences))
	for i := range studies {
		studies[i] = i / k
	}
	lp, err := sequenceLogProbs(m, radgen.NoGrad(), feats, res.Sequences, studies, true)
	if err != nil {
		t.Fatal(err)
	}
	var j float64
	for i, a := range res.Advantages {
		j += a * lp.At(i)
	}
	return j
}

// One step moves probability towards the sequences that beat their
// study's mean and away from the others: J = Σ (r − b)·log p, measured on
// the sequences the step sampled, is larger after the update than before.
func TestSCSTStepIsCorrectSigned(t *testing.T) {
	m, feats, refs := scstToy(t, 2)
	const k = 4
	s, err := newSCST(m, newSCSTAdam(t, m, 1e-3), SCSTConfig{Samples: k}, nil)
	if err != nil {
		t.Fatal(err)
	}
	snapshot := map[string][]float32{}
	for _, p := range radgen.Params(m) {
		snapshot[p.Name] = append([]float32(nil), p.Tensor.Data()...)
	}
	res, err := s.Step(context.Background(), feats, refs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sequences) != 4*k || len(res.Rewards) != 4*k || s.steps() != 1 {
		t.Fatalf("%d sequences, %d rewards, %d steps; want %d, %d, 1", len(res.Sequences), len(res.Rewards), s.steps(), 4*k, 4*k)
	}
	var nonzero bool
	for i := 0; i < len(res.Advantages); i += k {
		var sum float64
		for _, a := range res.Advantages[i : i+k] {
			sum += a
			nonzero = nonzero || math.Abs(a) > 1e-9
		}
		if math.Abs(sum) > 1e-9 {
			t.Fatalf("advantages of study %d sum to %v, want 0 (mean baseline)", i/k, sum)
		}
	}
	if !nonzero {
		t.Fatalf("every advantage is zero (rewards %v): the toy set does not test anything", res.Rewards)
	}
	after := weighted(t, m, feats, res, k)
	updated := map[string][]float32{}
	for _, p := range radgen.Params(m) {
		updated[p.Name] = append([]float32(nil), p.Tensor.Data()...)
		copy(p.Tensor.Data(), snapshot[p.Name])
	}
	before := weighted(t, m, feats, res, k)
	// The loss reported is −J/R before the update.
	if want := -before / float64(len(res.Advantages)); math.Abs(res.Loss-want) > 1e-5 {
		t.Fatalf("loss %v, want −J/R = %v", res.Loss, want)
	}
	if !(after > before) {
		t.Fatalf("Σ(r−b)·log p went from %v to %v; SCST must increase it", before, after)
	}
	t.Logf("J = Σ(r−b)·mean log p: %.6f → %.6f; mean reward %.4f", before, after, res.MeanReward)
	var changed bool
	for _, p := range radgen.Params(m) {
		for i, v := range updated[p.Name] {
			changed = changed || v != snapshot[p.Name][i]
		}
	}
	if !changed {
		t.Fatal("the step changed no parameter")
	}
}

// A few dozen SCST steps raise the mean CIDEr-D reward of the sampled
// sequences on the toy set.
func TestSCSTRaisesReward(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for a few dozen steps")
	}
	m, feats, refs := scstToy(t, 3)
	s, err := newSCST(m, newSCSTAdam(t, m, 1e-2), SCSTConfig{Samples: 4, Seed: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rewards []float64
	for range 40 {
		res, err := s.Step(context.Background(), feats, refs)
		if err != nil {
			t.Fatal(err)
		}
		rewards = append(rewards, res.MeanReward)
	}
	mean := func(x []float64) float64 {
		var s float64
		for _, v := range x {
			s += v
		}
		return s / float64(len(x))
	}
	first, last := mean(rewards[:5]), mean(rewards[len(rewards)-5:])
	t.Logf("mean CIDEr-D reward: first 5 steps %.4f, last 5 steps %.4f", first, last)
	if !(last > first+0.1) {
		t.Fatalf("mean reward went from %.4f to %.4f over %d steps; want a clear rise", first, last, len(rewards))
	}
}

func TestSCSTErrors(t *testing.T) {
	m, feats, refs := scstToy(t, 4)
	opt := newSCSTAdam(t, m, 1e-3)
	for _, c := range []SCSTConfig{{Samples: 1}, {Samples: 3, MaxLen: 99}, {Samples: 3, ClipNorm: -1}} {
		if _, err := newSCST(m, opt, c, nil); !errors.Is(err, ErrSCST) {
			t.Errorf("config %+v: %v, want ErrSCST", c, err)
		}
	}
	s, err := newSCST(m, opt, SCSTConfig{Samples: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Step(ctx, feats, refs[:3]); !errors.Is(err, ErrSCST) {
		t.Errorf("3 reference sets for 4 studies: %v", err)
	}
	bad := append([][][]int{{}}, refs[1:]...)
	if _, err := s.Step(ctx, feats, bad); !errors.Is(err, ErrSCST) {
		t.Errorf("study without references: %v", err)
	}
	short := func(context.Context, [][][]int, [][]int) ([]float64, error) { return []float64{1}, nil }
	s2, _ := newSCST(m, opt, SCSTConfig{Samples: 2}, short)
	if _, err := s2.Step(ctx, feats, refs); !errors.Is(err, ErrSCST) {
		t.Errorf("reward of the wrong length: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Step(cctx, feats, refs); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if s.steps() != 0 {
		t.Errorf("failed steps counted: %d", s.steps())
	}
}

func TestRewards(t *testing.T) {
	ctx := context.Background()
	refs := [][][]int{{{1, 2, 3, 4}}, {{5, 6, 7, 8}}, {{1, 6, 3, 8}}}
	got, err := cidErDReward(ctx, refs, [][]int{{1, 2, 3, 4}, {9, 9}, {1, 6, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if !(got[0] > got[2] && got[2] > got[1] && got[1] == 0) {
		t.Fatalf("CIDEr-D rewards %v: want exact > partial > unrelated = 0", got)
	}
	b4, err := bleuReward(4)
	if err != nil {
		t.Fatal(err)
	}
	bl, err := b4(ctx, refs[:1], [][]int{{1, 2, 3, 4}})
	if err != nil || math.Abs(bl[0]-1) > 1e-6 {
		t.Fatalf("BLEU-4 of an exact copy = %v (%v), want 1", bl, err)
	}
	if _, err := bleuReward(5); err == nil {
		t.Fatal("BLEU-5 accepted")
	}
}

func TestSCSTReferences(t *testing.T) {
	b := &data.Batch{Examples: []*data.Example{{IDs: []int{0, 4, 5, 0}}, {IDs: []int{0, 7}}}}
	refs := scstReferences(b)
	if len(refs) != 2 || len(refs[0]) != 1 || len(refs[0][0]) != 3 || refs[0][0][0] != 4 || refs[0][0][2] != 0 ||
		len(refs[1][0]) != 1 || refs[1][0][0] != 7 {
		t.Fatalf("references %v", refs)
	}
	refs[0][0][0] = 99
	if b.Examples[0].IDs[1] != 4 {
		t.Fatal("SCSTReferences shares the batch's ids")
	}
}
