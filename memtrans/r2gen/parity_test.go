package r2gen_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/testdevice"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// TestParityR2Gen runs the golden model's teacher-forced forward pass and
// loss on the device of RADGEN_DEVICE (the CPU by default) and compares
// every intermediate with the published code's: max |Δ| ≤ 1e-4, the loss
// within 1e-5 relative.
func TestParityR2Gen(t *testing.T) {
	dev := testdevice.Selected(t)
	defer testdevice.FailOnPanic(t)
	g := loadGolden(t)
	m := g.Build(t)
	t.Logf("config from the golden files: %+v", m.Config().(r2gen.Config))
	feats, in, targets, mask, b, steps := g.CaseBatch(t)
	testdevice.Move(t, m, dev)
	f, err := m.TeacherForce(radgen.NoGrad(), feats.To(dev), in, b, steps)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		got  *radgen.Tensor
	}{
		{"att_embedded", f.Encoded.AttEmbedded},
		{"encoder_out", f.Encoded.Out},
		{"tgt_embedded", f.TgtEmbedded},
		{"memory_init", f.MemoryInit},
		{"memory_states", f.Memory},
		{"decoder_out", f.DecoderOut},
		{"logprobs", f.LogProbs},
	}
	for _, c := range checks {
		if c.got.Device() != dev {
			t.Errorf("%s computed on %v, not %v", c.name, c.got.Device(), dev)
		}
		d := maxAbsDiff(t, c.name, c.got, g.Tensor(t, c.name))
		t.Logf("%-14s max |Δ| = %.3g", c.name, d)
		if d > 1e-4 {
			t.Errorf("%s: max |Δ| = %.3g > 1e-4", c.name, d)
		}
	}
	loss := testdevice.Host(arch.LanguageModelLoss(radgen.NoGrad(), f.LogProbs, targets, mask)).Data()[0]
	want := g.Tensor(t, "loss").Data()[0]
	rel := math.Abs(float64(loss-want)) / math.Abs(float64(want))
	t.Logf("%-14s %.7f vs %.7f, relative error %.3g", "loss", loss, want, rel)
	if rel > 1e-5 {
		t.Errorf("loss %v, want %v (relative error %.3g > 1e-5)", loss, want, rel)
	}
}

// A missing or mis-shaped weight is an error that names it, and the model is
// left unchanged.
func TestLoadErrorsNameTheTensor(t *testing.T) {
	g := loadGolden(t)
	m := g.Build(t)
	src := radgen.StateDict(m, "")
	before := m.Logit.Weight.Data()[0]
	delete(src, "model.rm.W.weight")
	err := radgen.LoadParams(m, src, "")
	if !errors.Is(err, radgen.ErrMissingTensor) || !strings.Contains(err.Error(), "model.rm.W.weight") {
		t.Errorf("missing tensor: %v", err)
	}
	src = radgen.StateDict(m, "")
	src["logit.bias"] = radgen.Zeros(5)
	err = radgen.LoadParams(m, src, "")
	if !errors.Is(err, radgen.ErrShapeMismatch) || !strings.Contains(err.Error(), "logit.bias") {
		t.Errorf("mis-shaped tensor: %v", err)
	}
	src = radgen.StateDict(m, "")
	nan := radgen.Zeros(m.Config().(r2gen.Config).DModel)
	nan.Data()[3] = float32(math.NaN())
	src["model.decoder.norm.gamma"] = nan
	if err := radgen.LoadParams(m, src, ""); err == nil || !strings.Contains(err.Error(), "model.decoder.norm.gamma") {
		t.Errorf("NaN weight: %v", err)
	}
	if m.Logit.Weight.Data()[0] != before {
		t.Error("a failed load modified the model")
	}
}
