package memtrans

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/testdevice"
	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/optim"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// trainDevice returns the device of RADGEN_DEVICE, the reference engine
// when that is the CPU (the tests using it compare a device with the CPU).
func trainDevice(t *testing.T) radgen.Device {
	t.Helper()
	dev, err := testdevice.Compared(t)
	if err != nil {
		t.Skip(err)
	}
	return dev
}

// tinyBatch is a fixed teacher-forcing batch over a vocabulary: random
// visual features (b, n, dVisual) and b reports of different lengths with
// padding.
type tinyBatch struct {
	feats       []float32
	b, n, t     int
	in, targets []int
	mask        []float32
}

func newTinyBatch(vocab, dVisual int) *tinyBatch {
	const seqLen = 9 // bos, tokens, eos, padding
	tb := &tinyBatch{b: 3, n: 6, t: seqLen - 1}
	r := rand.New(rand.NewPCG(11, 12))
	tb.feats = make([]float32, tb.b*tb.n*dVisual)
	for i := range tb.feats {
		tb.feats[i] = float32(math.Abs(r.NormFloat64()))
	}
	for i := range tb.b {
		l := 4 + i*2 // report lengths, then padding
		row := make([]int, seqLen)
		for j := 1; j <= l; j++ {
			row[j] = 1 + r.IntN(vocab-1)
		}
		tb.in = append(tb.in, row[:seqLen-1]...)
		tb.targets = append(tb.targets, row[1:]...)
		for j := 1; j < seqLen; j++ {
			if j <= l+1 {
				tb.mask = append(tb.mask, 1)
			} else {
				tb.mask = append(tb.mask, 0)
			}
		}
	}
	return tb
}

// tinyTrainer runs R2Gen's recipe on m (whose parameters live on one
// device) over a fixed batch: dropout seeded by the step, value clipping at
// 0.1, AMSGrad at learning rate 1e-4 with weight decay 5e-5.
type tinyTrainer struct {
	m     *r2gen.Model
	opt   *optim.Adam
	feats *radgen.Tensor
	batch *tinyBatch
	step  int
}

func newTinyTrainer(t *testing.T, m *r2gen.Model, tb *tinyBatch, dev radgen.Device) *tinyTrainer {
	t.Helper()
	groups := optim.R2GenGroups(radgen.Trainable(m), 5e-5, 1e-4, 5e-5)
	a, err := optim.NewAdam(groups[1:], optim.WithAMSGrad(true))
	if err != nil {
		t.Fatal(err)
	}
	feats := radgen.FromFloat32(slices.Clone(tb.feats), tb.b, tb.n, len(tb.feats)/(tb.b*tb.n)).To(dev)
	return &tinyTrainer{m: m, opt: a, feats: feats, batch: tb}
}

// Step trains one step and returns its loss.
func (tt *tinyTrainer) Step(t *testing.T) float64 {
	t.Helper()
	b := tt.batch
	g := radgen.NewGraph(radgen.Train(uint64(100 + tt.step)))
	tt.step++
	loss, err := tt.m.Loss(g, tt.feats, arch.Batch{In: b.in, Targets: b.targets, Mask: b.mask, Size: b.b, Len: b.t})
	if err != nil {
		t.Fatal(err)
	}
	lv := float64(loss.To(radgen.CPU).Data()[0])
	if err := g.Backward(loss); err != nil {
		t.Fatal(err)
	}
	optim.ClipGradValue(tt.opt.Params(), 0.1)
	tt.opt.Step()
	tt.opt.ZeroGrad()
	return lv
}

// TestTrainOnDeviceMatchesCPU trains the tiny R2Gen encoder–decoder
// (BASE+RM+MCLN, R2GenTiny, visual features fed directly as with a frozen
// extractor) for 20 steps of R2Gen's recipe (dropout, value clipping at
// 0.1, AMSGrad at learning rate 1e-4 with weight decay) on the test device and on the CPU from
// the same seed: every loss agrees to 1e-5 relative and every final weight
// to 1e-5 (absolute below 1, relative above). The weights are compared
// absolutely near zero because some have no true gradient: attention's key
// bias cancels in the softmax, so its gradient is rounding noise, which
// Adam's normalisation turns into steps of the learning rate's size that
// differ between engines summing in different orders.
func TestTrainOnDeviceMatchesCPU(t *testing.T) {
	dev := trainDevice(t)
	const vocab, steps = 40, 20
	cfg := r2cfg(R2GenTiny(vocab))
	cpu, err := r2gen.New(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	onDev, err := r2gen.New(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := radgen.ToDevice(onDev, dev); err != nil {
		t.Fatal(err)
	}
	tb := newTinyBatch(vocab, cfg.DVisual)
	oc, od := newTinyTrainer(t, cpu, tb, radgen.CPU), newTinyTrainer(t, onDev, tb, dev)
	worstLoss := 0.0
	var first, last float64
	for s := range steps {
		lc, ld := oc.Step(t), od.Step(t)
		rel := math.Abs(lc-ld) / math.Abs(lc)
		worstLoss = max(worstLoss, rel)
		if rel > 1e-5 {
			t.Errorf("step %d: loss %.7f on the CPU, %.7f on %v (relative %.2g)", s, lc, ld, dev, rel)
		}
		if s == 0 {
			first = lc
		}
		last = lc
	}
	if !(last < first) {
		t.Errorf("the loss did not fall: %.4f → %.4f", first, last)
	}
	want := map[string]*radgen.Tensor{}
	cpu.VisitParams(func(name string, x *radgen.Tensor) { want[name] = x })
	worstW, worstOther, count := 0.0, 0.0, 0
	onDev.VisitParams(func(name string, x *radgen.Tensor) {
		count++
		if x.Device() != dev {
			t.Errorf("%s left %v for %v", name, dev, x.Device())
			return
		}
		w, got := want[name].Data(), x.To(radgen.CPU).Data()
		for i := range w {
			d := math.Abs(float64(got[i])-float64(w[i])) / max(1, math.Abs(float64(w[i])))
			worstW = max(worstW, d)
			if !strings.HasSuffix(name, "linears.1.bias") {
				worstOther = max(worstOther, d)
			}
			if d > 1e-5 {
				t.Errorf("%s[%d] = %v on %v, %v on the CPU", name, i, got[i], dev, w[i])
				return
			}
		}
	})
	t.Logf("%d steps on %v and the CPU: loss %.4f → %.4f, largest relative loss difference %.2g, largest weight difference %.2g (%.2g outside the key biases; %d tensors)",
		steps, dev, first, last, worstLoss, worstW, worstOther, count)
}

// TestCheckpointAcrossDevices trains a tiny R2Gen model's encoder–decoder
// for 20 steps on the test device and on the CPU from the same seed, then
// moves checkpoints between them: the device-trained model's checkpoint
// loads on the CPU and generates the CPU-trained model's reports, and the
// CPU-trained checkpoint loaded onto the device holds its weights bit for
// bit and saves back to the same bytes.
func TestCheckpointAcrossDevices(t *testing.T) {
	dev := trainDevice(t)
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{
		"the heart is normal in size.", "no pleural effusion.", "the lungs are clear.", "no pneumothorax is seen."})
	if err != nil {
		t.Fatal(err)
	}
	cfg := R2GenTiny(tok.Len() + 1)
	cpuModel, err := New(cfg, tok, 7)
	if err != nil {
		t.Fatal(err)
	}
	devModel, err := New(cfg, tok, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := radgen.ToDevice(devModel.EncoderDecoder(), dev); err != nil {
		t.Fatal(err)
	}
	tb := newTinyBatch(r2cfg(cfg).Vocab, r2cfg(cfg).DVisual)
	tc := newTinyTrainer(t, cpuModel.EncoderDecoder().(*r2gen.Model), tb, radgen.CPU)
	td := newTinyTrainer(t, devModel.EncoderDecoder().(*r2gen.Model), tb, dev)
	for range 20 {
		tc.Step(t)
		td.Step(t)
	}
	var fromDev, fromCPU bytes.Buffer
	if err := devModel.Save(&fromDev); err != nil {
		t.Fatal(err)
	}
	if err := cpuModel.Save(&fromCPU); err != nil {
		t.Fatal(err)
	}
	// The device's checkpoint on the CPU.
	loaded, err := Load(bytes.NewReader(fromDev.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	studies := []Study{grayStudy("a", cfg.Views, 64), grayStudy("b", cfg.Views, 96)}
	for _, opt := range []GenerateOption{WithGreedy(false), WithBeamSize(3)} {
		want, err := cpuModel.Generate(context.Background(), studies, opt, WithMaxLength(12))
		if err != nil {
			t.Fatal(err)
		}
		got, err := loaded.Generate(context.Background(), studies, opt, WithMaxLength(12))
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i].Text != want[i].Text {
				t.Errorf("study %s: trained on %v %q, on the CPU %q", want[i].StudyID, dev, got[i].Text, want[i].Text)
			}
			if d := math.Abs(got[i].LogProb - want[i].LogProb); d > 1e-5*math.Abs(want[i].LogProb) {
				t.Errorf("study %s: log-probability %v trained on %v, %v on the CPU", want[i].StudyID, got[i].LogProb, dev, want[i].LogProb)
			}
			t.Logf("study %s: %q (log-probability %.5f from %v's weights, %.5f from the CPU's)", want[i].StudyID, got[i].Text, got[i].LogProb, dev, want[i].LogProb)
		}
	}
	// The CPU's checkpoint onto the device.
	back, err := Load(bytes.NewReader(fromCPU.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := radgen.ToDevice(back.EncoderDecoder(), dev); err != nil {
		t.Fatal(err)
	}
	want := radgen.StateDict(cpuModel.EncoderDecoder(), "")
	back.EncoderDecoder().VisitParams(func(name string, x *radgen.Tensor) {
		if x.Device() != dev || !slices.Equal(x.To(radgen.CPU).Data(), want[name].Data()) {
			t.Errorf("%s on %v differs from the CPU checkpoint", name, x.Device())
		}
	})
	var again bytes.Buffer
	if err := back.Save(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), fromCPU.Bytes()) {
		t.Errorf("the CPU checkpoint saved again from %v differs (%d bytes, %d before)", dev, again.Len(), fromCPU.Len())
	}
}

// TestTrainerOnDevice runs the Trainer (frozen extractor, R2Gen's recipe)
// for 3 epochs with the encoder–decoder on the test device and on the CPU
// from the same seed: the epoch losses agree to 1e-5 relative and the final
// weights to 2·LR (absolute below 1, relative above). The kernels sum in
// different orders (the CPU's dot products in 16 lanes with AVX-512, the
// reference engine's in its own), and Adam turns the last bits of a
// gradient component near zero into a whole step of either sign: one such
// step apart, a weight differs by up to 2·LR.
func TestTrainerOnDevice(t *testing.T) {
	dev := trainDevice(t)
	ctx := context.Background()
	cfg := TrainConfig{Epochs: 3, LRVisual: 5e-5, LR: 1e-4, WeightDecay: 5e-5, AMSGrad: true, ClipValue: 0.1, StepSize: 1, Gamma: 0.8, Seed: 7, FreezeExtractor: true}
	mc, lc, _, _ := synthSetup(t, 16, 3)
	md, ld, _, _ := synthSetup(t, 16, 3)
	if err := radgen.ToDevice(md.EncoderDecoder(), dev); err != nil {
		t.Fatal(err)
	}
	tc, err := NewTrainer(mc, cfg, lc)
	if err != nil {
		t.Fatal(err)
	}
	td, err := NewTrainer(md, cfg, ld)
	if err != nil {
		t.Fatal(err)
	}
	if err := tc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := td.Run(ctx); err != nil {
		t.Fatal(err)
	}
	hc, hd := tc.History(), td.History()
	if len(hc) != 3 || len(hd) != 3 {
		t.Fatalf("%d and %d epochs, want 3", len(hc), len(hd))
	}
	worst := 0.0
	for i := range hc {
		rel := math.Abs(hc[i].Loss-hd[i].Loss) / math.Abs(hc[i].Loss)
		worst = max(worst, rel)
		if rel > 1e-5 {
			t.Errorf("epoch %d: loss %.7f on the CPU, %.7f on %v", i+1, hc[i].Loss, hd[i].Loss, dev)
		}
	}
	want := radgen.StateDict(mc.EncoderDecoder(), "")
	worstW := 0.0
	md.EncoderDecoder().VisitParams(func(name string, x *radgen.Tensor) {
		w, got := want[name].Data(), x.To(radgen.CPU).Data()
		for i := range w {
			d := math.Abs(float64(got[i])-float64(w[i])) / max(1, math.Abs(float64(w[i])))
			worstW = max(worstW, d)
			if d > 2*cfg.LR {
				t.Errorf("%s[%d] = %v on %v, %v on the CPU", name, i, got[i], dev, w[i])
				return
			}
		}
	})
	t.Logf("Trainer on %v and the CPU: epoch loss %.4f → %.4f, largest relative loss difference %.2g, largest weight difference %.2g",
		dev, hc[0].Loss, hc[2].Loss, worst, worstW)
}

// TestDeviceTrainingMemoryIsFlat trains the tiny R2Gen on the test device
// for 1,000 steps (100 with -short) and requires the engine's live bytes
// after the last step to equal those after step 10, once the garbage
// collector has freed what is unreachable: intermediates, gradients, masks
// and moments do not accumulate. It runs where the engine counts its live
// bytes (the reference engine).
func TestDeviceTrainingMemoryIsFlat(t *testing.T) {
	dev := trainDevice(t)
	if dev != radgen.Reference() {
		t.Skipf("%v does not count its live bytes as the reference engine does", dev)
	}
	steps := 1000
	if testing.Short() {
		steps = 100
	}
	cfg := r2cfg(R2GenTiny(40))
	m, err := r2gen.New(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := radgen.ToDevice(m, dev); err != nil {
		t.Fatal(err)
	}
	settle := func() int64 { return testutil.Settled(dev.LiveBytes) }
	tt := newTinyTrainer(t, m, newTinyBatch(cfg.Vocab, cfg.DVisual), dev)
	var first, last, base float64
	var baseBytes int64
	for s := range steps {
		l := tt.Step(t)
		if s == 0 {
			first = l
		}
		last = l
		if s == 9 {
			baseBytes = settle()
			base = l
		}
	}
	after := settle()
	runtime.KeepAlive(tt) // the model, its optimiser's moments and the batch stay live
	t.Logf("%d steps on %v: loss %.4f → %.4f (%.4f at step 10); live bytes %d after step 10, %d after step %d", steps, dev, first, last, base, baseBytes, after, steps)
	if math.IsNaN(last) || math.IsInf(last, 0) || !(last < first) {
		t.Errorf("loss %v → %v", first, last)
	}
	if after != baseBytes {
		t.Errorf("live bytes grew from %d after step 10 to %d after step %d", baseBytes, after, steps)
	}
}
