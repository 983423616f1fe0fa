package memtrans

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/testdevice"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/mesh"
)

// deviceTestModel returns a tiny Transformer of variant v whose every
// parameter is random, so that no term is trivially neutral.
func deviceTestModel(t testing.TB, configure func(*r2gen.Config)) *r2gen.Model {
	t.Helper()
	c := r2gen.Tiny(31, 24)
	c.Dropout, c.EmbedDrop = 0, 0
	if configure != nil {
		configure(&c)
	}
	m, err := r2gen.New(c, 5)
	if err != nil {
		t.Fatal(err)
	}
	randomizeVectors(m, 6)
	return m
}

// stepBoth drives the CPU Decoding and the device decoding through the
// same tokens and reorders and returns the largest |Δ log p|.
func stepBoth(t *testing.T, cpu, dev decode.AttentionRecorder, steps int, reorder func(step, rows int) []int) float64 {
	t.Helper()
	ctx := context.Background()
	V := cpu.VocabSize()
	var worst float64
	rng := rand.New(rand.NewPCG(9, 9))
	for step := range steps {
		if reorder != nil {
			if src := reorder(step, cpu.Rows()); src != nil {
				if err := cpu.Reorder(src); err != nil {
					t.Fatal(err)
				}
				if err := dev.Reorder(src); err != nil {
					t.Fatal(err)
				}
			}
		}
		R := cpu.Rows()
		tokens := make([]int, R)
		for i := range tokens {
			tokens[i] = rng.IntN(V - 2) // below M²'s <bos> and <pad>
		}
		a, b := make([]float32, R*V), make([]float32, R*V)
		if err := cpu.Step(ctx, tokens, a); err != nil {
			t.Fatal(err)
		}
		if err := dev.Step(ctx, tokens, b); err != nil {
			t.Fatal(err)
		}
		for i := range a {
			if a[i] != b[i] { // equal −Inf (forbidden words) must not give NaN
				worst = math.Max(worst, math.Abs(float64(a[i]-b[i])))
			}
		}
		aa, ba := make([]float32, R*cpu.AttentionWidth()), make([]float32, R*dev.AttentionWidth())
		if err := cpu.Attention(aa); err != nil {
			t.Fatal(err)
		}
		if err := dev.Attention(ba); err != nil {
			t.Fatal(err)
		}
		for i := range aa {
			worst = math.Max(worst, math.Abs(float64(aa[i]-ba[i])))
		}
	}
	return worst
}

// The modules' decoding on a device (RADGEN_DEVICE, the reference engine
// by default) computes what the same decoding on the CPU computes: the same
// log-probabilities and attention at every step, through reorders that keep
// rows grouped by study (beams) and that do not.
func TestDeviceDecodingMatchesCPU(t *testing.T) {
	dev := testDevice(t)
	for name, configure := range map[string]func(*r2gen.Config){
		"r2gen":   nil,
		"base":    func(c *r2gen.Config) { c.Variant = r2gen.VariantBase },
		"base+rm": func(c *r2gen.Config) { c.Variant = r2gen.VariantBaseRM },
		"mem2mem": func(c *r2gen.Config) { c.Memory, c.Mem2MemPenalty = r2gen.MemoryMem2Mem, 0.1 },
		// Caches sized for MaxSeqLen+1 positions grow, re-laid out, past it.
		"short": func(c *r2gen.Config) { c.MaxSeqLen = 4 },
		"gca":   func(c *r2gen.Config) { c.Routing = mesh.RoutingGCA },
		"ama":   func(c *r2gen.Config) { c.Routing = mesh.RoutingAMA },
	} {
		t.Run(name, func(t *testing.T) {
			m := deviceTestModel(t, configure)
			md := deviceTestModel(t, configure)
			if err := radgen.ToDevice(md, dev); err != nil {
				t.Fatal(err)
			}
			feats := randomFeats(3, 5, 24, 7)
			cpu, err := m.NewDecoding(feats)
			if err != nil {
				t.Fatal(err)
			}
			steps, err := md.NewDecoding(feats)
			if err != nil {
				t.Fatal(err)
			}
			worst := stepBoth(t, cpu, steps, 12, func(step, rows int) []int {
				switch step {
				case 1: // beams: 3 rows per study, study-major
					return []int{0, 0, 0, 1, 1, 1, 2, 2, 2}
				case 4: // a beam reorder within studies
					return []int{2, 0, 0, 3, 5, 4, 8, 8, 6}
				case 7: // rows no longer grouped by study
					return []int{8, 0, 4, 1}
				case 9: // more rows than before, positions kept
					return []int{3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2}
				}
				return nil
			})
			t.Logf("max |Δ| over log-probs and attention: %.3g", worst)
			if !(worst <= 2e-5) {
				t.Errorf("device path differs from the CPU by %.3g", worst)
			}
		})
	}
}

// Through the facade: a model with the reference device writes the same
// reports as on the CPU, also after training steps change its weights.
func TestModelOnReferenceDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two tiny models")
	}
	ctx := context.Background()
	cpu, loader, ann, dir := synthSetup(t, 16, 4)
	defer cpu.Close()
	// The same seed gives the same weights.
	dev, err := New(cpu.cfg, cpu.tokenizer, 4, WithDevice(radgen.Reference()))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if dev.Device() != radgen.Reference() || cpu.Device() != radgen.CPU {
		t.Fatalf("devices %v and %v", dev.Device(), cpu.Device())
	}
	test, _ := ann.Split("test")
	var studies []Study
	for _, s := range test[:3] {
		st, err := cpu.StudyFromAnnotation(s, dir+"/images")
		if err != nil {
			t.Fatal(err)
		}
		studies = append(studies, st)
	}
	// tol is the bound on the log-probabilities' difference, relative to
	// their size: 1e-6 untrained, where the two engines differ by
	// rounding alone (measured 4e-6 absolute on about 35, every kernel
	// path); 1e-4 trained, where Adam amplifies rounding (a parameter whose
	// gradient is near zero moves by up to the learning rate either way),
	// measured 6e-5 to 9e-4 absolute on about 30 across this project's
	// kernel paths and ResNet engines. The texts must be equal.
	same := func(when string, tol float64) {
		t.Helper()
		for _, opts := range [][]GenerateOption{{WithBeamSize(3), WithMaxLength(15)}, {WithGreedy(false), WithMaxLength(15), WithAttention()}} {
			a, err := cpu.Generate(ctx, studies, opts...)
			if err != nil {
				t.Fatal(err)
			}
			b, err := dev.Generate(ctx, studies, opts...)
			if err != nil {
				t.Fatal(err)
			}
			for i := range a {
				if a[i].Text != b[i].Text || math.Abs(a[i].LogProb-b[i].LogProb) > tol*math.Abs(a[i].LogProb) || len(a[i].Attention) != len(b[i].Attention) {
					t.Fatalf("%s, report %d: CPU %q (%v), device %q (%v)", when, i, a[i].Text, a[i].LogProb, b[i].Text, b[i].LogProb)
				}
			}
		}
	}
	same("untrained", 1e-6)
	cfg := TrainConfig{Epochs: 1, LR: 2e-3, Seed: 3, FreezeExtractor: true}
	for _, m := range []*Model{cpu, dev} {
		tr, err := NewTrainer(m, cfg, loader)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	same("trained", 1e-4)
}

// Every architecture goes to the reference device; a device that cannot
// be used here is refused when the model is built, not at its first use.
func TestDeviceRefusals(t *testing.T) {
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal in size.", "no pleural effusion or pneumothorax."})
	if err != nil {
		t.Fatal(err)
	}
	v := tok.Len() + 1
	for name, c := range map[string]ModelConfig{"r2gen": R2GenTiny(v), "m2": M2Tiny(v), "metrans": METransTiny(v)} {
		m, err := New(c, tok, 1, WithDevice(radgen.Reference()))
		if err != nil {
			t.Errorf("%s on the reference device: %v", name, err)
			continue
		}
		var where []radgen.Device
		m.VisitParams(func(_ string, x *radgen.Tensor) {
			if d := x.Device(); len(where) == 0 || where[len(where)-1] != d {
				where = append(where, d)
			}
		})
		if len(where) != 1 || where[0] != radgen.Reference() {
			t.Errorf("%s: parameters on %v, want all on the reference device", name, where)
		}
		m.Close()
		m.VisitParams(func(p string, x *radgen.Tensor) {
			if x.Device() != radgen.CPU || x.Len() != 0 {
				t.Errorf("%s: %s still holds %d values on %v after Close", name, p, x.Len(), x.Device())
			}
		})
	}
	if err := radgen.CUDA(0).Check(); err != nil {
		if _, err := New(R2GenTiny(v), tok, 1, WithDevice(radgen.CUDA(0))); err == nil {
			t.Error("WithDevice(cuda:0) accepted where cuda:0 cannot be used")
		} else {
			t.Logf("no usable GPU: %v", err)
		}
	}
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

// The published model's beam-3 reports of the golden studies, decoded on
// the device (RADGEN_DEVICE), from concurrent callers: the decode issue's
// parity on the device.
func TestDeviceReproducesGoldenBeam3(t *testing.T) {
	dev := testDevice(t)
	m, g := goldenModel(t, WithDevice(dev))
	defer m.Close()
	cpu, _ := goldenModel(t)
	defer cpu.Close()
	feats := g.Tensor(t, "att_feats")
	seq, shape := g.Ints(t, "beam3_seq")
	ids := []string{"a", "b", "c", "d"}[:shape[0]]
	want, err := cpu.GenerateFeatures(context.Background(), ids, feats, WithBeamSize(3))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps, err := m.GenerateFeatures(context.Background(), ids, feats, WithBeamSize(3))
			if err != nil {
				t.Error(err)
				return
			}
			var worst float64
			for i, r := range reps {
				if golden := m.Tokenizer().Decode(seq[i*shape[1] : (i+1)*shape[1]]); r.Text != golden {
					t.Errorf("%s, study %d:\n got %q\nwant %q", dev, i, r.Text, golden)
				}
				if len(r.TokenLogProbs) != len(want[i].TokenLogProbs) {
					t.Errorf("%s, study %d: %d tokens, the CPU wrote %d", dev, i, len(r.TokenLogProbs), len(want[i].TokenLogProbs))
					continue
				}
				for j, lp := range r.TokenLogProbs {
					worst = math.Max(worst, math.Abs(float64(lp-want[i].TokenLogProbs[j])))
				}
			}
			if worst > 1e-4 {
				t.Errorf("%s: token log-probs differ from the CPU's by %.3g", dev, worst)
			}
			t.Logf("%s: golden beam-3 reports reproduced; token log-probs within %.3g of the CPU", dev, worst)
		}()
	}
	wg.Wait()
}

// The published model's teacher-forced log-probabilities (the core issue's
// golden) from the device decoder fed the golden tokens one step at a
// time: every word at every position the loss counts (beyond the end,
// teacher forcing masks the padding keys, which step-wise decoding never
// sees), max |Δ| ≤ 1e-4.
func TestDeviceParityLogProbs(t *testing.T) {
	dev := testDevice(t)
	g := loadGolden(t)
	m := g.Build(t)
	feats, in, _, mask, b, steps := g.CaseBatch(t)
	want := g.Tensor(t, "logprobs") // (B, T, V)
	if err := radgen.ToDevice(m, dev); err != nil {
		t.Fatal(err)
	}
	s, err := m.NewDecoding(feats)
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config().(r2gen.Config).Vocab
	out := make([]float32, b*V)
	var worst float64
	counted := 0
	for p := range steps {
		tokens := make([]int, b)
		for i := range b {
			tokens[i] = in[i*steps+p]
		}
		if err := s.Step(context.Background(), tokens, out); err != nil {
			t.Fatal(err)
		}
		for i := range b {
			if mask[i*steps+p] == 0 {
				continue
			}
			counted++
			for v := range V {
				worst = math.Max(worst, math.Abs(float64(out[i*V+v])-want.At(i, p, v)))
			}
		}
	}
	t.Logf("%s: logprobs at %d positions of %d studies, max |Δ| = %.3g", dev, counted, b, worst)
	if worst > 1e-4 {
		t.Errorf("max |Δ| = %.3g > 1e-4", worst)
	}
}

// WithHalfWeights: the same reports as float32 on the golden studies (the
// fp16 error is far below the gaps between beams there), log-probs within
// 2e-3, and the snapshot follows the weights when told they changed.
func TestModelWithHalfWeights(t *testing.T) {
	m, g := goldenModel(t, WithHalfWeights())
	defer m.Close()
	cpu, _ := goldenModel(t)
	defer cpu.Close()
	feats := g.Tensor(t, "att_feats")
	ids := make([]string, feats.Dim(0))
	want, err := cpu.GenerateFeatures(context.Background(), ids, feats, WithBeamSize(3))
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.GenerateFeatures(context.Background(), ids, feats, WithBeamSize(3))
	if err != nil {
		t.Fatal(err)
	}
	var worst float64
	for i := range want {
		if got[i].Text != want[i].Text {
			t.Fatalf("study %d: fp16 %q, float32 %q", i, got[i].Text, want[i].Text)
		}
		for j := range want[i].TokenLogProbs {
			worst = math.Max(worst, math.Abs(float64(got[i].TokenLogProbs[j]-want[i].TokenLogProbs[j])))
		}
	}
	t.Logf("fp16 weights: golden beam-3 reports unchanged, token log-probs within %.3g", worst)
	if worst == 0 || worst > 2e-3 {
		t.Errorf("fp16 log-probs differ by %.3g (want in (0, 2e-3])", worst)
	}
	// Scale the logit layer: only a refreshed snapshot sees it.
	w := m.r2genNet().Logit.Weight.Data()
	for i := range w {
		w[i] *= 2
	}
	m.half.markStale()
	again, err := m.GenerateFeatures(context.Background(), ids, feats, WithBeamSize(3))
	if err != nil {
		t.Fatal(err)
	}
	if again[0].LogProb == got[0].LogProb {
		t.Error("the snapshot did not follow the weights")
	}
}

// Through the facade, an M² model writes the same reports on the
// reference device as on the CPU (M²'s beam rules, forbidden <bos>/<pad>,
// attention).
func TestM2ModelOnReferenceDevice(t *testing.T) {
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal in size.", "no pleural effusion or pneumothorax.", "the lungs are clear."})
	if err != nil {
		t.Fatal(err)
	}
	cfg := M2Tiny(tok.Len() + 1)
	cpu, err := New(cfg, tok, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	dev, err := New(cfg, tok, 3, WithDevice(radgen.Reference()))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	feats := randomFeats(2, cfg.PatchesPerStudy(), cfg.Vision.OutChannels(), 5)
	ids := []string{"a", "b"}
	for _, opts := range [][]GenerateOption{{WithBeamSize(3), WithMaxLength(12)}, {WithGreedy(false), WithMaxLength(12), WithAttention()}} {
		a, err := cpu.GenerateFeatures(context.Background(), ids, feats, opts...)
		if err != nil {
			t.Fatal(err)
		}
		b, err := dev.GenerateFeatures(context.Background(), ids, feats, opts...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range a {
			if a[i].Text != b[i].Text || math.Abs(a[i].LogProb-b[i].LogProb) > 1e-4 || len(a[i].Attention) != len(b[i].Attention) {
				t.Fatalf("report %d: CPU %q (%v), device %q (%v)", i, a[i].Text, a[i].LogProb, b[i].Text, b[i].LogProb)
			}
		}
	}
}
