package r2gen_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// moduleStepConfigs are every Transformer configuration: the variants of
// the other seeds, and R2Gen, BASE and BASE+RM.
func moduleStepConfigs() map[string]r2gen.Config {
	out := variantConfigs()
	base := out["r2gen+gca"]
	base.Routing = ""
	out["r2gen"] = base
	c := base
	c.Variant = r2gen.VariantBase
	out["base"] = c
	c.Variant = r2gen.VariantBaseRM
	out["base+rm"] = c
	return out
}

// TestModuleStepsMatchTeacherForcing: for every configuration, on the CPU
// and on a device, the decoding built from the modules' steps gives the
// teacher-forced log-probabilities, also after beam-style reorders that
// repeat rows.
func TestModuleStepsMatchTeacherForcing(t *testing.T) {
	for _, dev := range stepDevices(t) {
		for name, c := range moduleStepConfigs() {
			t.Run(dev.String()+"/"+name, func(t *testing.T) {
				m, feats, in, want := forcedVariant(t, c)
				const b, steps = forcedStudies, forcedSteps
				if err := radgen.ToDevice(m, dev); err != nil {
					t.Fatal(err)
				}
				dec, err := m.StartDecoding(feats)
				if err != nil {
					t.Fatal(err)
				}
				// Rows follow studies: swap them before step 0, then at step
				// 3 swap them back and expand to four rows [1 1 0 0] (row i
				// decodes study rows[i]): two reorders between steps, which
				// compose while the step before still prepares the memory.
				rows := []int{0, 1}
				V := c.Vocab
				var worst float64
				for s := 0; s < steps; s++ {
					switch s {
					case 0:
						if err := dec.Reorder([]int{1, 0}); err != nil {
							t.Fatal(err)
						}
						rows = []int{1, 0}
					case 3:
						if err := dec.Reorder([]int{1, 0}); err != nil {
							t.Fatal(err)
						}
						if err := dec.Reorder([]int{1, 1, 0, 0}); err != nil {
							t.Fatal(err)
						}
						rows = []int{rows[0], rows[0], rows[1], rows[1]}
					}
					tok := make([]int, len(rows))
					for i, st := range rows {
						tok[i] = in[st*steps+s]
					}
					lp := make([]float32, len(rows)*V)
					if err := dec.Step(context.Background(), tok, lp); err != nil {
						t.Fatal(err)
					}
					for i, st := range rows {
						for v := 0; v < V; v++ {
							worst = math.Max(worst, math.Abs(float64(lp[i*V+v]-want[(st*steps+s)*V+v])))
						}
					}
				}
				if worst > 1e-4 {
					t.Fatalf("max |Δ log-prob| = %.3g", worst)
				}
			})
		}
	}
}

// TestModuleDecodingParityR2Gen decodes the golden case through the
// modules' steps, greedy (with and without trigram blocking) and beam 2
// and 3, on the CPU and on a device: the published tokens, and their
// log-probabilities within 1e-4.
func TestModuleDecodingParityR2Gen(t *testing.T) {
	g := loadGolden(t)
	for _, dev := range stepDevices(t) {
		m := g.Build(t)
		if err := radgen.ToDevice(m, dev); err != nil {
			t.Fatal(err)
		}
		checkGoldenDecoding(t, g, m.Config().(r2gen.Config).MaxSeqLen, dev.String()+"/", func(feats *radgen.Tensor) (decode.Model, error) {
			return m.StartDecoding(feats)
		})
	}
}

// After warm-up, a step and a reorder of the module decoding allocate
// nothing on the CPU, in float32 and with half-precision weights: results
// come from the decoding's arena, the caches grow by doubling.
func TestModuleDecodingStepAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	for _, v := range []r2gen.Variant{r2gen.VariantR2Gen, r2gen.VariantBase} {
		m := halfTestModel(t, v)
		feats := randomFeats(2, 5, m.Config().(r2gen.Config).DVisual, 13)
		for _, stored := range []map[*radgen.Tensor]*radgen.Tensor{nil, halfSnapshot(m.StepWeights())} {
			dec := halfDecoding(t, m, feats, stored)
			V := m.Config().(r2gen.Config).Vocab
			lp := make([]float32, 6*V)
			ctx := context.Background()
			if err := dec.Step(ctx, []int{0, 0}, lp); err != nil {
				t.Fatal(err)
			}
			if err := dec.Reorder([]int{0, 0, 0, 1, 1, 1}); err != nil {
				t.Fatal(err)
			}
			tok := []int{5, 6, 7, 8, 9, 10}
			step := func() {
				if err := dec.Step(ctx, tok, lp); err != nil {
					t.Fatal(err)
				}
				if err := dec.Reorder([]int{2, 0, 1, 5, 3, 4}); err != nil {
					t.Fatal(err)
				}
			}
			for range 40 {
				step()
			}
			// A collection empties sync.Pools, which then allocate again:
			// collect now, and step a few times so that none is due while
			// counting.
			runtime.GC()
			for range 5 {
				step()
			}
			if allocs := testing.AllocsPerRun(100, step); allocs != 0 {
				t.Errorf("%s, half=%v: %v allocations per step", v, stored != nil, allocs)
			}
		}
	}
}

// A finished decoding's arena serves the next one: the second decoding of
// the same studies gives the same log-probabilities bit for bit, and the
// released one refuses to step.
func TestModuleDecodingReusesArena(t *testing.T) {
	m := halfTestModel(t, r2gen.VariantR2Gen)
	feats := randomFeats(2, 5, m.Config().(r2gen.Config).DVisual, 17)
	tokens := [][]int{{0, 0}, {3, 4, 5, 6, 7, 8}, {9, 10, 11, 12, 13, 14}}
	src := [][]int{{0, 0, 0, 1, 1, 1}, {2, 0, 1, 3, 3, 5}, nil}
	first := halfDecoding(t, m, feats, nil)
	want := stepAll(t, first, tokens, src)
	first.Release()
	if err := first.Step(context.Background(), []int{1, 1, 1, 1, 1, 1}, make([]float32, 6*m.Config().(r2gen.Config).Vocab)); !errors.Is(err, arch.ErrReleased) {
		t.Fatalf("step after release: %v", err)
	}
	second := halfDecoding(t, m, feats, nil)
	defer second.Release()
	if got := stepAll(t, second, tokens, src); !equalSteps(got, want) {
		t.Fatal("a decoding on a reused arena differs from the first")
	}
}
