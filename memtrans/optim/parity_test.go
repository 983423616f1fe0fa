package optim

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/internal/testdevice"
	"github.com/radgen/radgen/internal/testutil"
)

func openGolden(t *testing.T, dir, name string) *safetensors.File {
	t.Helper()
	f, err := safetensors.OpenFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestR2GenStepParity applies clip_grad_value(0.1) and one Adam step (lr
// 1e-4, weight decay 5e-5, amsgrad, fresh state) to the reference
// parameters and gradients, and compares every parameter with the
// reference's result: max |Δ| ≤ 1e-6 per tensor.
func TestR2GenStepParity(t *testing.T) {
	dev := testdevice.Selected(t)
	dir := testutil.Dir(t, "RADGEN_GOLDEN_R2GEN", "golden/r2gen")
	model := openGolden(t, dir, "model.safetensors")
	grads := openGolden(t, dir, "grads.safetensors")
	step := openGolden(t, dir, "step.safetensors")

	if g, s := grads.Names(), step.Names(); !slices.Equal(g, s) {
		t.Fatalf("grads.safetensors has %d tensors, step.safetensors %d; the names differ", len(g), len(s))
	}
	var params []radgen.Named
	skipped := 0
	for _, name := range model.Names() {
		if _, ok := grads.Info(name); !ok {
			skipped++ // a buffer such as model.tgt_embed.1.pe
			continue
		}
		p, shape, err := model.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		g, gshape, err := grads.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(shape, gshape) {
			t.Fatalf("%s: parameter %v, gradient %v", name, shape, gshape)
		}
		pt := radgen.FromFloat32(p, shape...).SetRequiresGrad(true).To(dev)
		pt.SetGrad(radgen.FromFloat32(g, shape...).To(dev))
		params = append(params, radgen.Named{Name: name, Tensor: pt})
	}
	if len(params) != len(grads.Names()) {
		t.Fatalf("model.safetensors lacks %d of the %d parameters with gradients", len(grads.Names())-len(params), len(grads.Names()))
	}
	if skipped != 1 {
		t.Errorf("%d tensors of model.safetensors have no gradient, want 1 (the positional table)", skipped)
	}

	opt, err := NewAdam([]Group{{Params: params, LR: 1e-4, WeightDecay: 5e-5}}, WithAMSGrad(true))
	if err != nil {
		t.Fatal(err)
	}
	ClipGradValue(opt.Params(), 0.1)
	opt.Step()

	var worst float64
	worstName := ""
	exact, total := 0, 0
	for _, p := range params {
		want, _, err := step.Float32(p.Name)
		if err != nil {
			t.Fatal(err)
		}
		got := testdevice.Host(p.Tensor).Data()
		var tensorMax float64
		for i := range got {
			d := math.Abs(float64(got[i]) - float64(want[i]))
			if math.IsNaN(d) {
				d = math.Inf(1)
			}
			tensorMax = max(tensorMax, d)
			if math.Float32bits(got[i]) == math.Float32bits(want[i]) {
				exact++
			}
			total++
		}
		if tensorMax > 1e-6 {
			t.Errorf("%s: max |Δ| = %.3g after the step, want ≤ 1e-6", p.Name, tensorMax)
		}
		if tensorMax >= worst {
			worst, worstName = tensorMax, p.Name
		}
	}
	t.Logf("step parity over %d tensors, %d values: worst max |Δ| = %.3g (%s); %d of %d values bit-identical",
		len(params), total, worst, worstName, exact, total)
}
