package memtrans

import (
	"errors"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/m2"
	"github.com/radgen/radgen/memtrans/metrans"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// allocated returns the bytes f allocated on the heap (an upper bound on
// the growth of the live heap while it ran).
func allocated(f func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	f()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

func countParams(m radgen.Module) float64 {
	n := 0.0
	m.VisitParams(func(_ string, t *radgen.Tensor) { n += float64(t.Len()) })
	return n
}

// The estimates bound the parameters of the models they describe from
// above, within a factor of three, and the paper's models are far inside
// the default budget.
func TestBudgetEstimates(t *testing.T) {
	const vocab = 760
	r2 := []r2gen.Config{r2gen.IUXray(vocab), r2gen.MIMICCXR(4000), r2gen.Tiny(vocab, 512)}
	rm := r2gen.IUXray(vocab)
	rm.Variant = r2gen.VariantBaseRM
	base := r2gen.IUXray(vocab)
	base.Variant = r2gen.VariantBase
	r2 = append(r2, rm, base)
	for _, c := range r2 {
		if testing.Short() && c.DModel > 64 {
			continue
		}
		m, err := r2gen.New(c, 1)
		if err != nil {
			t.Fatal(err)
		}
		got, est := countParams(m), c.Cost(nominalPatches).Params
		if est < got || est > 3*got {
			t.Errorf("R2Gen %s d=%d vocab %d: estimate %.0f for %.0f parameters", c.Variant, c.DModel, c.Vocab, est, got)
		}
	}
	for _, c := range []m2.Config{m2.COCO(vocab).ForReports(vocab, 60), m2.Tiny(vocab, 512)} {
		if testing.Short() && c.DModel > 64 {
			continue
		}
		m, err := m2.New(c, 1)
		if err != nil {
			t.Fatal(err)
		}
		got, est := countParams(m), c.Cost(nominalPatches).Params
		if est < got || est > 3*got {
			t.Errorf("M² d=%d: estimate %.0f for %.0f parameters", c.DModel, est, got)
		}
	}
	for _, mc := range []ModelConfig{R2GenIUXray(vocab), R2GenMIMICCXR(4000), M2IUXray(vocab), METransIUXray(vocab),
		R2GenTiny(vocab), M2Tiny(vocab), METransTiny(vocab)} {
		if err := mc.Validate(); err != nil {
			t.Errorf("%s: %v", mc.Architecture(), err)
		}
		c := mc.cost()
		if c.Params > defaultMaxParams/2 || c.Activations > defaultMaxActivations/2 {
			t.Errorf("%s: %.3g parameters, %.3g activations: too close to the default budget", mc.Architecture(), c.Params, c.Activations)
		}
	}
}

// Configurations that describe enormous models are refused before anything
// is allocated, naming the field and the budget; none panics.
func TestBudgetRefusesHugeConfigs(t *testing.T) {
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal.", "no effusion."})
	if err != nil {
		t.Fatal(err)
	}
	vocab := tok.Len() + 1
	type tc struct {
		name  string
		cfg   ModelConfig
		field string
	}
	var cases []tc
	add := func(name, field string, edit func(*ModelConfig)) {
		c := R2GenTiny(vocab)
		edit(&c)
		cases = append(cases, tc{name, c, field})
	}
	add("layers", "num_layers", func(c *ModelConfig) { editR2(c, func(t *r2gen.Config) { t.Layers = 1 << 20 }) })
	add("d_model", "d_model", func(c *ModelConfig) { editR2(c, func(t *r2gen.Config) { t.DModel, t.DFF = 1<<20, 64 }) })
	add("d_ff", "d_ff", func(c *ModelConfig) { editR2(c, func(t *r2gen.Config) { t.DFF = 1 << 20 }) })
	add("pe_len", "pe_len", func(c *ModelConfig) { editR2(c, func(t *r2gen.Config) { t.DModel, t.PositionLen = 512, 1<<20 }) })
	add("image_size", "image_size", func(c *ModelConfig) { c.ImageSize, c.ResizeTo, c.Views = 4096, 4096, 16 })
	add("m2 d_ff", "d_ff", func(c *ModelConfig) {
		m := M2Tiny(vocab)
		editM2(&m, func(c *m2.Config) { c.DFF = 1 << 20 })
		*c = m
	})
	add("m2 layers", "enc_layers", func(c *ModelConfig) {
		m := M2Tiny(vocab)
		editM2(&m, func(c *m2.Config) { c.EncLayers = 1 << 20 })
		*c = m
	})
	add("metrans experts", "experts", func(c *ModelConfig) {
		m := METransTiny(vocab)
		editMT(&m, func(c *metrans.Config) { c.Experts = 1 << 20 })
		*c = m
	})
	for _, c := range cases {
		var err error
		n := allocated(func() { _, err = New(c.cfg, tok, 1) })
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.field)
		}
		if n > 1<<20 {
			t.Errorf("%s: allocated %d bytes before refusing", c.name, n)
		}
	}
	// The sub-configurations refuse on their own too.
	big := r2gen.Tiny(vocab, 512)
	big.DModel, big.DFF = 1<<20, 64
	if err := checkR2(big); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "d_model = 1048576") {
		t.Errorf("Config d_model 2^20: %v", err)
	}
	if _, err := r2gen.New(big, 1); !errors.Is(err, ErrBudget) {
		t.Errorf("NewTransformer d_model 2^20: %v", err)
	}
	mc := m2.Tiny(vocab, 512)
	mc.Vocab, mc.DModel = 1<<20, 1024
	if err := checkArchBudget("M²", DefaultBudget(), mc, nominalPatches); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "budget of") {
		t.Errorf("m2.Config vocab 2^20: %v", err)
	}
	mt := metrans.Tiny(vocab, 512, 98)
	mt.DModel, mt.DFF = 1<<16, 1<<16
	if err := checkArchBudget("METransformer", DefaultBudget(), mt, mt.Patches); !errors.Is(err, ErrBudget) {
		t.Errorf("metrans.Config d_model 2^16: %v", err)
	}
	// A smaller budget refuses even the tiny model; the error names it.
	_, err = New(R2GenTiny(vocab), tok, 1, WithBudget(Budget{MaxParams: 1000}))
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "budget of 1000") {
		t.Errorf("budget 1000: %v", err)
	}
}

// inferR2GenConfig reads the layer count from tensor names; a forged name
// cannot make it build a million layers.
func TestInferConfigForgedLayer(t *testing.T) {
	c := r2gen.Tiny(20, 512)
	m, err := r2gen.New(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	shapes := map[string][]int{}
	m.VisitParams(func(name string, x *radgen.Tensor) { shapes[name] = x.Shape() })
	shapes["model.tgt_embed.1.pe"] = []int{1, c.PositionLen, c.DModel}
	if got, err := r2gen.InferConfig(shapes, c.Heads, c.MemoryHeads, 60); err != nil || got.Layers != c.Layers {
		t.Fatalf("InferConfig: %+v, %v", got, err)
	}
	shapes["model.encoder.layers.999999.x"] = []int{1}
	var got r2gen.Config
	n := allocated(func() { got, err = r2gen.InferConfig(shapes, c.Heads, c.MemoryHeads, 60) })
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "num_layers") {
		t.Errorf("forged layer 999999: %+v, %v", got.Layers, err)
	}
	if n > 1<<20 {
		t.Errorf("forged layer 999999: allocated %d bytes", n)
	}
}
