package r2gen_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/mesh"
)

// nominalPatches is the patch count the facade assumes when it checks an
// encoder–decoder's configuration on its own: two 224² views of a ResNet.
const nominalPatches = 2 * 7 * 7

// checkR2 validates an R2Gen configuration as the facade checks one alone:
// its own checks, then the default budget.
func checkR2(c r2gen.Config) error {
	if err := c.Validate(nominalPatches); err != nil {
		return err
	}
	b, k := memtrans.DefaultBudget(), c.Cost(nominalPatches)
	if k.Params > float64(b.MaxParams) || k.Activations > float64(b.MaxActivations) {
		return fmt.Errorf("%w: %.3g parameters and %.3g activations, beyond the default budget", arch.ErrConfig, k.Params, k.Activations)
	}
	return nil
}

// TestVariantsIncrementalMatchesTeacherForcing: for every new
// configuration, the incremental Decoding (keys and values of each layer's
// routed source, Mem2Mem's memory per row) and the O(T²) Recompute give the
// teacher-forced log-probabilities, also after a beam-style reorder.
func TestVariantsIncrementalMatchesTeacherForcing(t *testing.T) {
	for name, c := range variantConfigs() {
		t.Run(name, func(t *testing.T) {
			m, feats, in, want := forcedVariant(t, c)
			const b, steps = forcedStudies, forcedSteps
			dec, err := m.StartDecoding(feats)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := m.StartRecompute(feats)
			if err != nil {
				t.Fatal(err)
			}
			// Swap the two rows before the first step and back after the
			// third: the state must follow.
			V := c.Vocab
			lp, lr := make([]float32, b*V), make([]float32, b*V)
			tok := make([]int, b)
			perm := []int{1, 0}
			var worst float64
			for s := 0; s < steps; s++ {
				if s == 0 || s == 3 {
					for _, r := range []interface{ Reorder([]int) error }{dec, rec} {
						if err := r.Reorder(perm); err != nil {
							t.Fatal(err)
						}
					}
				}
				swapped := s < 3
				for i := range tok {
					src := i
					if swapped {
						src = perm[i]
					}
					tok[i] = in[src*steps+s]
				}
				if err := dec.Step(context.Background(), tok, lp); err != nil {
					t.Fatal(err)
				}
				if err := rec.Step(context.Background(), tok, lr); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < b; i++ {
					src := i
					if swapped {
						src = perm[i]
					}
					for v := 0; v < V; v++ {
						w := float64(want[(src*steps+s)*V+v])
						worst = math.Max(worst, math.Abs(float64(lp[i*V+v])-w))
						worst = math.Max(worst, math.Abs(float64(lr[i*V+v])-w))
					}
				}
			}
			if worst > 1e-4 {
				t.Fatalf("max |Δ log-prob| = %.3g", worst)
			}
		})
	}
}

// The variants' modules change the model only where they apply: a
// configuration without them is R2Gen, with the same parameters and the
// same initial weights for the shared ones.
func TestVariantsShareR2GenInitialisation(t *testing.T) {
	c := variantConfigs()["r2gen+gca"]
	r2 := c
	r2.Routing = ""
	a, err := r2gen.New(r2, 9)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r2gen.New(c, 9)
	if err != nil {
		t.Fatal(err)
	}
	pa, pb := radgen.StateDict(a, ""), radgen.StateDict(b, "")
	for name, x := range pa {
		y, ok := pb[name]
		if !ok {
			t.Fatalf("%s missing from the multi-view model", name)
		}
		for i, v := range x.Data() {
			if y.Data()[i] != v {
				t.Fatalf("%s differs at %d", name, i)
			}
		}
	}
	if extra := len(pb) - len(pa); extra != 2*c.Layers {
		t.Fatalf("GCA adds %d tensors, want %d (a LayerNorm per decoder layer)", extra, 2*c.Layers)
	}
}

// A few steps of gradient descent on one batch lower every variant's
// training loss (language model plus AuxLoss), and the penalty takes part.
func TestVariantsTrain(t *testing.T) {
	for name, c := range variantConfigs() {
		t.Run(name, func(t *testing.T) {
			m, err := r2gen.New(c, 5)
			if err != nil {
				t.Fatal(err)
			}
			const b, steps = 4, 8
			feats, toks := variantBatch(c, b, steps+1, 6)
			var in, targets []int
			var mask []float32
			for i := 0; i < b; i++ {
				row := toks[i*(steps+1) : (i+1)*(steps+1)]
				in = append(in, row[:steps]...)
				targets = append(targets, row[1:]...)
				for range steps {
					mask = append(mask, 1)
				}
			}
			params := radgen.Trainable(m)
			lossAt := func(train bool) (float64, *radgen.Graph, *radgen.Tensor) {
				g := radgen.NewGraph()
				if !train {
					g = radgen.NoGrad()
				}
				f, err := m.TeacherForce(g, feats, in, b, steps)
				if err != nil {
					t.Fatal(err)
				}
				loss := arch.LanguageModelLoss(g, f.LogProbs, targets, mask)
				aux := m.AuxLoss(g, f)
				if (aux != nil) != (c.Mem2MemPenalty > 0) {
					t.Fatalf("AuxLoss = %v with penalty weight %v", aux, c.Mem2MemPenalty)
				}
				if aux != nil {
					if v := aux.Data()[0]; !(v > 0) {
						t.Fatalf("penalty %v", v)
					}
					loss = g.Add(loss, aux)
				}
				return float64(loss.Data()[0]), g, loss
			}
			first, _, _ := lossAt(false)
			for range 15 {
				_, g, loss := lossAt(true)
				for _, p := range params {
					p.Tensor.ZeroGrad()
				}
				if err := g.Backward(loss); err != nil {
					t.Fatal(err)
				}
				for _, p := range params {
					if gr := p.Tensor.Grad(); gr != nil {
						d := p.Tensor.Data()
						for i, v := range gr.Data() {
							d[i] -= 0.05 * v
						}
					}
				}
			}
			last, _, _ := lossAt(false)
			if !(last < first*0.9) {
				t.Fatalf("loss %.4f → %.4f", first, last)
			}
		})
	}
}

func TestVariantConfigJSON(t *testing.T) {
	// An R2Gen configuration written before the variants existed.
	var c r2gen.Config
	old := `{"variant":"r2gen","d_model":64,"d_ff":64,"num_heads":4,"num_layers":2,"d_vf":512,"vocab":30,` +
		`"rm_num_slots":3,"rm_num_heads":4,"dropout":0.1,"drop_prob_lm":0.5,"max_seq_length":60,"pe_len":512}`
	if err := json.Unmarshal([]byte(old), &c); err != nil {
		t.Fatal(err)
	}
	if c != r2gen.Tiny(30, 512) {
		t.Fatalf("old config reads as %+v", c)
	}
	out, _ := json.Marshal(c)
	if string(out) != old {
		t.Fatalf("R2Gen config writes %s", out)
	}
	v := variantConfigs()["r2gen+mem2mem+ama"]
	out, _ = json.Marshal(v)
	var back r2gen.Config
	if err := json.Unmarshal(out, &back); err != nil || back != v {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for _, bad := range []func(*r2gen.Config){
		func(c *r2gen.Config) { c.Routing = "sideways" },
		func(c *r2gen.Config) { c.Memory = "tape" },
		func(c *r2gen.Config) { c.Memory, c.Variant = r2gen.MemoryMem2Mem, r2gen.VariantBase },
		func(c *r2gen.Config) { c.Mem2MemPenalty = 1 },
		func(c *r2gen.Config) { c.Memory, c.Mem2MemPenalty = r2gen.MemoryMem2Mem, -1 },
		func(c *r2gen.Config) { c.Memory, c.Mem2MemHidden = r2gen.MemoryMem2Mem, -3 },
	} {
		c := r2gen.Tiny(30, 512)
		bad(&c)
		if err := checkR2(c); !errors.Is(err, arch.ErrConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// inferR2GenConfig reads the Mem2Mem memory and the learned routings from the
// shapes of a variant's state_dict; the fixed routings cannot be told apart.
func TestInferVariantConfig(t *testing.T) {
	for _, name := range []string{"r2gen+mem2mem", "base+rm+mem2mem", "r2gen+fma", "r2gen+mem2mem+ama", "r2gen+gca"} {
		c := variantConfigs()[name]
		m, err := r2gen.New(c, 1)
		if err != nil {
			t.Fatal(err)
		}
		shapes := map[string][]int{}
		m.VisitParams(func(n string, x *radgen.Tensor) { shapes[n] = x.Shape() })
		got, err := r2gen.InferConfig(shapes, c.Heads, c.MemoryHeads, c.MaxSeqLen)
		if c.Routing == mesh.RoutingGCA {
			if !errors.Is(err, arch.ErrConfig) {
				t.Fatalf("%s: %v", name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got.Dropout, got.EmbedDrop, got.Mem2MemPenalty = c.Dropout, c.EmbedDrop, c.Mem2MemPenalty
		if got != c {
			t.Fatalf("%s: inferred %+v, want %+v", name, got, c)
		}
	}
}

// FuzzInferConfig: shapes read from an untrusted state_dict never make
// inferR2GenConfig panic, and whatever it accepts validates.
func FuzzInferConfig(f *testing.F) {
	f.Add(uint16(16), uint16(12), uint16(24), uint16(11), uint16(32), uint8(3), uint8(2), uint16(48), uint16(4), uint16(8), uint8(1))
	f.Add(uint16(0), uint16(0), uint16(0), uint16(0), uint16(0), uint8(0), uint8(0), uint16(0), uint16(0), uint16(0), uint8(255))
	f.Add(uint16(16), uint16(12), uint16(24), uint16(11), uint16(32), uint8(3), uint8(1), uint16(16), uint16(5000), uint16(0), uint8(6))
	f.Fuzz(func(t *testing.T, d, dvf, dff, vocab, pe uint16, layers, kind uint8, logitIn, m2mSlots, m2mHidden uint16, views uint8) {
		shapes := map[string][]int{
			"att_embed.0.weight":                             {int(d), int(dvf)},
			"model.encoder.layers.0.feed_forward.w_1.weight": {int(dff), int(d)},
			"logit.weight":                                   {int(vocab), int(logitIn)},
			"model.tgt_embed.1.pe":                           {1, int(pe), int(d)},
		}
		for i := 1; i < int(layers%8); i++ {
			shapes[fmt.Sprintf("model.encoder.layers.%d.feed_forward.w_1.weight", i)] = []int{int(dff), int(d)}
		}
		switch kind % 3 {
		case 1:
			shapes["model.decoder.layers.0.sublayer.0.norm.mlp_gamma.0.weight"] = []int{int(d), int(logitIn)}
		case 2:
			shapes["model.rm.W.weight"] = []int{2 * int(d), int(d)}
		}
		if m2mSlots > 0 {
			shapes["model.m2m.bank.w1.weight"] = []int{int(m2mSlots), int(m2mHidden)}
		}
		switch views % 4 {
		case 1:
			shapes["model.views.0.norm.gamma"] = []int{int(d)}
		case 2:
			shapes["model.views.0.mix.0.weight"] = []int{int(d), int(d)}
		case 3:
			shapes["model.views.0.score.weight"] = []int{int(layers), int(d)}
		}
		c, err := r2gen.InferConfig(shapes, 2, 2, 60)
		if err == nil {
			if verr := checkR2(c); verr != nil {
				t.Fatalf("accepted %+v that does not validate: %v", c, verr)
			}
		} else if !errors.Is(err, arch.ErrConfig) {
			t.Fatalf("error %v does not wrap ErrConfig", err)
		}
	})
}
