package memtrans

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// An SCST step on a device (RADGEN_DEVICE, the reference engine by
// default) samples the sequences the CPU samples, gets the same rewards and
// moves every parameter as the CPU's step does.
func TestSCSTOnDeviceMatchesCPU(t *testing.T) {
	dev := testDevice(t)
	cpu, feats, refs := scstToy(t, 2)
	on, _, _ := scstToy(t, 2)
	if err := radgen.ToDevice(on, dev); err != nil {
		t.Fatal(err)
	}
	const k = 4
	step := func(m *r2gen.Model) SCSTResult {
		s, err := newSCST(m, newSCSTAdam(t, m, 1e-3), SCSTConfig{Samples: k, ClipNorm: 0.1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Step(context.Background(), feats, refs)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := step(cpu), step(on)
	if len(a.Sequences) != len(b.Sequences) {
		t.Fatalf("%d sequences on the CPU, %d on %v", len(a.Sequences), len(b.Sequences), dev)
	}
	for i := range a.Sequences {
		if !slices.Equal(a.Sequences[i], b.Sequences[i]) || math.Abs(a.Rewards[i]-b.Rewards[i]) > 1e-9 {
			t.Fatalf("sample %d: CPU %v (reward %v), %v %v (reward %v)", i, a.Sequences[i], a.Rewards[i], dev, b.Sequences[i], b.Rewards[i])
		}
	}
	if math.Abs(a.Loss-b.Loss) > 1e-5*math.Max(1, math.Abs(a.Loss)) {
		t.Fatalf("loss %v on the CPU, %v on %v", a.Loss, b.Loss, dev)
	}
	want := radgen.StateDict(cpu, "")
	var worst float64
	for name, p := range radgen.StateDict(on, "") {
		got, w := p.To(radgen.CPU).Float64s(), want[name].Float64s()
		for i := range w {
			worst = math.Max(worst, math.Abs(got[i]-w[i]))
		}
	}
	t.Logf("SCST step on %v: %d samples as on the CPU; loss %.6g; weights within %.3g", dev, len(b.Sequences), b.Loss, worst)
	if worst > 1e-5 {
		t.Errorf("weights after the step differ from the CPU's by %.3g", worst)
	}
}

// Through the facade, a METransformer writes the same reports, experts and
// votes on a device as on the CPU.
func TestMETransModelOnDevice(t *testing.T) {
	dev := testDevice(t)
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal in size.", "no pleural effusion or pneumothorax.", "the lungs are clear."})
	if err != nil {
		t.Fatal(err)
	}
	cfg := METransTiny(tok.Len() + 1)
	cpu, err := New(cfg, tok, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	on, err := New(cfg, tok, 3, WithDevice(dev))
	if err != nil {
		t.Fatal(err)
	}
	defer on.Close()
	feats := randomFeats(2, cfg.PatchesPerStudy(), cfg.Vision.OutChannels(), 5)
	ids := []string{"a", "b"}
	for _, opts := range [][]GenerateOption{{WithBeamSize(3), WithMaxLength(12)}, {WithGreedy(false), WithMaxLength(12)}} {
		a, err := cpu.GenerateFeatures(context.Background(), ids, feats, opts...)
		if err != nil {
			t.Fatal(err)
		}
		b, err := on.GenerateFeatures(context.Background(), ids, feats, opts...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range a {
			if a[i].Text != b[i].Text || a[i].Expert != b[i].Expert || math.Abs(a[i].LogProb-b[i].LogProb) > 1e-4 {
				t.Fatalf("report %d: CPU %q (expert %d, %v), %v %q (expert %d, %v)", i, a[i].Text, a[i].Expert, a[i].LogProb, dev, b[i].Text, b[i].Expert, b[i].LogProb)
			}
		}
	}
}

// A frozen-extractor Trainer on a device — batch-norm calibration, features
// cached in memory and on disk — trains as the CPU does, and fresh models
// that read the disk caches back train as the first ones did.
func TestFrozenTrainerWithCacheOnDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("trains four tiny models")
	}
	dev := testDevice(t)
	ctx := context.Background()
	first, loader, _, _ := synthSetup(t, 16, 4)
	first.Close()
	run := func(on radgen.Device, cache string) float64 {
		m, err := New(first.cfg, first.tokenizer, 4, WithDevice(on)) // the same weights each time
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		tr, err := NewTrainer(m, TrainConfig{Epochs: 1, LR: 2e-3, Seed: 3, FreezeExtractor: true, CalibrateBatches: 1, FeatureCache: cache}, loader)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Run(ctx); err != nil {
			t.Fatal(err)
		}
		h := tr.History()
		return h[len(h)-1].Loss
	}
	cpuDir, devDir := t.TempDir(), t.TempDir()
	var cpu0, dev0 float64
	for round := range 2 { // the second round reads the caches the first wrote
		a, b := run(radgen.CPU, cpuDir), run(dev, devDir)
		t.Logf("round %d: loss %.7f on the CPU, %.7f on %v", round, a, b, dev)
		if math.Abs(a-b) > 1e-4*math.Abs(a) {
			t.Fatalf("round %d: loss %v on the CPU, %v on %v", round, a, b, dev)
		}
		if round == 0 {
			cpu0, dev0 = a, b
		} else if math.Abs(a-cpu0) > 1e-6*math.Abs(a) || math.Abs(b-dev0) > 1e-6*math.Abs(b) {
			t.Fatalf("from the disk caches: loss %v (CPU) and %v (%v), first %v and %v", a, b, dev, cpu0, dev0)
		}
	}
}
