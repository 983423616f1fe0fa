package metrans

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/gradcheck"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/optim"
)

// metransBatch is a toy batch: B studies of N random feature rows and one
// report each, as (inputs, targets, mask) the way the trainer cuts them.
func metransBatch(b, n, dIn int, seed uint64) (feats *radgen.Tensor, in, targets []int, mask []float32, t int) {
	rng := rand.New(rand.NewPCG(seed, 3))
	feats = radgen.Zeros(b, n, dIn)
	radgen.Uniform(feats, rng, 1)
	reports := [][]int{{1, 2, 3, 4, 0}, {5, 6, 7, 0}, {1, 6, 3, 8, 9, 0}, {5, 2, 0}}
	t = 6
	for i := range b {
		row := append([]int{0}, reports[i%len(reports)]...) // BOS, words, EOS
		for len(row) < t+1 {
			row = append(row, 0)
		}
		in = append(in, row[:t]...)
		targets = append(targets, row[1:t+1]...)
		for j := range t {
			if j < len(reports[i%len(reports)]) {
				mask = append(mask, 1)
			} else {
				mask = append(mask, 0)
			}
		}
	}
	return feats, in, targets, mask, t
}

func tinyMETrans(t *testing.T, dropout float64) *Model {
	t.Helper()
	c := Config{DIn: 3, Patches: 3, Experts: 2, DModel: 4, Heads: 2, DFF: 6, DMid: 3, ViTLayers: 1,
		BilinearLayers: 1, DecoderLayers: 2, Vocab: 10, MaxSeqLen: 8, Lambda: 0.5, Dropout: dropout}
	m, err := New(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The gradient of the whole objective (Σ experts' NLL + λ·orthogonal
// loss) agrees with finite differences for every parameter and the input.
func TestMETransGradients(t *testing.T) {
	m := tinyMETrans(t, 0)
	// The initial tables (N(0, 0.02²)) make the tokens tiny before the
	// ViT's layer norms, where the loss is so curved that central
	// differences with h = 1e-6 are off by 1e-5; unit-scale tables keep
	// the check about the gradient, not the step.
	rng := rand.New(rand.NewPCG(8, 8))
	for _, x := range []*radgen.Tensor{m.ViT.Experts, m.ViT.Pos, m.ViT.Seg} {
		radgen.Uniform(x, rng, 1)
	}
	radgen.Promote64(m)
	feats32, in, targets, mask, T := metransBatch(2, 3, 3, 1)
	feats := feats32.To64()
	wrt := []*radgen.Tensor{feats}
	for _, p := range radgen.Params(m) {
		wrt = append(wrt, p.Tensor)
	}
	gradcheck.Check(t, "METransformer loss", 1e-5, func(g *radgen.Graph) *radgen.Tensor {
		f, err := m.TeacherForce(g, feats, in, 2, T)
		if err != nil {
			t.Fatal(err)
		}
		total, _, _ := m.loss(g, f, targets, mask)
		return g.Reshape(total, 1)
	}, wrt...)
}

// The loss is Σ_m NLL_m + λ·L_orth, with NLL_m each expert's masked mean.
func TestMETransLossParts(t *testing.T) {
	m := tinyMETrans(t, 0)
	feats, in, targets, mask, T := metransBatch(3, 3, 3, 2)
	g := radgen.NoGrad()
	f, err := m.TeacherForce(g, feats, in, 3, T)
	if err != nil {
		t.Fatal(err)
	}
	total, nll, orth := m.loss(g, f, targets, mask)
	var want float64
	mm, V := 2, 10
	for e := range mm {
		var s, cnt float64
		for i := range 3 {
			for j := range T {
				if mask[i*T+j] != 0 {
					s -= float64(f.LogProbs.Data()[((i*mm+e)*T+j)*V+targets[i*T+j]])
					cnt++
				}
			}
		}
		want += s / cnt
	}
	if math.Abs(nll.At()-want) > 1e-4 {
		t.Fatalf("Σ experts' NLL = %v, want %v", nll.At(), want)
	}
	if math.Abs(total.At()-(nll.At()+0.5*orth.At())) > 1e-5 || orth.At() < 0 || orth.At() > 2 {
		t.Fatalf("total %v, nll %v, orth %v (λ = 0.5)", total.At(), nll.At(), orth.At())
	}
}

// Every expert's decoding stream gives the log-probabilities of the
// teacher-forced pass on the same tokens, so each candidate report is the
// one its own expert's stream produces.
func TestMETransDecodingMatchesTeacherForcing(t *testing.T) {
	m := tinyMETrans(t, 0.1)
	feats, _, _, _, _ := metransBatch(2, 3, 3, 3)
	dec, err := m.startDecoding(feats)
	if err != nil {
		t.Fatal(err)
	}
	if dec.Rows() != 4 {
		t.Fatalf("%d rows, want B·M = 4", dec.Rows())
	}
	hyps, err := decode.Greedy{MaxLen: 5}.Decode(context.Background(), dec)
	if err != nil {
		t.Fatal(err)
	}
	for r, h := range hyps {
		toks := h[0].Tokens
		in := append([]int{0}, toks[:len(toks)-1]...)
		study := r / 2
		g := radgen.NoGrad()
		enc, err := m.encode(g, g.Slice(feats, 0, study, study+1))
		if err != nil {
			t.Fatal(err)
		}
		lp, err := m.decodeTokens(g, g.Slice(enc.Adjusted, 0, r%2, r%2+1), in, 1, len(in))
		if err != nil {
			t.Fatal(err)
		}
		for j, tok := range toks {
			got := float64(h[0].LogProbs[j])
			want := lp.At(0, j, tok)
			if math.Abs(got-want) > 1e-5 {
				t.Fatalf("row %d token %d: decoding %v, teacher forcing %v", r, j, got, want)
			}
		}
	}
}

// A few Adam steps on a toy batch lower the loss.
func TestMETransTrainingLowersLoss(t *testing.T) {
	c := Tiny(10, 6, 4)
	c.Dropout = 0
	m, err := New(c, 2)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := optim.NewAdam([]optim.Group{{Params: radgen.Trainable(m), LR: 3e-3}})
	if err != nil {
		t.Fatal(err)
	}
	feats, in, targets, mask, T := metransBatch(4, 4, 6, 4)
	var losses []float64
	for range 15 {
		g := radgen.NewGraph()
		f, err := m.TeacherForce(g, feats, in, 4, T)
		if err != nil {
			t.Fatal(err)
		}
		total, _, _ := m.loss(g, f, targets, mask)
		losses = append(losses, total.At())
		if err := g.Backward(total); err != nil {
			t.Fatal(err)
		}
		opt.Step()
		opt.ZeroGrad()
	}
	t.Logf("loss: %.4f → %.4f", losses[0], losses[len(losses)-1])
	// With dropout, a training graph draws masks (the loss differs from
	// evaluation) from its seed (the same seed, the same loss).
	m.config.Dropout = 0.3
	for _, l := range m.Decoder {
		l.dropout = 0.3
	}
	trainLoss := func(g *radgen.Graph) float64 {
		f, err := m.TeacherForce(g, feats, in, 4, T)
		if err != nil {
			t.Fatal(err)
		}
		total, _, _ := m.loss(g, f, targets, mask)
		return total.At()
	}
	a, b, e := trainLoss(radgen.NewGraph(radgen.Train(5))), trainLoss(radgen.NewGraph(radgen.Train(5))), trainLoss(radgen.NoGrad())
	if a != b || a == e {
		t.Fatalf("dropout: two runs with seed 5 give %v and %v, evaluation %v", a, b, e)
	}
	if !(losses[len(losses)-1] < 0.7*losses[0]) {
		t.Fatalf("loss went from %v to %v in %d steps", losses[0], losses[len(losses)-1], len(losses))
	}
}

func TestMETransGenerateVotes(t *testing.T) {
	m := tinyMETrans(t, 0)
	feats, _, _, _, _ := metransBatch(3, 3, 3, 5)
	reports, err := m.generate(context.Background(), feats, decode.BeamSearch{Size: 2, MaxLen: 6}, decode.Vote{Score: cidErDReward})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 3 {
		t.Fatalf("%d reports for 3 studies", len(reports))
	}
	for i, r := range reports {
		if len(r.Candidates) != 2 || len(r.Scores) != 2 || r.Expert < 0 || r.Expert > 1 {
			t.Fatalf("study %d: %+v", i, r)
		}
		if &r.Best.Tokens[0] != &r.Candidates[r.Expert].Tokens[0] {
			t.Fatalf("study %d: the winner is not candidate %d", i, r.Expert)
		}
		for j, s := range r.Scores {
			if s > r.Scores[r.Expert] {
				t.Fatalf("study %d: candidate %d scores %v above the winner's %v", i, j, s, r.Scores[r.Expert])
			}
		}
	}
	if _, err := m.generate(context.Background(), feats, decode.BeamSearch{Size: 2, MaxLen: 6}, decode.Vote{}); !errors.Is(err, decode.ErrVote) {
		t.Fatalf("vote without a metric: %v", err)
	}
}

func TestMETransStateDictRoundTrip(t *testing.T) {
	a := tinyMETrans(t, 0)
	b, err := New(a.config, 99)
	if err != nil {
		t.Fatal(err)
	}
	if err := radgen.LoadParams(b, radgen.StateDict(a, ""), ""); err != nil {
		t.Fatal(err)
	}
	feats, in, _, _, T := metransBatch(2, 3, 3, 6)
	fa, _ := a.TeacherForce(radgen.NoGrad(), feats, in, 2, T)
	fb, _ := b.TeacherForce(radgen.NoGrad(), feats, in, 2, T)
	for i, v := range fa.LogProbs.Data() {
		if fb.LogProbs.Data()[i] != v {
			t.Fatalf("log-prob %d differs after loading: %v vs %v", i, fb.LogProbs.Data()[i], v)
		}
	}
	names := map[string]bool{}
	for _, p := range radgen.Params(a) {
		if names[p.Name] {
			t.Fatalf("parameter name %q twice", p.Name)
		}
		names[p.Name] = true
	}
	for _, n := range []string{"vit.experts", "bilinear.0.eba.query_key.weight", "adjust.expert.weight", "decoder.0.cross_eba.channel.bias", "logit.weight"} {
		if !names[n] {
			t.Fatalf("no parameter %q", n)
		}
	}
}

func TestMETransErrors(t *testing.T) {
	good := Tiny(10, 6, 4)
	for _, bad := range []func(*Config){
		func(c *Config) { c.Experts = 0 },
		func(c *Config) { c.Heads = 5 },
		func(c *Config) { c.Lambda = -1 },
		func(c *Config) { c.Dropout = 1 },
	} {
		c := good
		bad(&c)
		if _, err := New(c, 1); !errors.Is(err, arch.ErrConfig) {
			t.Errorf("config %+v: %v, want arch.ErrConfig", c, err)
		}
	}
	m, _ := New(good, 1)
	if _, err := m.encode(radgen.NoGrad(), radgen.Zeros(1, 5, 6)); err == nil {
		t.Error("features with the wrong number of patches accepted")
	}
	if _, err := m.TeacherForce(radgen.NoGrad(), radgen.Zeros(1, 4, 6), []int{0, 10}, 1, 2); err == nil {
		t.Error("token outside the vocabulary accepted")
	}
}

// The incremental decoding and the recomputing one give the same
// log-probabilities through steps and reorders (expansion, repeats,
// shrinking), and the same beam-search reports.
func TestMETransIncrementalMatchesRecompute(t *testing.T) {
	m := tinyMETrans(t, 0)
	feats, _, _, _, _ := metransBatch(2, 3, 3, 7)
	inc, err := m.startDecoding(feats)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := m.StartRecompute(feats)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	ctx := context.Background()
	V := m.config.Vocab
	reorders := [][]int{{0, 0, 1, 1, 2, 2, 3, 3}, {7, 6, 5, 4, 3, 2, 1, 0}, {1, 1, 1, 4, 5}, {4, 3, 2, 1, 0}}
	for step := range 5 {
		rows := inc.Rows()
		tokens := make([]int, rows)
		for i := range tokens {
			tokens[i] = rng.IntN(V)
		}
		a, b := make([]float32, rows*V), make([]float32, rows*V)
		if err := inc.Step(ctx, tokens, a); err != nil {
			t.Fatal(err)
		}
		if err := rec.Step(ctx, tokens, b); err != nil {
			t.Fatal(err)
		}
		for i := range a {
			if d := math.Abs(float64(a[i] - b[i])); d > 1e-5 {
				t.Fatalf("step %d, entry %d: incremental %v, recompute %v", step, i, a[i], b[i])
			}
		}
		if step < len(reorders) {
			if err := inc.Reorder(reorders[step]); err != nil {
				t.Fatal(err)
			}
			if err := rec.Reorder(reorders[step]); err != nil {
				t.Fatal(err)
			}
		}
	}
	inc, _ = m.startDecoding(feats)
	rec, _ = m.StartRecompute(feats)
	beam := decode.BeamSearch{Size: 3, N: 3, MaxLen: 7}
	hi, err := beam.Decode(ctx, inc)
	if err != nil {
		t.Fatal(err)
	}
	hr, err := beam.Decode(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	for r := range hi {
		for j := range hi[r] {
			x, y := hi[r][j], hr[r][j]
			if len(x.Tokens) != len(y.Tokens) || math.Abs(x.Score-y.Score) > 1e-4 {
				t.Fatalf("row %d beam %d: %v (%v) vs %v (%v)", r, j, x.Tokens, x.Score, y.Tokens, y.Score)
			}
			for k := range x.Tokens {
				if x.Tokens[k] != y.Tokens[k] {
					t.Fatalf("row %d beam %d: %v vs %v", r, j, x.Tokens, y.Tokens)
				}
			}
		}
	}
	if err := inc.Reorder([]int{99}); !errors.Is(err, decode.ErrShape) {
		t.Fatalf("bad reorder: %v", err)
	}
}
