package memtrans

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/flops"
	"github.com/radgen/radgen/internal/testdevice"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/optim"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/mesh"
)

// r2genFLOPs returns the FLOPs of the products of R2Gen's encoder–decoder
// of configuration c (the relational-memory variants, without multi-view
// routing) on a batch of b studies of n patches each and t tokens: the
// forward pass or, with train, forward and backward (three forwards, less
// att_embed's input gradient unless featGrad says the features need one,
// as they do below a trained extractor). Norms, softmax and the gates'
// elementwise work are not counted (see internal/flops).
func r2genFLOPs(c r2gen.Config, b, n, t int, train, featGrad bool) (float64, error) {
	if c.Memory != r2gen.MemoryRelational || c.Routing != mesh.RoutingNone {
		return 0, fmt.Errorf("no FLOP count for the %q memory with routing %q", c.Memory, c.Routing)
	}
	B, N, T := float64(b), float64(n), float64(t)
	D, F, L := float64(c.DModel), float64(c.DFF), float64(c.Layers)
	S, V := float64(c.MemorySlots), float64(c.Vocab)
	// Multiply-adds, module by module.
	attEmbed := B * N * float64(c.DVisual) * D
	// Encoder layer: Q, K, V and output projections, scores and their
	// weighted sum, the feed-forward pair.
	encoder := L * B * (4*N*D*D + 2*N*N*D + 2*N*D*F)
	// Decoder layer: self-attention over the tokens; source attention (Q
	// and output on the tokens, K and V on the patches); the feed-forward
	// pair.
	decoder := L * B * (4*T*D*D + 2*T*T*D + 2*T*D*D + 2*N*D*D + 2*T*N*D + 2*T*D*F)
	var memory float64
	logitIn := D
	if c.Variant != r2gen.VariantBase {
		// The relational memory's step, per study and position: Q, K, V
		// and output projections of the S slots, U·tanh(M) (D → 2D) of
		// the slots, W·y (D → 2D) and K, V of the token, attention of S
		// queries over S+1 keys, the MLP's two layers on the slots.
		memory = B * T * ((8*S+4)*D*D + 2*S*(S+1)*D)
		if c.Variant == r2gen.VariantBaseRM {
			logitIn += S * D
		}
	}
	if c.Variant == r2gen.VariantR2Gen {
		// MCLN: three norms a layer, each with γ's and β's MLPs
		// (S·D → D → D) on every position's memory.
		decoder += L * 3 * 2 * B * T * (S*D*D + D*D)
	}
	logits := B * T * logitIn * V
	fwd := 2 * (attEmbed + encoder + decoder + memory + logits)
	switch {
	case !train:
		return fwd, nil
	case featGrad:
		return 3 * fwd, nil
	}
	return 3*fwd - 2*attEmbed, nil
}

// TestR2GenFLOPs checks r2genFLOPs against a count by hand of a small
// configuration: D 8, d_ff 16, 1 layer, 2 slots, d_vf 4, vocabulary 10, a
// study of 3 patches and 2 tokens.
func TestR2GenFLOPs(t *testing.T) {
	c := r2gen.Config{Variant: r2gen.VariantR2Gen, DModel: 8, DFF: 16, Heads: 2, Layers: 1, DVisual: 4, Vocab: 10,
		MemorySlots: 2, MemoryHeads: 2, MaxSeqLen: 2, PositionLen: 2}
	const (
		attEmbed = 3 * 4 * 8 // 96
		// Q, K, V, O: 4·3·8·8 = 768; scores and sum: 2·3·3·8 = 144;
		// feed-forward: 2·3·8·16 = 768.
		encoder = 768 + 144 + 768
		// Self: 4·2·64 = 512 and 2·2·2·8 = 64; source: Q, O 2·2·64 =
		// 256, K, V 2·3·64 = 384, 2·2·3·8 = 96; feed-forward 2·2·8·16 =
		// 512.
		decoder = 512 + 64 + 256 + 384 + 96 + 512
		// 3 norms × 2 MLPs × 2 positions × (16·8 + 8·8).
		mcln = 3 * 2 * 2 * (128 + 64)
		// Per position: Q, K, V, O of 2 slots 4·2·64 = 512, U 2·2·64 =
		// 256, W 2·64 = 128, K, V of the token 2·64 = 128, attention
		// 2·(2·3·8) = 96, MLP 2·2·64 = 256; 2 positions.
		memory = 2 * (512 + 256 + 128 + 128 + 96 + 256)
		logits = 2 * 8 * 10
	)
	for _, tc := range []struct {
		variant r2gen.Variant
		macs    float64
	}{
		{r2gen.VariantR2Gen, attEmbed + encoder + decoder + mcln + memory + logits}, // 8816
		{r2gen.VariantBaseRM, attEmbed + encoder + decoder + memory + 2*(8+16)*10},
		{r2gen.VariantBase, attEmbed + encoder + decoder + logits},
	} {
		c.Variant = tc.variant
		fwd, err := r2genFLOPs(c, 1, 3, 2, false, false)
		if err != nil {
			t.Fatal(err)
		}
		train, _ := r2genFLOPs(c, 1, 3, 2, true, false)
		trainFeat, _ := r2genFLOPs(c, 1, 3, 2, true, true)
		if fwd != 2*tc.macs || train != 6*tc.macs-2*attEmbed || trainFeat != 6*tc.macs {
			t.Errorf("%s: forward %v, training %v, with the features' gradient %v; want %v, %v, %v",
				tc.variant, fwd, train, trainFeat, 2*tc.macs, 6*tc.macs-2*attEmbed, 6*tc.macs)
		}
		// Every term scales with the batch.
		if f4, _ := r2genFLOPs(c, 4, 3, 2, false, false); f4 != 4*fwd {
			t.Errorf("%s: batch 4 is %v FLOPs, want 4 × %v", tc.variant, f4, fwd)
		}
	}
	c.Memory = r2gen.MemoryMem2Mem
	if _, err := r2genFLOPs(c, 1, 3, 2, false, false); err == nil {
		t.Error("counted Mem2Mem, which r2genFLOPs does not know")
	}
}

// TestR2GenFLOPsMatchModel checks r2genFLOPs against the weights of a
// model built from the configuration: every matrix's elements times the
// rows it multiplies (known from its checkpoint name), plus the attention
// products, which have no weights.
func TestR2GenFLOPsMatchModel(t *testing.T) {
	const b, n, tl = 2, 5, 4
	for _, v := range []r2gen.Variant{r2gen.VariantR2Gen, r2gen.VariantBaseRM, r2gen.VariantBase} {
		c := r2gen.Config{Variant: v, DModel: 16, DFF: 24, Heads: 2, Layers: 2, DVisual: 12, Vocab: 11,
			MemorySlots: 3, MemoryHeads: 4, MaxSeqLen: tl, PositionLen: tl}
		m, err := r2gen.New(c, 1)
		if err != nil {
			t.Fatal(err)
		}
		S := c.MemorySlots
		var macs float64
		m.VisitParams(func(name string, w *radgen.Tensor) {
			if w.Rank() != 2 || strings.HasPrefix(name, "model.tgt_embed.") {
				return // biases, norms' vectors, the embedding lookup
			}
			var rows int
			switch {
			case strings.HasPrefix(name, "att_embed."), strings.HasPrefix(name, "model.encoder."):
				rows = b * n
			case strings.Contains(name, ".src_attn.linears.1."), strings.Contains(name, ".src_attn.linears.2."):
				rows = b * n // keys and values of the patches
			case strings.HasPrefix(name, "model.decoder."), strings.HasPrefix(name, "logit."), strings.HasPrefix(name, "model.rm.W."):
				rows = b * tl
			case strings.HasPrefix(name, "model.rm.attn.linears.1."), strings.HasPrefix(name, "model.rm.attn.linears.2."):
				rows = b * tl * (S + 1) // keys and values of [M; y]
			case strings.HasPrefix(name, "model.rm."):
				rows = b * tl * S
			default:
				t.Fatalf("%s: no count for %s", v, name)
			}
			macs += float64(rows * w.Len())
		})
		D, L := c.DModel, c.Layers
		macs += float64(L * b * 2 * n * n * D)          // encoder attention
		macs += float64(L * b * (2*tl*tl*D + 2*tl*n*D)) // decoder attention
		if v != r2gen.VariantBase {
			macs += float64(b * tl * 2 * S * (S + 1) * D) // memory attention
		}
		if got, err := r2genFLOPs(c, b, n, tl, false, false); err != nil || got != 2*macs {
			t.Errorf("%s: r2genFLOPs %v (%v), the model's weights give %v", v, got, err, 2*macs)
		}
	}
}

// paperModel is R2Gen's IU X-Ray configuration (d=512, 3 layers, 8 heads,
// 3 memory slots, vocabulary 761) with random weights.
func paperModel(b testing.TB) *r2gen.Model {
	m, err := r2gen.New(r2gen.IUXray(761), 1)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func randomFeats(b, n, d int, seed uint64) *radgen.Tensor {
	r := rand.New(rand.NewPCG(seed, 1))
	x := radgen.Zeros(b, n, d)
	for i := range x.Data() {
		x.Data()[i] = float32(r.Float64())
	}
	return x
}

// BenchmarkForward is the teacher-forced forward pass of the paper's IU
// configuration: batch 16, 98 patches, 60 tokens.
func BenchmarkForward(b *testing.B) {
	m := paperModel(b)
	const B, T = 16, 60
	feats := randomFeats(B, 98, 2048, 2)
	tokens := make([]int, B*T)
	r := rand.New(rand.NewPCG(3, 3))
	for i := range tokens {
		tokens[i] = 1 + r.IntN(760)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := m.TeacherForce(radgen.NoGrad(), feats, tokens, B, T); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(B*T*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// noEOS forces full-length reports: it forbids the end token after every
// step, so a random model writes exactly MaxLen tokens.
type noEOS struct{ decode.Model }

func (n noEOS) Step(ctx context.Context, tokens []int, dst []float32) error {
	if err := n.Model.Step(ctx, tokens, dst); err != nil {
		return err
	}
	V := n.VocabSize()
	for r := 0; r < n.Rows(); r++ {
		dst[r*V] = float32(math.Inf(-1))
	}
	return nil
}

// BenchmarkGenerate decodes 60-token reports (eos forbidden) with the paper's
// IU configuration, incrementally (with float32 weights, and "half" with a
// half-precision snapshot) and with the published code's full-prefix
// recomputation, reporting ms per study and ns per token.
func BenchmarkGenerate(b *testing.B) {
	m := paperModel(b)
	hw := halfSnapshot(m.StepWeights())
	const maxLen = 60
	for _, mode := range []string{"incremental", "half", "recompute"} {
		for _, strat := range []string{"greedy", "beam3"} {
			for _, batch := range []int{1, 16} {
				if mode == "recompute" && batch > 1 {
					continue // the baseline is slow enough at batch 1
				}
				b.Run(fmt.Sprintf("%s/%s/batch=%d", mode, strat, batch), func(b *testing.B) {
					feats := randomFeats(batch, 98, 2048, 4)
					var s decode.Strategy = decode.Greedy{MaxLen: maxLen}
					if strat == "beam3" {
						s = decode.BeamSearch{Size: 3, MaxLen: maxLen, FullLength: true}
					}
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						var model decode.Model
						var err error
						switch mode {
						case "incremental":
							model, err = m.StartDecoding(feats)
						case "half":
							model, err = m.StartDecoding(feats, radgen.SubstituteWeights(hw))
						default:
							model, err = m.StartRecompute(feats)
						}
						if err != nil {
							b.Fatal(err)
						}
						hyps, err := s.Decode(context.Background(), noEOS{model})
						if err != nil {
							b.Fatal(err)
						}
						if r, ok := model.(arch.Releaser); ok {
							r.Release() // as Generate does: the next decoding reuses its memory
						}
						if n := len(hyps[0][0].Tokens); n != maxLen {
							b.Fatalf("%d tokens, want %d", n, maxLen)
						}
					}
					sec := b.Elapsed().Seconds() / float64(b.N)
					b.ReportMetric(sec*1e3/float64(batch), "ms/study")
					b.ReportMetric(sec*1e9/float64(batch*maxLen), "ns/token")
				})
			}
		}
	}
}

// BenchmarkTrainStep is one optimiser step of the paper's IU configuration
// without the extractor (features given): batch 16, 60 tokens, forward,
// backward, clipping and Adam, on the device of RADGEN_DEVICE (the CPU by
// default; the model and the features are moved there before the timer
// starts). The steps' graphs share a step memory, as memtrans.Trainer's do,
// and two steps before the timer starts warm it (the first measures a
// step's memory, the second takes it whole) and create Adam's moments. It reports tokens/s, GFLOP/step (forward and backward, see
// r2genFLOPs), GFLOP/s and peak-frac, the CPU use during the steps, the
// kernel's part of it, minor page faults and bytes allocated per step.
func BenchmarkTrainStep(b *testing.B) {
	dev := testdevice.Benched(b)
	m := paperModel(b)
	work, err := r2genFLOPs(m.Config().(r2gen.Config), 16, 98, 60, true, false)
	if err != nil {
		b.Fatal(err)
	}
	if err := radgen.ToDevice(m, dev); err != nil {
		b.Fatal(err)
	}
	const B, T = 16, 60
	feats := randomFeats(B, 98, 2048, 6).To(dev)
	r := rand.New(rand.NewPCG(4, 4))
	in := make([]int, B*T)
	tg := make([]int, B*T)
	mask := make([]float32, B*T)
	for i := range in {
		in[i], tg[i], mask[i] = 1+r.IntN(760), 1+r.IntN(760), 1
	}
	params := radgen.Trainable(m)
	opt, err := optim.NewAdam(optim.R2GenGroups(params, 5e-5, 1e-4, 5e-5), optim.WithAMSGrad(true))
	if err != nil {
		b.Fatal(err)
	}
	ws := radgen.NewStepMemory()
	step := func(i int) {
		g := radgen.NewGraph(radgen.Train(uint64(i)), radgen.InStepMemory(ws))
		f, err := m.TeacherForce(g, feats, in, B, T)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Backward(arch.LanguageModelLoss(g, f.LogProbs, tg, mask)); err != nil {
			b.Fatal(err)
		}
		optim.ClipGradValue(params, 0.1)
		opt.Step()
		opt.ZeroGrad()
	}
	step(-2)
	step(-1)
	b.ReportAllocs()
	cpu0, sys0, faults0 := usage()
	b.ResetTimer()
	for i := range b.N {
		step(i)
	}
	b.StopTimer()
	cpu1, sys1, faults1 := usage()
	// CPU use as a share of the cores (1: every core busy for the whole
	// step), the kernel's part of it, and the minor page faults (fresh
	// pages the kernel zeroes) per step.
	wall := b.Elapsed().Seconds() * float64(runtime.GOMAXPROCS(0))
	b.ReportMetric((cpu1-cpu0).Seconds()/wall, "cpu-use")
	b.ReportMetric((sys1-sys0).Seconds()/wall, "sys-use")
	b.ReportMetric(float64(faults1-faults0)/float64(b.N), "faults/op")
	b.ReportMetric(float64(B*T*b.N)/b.Elapsed().Seconds(), "tokens/s")
	flops.Report(b, work, dev)
}

// BenchmarkTrainStepTiny is one Trainer step of the tiny model (R2GenTiny,
// extractor trained too) on a batch of 8 synthetic studies, on the device
// of RADGEN_DEVICE (the CPU by default; the whole model is moved there
// before the timer starts). It reports tokens/s, the teacher-forced
// positions of the batch.
func BenchmarkTrainStepTiny(b *testing.B) {
	dev := testdevice.Benched(b)
	m, loader, _, _ := synthSetup(b, 16, 1)
	if err := radgen.ToDevice(m, dev); err != nil {
		b.Fatal(err)
	}
	tr, err := NewTrainer(m, TrainConfig{Epochs: 1, LR: 1e-3, LRVisual: 1e-3, AMSGrad: true, ClipValue: 0.1, Seed: 1}, loader)
	if err != nil {
		b.Fatal(err)
	}
	var batch *data.Batch
	for bt, err := range loader.Epoch(context.Background(), 0) {
		if err != nil {
			b.Fatal(err)
		}
		batch = bt
		break
	}
	b.ResetTimer()
	for range b.N {
		if _, err := tr.Step(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(batch.Size()*(batch.SeqLen-1)*b.N)/b.Elapsed().Seconds(), "tokens/s")
}
