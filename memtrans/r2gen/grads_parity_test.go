package r2gen_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/testdevice"
	"github.com/radgen/radgen/memtrans/arch"
)

// TestParityR2GenGradients checks every parameter's gradient of the case
// loss (eval mode), computed on the device of RADGEN_DEVICE (the CPU by
// default), against the published code: ‖Δ‖ ≤ 1e-3·‖ref‖ + 1e-6.
func TestParityR2GenGradients(t *testing.T) {
	dev := testdevice.Selected(t)
	defer testdevice.FailOnPanic(t)
	g := loadGolden(t)
	grads := openSafetensors(t, filepath.Join(g.Dir, "grads.safetensors"))
	m := g.Build(t)
	feats, in, targets, mask, b, steps := g.CaseBatch(t)
	testdevice.Move(t, m, dev)
	graph := radgen.NewGraph()
	f, err := m.TeacherForce(graph, feats.To(dev), in, b, steps)
	if err != nil {
		t.Fatal(err)
	}
	if err := graph.Backward(arch.LanguageModelLoss(graph, f.LogProbs, targets, mask)); err != nil {
		t.Fatal(err)
	}
	checked := 0
	var worstRel float64
	var worstName string
	for _, p := range radgen.Trainable(m) {
		want, shape, err := grads.Float32(p.Name)
		if err != nil {
			t.Errorf("golden lacks the gradient of %q", p.Name)
			continue
		}
		got := p.Tensor.Grad()
		if got == nil {
			t.Errorf("%s: no gradient", p.Name)
			continue
		}
		if got.Device() != dev {
			t.Errorf("%s: gradient on %v, not %v", p.Name, got.Device(), dev)
		}
		got = testdevice.Host(got)
		if got.Len() != len(want) {
			t.Fatalf("%s: gradient shape %v, golden %v", p.Name, got.Shape(), shape)
		}
		var dd, rr float64
		for i, v := range got.Data() {
			d := float64(v - want[i])
			dd += d * d
			rr += float64(want[i]) * float64(want[i])
		}
		diff, ref := math.Sqrt(dd), math.Sqrt(rr)
		if diff > 1e-3*ref+1e-6 {
			t.Errorf("%s: ‖Δ‖ = %.3g, ‖ref‖ = %.3g", p.Name, diff, ref)
		}
		if ref > 1e-6 && diff/ref > worstRel {
			worstRel, worstName = diff/ref, p.Name
		}
		checked++
	}
	if n := len(grads.Names()); checked != n {
		t.Errorf("checked %d gradients, golden has %d", checked, n)
	}
	t.Logf("%d parameter gradients; worst ‖Δ‖/‖ref‖ = %.3g (%s)", checked, worstRel, worstName)
}
