package memtrans

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/mesh"
)

// variantConfigs are the configurations the other seeds add to R2Gen.
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

// Continued learning: a multi-view model takes every single-view weight
// and keeps its routing's own initialisation.
func TestContinueFromSingleView(t *testing.T) {
	for _, name := range []string{"r2gen+fma", "r2gen+mem2mem"} {
		c := variantConfigs()[name]
		single := c
		single.Routing, single.Memory, single.Mem2MemHidden, single.Mem2MemPenalty = "", "", 0, 0
		if c.Memory == r2gen.MemoryMem2Mem {
			single.MemorySlots = c.MemorySlots
		}
		src, err := r2gen.New(single, 1)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := r2gen.New(c, 2)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := r2gen.New(c, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := dst.ContinueFrom(radgen.StateDict(src, "encoder_decoder."), "encoder_decoder."); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sd, fd := radgen.StateDict(src, ""), radgen.StateDict(fresh, "")
		variant := map[*radgen.Tensor]bool{}
		dst.VisitVariant(func(_ string, x *radgen.Tensor) { variant[x] = true })
		n := 0
		dst.VisitParams(func(p string, x *radgen.Tensor) {
			want := sd[p]
			if variant[x] {
				want = fd[p]
				n++
			}
			for i, v := range x.Data() {
				if want.Data()[i] != v {
					t.Fatalf("%s: %s[%d] = %v, want %v", name, p, i, v, want.Data()[i])
				}
			}
		})
		if n == 0 {
			t.Fatalf("%s: no variant parameters", name)
		}
	}
	// A source of another width fails and leaves the model unchanged.
	c := variantConfigs()["r2gen+gca"]
	other := c
	other.Routing, other.DModel, other.DFF = "", 8, 8
	src, _ := r2gen.New(other, 1)
	dst, _ := r2gen.New(c, 2)
	before := radgen.StateDict(dst, "")["logit.weight"].Data()[0]
	if err := dst.ContinueFrom(radgen.StateDict(src, ""), ""); !errors.Is(err, radgen.ErrShapeMismatch) {
		t.Fatalf("width mismatch: %v", err)
	}
	if radgen.StateDict(dst, "")["logit.weight"].Data()[0] != before {
		t.Fatal("failed ContinueFrom modified the model")
	}
}

// A variant's model saves and loads like R2Gen's and generates the same
// reports afterwards.
func TestVariantCheckpointRoundTrip(t *testing.T) {
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal in size .", "no effusion . the lungs are clear ."})
	if err != nil {
		t.Fatal(err)
	}
	cfg := R2GenTiny(tok.Len() + 1)
	editR2(&cfg, func(t *r2gen.Config) { t.Routing = mesh.RoutingGCA })
	editR2(&cfg, func(t *r2gen.Config) { t.Memory, t.Mem2MemPenalty = r2gen.MemoryMem2Mem, 0.5 })
	m, err := New(cfg, tok, 3)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := m.Save(&buf); err != nil {
		t.Fatal(err)
	}
	m2, err := Load(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got := m2.r2genNet().Config().(r2gen.Config); got != r2cfg(cfg) {
		t.Fatalf("config after load: %+v", got)
	}
	feats := randomFeats(2, 4, r2cfg(cfg).DVisual, 8)
	ids := []string{"a", "b"}
	r1, err := m.GenerateFeatures(context.Background(), ids, feats, WithBeamSize(2))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := m2.GenerateFeatures(context.Background(), ids, feats, WithBeamSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(r1) != fmt.Sprint(r2) {
		t.Fatalf("reports differ after the round trip:\n%v\n%v", r1, r2)
	}
}
