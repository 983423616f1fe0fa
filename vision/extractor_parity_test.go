package vision_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/internal/testdevice"
	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/vision"
)

// openExtractorGolden opens extractor.safetensors of the R2Gen golden: the
// published R2Gen VisualExtractor's weights (visual_extractor.model.*), its
// input_images [N, 3, H, W] and outputs patch_feats [N, h·w, C] and avg_feats
// [N, C], computed in eval mode on CPU in float32.
func openExtractorGolden(t *testing.T) *safetensors.File {
	t.Helper()
	dir := testutil.Dir(t, "RADGEN_GOLDEN_R2GEN", "golden/r2gen")
	path := filepath.Join(dir, "extractor.safetensors")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no extractor golden: %v", err)
	}
	f, err := safetensors.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func goldenTensor(t *testing.T, f *safetensors.File, name string) *radgen.Tensor {
	t.Helper()
	data, shape, err := f.Float32(name)
	if err != nil {
		t.Fatalf("golden: %v", err)
	}
	return radgen.FromFloat32(data, shape...)
}

// relErr returns ‖got − want‖/‖want‖ after checking the shapes agree; got
// may live on any device.
func relErr(t *testing.T, what string, got, want *radgen.Tensor) float64 {
	t.Helper()
	gs, ws := got.Shape(), want.Shape()
	if len(gs) != len(ws) {
		t.Fatalf("%s: shape %v, golden %v", what, gs, ws)
	}
	for i := range gs {
		if gs[i] != ws[i] {
			t.Fatalf("%s: shape %v, golden %v", what, gs, ws)
		}
	}
	var num, den float64
	g, w := testdevice.Host(got).Data(), want.Data()
	for i := range w {
		d := float64(g[i]) - float64(w[i])
		num += d * d
		den += float64(w[i]) * float64(w[i])
	}
	return math.Sqrt(num / den)
}

const parityTol = 1e-4

// TestExtractorParity runs the golden extractor on the device of
// RADGEN_DEVICE (the CPU by default) for inference (Extract), on a
// recording graph (not with -short), and over the golden images as the
// views of one study, and compares the features with the published code's:
// ‖Δ‖/‖ref‖ ≤ 1e-4.
func TestExtractorParity(t *testing.T) {
	dev := testdevice.Selected(t)
	defer testdevice.FailOnPanic(t)
	f := openExtractorGolden(t)
	const prefix = "visual_extractor."
	cfg, naming, err := vision.InferResNet(f.Names(), prefix+"model.")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("golden architecture %q; inferred %v with %v names", f.Metadata()["arch"], cfg, naming)
	if arch := strings.ReplaceAll(f.Metadata()["arch"], " ", ""); strings.Contains(arch, "ResNet(") {
		want := strings.ReplaceAll(cfg.String(), " ", "")
		if !strings.Contains(arch, want) {
			t.Errorf("inferred %s, golden metadata says %q", want, arch)
		}
	}
	ext, err := vision.LoadExtractor(f, prefix)
	if err != nil {
		t.Fatal(err)
	}
	testdevice.Move(t, ext, dev)
	images := goldenTensor(t, f, "input_images").To(dev)
	wantP := goldenTensor(t, f, "patch_feats")
	wantA := goldenTensor(t, f, "avg_feats")

	check := func(path string, p, a *radgen.Tensor) {
		t.Helper()
		if p.Device() != dev || a.Device() != dev {
			t.Errorf("%s: features on %v and %v, not %v", path, p.Device(), a.Device(), dev)
		}
		ep, ea := relErr(t, path+" patch_feats", p, wantP), relErr(t, path+" avg_feats", a, wantA)
		t.Logf("%s: patch_feats ‖Δ‖/‖ref‖ = %.3g, avg_feats ‖Δ‖/‖ref‖ = %.3g", path, ep, ea)
		if ep > parityTol || ea > parityTol || math.IsNaN(ep) || math.IsNaN(ea) {
			t.Errorf("%s: relative errors %.3g, %.3g exceed %g", path, ep, ea, parityTol)
		}
	}

	// Inference (Extract): on the CPU, batch norm folded into the
	// convolutions by the engine.
	p, a, err := ext.Extract(context.Background(), images)
	if err != nil {
		t.Fatal(err)
	}
	check("Extract (NoGrad)", p, a)

	// The differentiable path with explicit eval-mode batch norms.
	if !testing.Short() {
		p, a = ext.Forward(radgen.NewGraph(), images)
		check("unfolded (recording, eval)", p, a)
	}

	// The golden images as the two views of one study (IU X-Ray):
	// 2·h·w patches, view 0 first, and the averaged features side by side.
	n := images.Dim(0)
	study := radgen.NoGrad().Reshape(images, append([]int{1}, images.Shape()...)...)
	sp, sa, err := ext.Extract(context.Background(), study)
	if err != nil {
		t.Fatal(err)
	}
	hw, c := wantP.Dim(1), wantP.Dim(2)
	if got, want := sp.Shape(), []int{1, n * hw, c}; !equalInts(got, want) {
		t.Fatalf("study patches %v, want %v", got, want)
	}
	if got, want := sa.Shape(), []int{1, n * c}; !equalInts(got, want) {
		t.Fatalf("study avg %v, want %v", got, want)
	}
	ep := relErr(t, "study patches", radgen.FromFloat32(testdevice.Host(sp).Data(), n, hw, c), wantP)
	ea := relErr(t, "study avg", radgen.FromFloat32(testdevice.Host(sa).Data(), n, c), wantA)
	t.Logf("multi-view study [1, %d, 3, H, W]: patches ‖Δ‖/‖ref‖ = %.3g, avg ‖Δ‖/‖ref‖ = %.3g", n, ep, ea)
	if ep > parityTol || ea > parityTol {
		t.Errorf("multi-view: relative errors %.3g, %.3g exceed %g", ep, ea, parityTol)
	}
}

// TestExtractorLoadErrors removes or reshapes one tensor of the golden
// weights and expects an error naming it.
func TestExtractorLoadErrors(t *testing.T) {
	f := openExtractorGolden(t)
	const victim = "visual_extractor.model.6.0.bn2.running_var"
	missing := &editedSource{f: f, drop: victim}
	_, err := vision.LoadExtractor(missing, "visual_extractor.")
	if err == nil || !strings.Contains(err.Error(), victim) {
		t.Errorf("missing %s: error %v", victim, err)
	}
	reshaped := &editedSource{f: f, reshape: victim}
	_, err = vision.LoadExtractor(reshaped, "visual_extractor.")
	if err == nil || !strings.Contains(err.Error(), victim) {
		t.Errorf("mis-shaped %s: error %v", victim, err)
	}
}

type editedSource struct {
	f             *safetensors.File
	drop, reshape string
}

func (s *editedSource) Names() []string { return s.f.Names() }

func (s *editedSource) Float32(name string) ([]float32, []int, error) {
	if name == s.drop {
		return nil, nil, safetensors.ErrNotFound
	}
	d, shape, err := s.f.Float32(name)
	if name == s.reshape && err == nil {
		return d[:len(d)-1], []int{len(d) - 1}, nil
	}
	return d, shape, err
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
