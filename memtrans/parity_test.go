package memtrans

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/internal/testdevice"
	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// golden is an opened R2Gen golden directory.
type golden struct {
	dir   string
	model *safetensors.File
	cas   *safetensors.File
	meta  struct {
		Config map[string]any `json:"config"`
	}
}

func openSafetensors(t testing.TB, path string) *safetensors.File {
	t.Helper()
	f, err := safetensors.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func loadGolden(t testing.TB) *golden {
	t.Helper()
	dir := testutil.Dir(t, "RADGEN_GOLDEN_R2GEN", "golden/r2gen")
	g := &golden{dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &g.meta); err != nil {
		t.Fatalf("meta.json: %v", err)
	}
	g.model = openSafetensors(t, filepath.Join(dir, "model.safetensors"))
	g.cas = openSafetensors(t, filepath.Join(dir, "case.safetensors"))
	return g
}

func (g *golden) intConfig(t testing.TB, key string) int {
	v, ok := g.meta.Config[key].(float64)
	if !ok {
		t.Fatalf("meta.json config lacks %q", key)
	}
	return int(v)
}

// transformer builds the golden model with sizes read from the files.
func (g *golden) transformer(t testing.TB) *r2gen.Model {
	t.Helper()
	shapes := map[string][]int{}
	for _, n := range g.model.Names() {
		info, _ := g.model.Info(n)
		shapes[n] = info.Shape
	}
	cfg, err := r2gen.InferConfig(shapes, g.intConfig(t, "num_heads"), g.intConfig(t, "rm_num_heads"), g.intConfig(t, "max_seq_length"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := r2gen.New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := radgen.LoadParams(m, g.model, ""); err != nil {
		t.Fatal(err)
	}
	return m
}

func (g *golden) tensor(t testing.TB, name string) *radgen.Tensor { return fileTensor(t, g.cas, name) }

func (g *golden) ints(t testing.TB, name string) ([]int, []int) { return fileInts(t, g.cas, name) }

// fileTensor reads a float tensor of a golden file.
func fileTensor(t testing.TB, f *safetensors.File, name string) *radgen.Tensor {
	t.Helper()
	v, shape, err := f.Float32(name)
	if err != nil {
		t.Fatal(err)
	}
	return radgen.FromFloat32(v, shape...)
}

// fileInts reads an integer tensor of a golden file as ints, with its shape.
func fileInts(t testing.TB, f *safetensors.File, name string) ([]int, []int) {
	t.Helper()
	v, shape, err := f.Int64(name)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out, shape
}

// maxAbsDiff returns the largest |got − want| over the elements (+Inf for a
// NaN); got and want may live on any device.
func maxAbsDiff(t testing.TB, name string, got, want *radgen.Tensor) float64 {
	t.Helper()
	if len(got.Shape()) != len(want.Shape()) || got.Len() != want.Len() {
		t.Fatalf("%s: shape %v, want %v", name, got.Shape(), want.Shape())
	}
	var worst float64
	a, b := got.Float64s(), want.Float64s()
	for i := range a {
		d := math.Abs(a[i] - b[i])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		worst = math.Max(worst, d)
	}
	return worst
}

// caseBatch returns the golden features and teacher-forcing inputs.
func (g *golden) caseBatch(t testing.TB) (feats *radgen.Tensor, in, targets []int, mask []float32, b, steps int) {
	feats = g.tensor(t, "att_feats")
	tg, shape := g.ints(t, "targets")
	mk := g.tensor(t, "target_mask").Data()
	b, full := shape[0], shape[1]
	steps = full - 1
	for i := 0; i < b; i++ {
		in = append(in, tg[i*full:i*full+steps]...)
		targets = append(targets, tg[i*full+1:(i+1)*full]...)
		mask = append(mask, mk[i*full+1:(i+1)*full]...)
	}
	return feats, in, targets, mask, b, steps
}

// TestParityR2Gen runs the golden model's teacher-forced forward pass and
// loss on the device of RADGEN_DEVICE (the CPU by default) and compares
// every intermediate with the published code's: max |Δ| ≤ 1e-4, the loss
// within 1e-5 relative.
func TestParityR2Gen(t *testing.T) {
	dev := testdevice.Selected(t)
	defer testdevice.FailOnPanic(t)
	g := loadGolden(t)
	m := g.transformer(t)
	t.Logf("config from the golden files: %+v", m.Config().(r2gen.Config))
	feats, in, targets, mask, b, steps := g.caseBatch(t)
	testdevice.Move(t, m, dev)
	f, err := m.TeacherForce(radgen.NoGrad(), feats.To(dev), in, b, steps)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		got  *radgen.Tensor
	}{
		{"att_embedded", f.Encoded.AttEmbedded},
		{"encoder_out", f.Encoded.Out},
		{"tgt_embedded", f.TgtEmbedded},
		{"memory_init", f.MemoryInit},
		{"memory_states", f.Memory},
		{"decoder_out", f.DecoderOut},
		{"logprobs", f.LogProbs},
	}
	for _, c := range checks {
		if c.got.Device() != dev {
			t.Errorf("%s computed on %v, not %v", c.name, c.got.Device(), dev)
		}
		d := maxAbsDiff(t, c.name, c.got, g.tensor(t, c.name))
		t.Logf("%-14s max |Δ| = %.3g", c.name, d)
		if d > 1e-4 {
			t.Errorf("%s: max |Δ| = %.3g > 1e-4", c.name, d)
		}
	}
	loss := testdevice.Host(arch.LanguageModelLoss(radgen.NoGrad(), f.LogProbs, targets, mask)).Data()[0]
	want := g.tensor(t, "loss").Data()[0]
	rel := math.Abs(float64(loss-want)) / math.Abs(float64(want))
	t.Logf("%-14s %.7f vs %.7f, relative error %.3g", "loss", loss, want, rel)
	if rel > 1e-5 {
		t.Errorf("loss %v, want %v (relative error %.3g > 1e-5)", loss, want, rel)
	}
}

// A missing or mis-shaped weight is an error that names it, and the model is
// left unchanged.
func TestLoadErrorsNameTheTensor(t *testing.T) {
	g := loadGolden(t)
	m := g.transformer(t)
	src := radgen.StateDict(m, "")
	before := m.Logit.Weight.Data()[0]
	delete(src, "model.rm.W.weight")
	err := radgen.LoadParams(m, src, "")
	if !errors.Is(err, radgen.ErrMissingTensor) || !strings.Contains(err.Error(), "model.rm.W.weight") {
		t.Errorf("missing tensor: %v", err)
	}
	src = radgen.StateDict(m, "")
	src["logit.bias"] = radgen.Zeros(5)
	err = radgen.LoadParams(m, src, "")
	if !errors.Is(err, radgen.ErrShapeMismatch) || !strings.Contains(err.Error(), "logit.bias") {
		t.Errorf("mis-shaped tensor: %v", err)
	}
	src = radgen.StateDict(m, "")
	nan := radgen.Zeros(m.Config().(r2gen.Config).DModel)
	nan.Data()[3] = float32(math.NaN())
	src["model.decoder.norm.gamma"] = nan
	if err := radgen.LoadParams(m, src, ""); err == nil || !strings.Contains(err.Error(), "model.decoder.norm.gamma") {
		t.Errorf("NaN weight: %v", err)
	}
	if m.Logit.Weight.Data()[0] != before {
		t.Error("a failed load modified the model")
	}
}
