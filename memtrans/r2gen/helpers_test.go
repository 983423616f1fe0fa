package r2gen_test

// The helpers of R2Gen's tests.

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/goldentest"
	"github.com/radgen/radgen/internal/testdevice"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/mesh"
)

// The golden files, read as every architecture's tests read them.
type golden = goldentest.R2Gen

var (
	loadGolden      = goldentest.LoadR2Gen
	openSafetensors = goldentest.Open
	fileTensor      = goldentest.Tensor
	fileInts        = goldentest.Ints
	maxAbsDiff      = goldentest.MaxAbsDiff
)

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

// forcedStudies and forcedSteps are the batch forcedVariant teacher-forces.
const forcedStudies, forcedSteps = 2, 7

// forcedVariant builds variant c (seed 3) and teacher-forces a batch of
// forcedStudies studies of forcedSteps inputs (variantBatch, seed 4) on a
// graph that records nothing: it returns the model, the features, the
// inputs and their log-probabilities, which an incremental decoding of the
// same inputs must give.
func forcedVariant(t *testing.T, c r2gen.Config) (m *r2gen.Model, feats *radgen.Tensor, in []int, want []float32) {
	t.Helper()
	m, err := r2gen.New(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	feats, in = variantBatch(c, forcedStudies, forcedSteps, 4)
	f, err := m.TeacherForce(radgen.NoGrad(), feats, in, forcedStudies, forcedSteps)
	if err != nil {
		t.Fatal(err)
	}
	return m, feats, in, f.LogProbs.Data()
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
