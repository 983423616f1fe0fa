package memtrans

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/vision"
)

// TestFeatureCacheFromDeviceExtractor caches the patch features of two
// studies (films of 64² and 96², resized by the evaluation transform) from
// a tiny model placed on the test device (the reference engine when that
// is the CPU), both through Model.Features (which returns them on the CPU)
// and straight from the extractor's device output, and those of the same
// model on the CPU: the cache files read back on the CPU hold the same
// shapes and agree to 1e-5 relative to the largest magnitude of each
// study's features (patch features after a ReLU are zero or small in many
// places, where an element's own relative difference is rounding noise
// over nothing).
func TestFeatureCacheFromDeviceExtractor(t *testing.T) {
	dev := trainDevice(t)
	ctx := context.Background()
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal in size.", "no pleural effusion."})
	if err != nil {
		t.Fatal(err)
	}
	cfg := R2GenTiny(tok.Len() + 1)
	cpuModel, err := New(cfg, tok, 5)
	if err != nil {
		t.Fatal(err)
	}
	devModel, err := New(cfg, tok, 5, WithDevice(dev))
	if err != nil {
		t.Fatal(err)
	}
	ext := devModel.extractor
	if w := ext.ResNet.Stem.Weight; w.Device() != dev {
		t.Fatalf("WithDevice(%v) left the extractor on %v", dev, w.Device())
	}
	studies := []Study{grayStudy("CXR-a", cfg.Views, 64), grayStudy("CXR-b", cfg.Views, 96)}
	cpuDir, featDir, devDir := t.TempDir(), t.TempDir(), t.TempDir()

	want, err := cpuModel.Features(ctx, studies)
	if err != nil {
		t.Fatal(err)
	}
	if want.Device() != radgen.CPU {
		t.Fatalf("Model.Features on the CPU returned features on %v", want.Device())
	}
	g := radgen.NoGrad()
	for i, s := range studies {
		if err := data.WriteFeatureCache(cpuDir, s.ID, g.Slice(want, 0, i, i+1)); err != nil {
			t.Fatal(err)
		}
	}

	fromModel, err := devModel.Features(ctx, studies)
	if err != nil {
		t.Fatal(err)
	}
	if fromModel.Device() != radgen.CPU {
		t.Fatalf("Model.Features on %v returned features on %v, want the CPU", dev, fromModel.Device())
	}
	for i, s := range studies {
		if err := data.WriteFeatureCache(featDir, s.ID, g.Slice(fromModel, 0, i, i+1)); err != nil {
			t.Fatal(err)
		}
	}

	views := make([][]*vision.Image, len(studies))
	for i, s := range studies {
		if views[i], err = devModel.Preprocess(s); err != nil {
			t.Fatal(err)
		}
	}
	imgs, err := vision.StackStudies(views)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := ext.Extract(ctx, imgs.To(dev))
	if err != nil {
		t.Fatal(err)
	}
	if got.Device() != dev {
		t.Fatalf("the extractor on %v returned features on %v", dev, got.Device())
	}
	for i, s := range studies {
		if err := data.WriteFeatureCache(devDir, s.ID, g.Slice(got, 0, i, i+1)); err != nil {
			t.Fatal(err)
		}
	}

	for _, s := range studies {
		w, ok := data.ReadFeatureCache(cpuDir, s.ID)
		if !ok {
			t.Fatalf("study %s: no features cached from the CPU", s.ID)
		}
		wv := w.Data()
		scale := 0.0
		for _, v := range wv {
			scale = max(scale, math.Abs(float64(v)))
		}
		if scale == 0 {
			t.Fatalf("study %s: the CPU's features are all zero", s.ID)
		}
		for _, c := range []struct{ how, dir string }{{"Model.Features", featDir}, {"the device's output", devDir}} {
			d, ok := data.ReadFeatureCache(c.dir, s.ID)
			if !ok {
				t.Fatalf("study %s: no features cached from %s on %v", s.ID, c.how, dev)
			}
			if d.Device() != radgen.CPU || !slices.Equal(d.Shape(), w.Shape()) {
				t.Fatalf("study %s: cached from %s on %v %v, read on %v; from the CPU %v", s.ID, c.how, dev, d.Shape(), d.Device(), w.Shape())
			}
			dv := d.Data()
			worst := 0.0
			for i := range wv {
				rel := math.Abs(float64(dv[i])-float64(wv[i])) / scale
				worst = max(worst, rel)
				if rel > 1e-5 {
					t.Errorf("study %s: feature %d is %v cached from %s on %v, %v from the CPU", s.ID, i, dv[i], c.how, dev, wv[i])
					break
				}
			}
			t.Logf("study %s: %v features from %s on %v, largest magnitude %.4g, largest difference %.2g of it", s.ID, w.Shape(), c.how, dev, scale, worst)
		}
	}
}
