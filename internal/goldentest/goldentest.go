// Package goldentest reads the outputs of the published reference code
// (../shared/golden) as the parity tests of the architectures read them:
// safetensors files of tensors, and R2Gen's golden directory (its weights,
// one teacher-forced case and the run's configuration). It is for tests
// only: every failure stops the test that asked.
package goldentest

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// Open opens a safetensors file for the rest of the test.
func Open(t testing.TB, path string) *safetensors.File {
	t.Helper()
	f, err := safetensors.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// Tensor reads a float tensor of a golden file.
func Tensor(t testing.TB, f *safetensors.File, name string) *radgen.Tensor {
	t.Helper()
	v, shape, err := f.Float32(name)
	if err != nil {
		t.Fatal(err)
	}
	return radgen.FromFloat32(v, shape...)
}

// Ints reads an integer tensor of a golden file as ints, with its shape.
func Ints(t testing.TB, f *safetensors.File, name string) ([]int, []int) {
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

// MaxAbsDiff returns the largest |got − want| over the elements (+Inf for a
// NaN); got and want may live on any device. Shapes that differ fail the
// test, named name.
func MaxAbsDiff(t testing.TB, name string, got, want *radgen.Tensor) float64 {
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

// R2Gen is an opened R2Gen golden directory ($RADGEN_GOLDEN_R2GEN, by
// default ../shared/golden/r2gen).
type R2Gen struct {
	Dir     string
	Weights *safetensors.File // model.safetensors: the state_dict
	Case    *safetensors.File // case.safetensors: inputs and intermediates
	Meta    struct {
		Config map[string]any `json:"config"`
	}
}

// LoadR2Gen opens R2Gen's golden directory; the test skips with a message
// when it is absent.
func LoadR2Gen(t testing.TB) *R2Gen {
	t.Helper()
	dir := testutil.Dir(t, "RADGEN_GOLDEN_R2GEN", "golden/r2gen")
	g := &R2Gen{Dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &g.Meta); err != nil {
		t.Fatalf("meta.json: %v", err)
	}
	g.Weights = Open(t, filepath.Join(dir, "model.safetensors"))
	g.Case = Open(t, filepath.Join(dir, "case.safetensors"))
	return g
}

// IntConfig returns an integer argument of the reference run.
func (g *R2Gen) IntConfig(t testing.TB, key string) int {
	t.Helper()
	v, ok := g.Meta.Config[key].(float64)
	if !ok {
		t.Fatalf("meta.json config lacks %q", key)
	}
	return int(v)
}

// Build builds the golden model with sizes read from the files and loads
// its weights.
func (g *R2Gen) Build(t testing.TB) *r2gen.Model {
	t.Helper()
	shapes := map[string][]int{}
	for _, n := range g.Weights.Names() {
		info, _ := g.Weights.Info(n)
		shapes[n] = info.Shape
	}
	cfg, err := r2gen.InferConfig(shapes, g.IntConfig(t, "num_heads"), g.IntConfig(t, "rm_num_heads"), g.IntConfig(t, "max_seq_length"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := r2gen.New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := radgen.LoadParams(m, g.Weights, ""); err != nil {
		t.Fatal(err)
	}
	return m
}

// Tensor reads a float tensor of the case.
func (g *R2Gen) Tensor(t testing.TB, name string) *radgen.Tensor { return Tensor(t, g.Case, name) }

// Ints reads an integer tensor of the case.
func (g *R2Gen) Ints(t testing.TB, name string) ([]int, []int) { return Ints(t, g.Case, name) }

// CaseBatch returns the case's features and teacher-forcing batch: inputs,
// targets and mask, b reports of steps positions.
func (g *R2Gen) CaseBatch(t testing.TB) (feats *radgen.Tensor, in, targets []int, mask []float32, b, steps int) {
	t.Helper()
	feats = g.Tensor(t, "att_feats")
	tg, shape := g.Ints(t, "targets")
	mk := g.Tensor(t, "target_mask").Data()
	b, full := shape[0], shape[1]
	steps = full - 1
	for i := 0; i < b; i++ {
		in = append(in, tg[i*full:i*full+steps]...)
		targets = append(targets, tg[i*full+1:(i+1)*full]...)
		mask = append(mask, mk[i*full+1:(i+1)*full]...)
	}
	return feats, in, targets, mask, b, steps
}
