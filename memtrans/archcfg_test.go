package memtrans

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/m2"
	"github.com/radgen/radgen/memtrans/metrans"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// Test helpers for the library's configurations inside a ModelConfig.

func r2cfg(c ModelConfig) r2gen.Config { return c.EncoderDecoder.(r2gen.Config) }

func mtcfg(c ModelConfig) metrans.Config { return c.EncoderDecoder.(metrans.Config) }

func editR2(c *ModelConfig, f func(*r2gen.Config)) {
	t := c.EncoderDecoder.(r2gen.Config)
	f(&t)
	c.EncoderDecoder = t
}

func editM2(c *ModelConfig, f func(*m2.Config)) {
	t := c.EncoderDecoder.(m2.Config)
	f(&t)
	c.EncoderDecoder = t
}

func editMT(c *ModelConfig, f func(*metrans.Config)) {
	t := c.EncoderDecoder.(metrans.Config)
	f(&t)
	c.EncoderDecoder = t
}

// legacyConfigJSON writes c as API record v0.2.0 saved it: the
// encoder–decoder under "transformer", "m2" or "metrans".
func legacyConfigJSON(t testing.TB, c ModelConfig) string {
	t.Helper()
	key := map[string]string{ArchR2Gen: "transformer", ArchM2: "m2", ArchMETransformer: "metrans"}[c.Architecture()]
	ed, err := json.Marshal(c.EncoderDecoder)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := json.Marshal(c.Vision)
	return fmt.Sprintf(`{%q:%s,"vision":%s,"corpus":%q,"views":%d,"image_size":%d,"resize_to":%d}`, key, ed, v, c.Corpus, c.Views, c.ImageSize, c.ResizeTo)
}

// Checkpoints written before the registry (API record v0.2.0) name their
// encoder–decoder by field; they load into the same configuration and
// generate the same reports.
func TestLoadsV020Checkpoints(t *testing.T) {
	skipUnderRace(t)
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal.", "no effusion.", "the lungs are clear."})
	if err != nil {
		t.Fatal(err)
	}
	v := tok.Len() + 1
	r2 := R2GenTiny(v)
	editR2(&r2, func(c *r2gen.Config) { c.DModel, c.DFF, c.Layers, c.Heads, c.MemoryHeads = 8, 8, 1, 2, 2 })
	for _, cfg := range []ModelConfig{r2, M2Tiny(v), METransTiny(v)} {
		t.Run(cfg.Architecture(), func(t *testing.T) {
			m, err := New(cfg, tok, 7)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			var buf bytes.Buffer
			if err := m.Save(&buf); err != nil {
				t.Fatal(err)
			}
			payload := unseal(t, buf.Bytes())
			f, err := safetensors.Open(bytes.NewReader(payload), int64(len(payload)))
			if err != nil {
				t.Fatal(err)
			}
			md := f.Metadata()
			if !strings.Contains(md[metaConfig], `"architecture":"`+cfg.Architecture()+`"`) {
				t.Fatalf("saved config %s does not name its architecture", md[metaConfig])
			}
			md[metaConfig] = legacyConfigJSON(t, cfg)
			var ts []safetensors.Tensor
			for _, n := range f.Names() {
				info, data, err := f.Bytes(n)
				if err != nil {
					t.Fatal(err)
				}
				ts = append(ts, safetensors.Tensor{Name: n, Dtype: info.Dtype, Shape: info.Shape, Data: data})
			}
			var payload2, old bytes.Buffer
			if err := safetensors.Write(&payload2, ts, md); err != nil {
				t.Fatal(err)
			}
			if err := sealCheckpoint(&old, payload2.Bytes()); err != nil {
				t.Fatal(err)
			}
			back, err := Load(&old)
			if err != nil {
				t.Fatal(err)
			}
			defer back.Close()
			if !reflect.DeepEqual(back.Config(), cfg) {
				t.Fatalf("loaded %+v, want %+v", back.Config(), cfg)
			}
			ids := []string{"a", "b"}
			feats := randomFeats(2, cfg.PatchesPerStudy(), cfg.visualWidth(), 3)
			want, err := m.GenerateFeatures(context.Background(), ids, feats, WithBeamSize(2), WithMaxLength(6))
			if err != nil {
				t.Fatal(err)
			}
			got, err := back.GenerateFeatures(context.Background(), ids, feats, WithBeamSize(2), WithMaxLength(6))
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if !slices.Equal(got[i].Tokens, want[i].Tokens) || got[i].LogProb != want[i].LogProb {
					t.Fatalf("study %d: %v (%v), want %v (%v)", i, got[i].Tokens, got[i].LogProb, want[i].Tokens, want[i].LogProb)
				}
			}
		})
	}
}

// A configuration naming an architecture nobody registered is refused with
// an error that says so and lists the registered ones.
func TestUnregisteredArchitecture(t *testing.T) {
	var c ModelConfig
	err := json.Unmarshal([]byte(`{"architecture":"lstm","encoder_decoder":{},"views":2}`), &c)
	if !errors.Is(err, arch.ErrUnregistered) || !strings.Contains(err.Error(), `"lstm"`) || !strings.Contains(err.Error(), `"r2gen"`) {
		t.Fatalf("unregistered architecture: %v", err)
	}
	err = json.Unmarshal([]byte(`{"architecture":"r2gen","encoder_decoder":{"d_model":8,"bogus":1}}`), &c)
	if err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("unknown field: %v", err)
	}
	if _, err := json.Marshal(ModelConfig{}); !errors.Is(err, arch.ErrUnregistered) {
		t.Fatalf("marshal without an encoder–decoder: %v", err)
	}
}

// checkR2 validates an R2Gen configuration alone, over two views of
// patches, against the default budget.
func checkR2(c r2gen.Config) error {
	if err := c.Validate(nominalPatches); err != nil {
		return err
	}
	return checkArchBudget("R2Gen", DefaultBudget(), c, nominalPatches)
}

// checkM2 validates an M² configuration in its own ids alone, over two
// views of regions, against the default budget.
func checkM2(c m2.Config) error {
	if err := c.ValidateShape(); err != nil {
		return err
	}
	return checkArchBudget("M²", DefaultBudget(), c, nominalPatches)
}

// m2 returns the Meshed-Memory Transformer of an ArchM2 model, or nil.
// r2genNet returns the encoder–decoder of an R2Gen model, or nil (for a
// nil m too).
func (m *Model) r2genNet() *r2gen.Model {
	if m == nil {
		return nil
	}
	r2, _ := m.net.(*r2gen.Model)
	return r2
}

func (m *Model) m2() *m2.Model {
	if f, ok := m.net.(m2.ReportModel); ok {
		return f.Model
	}
	return nil
}

// metrans returns the METransformer of an ArchMETransformer model, or nil.
func (m *Model) metrans() *metrans.Model {
	mt, _ := m.net.(*metrans.Model)
	return mt
}
