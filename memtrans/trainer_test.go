package memtrans

import (
	"bytes"
	"context"
	"math"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/vision"
)

// synthSetup writes a small synthetic data set and returns a tiny model
// and a loader over its training split.
func synthSetup(t testing.TB, n int, seed uint64) (*Model, *data.Loader, *data.Annotation, string) {
	t.Helper()
	return synthSetupConfig(t, n, seed, R2GenTiny)
}

// synthSetupConfig is synthSetup with the model configuration of
// configure(vocab).
func synthSetupConfig(t testing.TB, n int, seed uint64, configure func(vocab int) ModelConfig) (*Model, *data.Loader, *data.Annotation, string) {
	t.Helper()
	dir := t.TempDir()
	ann, err := data.WriteSynthetic(context.Background(), dir, data.SynthConfig{Train: n, Val: 8, Test: 8, Width: 64, Height: 64, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	train, _ := ann.Split("train")
	var reports []string
	for _, s := range train {
		reports = append(reports, s.Report)
	}
	tok, err := data.BuildTokenizer(data.IUXray, 3, reports)
	if err != nil {
		t.Fatal(err)
	}
	cfg := configure(tok.Len() + 1)
	m, err := New(cfg, tok, seed)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := data.NewDataset(ann, "train", tok, data.DatasetConfig{ImageDir: dir + "/images"})
	if err != nil {
		t.Fatal(err)
	}
	tr := vision.TrainTransform(cfg.ResizeTo, cfg.ImageSize)
	tr.Flip = 0
	loader, err := data.NewLoader(ds, data.WithBatchSize(8), data.WithShuffle(true), data.WithSeed(seed), data.WithTransform(tr))
	if err != nil {
		t.Fatal(err)
	}
	return m, loader, ann, dir
}

// TestResumeIsBitExact trains 2 epochs straight, and 1 epoch + save +
// resume + 1 epoch, and requires identical weights.
func TestResumeIsBitExact(t *testing.T) {
	ctx := context.Background()
	cfg := TrainConfig{Epochs: 2, LRVisual: 5e-4, LR: 1e-3, WeightDecay: 5e-5, AMSGrad: true, ClipValue: 0.1, StepSize: 1, Gamma: 0.5, Seed: 7}

	m1, loader, _, _ := synthSetup(t, 16, 3)
	tr1, err := NewTrainer(m1, cfg, loader)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr1.Run(ctx); err != nil {
		t.Fatal(err)
	}

	m2, loader2, _, _ := synthSetup(t, 16, 3)
	tr2, err := NewTrainer(m2, cfg, loader2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr2.RunEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tr2.SaveState(&buf); err != nil {
		t.Fatal(err)
	}
	m3, tr3, err := ResumeTrainer(bytes.NewReader(buf.Bytes()), loader2, TrainConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if tr3.Epoch() != 1 {
		t.Fatalf("resumed at epoch %d, want 1", tr3.Epoch())
	}
	if err := tr3.Run(ctx); err != nil {
		t.Fatal(err)
	}
	a, b := radgen.Params(m1), radgen.Params(m3)
	for i := range a {
		x, y := a[i].Tensor.Float64s(), b[i].Tensor.Float64s()
		for j := range x {
			if x[j] != y[j] {
				t.Fatalf("%s[%d]: uninterrupted %v, resumed %v", a[i].Name, j, x[j], y[j])
			}
		}
	}
	h1, h3 := tr1.History(), tr3.History()
	if len(h1) != 2 || len(h3) != 2 || h1[1].Loss != h3[1].Loss {
		t.Fatalf("histories differ: %+v vs %+v", h1, h3)
	}
	if math.IsNaN(h1[1].Loss) || h1[1].Loss >= h1[0].Loss+1 {
		t.Errorf("loss did not behave: %+v", h1)
	}
}

// The feature cache round-trips through disk and refuses a file written
// for another key.
func TestFeatureCacheDisk(t *testing.T) {
	dir := t.TempDir()
	c := &featureCache{dir: dir, mem: map[string]*radgen.Tensor{}}
	x := radgen.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 1, 2, 3)
	if err := c.put("CXR1", x); err != nil {
		t.Fatal(err)
	}
	fresh := &featureCache{dir: dir, mem: map[string]*radgen.Tensor{}}
	y, ok := fresh.get("CXR1")
	if !ok || len(y.Shape()) != 3 || y.Data()[5] != 6 {
		t.Fatalf("disk cache gave %v, %v", y, ok)
	}
	if _, ok := fresh.get("CXR2"); ok {
		t.Error("hit for a key never stored")
	}
}
