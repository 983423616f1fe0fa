package memtrans

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/vision"
)

// TestFeatureCacheFromDeviceExtractor caches the patch features of two
// studies (films of 64² and 96², resized by the evaluation transform)
// extracted by a tiny model's frozen extractor on the test device (the
// reference engine when that is the CPU), written straight from the device,
// and those of the same extractor on the CPU (Model.Features): the cache
// files read back on the CPU hold the same shapes and agree to 1e-5
// relative to the largest magnitude of each study's features (patch
// features after a ReLU are zero or small in many places, where an
// element's own relative difference is rounding noise over nothing).
func TestFeatureCacheFromDeviceExtractor(t *testing.T) {
	dev := trainDevice(t)
	ctx := context.Background()
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal in size.", "no pleural effusion."})
	if err != nil {
		t.Fatal(err)
	}
	cfg := TinyConfig(tok.Len() + 1)
	cpuModel, err := New(cfg, tok, 5)
	if err != nil {
		t.Fatal(err)
	}
	devModel, err := New(cfg, tok, 5)
	if err != nil {
		t.Fatal(err)
	}
	ext := devModel.Extractor()
	if err := radgen.ToDevice(ext, dev); err != nil {
		t.Fatal(err)
	}
	studies := []Study{grayStudy("CXR-a", cfg.Views, 64), grayStudy("CXR-b", cfg.Views, 96)}
	cpuDir, devDir := t.TempDir(), t.TempDir()

	want, err := cpuModel.Features(ctx, studies)
	if err != nil {
		t.Fatal(err)
	}
	if want.Device() != radgen.CPU {
		t.Fatalf("Model.Features on the CPU returned features on %v", want.Device())
	}
	g := radgen.NoGrad()
	for i, s := range studies {
		if err := WriteFeatureCache(cpuDir, s.ID, g.Slice(want, 0, i, i+1)); err != nil {
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
	got, err := extractOn(t, ext, imgs.To(dev))
	if err != nil {
		t.Fatal(err)
	}
	if got.Device() != dev {
		t.Fatalf("the extractor on %v returned features on %v", dev, got.Device())
	}
	for i, s := range studies {
		if err := WriteFeatureCache(devDir, s.ID, g.Slice(got, 0, i, i+1)); err != nil {
			t.Fatal(err)
		}
	}

	for _, s := range studies {
		w, ok := ReadFeatureCache(cpuDir, s.ID)
		if !ok {
			t.Fatalf("study %s: no features cached from the CPU", s.ID)
		}
		d, ok := ReadFeatureCache(devDir, s.ID)
		if !ok {
			t.Fatalf("study %s: no features cached from %v", s.ID, dev)
		}
		if d.Device() != radgen.CPU || !slices.Equal(d.Shape(), w.Shape()) {
			t.Fatalf("study %s: cached from %v %v on %v, from the CPU %v", s.ID, dev, d.Shape(), d.Device(), w.Shape())
		}
		wv, dv := w.Data(), d.Data()
		scale := 0.0
		for _, v := range wv {
			scale = max(scale, math.Abs(float64(v)))
		}
		if scale == 0 {
			t.Fatalf("study %s: the CPU's features are all zero", s.ID)
		}
		worst := 0.0
		for i := range wv {
			rel := math.Abs(float64(dv[i])-float64(wv[i])) / scale
			worst = max(worst, rel)
			if rel > 1e-5 {
				t.Errorf("study %s: feature %d is %v cached from %v, %v from the CPU", s.ID, i, dv[i], dev, wv[i])
				break
			}
		}
		t.Logf("study %s: %v features, largest magnitude %.4g, largest difference %.2g of it", s.ID, w.Shape(), scale, worst)
	}
}

// extractOn runs ext's inference path on images on ext's device. It skips
// the test, rather than crash the package's tests, while that path reads
// host memory (vision's folded inference path runs on the CPU only; it
// must give way to the graph's evaluation path for a device's images).
func extractOn(t *testing.T, ext *vision.Extractor, images *radgen.Tensor) (patches *radgen.Tensor, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			msg, _ := r.(string)
			if !strings.Contains(msg, "host access to a tensor on") {
				panic(r)
			}
			t.Skipf("vision.Extractor.Extract does not run on %v yet: %s", images.Device(), msg)
		}
	}()
	patches, _, err = ext.Extract(context.Background(), images)
	return patches, err
}
