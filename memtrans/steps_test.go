package memtrans

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
)

// stepDevices are the devices the module decoding runs on in these tests:
// the CPU and the device of RADGEN_DEVICE (the reference engine when that
// is the CPU).
func stepDevices(t *testing.T) []radgen.Device {
	t.Helper()
	return []radgen.Device{radgen.CPU, testDevice(t)}
}

// moduleStepConfigs are every Transformer configuration: the variants of
// the other seeds, and R2Gen, BASE and BASE+RM.
func moduleStepConfigs() map[string]Config {
	out := variantConfigs()
	base := out["r2gen+gca"]
	base.Routing = ""
	out["r2gen"] = base
	c := base
	c.Variant = VariantBase
	out["base"] = c
	c.Variant = VariantBaseRM
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
				m, err := newR2GenModel(c, 3)
				if err != nil {
					t.Fatal(err)
				}
				const b, steps = 2, 7
				feats, in := variantBatch(c, b, steps, 4)
				f, err := m.teacherForce(radgen.NoGrad(), feats, in, b, steps)
				if err != nil {
					t.Fatal(err)
				}
				want := f.LogProbs.Data()
				if err := radgen.ToDevice(m, dev); err != nil {
					t.Fatal(err)
				}
				dec, err := m.startModuleDecoding(feats)
				if err != nil {
					t.Fatal(err)
				}
				// Rows follow studies: swap them before step 0, then at step
				// 3 expand to four rows [1 1 0 0] (row i decodes study
				// rows[i]).
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
						if err := dec.Reorder([]int{0, 0, 1, 1}); err != nil {
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
		m := g.transformer(t)
		if err := radgen.ToDevice(m, dev); err != nil {
			t.Fatal(err)
		}
		checkGoldenDecoding(t, g, m.Config.MaxSeqLen, dev.String()+"/", func(feats *radgen.Tensor) (decode.Model, error) {
			return m.startModuleDecoding(feats)
		})
	}
}

// BenchmarkModuleDecoding decodes 60-token reports (eos forbidden) with the
// paper's IU configuration through the hand-written CPU step ("handwritten")
// and through the modules' steps ("modules"), beam 3 at batch 1 and 16 and
// greedy at batch 16, for benchstat to compare in one run.
func BenchmarkModuleDecoding(b *testing.B) {
	m := paperModel(b)
	const maxLen = 60
	hw := halfSnapshot(m.stepMatrices())
	old := m.oldHalfSnapshot()
	for _, path := range []string{"handwritten", "modules", "handwritten-half", "modules-half"} {
		for _, run := range []struct {
			strat string
			batch int
		}{{"beam3", 1}, {"beam3", 16}, {"greedy", 16}} {
			b.Run(fmt.Sprintf("%s/%s/batch=%d", path, run.strat, run.batch), func(b *testing.B) {
				feats := randomFeats(run.batch, 98, 2048, 4)
				var s decode.Strategy = decode.Greedy{MaxLen: maxLen}
				if run.strat == "beam3" {
					s = decode.BeamSearch{Size: 3, MaxLen: maxLen, FullLength: true}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					var model decode.Model
					var err error
					switch path {
					case "handwritten":
						model, err = m.startCPUDecoding(feats)
					case "handwritten-half":
						model, err = m.startDecodingWith(feats, old)
					case "modules-half":
						model, err = m.startModuleDecoding(feats, radgen.SubstituteWeights(hw))
					default:
						model, err = m.startModuleDecoding(feats)
					}
					if err != nil {
						b.Fatal(err)
					}
					if _, err := s.Decode(context.Background(), noEOS{model}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N*run.batch), "ms/study")
			})
		}
	}
}
