package memtrans

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/pth"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/vision"
)

// tinyR2GenWeights returns a tokenizer, a tiny configuration and random
// weights for it under R2Gen's state_dict names, plus the BatchNorm step
// counters a real R2Gen checkpoint carries.
func tinyR2GenWeights(t *testing.T) (*data.Tokenizer, ModelConfig, []pth.Tensor) {
	t.Helper()
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"The heart is normal. No effusion."})
	if err != nil {
		t.Fatal(err)
	}
	cfg := R2GenTiny(tok.Len() + 1)
	editR2(&cfg, func(t *r2gen.Config) { t.DModel, t.DFF, t.Layers = 16, 16, 1 })
	editR2(&cfg, func(t *r2gen.Config) { t.Heads, t.MemoryHeads = 2, 2 })
	m, err := New(cfg, tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(6, 6))
	var ts []pth.Tensor
	for _, p := range radgen.Params(m) {
		v := make([]float32, len(p.Tensor.Data()))
		for i := range v {
			if strings.HasSuffix(p.Name, "running_var") {
				v[i] = 0.5 + rng.Float32() // a variance must stay positive
			} else {
				v[i] = float32(rng.NormFloat64())
			}
		}
		ts = append(ts, pth.Tensor{Name: p.Name, Shape: slices.Clone(p.Tensor.Shape()), Data: v})
		if strings.HasSuffix(p.Name, "running_var") {
			ts = append(ts, pth.Tensor{Name: strings.TrimSuffix(p.Name, "running_var") + "num_batches_tracked", Shape: []int{}, Data: []float32{1234}})
		}
	}
	return tok, cfg, ts
}

// TestLoadR2GenFile writes random R2Gen-named weights for a tiny model as a
// PyTorch checkpoint and as safetensors, loads both through the facade and
// requires every parameter to come back bit for bit.
func TestLoadR2GenFile(t *testing.T) {
	tok, cfg, ts := tinyR2GenWeights(t)
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := pth.Write(&buf, ts, &pth.Meta{Epoch: 7, MonitorBest: 0.25}); err != nil {
		t.Fatal(err)
	}
	pthPath := filepath.Join(dir, "model_best.pth")
	if err := os.WriteFile(pthPath, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var st []safetensors.Tensor
	for _, x := range ts {
		st = append(st, safetensors.Tensor{Name: x.Name, Dtype: safetensors.F32, Shape: x.Shape, Data: safetensors.F32Bytes(x.Data)})
	}
	var sbuf bytes.Buffer
	if err := safetensors.Write(&sbuf, st, nil); err != nil {
		t.Fatal(err)
	}
	// Named .pth on purpose: the format is sniffed, not taken from the name.
	stPath := filepath.Join(dir, "weights.pth")
	if err := os.WriteFile(stPath, sbuf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string]pth.Tensor{}
	for _, x := range ts {
		want[x.Name] = x
	}
	for _, path := range []string{pthPath, stPath} {
		var logs bytes.Buffer
		m, err := LoadR2GenFile(path, tok, cfg.Views, r2cfg(cfg).Heads, r2cfg(cfg).MemoryHeads,
			WithModelOptions(WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))))
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(path), err)
		}
		if got := r2cfg(m.Config()); got.DModel != 16 || got.Layers != 1 || got.Vocab != r2cfg(cfg).Vocab {
			t.Errorf("%s: inferred config %+v", filepath.Base(path), got)
		}
		n := 0
		for _, p := range radgen.Params(m) {
			w, ok := want[p.Name]
			if !ok {
				t.Fatalf("%s: model parameter %q not in the file", filepath.Base(path), p.Name)
			}
			if !slices.Equal(p.Tensor.Shape(), w.Shape) || !slices.Equal(p.Tensor.Data(), w.Data) {
				t.Fatalf("%s: %q differs after loading", filepath.Base(path), p.Name)
			}
			n++
		}
		t.Logf("%s: %d parameters identical", filepath.Base(path), n)
		if path == pthPath && !strings.Contains(logs.String(), "epoch=7 monitor_best=0.25") {
			t.Errorf("log: %s", logs.String())
		}
		m.Close()
	}

	bad := filepath.Join(dir, "bad.pth")
	for _, b := range [][]byte{[]byte("not weights at all"), buf.Bytes()[:buf.Len()/2], {}} {
		if err := os.WriteFile(bad, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadR2GenFile(bad, tok, 2, 2, 2); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("%d bytes of garbage: %v", len(b), err)
		}
	}
	if _, err := LoadR2GenFile(pthPath, tok, 2, 2, 2, WithModelOptions(WithBudget(Budget{MaxCheckpointBytes: 1000}))); !errors.Is(err, ErrCheckpoint) || !errors.Is(err, pth.ErrLimit) {
		t.Errorf("limit: %v", err)
	}
}

// TestStudyFromFilesDICOM mixes a DICOM file (the chest CR of the DICOM
// module's testdata, linked under a name without extension) with a PNG in
// one study: the DICOM is recognised by its preamble.
func TestStudyFromFilesDICOM(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/suyashkumar/dicom").Output()
	src := filepath.Join(strings.TrimSpace(string(out)), "testdata", "4.dcm")
	if _, serr := os.Stat(src); err != nil || serr != nil {
		t.Skipf("DICOM testdata not in the module cache: %v %v", err, serr)
	}
	dir := t.TempDir()
	dcm := filepath.Join(dir, "frontal")
	if err := os.Symlink(src, dcm); err != nil {
		t.Skip(err)
	}
	pngPath := filepath.Join(dir, "lateral.png")
	g := image.NewGray(image.Rect(0, 0, 5, 3))
	g.Pix[7] = 200
	var buf bytes.Buffer
	if err := png.Encode(&buf, g); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pngPath, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := StudyFromFiles("s1", dcm, pngPath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := vision.DecodeDICOMFile(src)
	if err != nil {
		t.Fatal(err)
	}
	v0, ok := s.Views[0].(*vision.Pixels)
	if !ok || v0.W != 1760 || v0.H != 2140 || v0.C != 1 || !bytes.Equal(v0.Pix, want.Pix) {
		t.Fatalf("DICOM view: %T %v", s.Views[0], s.Views[0].Bounds())
	}
	if v1, ok := s.Views[1].(*vision.Pixels); !ok || v1.C != 1 || v1.Pix[7] != 200 {
		t.Fatalf("PNG view: %T", s.Views[1])
	}
	// A file with the preamble but broken content is an error naming it.
	bad := filepath.Join(dir, "bad.dcm")
	head := append(make([]byte, 128), "DICM"...)
	if err := os.WriteFile(bad, append(head, 1, 2, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := StudyFromFiles("s2", bad); !errors.Is(err, vision.ErrDICOM) || !strings.Contains(err.Error(), "bad.dcm") {
		t.Errorf("broken DICOM: %v", err)
	}
}

// TestLoadR2GenFileGolden saves the shared golden R2Gen weights (encoder–
// decoder and visual extractor) as an R2Gen .pth checkpoint, loads it
// through LoadR2GenFile, and requires identical parameters and the golden
// beam-3 reports.
func TestLoadR2GenFileGolden(t *testing.T) {
	ref, g := goldenModel(t)
	defer ref.Close()
	ext := openSafetensors(t, filepath.Join(g.Dir, "extractor.safetensors"))
	var ts []pth.Tensor
	add := func(name string, src *safetensors.File, key string) {
		v, shape, err := src.Float32(key)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, pth.Tensor{Name: name, Shape: shape, Data: v})
	}
	for _, n := range g.Weights.Names() {
		add("encoder_decoder."+n, g.Weights, n)
	}
	for _, n := range ext.Names() {
		if strings.HasPrefix(n, "visual_extractor.") {
			add(n, ext, n)
		}
	}
	path := filepath.Join(t.TempDir(), "model_best.pth")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pth.Write(f, ts, &pth.Meta{Epoch: 100, MonitorBest: 0.1}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := LoadR2GenFile(path, ref.Tokenizer(), 2, g.IntConfig(t, "num_heads"), g.IntConfig(t, "rm_num_heads"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, b := radgen.Params(ref), radgen.Params(m)
	if len(a) != len(b) {
		t.Fatalf("%d parameters from safetensors, %d from .pth", len(a), len(b))
	}
	for i := range a {
		if a[i].Name != b[i].Name || !slices.Equal(a[i].Tensor.Data(), b[i].Tensor.Data()) {
			t.Fatalf("parameter %s differs", a[i].Name)
		}
	}
	feats := g.Tensor(t, "att_feats")
	seq, shape := g.Ints(t, "beam3_seq")
	ids := make([]string, shape[0])
	reps, err := m.GenerateFeatures(context.Background(), ids, feats, WithBeamSize(3))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reps {
		if want := m.Tokenizer().Decode(seq[i*shape[1] : (i+1)*shape[1]]); r.Text != want {
			t.Errorf("study %d:\n got %q\nwant %q", i, r.Text, want)
		}
	}
	t.Logf("%d tensors through .pth; %d golden beam-3 reports reproduced", len(ts), len(reps))
}
