package memtrans

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/vision"
)

// writePNG writes a w×h test film: 16-bit gray or 8-bit RGB.
func writePNG(t *testing.T, path string, w, h int, rgb bool, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var img image.Image
	if rgb {
		m := image.NewRGBA(image.Rect(0, 0, w, h))
		for i := range m.Pix {
			m.Pix[i] = byte(rng.IntN(256))
			if i%4 == 3 {
				m.Pix[i] = 0xff
			}
		}
		img = m
	} else {
		m := image.NewGray16(image.Rect(0, 0, w, h))
		for i := range m.Pix {
			m.Pix[i] = byte(rng.IntN(256))
		}
		img = m
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// StudyFromAnnotation resizes each view as soon as it is decoded; the
// tensors Generate feeds the extractor are the same as from the full
// films; decoding allocates each film once in its own bit depth, and the
// study keeps only the resized views.
func TestStudyFromAnnotationMemory(t *testing.T) {
	dir := t.TempDir()
	const side = 1536
	writePNG(t, filepath.Join(dir, "0.png"), side, side, false, 1)
	writePNG(t, filepath.Join(dir, "1.png"), side, side-100, true, 2)
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal.", "no effusion."})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(R2GenTiny(tok.Len()+1), tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	entry := data.Study{ID: "s", ImagePath: []string{"0.png", "1.png"}, Report: "x"}
	var small Study
	n := allocated(func() { small, err = m.StudyFromAnnotation(entry, dir) })
	if err != nil {
		t.Fatal(err)
	}
	// The gray film decodes at 2 bytes a pixel, the RGB one at 4 (Go keeps
	// it as RGBA), and nothing else of that size is allocated; what the
	// study keeps is ImageSize² a view.
	bound := uint64(2*side*side + 4*side*(side-100) + 2<<20)
	for i, v := range small.Views {
		if b := v.Bounds(); b.Dx() != m.Config().ImageSize || b.Dy() != m.Config().ImageSize {
			t.Errorf("view %d kept at %v", i, b)
		}
	}
	t.Logf("two-view study (%d² 16-bit gray, %d×%d RGB): %d bytes allocated (bound %d)", side, side, side-100, n, bound)
	if n > bound {
		t.Errorf("StudyFromAnnotation allocated %d bytes, bound %d", n, bound)
	}
	full, err := StudyFromFiles("s", filepath.Join(dir, "0.png"), filepath.Join(dir, "1.png"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.Preprocess(small)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Preprocess(full)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if !slices.Equal(a[i].Pix, b[i].Pix) {
			t.Errorf("view %d: resized-at-load tensor differs from the full-resolution one", i)
		}
	}
}

// Image files that are FIFOs or devices are refused at once; the pixel and
// file limits reach study loading through the model's options.
func TestStudyFromFilesLimits(t *testing.T) {
	dir := t.TempDir()
	writePNG(t, filepath.Join(dir, "0.png"), 64, 64, false, 1)
	fifo := filepath.Join(dir, "fifo.png")
	if err := mkfifo(fifo); err != nil {
		t.Skip("no FIFOs:", err)
	}
	if _, err := StudyFromFiles("s", fifo); !errors.Is(err, vision.ErrNotRegular) {
		t.Errorf("FIFO: %v", err)
	}
	if _, err := StudyFromFiles("s", "/dev/zero"); !errors.Is(err, vision.ErrNotRegular) {
		t.Errorf("/dev/zero: %v", err)
	}
	tok, _ := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal."})
	m, err := New(R2GenTiny(tok.Len()+1), tok, 1, WithMaxPixels(1000))
	if err != nil {
		t.Fatal(err)
	}
	entry := data.Study{ID: "s", ImagePath: []string{"0.png", "0.png"}, Report: "x"}
	if _, err := m.StudyFromAnnotation(entry, dir); !errors.Is(err, vision.ErrTooLarge) {
		t.Errorf("64² under a 1000-pixel limit: %v", err)
	}
	m2, err := New(R2GenTiny(tok.Len()+1), tok, 1, WithImageOptions(vision.WithMaxFileBytes(100)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m2.StudyFromAnnotation(entry, dir); !errors.Is(err, vision.ErrFileTooLarge) {
		t.Errorf("file over 100 bytes: %v", err)
	}
	if _, err := New(R2GenTiny(tok.Len()+1), tok, 1, WithImageOptions(vision.WithMaxFileBytes(-1))); err == nil {
		t.Error("negative file limit accepted")
	}
}

// StudyFromPaths keeps views at the model's image size and gives the same
// tensors as the full films.
func TestStudyFromPaths(t *testing.T) {
	dir := t.TempDir()
	writePNG(t, filepath.Join(dir, "0.png"), 300, 200, true, 3)
	writePNG(t, filepath.Join(dir, "1.png"), 200, 300, false, 4)
	tok, _ := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal."})
	m, err := New(R2GenTiny(tok.Len()+1), tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{filepath.Join(dir, "0.png"), filepath.Join(dir, "1.png")}
	small, err := m.StudyFromPaths("s", paths...)
	if err != nil {
		t.Fatal(err)
	}
	full, err := StudyFromFiles("s", paths...)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := m.Preprocess(small)
	b, _ := m.Preprocess(full)
	for i := range a {
		if small.Views[i].Bounds().Dx() != m.Config().ImageSize || !slices.Equal(a[i].Pix, b[i].Pix) {
			t.Errorf("view %d: %v, tensors equal %v", i, small.Views[i].Bounds(), slices.Equal(a[i].Pix, b[i].Pix))
		}
	}
}

// WithMaxLength errors say what is wrong with the length (and still match
// decode.ErrMaxLen).
func TestMaxLengthMessages(t *testing.T) {
	tok, _ := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal."})
	cfg := R2GenTiny(tok.Len() + 1)
	m, err := New(cfg, tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := []Study{grayStudy("a", cfg.Views, 64)}
	for n, want := range map[int]string{
		10000: "WithMaxLength(10000): this model writes at most 512 tokens (its positional table)",
		0:     "WithMaxLength(0): the length must be positive",
	} {
		_, err := m.Generate(context.Background(), s, WithMaxLength(n))
		if !errors.Is(err, decode.ErrMaxLen) || err.Error() != "memtrans: "+want {
			t.Errorf("WithMaxLength(%d): %v", n, err)
		}
	}
}
