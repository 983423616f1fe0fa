package r2gen_test

// The helpers of R2Gen's tests.

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/internal/testdevice"
	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/mesh"
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

// stepDevices are the devices the module decoding runs on in these tests:
// the CPU and the device of RADGEN_DEVICE (the reference engine when that
// is the CPU).
func stepDevices(t *testing.T) []radgen.Device {
	t.Helper()
	return []radgen.Device{radgen.CPU, testDevice(t)}
}

// testDevice is the device of the device tests: RADGEN_DEVICE=cuda:N on a
// GPU machine, the reference device otherwise.
func testDevice(t testing.TB) radgen.Device {
	t.Helper()
	dev, err := testdevice.Compared(t)
	if err != nil {
		t.Skip(err)
	}
	return dev
}

// variantConfigs are small configurations of every variant the seeds add
// to R2Gen: each multi-view routing, BASE with one, Mem2Mem with and
// without the relational memory's norms and with a routing.
func variantConfigs() map[string]r2gen.Config {
	base := r2gen.Config{Variant: r2gen.VariantR2Gen, DModel: 16, DFF: 24, Heads: 2, Layers: 3, DVisual: 12, Vocab: 11,
		MemorySlots: 3, MemoryHeads: 2, Dropout: 0.1, EmbedDrop: 0.1, MaxSeqLen: 12, PositionLen: 32}
	out := map[string]r2gen.Config{}
	for _, r := range mesh.Routings {
		c := base
		c.Routing = r
		out["r2gen+"+string(r)] = c
	}
	c := base
	c.Variant, c.Routing = r2gen.VariantBase, mesh.RoutingGCA
	out["base+gca"] = c
	c = base
	c.Memory, c.MemorySlots, c.Mem2MemHidden, c.Mem2MemPenalty = r2gen.MemoryMem2Mem, 4, 8, 0.1
	out["r2gen+mem2mem"] = c
	c.Variant = r2gen.VariantBaseRM
	out["base+rm+mem2mem"] = c
	c.Variant, c.Routing, c.Mem2MemHidden = r2gen.VariantR2Gen, mesh.RoutingAMA, 0
	out["r2gen+mem2mem+ama"] = c
	return out
}

// variantBatch returns features of b studies of 5 patches and b rows of t
// decoder inputs (0 first, then random words) for c.
func variantBatch(c r2gen.Config, b, t int, seed uint64) (*radgen.Tensor, []int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	feats := randomFeats(b, 5, c.DVisual, seed)
	tokens := make([]int, b*t)
	for i := range tokens {
		if i%t != 0 {
			tokens[i] = 1 + rng.IntN(c.Vocab-1)
		}
	}
	return feats, tokens
}

func randomFeats(b, n, d int, seed uint64) *radgen.Tensor {
	r := rand.New(rand.NewPCG(seed, 1))
	x := radgen.Zeros(b, n, d)
	for i := range x.Data() {
		x.Data()[i] = float32(r.Float64())
	}
	return x
}

// halfTestModel is a small R2Gen model (all of a step's matrix kinds, sizes
// that are not multiples of the kernels' blocks) with random weights.
func halfTestModel(t testing.TB, variant r2gen.Variant) *r2gen.Model {
	c := r2gen.IUXray(53)
	c.Variant = variant
	c.DModel, c.DFF, c.Heads, c.MemoryHeads = 40, 72, 4, 4
	c.DVisual, c.MaxSeqLen = 24, 12
	m, err := r2gen.New(c, 7)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// halfSnapshot returns half-precision copies of the float32 CPU matrices
// ws, keyed by the matrix, as the facade's half-precision weights keep
// them.
func halfSnapshot(ws []*radgen.Tensor) map[*radgen.Tensor]*radgen.Tensor {
	stored := make(map[*radgen.Tensor]*radgen.Tensor, len(ws))
	for _, w := range ws {
		if w.Device() == radgen.CPU && !w.Is64() && w.Rank() == 2 {
			stored[w] = w.ToHalf()
		}
	}
	return stored
}

// halfDecoding starts m's module decoding of feats reading the
// half-precision copies stored (nil: float32).
func halfDecoding(t testing.TB, m *r2gen.Model, feats *radgen.Tensor, stored map[*radgen.Tensor]*radgen.Tensor) *r2gen.Decoding {
	t.Helper()
	dec, err := m.NewDecoding(feats, radgen.SubstituteWeights(stored))
	if err != nil {
		t.Fatal(err)
	}
	return dec
}

// stepAll feeds tokens[s] at step s to dec, reordering by src[s] after it,
// and returns every step's log-probabilities.
func stepAll(t testing.TB, dec decode.Model, tokens [][]int, src [][]int) [][]float32 {
	t.Helper()
	var out [][]float32
	V := dec.VocabSize()
	for s, tok := range tokens {
		lp := make([]float32, len(tok)*V)
		if err := dec.Step(context.Background(), tok, lp); err != nil {
			t.Fatal(err)
		}
		out = append(out, lp)
		if src[s] != nil {
			if err := dec.Reorder(src[s]); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

func equalSteps(a, b [][]float32) bool {
	for s := range a {
		for i := range a[s] {
			if a[s][i] != b[s][i] {
				return false
			}
		}
	}
	return true
}
