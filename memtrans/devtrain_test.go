package memtrans

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans/optim"
)

// trainDevice returns the device of RADGEN_DEVICE, the reference engine
// when that is the CPU (the tests using it compare a device with the CPU).
func trainDevice(t *testing.T) radgen.Device {
	t.Helper()
	dev, err := radgen.ParseDevice(testutil.DeviceName(t))
	if err != nil {
		t.Fatal(err)
	}
	if dev == radgen.CPU {
		dev = radgen.Reference()
	}
	if err := dev.Check(); err != nil {
		t.Skipf("device %v: %v", dev, err)
	}
	return dev
}

// TestTrainOnDeviceMatchesCPU trains the tiny R2Gen encoder–decoder
// (BASE+RM+MCLN, TinyConfig, visual features fed directly as with a frozen
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
	const (
		vocab, b, n, steps = 40, 3, 6, 20
		seqLen             = 9 // bos, tokens, eos, padding
	)
	cfg := TinyConfig(vocab).Transformer
	cpu, err := NewTransformer(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	onDev, err := NewTransformer(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := radgen.ToDevice(onDev, dev); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	fv := make([]float32, b*n*cfg.DVisual)
	for i := range fv {
		fv[i] = float32(math.Abs(r.NormFloat64()))
	}
	featsCPU := radgen.FromFloat32(fv, b, n, cfg.DVisual)
	featsDev := featsCPU.To(dev)
	var in, targets []int
	var mask []float32
	for i := range b {
		l := 4 + i*2 // report lengths, then padding
		row := make([]int, seqLen)
		for j := 1; j <= l; j++ {
			row[j] = 1 + r.IntN(vocab-1)
		}
		in = append(in, row[:seqLen-1]...)
		targets = append(targets, row[1:]...)
		for j := 1; j < seqLen; j++ {
			if j <= l+1 {
				mask = append(mask, 1)
			} else {
				mask = append(mask, 0)
			}
		}
	}
	newOpt := func(m *Transformer) *optim.Adam {
		groups := optim.R2GenGroups(radgen.Trainable(m), 5e-5, 1e-4, 5e-5)
		a, err := optim.NewAdam(groups[1:], optim.WithAMSGrad(true))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	step := func(m *Transformer, opt *optim.Adam, feats *radgen.Tensor, s int) float64 {
		g := radgen.NewGraph(radgen.Train(uint64(100 + s)))
		loss, err := m.trainingLoss(g, feats, in, targets, mask, b, seqLen-1)
		if err != nil {
			t.Fatal(err)
		}
		lv := float64(loss.To(radgen.CPU).Data()[0])
		if err := g.Backward(loss); err != nil {
			t.Fatal(err)
		}
		optim.ClipGradValue(opt.Params(), 0.1)
		opt.Step()
		opt.ZeroGrad()
		return lv
	}
	oc, od := newOpt(cpu), newOpt(onDev)
	worstLoss := 0.0
	var first, last float64
	for s := range steps {
		lc := step(cpu, oc, featsCPU, s)
		ld := step(onDev, od, featsDev, s)
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
