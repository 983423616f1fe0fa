package memtrans

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen/internal/flops"
	"github.com/radgen/radgen/internal/testdevice"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/vision"
)

// BenchmarkTrainStepFull is one step of the paper's recipe on IU X-Ray as
// the published code trains it: R2GenIUXray (ResNet-101 extractor with
// batch statistics, fine-tuned, and the encoder–decoder with a vocabulary
// of 761), a batch of 16 studies of two 224² views and 60 token positions,
// run by Trainer.Step under R2GenIUXrayTraining: forward, masked NLL,
// backward, clipping by value at 0.1 and AMSGrad Adam with weight decay
// 5e-5 in R2Gen's two groups (extractor 5e-5, the rest 1e-4). Images are
// N(0, 1), token ids uniform in [1, 759], every position counted, on the
// device of RADGEN_DEVICE (the CPU by default). One untimed step comes
// first, as in the anchor script of ../shared/bench, so that the timed ones
// do not pay the first step's allocations (Adam's moments among them).
//
// It reports images/s, tokens/s, GFLOP/step (see internal/flops and
// r2genFLOPs), GFLOP/s and peak-frac. About half a minute a step on two
// cores: skipped with -short.
func BenchmarkTrainStepFull(b *testing.B) {
	if testing.Short() {
		b.Skip("slow: the ResNet-101 extractor trains on 32 images a step")
	}
	dev := testdevice.Benched(b)
	const B, T, vocab = 16, 60, 761
	words := make([]string, vocab-1) // [Unk] and 759 words, in code-point order
	words[0] = data.Unk
	for i := 1; i < len(words); i++ {
		words[i] = fmt.Sprintf("w%03d", i)
	}
	tok, err := data.NewTokenizer(data.IUXray, 3, words)
	if err != nil {
		b.Fatal(err)
	}
	cfg := R2GenIUXray(vocab)
	m, err := New(cfg, tok, 1, WithDevice(dev))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	batch := fullStepBatch(B, T, cfg.Views, cfg.ImageSize)
	// The trainer takes a loader for its epochs; Step is given the batch.
	ds := &data.Dataset{Corpus: data.IUXray, Split: "train", Views: cfg.Views, MaxSeqLen: T + 1}
	for _, e := range batch.Examples {
		ds.Examples = append(ds.Examples, *e)
	}
	loader, err := data.NewLoader(ds, data.WithBatchSize(B), data.WithoutImages())
	if err != nil {
		b.Fatal(err)
	}
	tr, err := NewTrainer(m, R2GenIUXrayTraining(), loader)
	if err != nil {
		b.Fatal(err)
	}
	work, err := trainStepFLOPs(cfg, B, T)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := tr.Step(ctx, batch); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := tr.Step(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(B*cfg.Views*b.N)/sec, "images/s")
	b.ReportMetric(float64(B*T*b.N)/sec, "tokens/s")
	flops.Report(b, work, dev)
}

// trainStepFLOPs returns the FLOPs of a training step of an R2Gen model of
// configuration c with its extractor fine-tuned, on b studies and t token
// positions: the extractor's forward and backward on every view, and the
// encoder–decoder's, with the gradient of the features it is given.
func trainStepFLOPs(c ModelConfig, b, t int) (float64, error) {
	rc, ok := c.EncoderDecoder.(r2gen.Config)
	if !ok {
		return 0, fmt.Errorf("no FLOP count for a %T encoder–decoder", c.EncoderDecoder)
	}
	decoder, err := r2genFLOPs(rc, b, c.PatchesPerStudy(), t, true, true)
	if err != nil {
		return 0, err
	}
	image := flops.ResNet(c.Vision.Block == vision.Bottleneck, c.Vision.Layers, c.ImageSize, c.ImageSize, true)
	return decoder + float64(b*c.Views)*image, nil
}

func TestTrainStepFLOPs(t *testing.T) {
	// The paper's IU X-Ray step: 32 images through ResNet-101 (7.8 GMACs
	// each forward, He et al. 2016, Table 1), ×3 for training, less the
	// stem's input gradient (0.118 GMACs), and the encoder–decoder's
	// 88 GFLOPs forward (r2genFLOPs, of which MCLN's MLPs are 36), ×3.
	got, err := trainStepFLOPs(R2GenIUXray(761), 16, 60)
	if err != nil {
		t.Fatal(err)
	}
	if got < 1.74e12 || got > 1.77e12 {
		t.Errorf("paper step: %.4g FLOPs, want about 1.75e12", got)
	}
	// One view per study (MIMIC-CXR): half the images, half the patches.
	c := R2GenMIMICCXR(761)
	decoder, _ := r2genFLOPs(c.EncoderDecoder.(r2gen.Config), 4, 49, 10, true, true)
	want := decoder + 4*flops.ResNet(true, vision.ResNet101.Layers, 224, 224, true)
	if got, err := trainStepFLOPs(c, 4, 10); err != nil || got != want {
		t.Errorf("MIMIC-CXR step: %v (%v), want %v", got, err, want)
	}
	if _, err := trainStepFLOPs(M2IUXray(761), 4, 10); err == nil {
		t.Error("counted an M² step, which trainStepFLOPs does not know")
	}
}

// fullStepBatch is the anchor's batch: b studies of views n×n images with
// N(0, 1) values and t+1 ids uniform in [1, 759] (t positions: the model
// reads ids 0..t−1 and predicts 1..t), every one unmasked.
func fullStepBatch(b, t, views, n int) *data.Batch {
	r := rand.New(rand.NewPCG(5, 5))
	out := &data.Batch{Views: views, Height: n, Width: n, SeqLen: t + 1,
		Images: make([]float32, b*views*3*n*n), Targets: make([]int, b*(t+1)), Masks: make([]float32, b*(t+1))}
	for i := range out.Images {
		out.Images[i] = float32(r.NormFloat64())
	}
	for i := range out.Targets {
		out.Targets[i], out.Masks[i] = 1+r.IntN(759), 1
	}
	for i := range b {
		ids := out.Targets[i*(t+1) : (i+1)*(t+1)]
		out.Examples = append(out.Examples, &data.Example{ID: fmt.Sprintf("study%02d", i), Report: "w001", IDs: ids})
		out.Index = append(out.Index, i)
		out.Lengths = append(out.Lengths, t+1)
	}
	return out
}
