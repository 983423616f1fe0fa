package m2_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/gradcheck"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/m2"
	"github.com/radgen/radgen/mesh"
)

func routedM2(t testing.TB, r mesh.Routing) *m2.Model {
	t.Helper()
	c := tinyM2Config()
	c.Routing = r
	m, err := m2.New(c, 7)
	if err != nil {
		t.Fatal(err)
	}
	randomizeVectors(m, 8)
	return m
}

// With a routing, each decoder layer has one gate and one multi-view
// source, named views.i.*.
func TestM2RoutingStructure(t *testing.T) {
	for _, r := range mesh.Routings {
		m := routedM2(t, r)
		if len(m.Decoder.Views) != m.Config.DecLayers {
			t.Fatalf("%s: %d views for %d layers", r, len(m.Decoder.Views), m.Config.DecLayers)
		}
		for i, l := range m.Decoder.Layers {
			if len(l.Mesh.Gates) != 1 {
				t.Fatalf("%s: layer %d has %d gates", r, i, len(l.Mesh.Gates))
			}
		}
		sd := radgen.StateDict(m, "")
		if _, _, err := sd.Float32("decoder.views.1.norm.gamma"); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
	}
	c := tinyM2Config()
	c.Routing, c.DecLayers = mesh.RoutingGCA, c.EncLayers+1
	if err := checkM2(c); !errors.Is(err, arch.ErrConfig) {
		t.Errorf("more decoder layers than levels: %v", err)
	}
	c.Routing = "zigzag"
	if err := checkM2(c); !errors.Is(err, arch.ErrConfig) {
		t.Errorf("unknown routing: %v", err)
	}
}

// Gradients through the routed decoder, the multi-view parameters
// included, match central differences.
func TestM2RoutingGradients(t *testing.T) {
	for _, r := range []mesh.Routing{mesh.RoutingGCA, mesh.RoutingFMA, mesh.RoutingAMA} {
		c := tinyM2Config()
		c.DModel, c.DK, c.DV, c.Heads, c.DFF, c.MemorySlots, c.DIn, c.Vocab = 6, 2, 2, 2, 8, 3, 5, 9
		c.EncLayers, c.DecLayers, c.Routing = 2, 2, r
		c.Padding = m2.PadZeroRows
		m, err := m2.New(c, 3)
		if err != nil {
			t.Fatal(err)
		}
		radgen.Promote64(m)
		rng := rand.New(rand.NewPCG(5, 5))
		for _, v := range m.Decoder.Views {
			radgen.Uniform(v.Gamma, rng, 1)
			radgen.Uniform(v.Beta, rng, 0.3)
		}
		feats := gradcheck.Rand(rng, 1, 2, 4, 5)
		in := []int{2, 5, 6, 2, 7, 1}
		targets := []int{5, 6, 3, 7, 3, 1}
		v := m.Decoder.Views[1]
		check := []*radgen.Tensor{feats, m.Encoder.FC.Weight, v.Gamma, v.Beta, m.Decoder.Layers[0].Mesh.Gates[0].Weight}
		switch r {
		case mesh.RoutingFMA:
			check = append(check, v.Mix[0].Weight, v.Mix[1].Bias)
		case mesh.RoutingAMA:
			check = append(check, v.Score.Weight, v.Score.Bias)
		}
		gradcheck.Check(t, "M² "+string(r), 1e-6, func(g *radgen.Graph) *radgen.Tensor {
			enc, err := m.Encode(g, feats)
			if err != nil {
				t.Fatal(err)
			}
			lp, err := m.TeacherForce(g, enc, in, 2, 3)
			if err != nil {
				t.Fatal(err)
			}
			return m.NLL(g, lp, targets)
		}, check...)
	}
}

// The incremental decoder reads the same routed sources as teacher
// forcing: beam-search log-probabilities equal a teacher-forced pass.
func TestM2RoutingBeamMatchesTeacherForcing(t *testing.T) {
	for _, r := range mesh.Routings {
		m := routedM2(t, r)
		c := m.Config
		feats := m2Feats(rand.New(rand.NewPCG(2, 2)), 3, 6, 12)
		enc, err := m.Encode(radgen.NoGrad(), feats)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := m.NewDecodingEncoded(enc)
		if err != nil {
			t.Fatal(err)
		}
		hyps, err := decode.BeamSearch{Size: 3, N: 3, MaxLen: 8, BOS: c.BOS, EOS: c.EOS, Semantics: decode.M2, FullLength: true}.
			Decode(context.Background(), dec)
		if err != nil {
			t.Fatal(err)
		}
		worst := m2TeacherForcedDelta(t, m, enc, hyps)
		t.Logf("%s: beam vs teacher forcing, max |Δ log p| = %.3g", r, worst)
		if worst > 1e-5 {
			t.Errorf("%s: max |Δ| = %.3g", r, worst)
		}
	}
}
