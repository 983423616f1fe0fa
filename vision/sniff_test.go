package vision

import (
	"bytes"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
)

// Decode recognises a view's format from its bytes: DICOM files (real ones
// in every codec, and the package's own) decode as DecodeDICOM decodes
// them, images as before, whatever their names.
func TestDecodeSniffs(t *testing.T) {
	var files []string
	for _, dir := range []string{"testdata", filepath.Join("testdata", "dicom")} {
		matches, _ := filepath.Glob(filepath.Join(dir, "*"))
		files = append(files, matches...)
	}
	real := os.Getenv("RADGEN_REAL_DICOM") // the real files too, when ../shared is there
	if real == "" {
		real = testutil.SharedPath("real/dicom")
	}
	matches, _ := filepath.Glob(filepath.Join(real, "*"))
	files = append(files, matches...)
	var dicoms, images int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 || strings.HasSuffix(f, ".json") || testing.Short() && len(b) > 256<<10 {
			continue
		}
		got, err := Decode(bytes.NewReader(b))
		switch Sniff(b) {
		case "dicom":
			want, werr := DecodeDICOM(bytes.NewReader(b), int64(len(b)))
			if (err == nil) != (werr == nil) {
				t.Errorf("%s: Decode %v, DecodeDICOM %v", f, err, werr)
				continue
			}
			if werr == nil && (got.W != want.W || got.H != want.H || got.C != want.C || !slices.Equal(got.Pix, want.Pix)) {
				t.Errorf("%s: Decode and DecodeDICOM differ", f)
			}
			dicoms++
		case "png", "jpeg", "gif":
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			images++
		}
	}
	t.Logf("%d DICOM files, %d images", dicoms, images)
	if dicoms == 0 || images == 0 {
		t.Fatalf("%d DICOM files and %d images found", dicoms, images)
	}
}

func TestSniff(t *testing.T) {
	for head, want := range map[string]string{
		"\x89PNG\r\n\x1a\n\x00\x00":          "png",
		"\xff\xd8\xff\xe0":                   "jpeg",
		"GIF89a..":                           "gif",
		"GIF87a..":                           "gif",
		strings.Repeat("\x00", 128) + "DICM": "dicom",
		"":                                   "",
		"%PDF-1.7":                           "",
		"\x89PNG":                            "",
	} {
		if got := Sniff([]byte(head)); got != want {
			t.Errorf("Sniff(%q) = %q, want %q", head[:min(len(head), 12)], got, want)
		}
	}
}

// Pixels is an image.Image that FromImage reads back unchanged.
func TestPixelsIsAnImage(t *testing.T) {
	gray := &Pixels{W: 3, H: 2, C: 1, Pix: []uint8{1, 2, 3, 4, 5, 6}}
	rgb := &Pixels{W: 2, H: 1, C: 3, Pix: []uint8{10, 20, 30, 40, 50, 60}}
	var img image.Image = gray
	if img.Bounds() != image.Rect(0, 0, 3, 2) || img.At(2, 1) != (color.Gray{Y: 6}) || img.At(3, 0) != (color.Gray{}) {
		t.Fatalf("gray: bounds %v, At(2, 1) %v", img.Bounds(), img.At(2, 1))
	}
	if rgb.At(1, 0) != (color.RGBA{40, 50, 60, 255}) || rgb.ColorModel() != color.RGBAModel {
		t.Fatalf("rgb: At(1, 0) %v", rgb.At(1, 0))
	}
	for _, p := range []*Pixels{gray, rgb} {
		q := FromImage(nil, p)
		if q.W != p.W || q.H != p.H || q.C != p.C || !slices.Equal(q.Pix, p.Pix) || &q.Pix[0] == &p.Pix[0] {
			t.Errorf("FromImage of %+v gave %+v", p, q)
		}
	}
}
