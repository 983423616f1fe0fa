package memtrans

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// randomizeVectors draws every one-dimensional parameter of m (biases,
// norm gains, gates) from U(−0.3, 0.3) with PCG(seed, seed), so that no
// term is trivially neutral.
func randomizeVectors(m radgen.Module, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	for _, p := range radgen.Params(m) {
		if p.Tensor.Rank() == 1 {
			radgen.Uniform(p.Tensor, rng, 0.3)
		}
	}
}

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
