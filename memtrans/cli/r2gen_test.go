package cli

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
)

// The R2Gen checkpoint of testdata: model_best.pth as R2Gen's trainer saves
// it ({'epoch', 'state_dict', 'monitor_best'}) from a DataParallel model
// (every name under "module."), for a tiny configuration (d_model 16, one
// layer, 2 heads and 2 memory heads) and the vocabulary of
// testdata/annotation.json's train split. memtrans's
// TestLoadR2GenDataParallel writes it and checks it holds what it should.
const (
	fixturePth = "testdata/model_best.pth"
	fixtureAnn = "testdata/annotation.json"
)

// writeFilms writes the two views of the annotation's test studies x and y
// under dir: gradients that differ per study and view.
func writeFilms(t *testing.T, dir string) {
	t.Helper()
	for s, id := range []string{"x", "y"} {
		if err := os.MkdirAll(filepath.Join(dir, id), 0o755); err != nil {
			t.Fatal(err)
		}
		for v := range 2 {
			g := image.NewGray(image.Rect(0, 0, 64, 64))
			for y := range 64 {
				for x := range 64 {
					g.SetGray(x, y, color.Gray{uint8((x*(s+1) + y*(v+2)*3) % 256)})
				}
			}
			f, err := os.Create(filepath.Join(dir, id, []string{"0.png", "1.png"}[v]))
			if err != nil {
				t.Fatal(err)
			}
			if err := png.Encode(f, g); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
}

func readGenerated(t *testing.T, path string) []generated {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []generated
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// radgen generate reads R2Gen's model_best.pth (DataParallel names, the
// vocabulary rebuilt from -ann's train split); radgen convert writes it as
// a radgen checkpoint, and safetensors weights of the same names load too:
// all three write the same reports with the same log-probabilities.
func TestGenerateR2GenCheckpoint(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	images := filepath.Join(dir, "images")
	writeFilms(t, images)
	p := func(name string) string { return filepath.Join(dir, name) }
	r2gen := []string{"-heads", "2", "-memory-heads", "2"}
	gen := func(model, out string, extra ...string) []generated {
		t.Helper()
		args := append([]string{"-model", model, "-ann", fixtureAnn, "-images", images, "-o", out}, extra...)
		if err := generate(ctx, args); err != nil {
			t.Fatalf("generate -model %s: %v", model, err)
		}
		return readGenerated(t, out)
	}
	fromPth := gen(fixturePth, p("pth.json"), r2gen...)
	if len(fromPth) != 2 || fromPth[0].ID != "x" || fromPth[1].ID != "y" {
		t.Fatalf("reports from the .pth: %+v", fromPth)
	}
	for _, r := range fromPth {
		t.Logf("%s: %q (log p %.4f)", r.ID, r.Report, r.LogP)
	}

	if err := convert(append([]string{"-model", fixturePth, "-vocab", fixtureAnn, "-out", p("model.radgen")}, r2gen...)); err != nil {
		t.Fatal(err)
	}
	m, err := memtrans.LoadFile(p("model.radgen"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg := m.Config(); cfg.Architecture() != memtrans.ArchR2Gen || cfg.Views != 2 {
		t.Errorf("converted: %s, %d views", cfg.Architecture(), cfg.Views)
	}
	// Safetensors of the same state_dict names, under a name that says
	// nothing: the kind is read from the bytes.
	err = radgen.SaveWeightsFile(p("weights.bin"), m, nil)
	m.Close()
	if err != nil {
		t.Fatal(err)
	}
	fromNative := gen(p("model.radgen"), p("native.json"))
	fromSafetensors := gen(p("weights.bin"), p("safetensors.json"), r2gen...)
	for i, want := range fromPth {
		for kind, got := range map[string][]generated{"radgen checkpoint": fromNative, "safetensors": fromSafetensors} {
			if got[i] != want {
				t.Errorf("%s: %+v, from the .pth %+v", kind, got[i], want)
			}
		}
	}
}

// sniffModel never panics, and never takes a header that does not fit the
// file for safetensors.
func FuzzSniffModel(f *testing.F) {
	head, err := os.ReadFile(fixturePth)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(head[:16], int64(len(head)))
	f.Add([]byte("RADGENv1\x00\x00"), int64(10))
	f.Add([]byte("\x80\x02}q\x00"), int64(5))
	f.Add([]byte("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":1}"), int64(24))
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\xff{"), int64(-1))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		if sniffModel(b, size) != kindSafetensors {
			return
		}
		if len(b) < 9 || b[8] != '{' {
			t.Fatalf("%q read as safetensors", b)
		}
		n := binary.LittleEndian.Uint64(b[:8])
		if n < 2 || (size >= 0 && (size < 10 || n > uint64(size)-8)) {
			t.Errorf("a header of %d bytes in a file of %d read as safetensors", n, size)
		}
	})
}
