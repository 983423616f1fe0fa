package memtrans

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/testdevice"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/optim"
	"github.com/radgen/radgen/memtrans/r2gen"
)

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
// starts). It reports tokens/s.
func BenchmarkTrainStep(b *testing.B) {
	dev := testdevice.Benched(b)
	m := paperModel(b)
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
	b.ResetTimer()
	for i := range b.N {
		g := radgen.NewGraph(radgen.Train(uint64(i)))
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
	b.ReportMetric(float64(B*T*b.N)/b.Elapsed().Seconds(), "tokens/s")
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
