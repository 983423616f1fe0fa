package jpeg2000

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/codec"
)

// lossyTolerance is the largest |Δ| allowed between this decoder and
// opj_decompress on the lossy (9/7 or truncated) test streams. Both lift in
// float32 with the same constants and order, and agree exactly on all of
// them (max |Δ| 0); the tolerance of 1 leaves room for a C compiler that
// contracts OpenJPEG's multiply-adds into fused ones.
func lossyTolerance(int) int { return 1 }

// image is a reference: samples per component in component raster order,
// with each component's size.
type image struct {
	w, h   []int
	prec   int
	signed bool
	comp   [][]int
}

// readPNM reads a binary PGM or PPM into an image.
func readPNM(b []byte) (*image, error) {
	// Header: four whitespace-separated fields, '#' comments, then one
	// whitespace byte.
	var fields []string
	p := 0
	for len(fields) < 4 && p < len(b) {
		switch c := b[p]; {
		case c == '#':
			for p < len(b) && b[p] != '\n' {
				p++
			}
		case c == ' ' || c == '\n' || c == '\r' || c == '\t':
			p++
		default:
			q := p
			for p < len(b) && b[p] != ' ' && b[p] != '\n' && b[p] != '\r' && b[p] != '\t' {
				p++
			}
			fields = append(fields, string(b[q:p]))
		}
	}
	p++
	var w, h, maxv int
	if len(fields) < 4 || (fields[0] != "P5" && fields[0] != "P6") {
		return nil, fmt.Errorf("not a binary PNM")
	}
	if _, err := fmt.Sscan(fields[1]+" "+fields[2]+" "+fields[3], &w, &h, &maxv); err != nil || p > len(b) {
		return nil, fmt.Errorf("bad PNM header %q: %v", fields, err)
	}
	magic := fields[0]
	nc := 1
	if magic == "P6" {
		nc = 3
	}
	bps := 1
	if maxv > 255 {
		bps = 2
	}
	px := b[p:]
	if len(px) < w*h*nc*bps {
		return nil, fmt.Errorf("PNM of %d bytes for %d×%d×%d", len(px), w, h, nc)
	}
	im := &image{prec: bitsFor(maxv)}
	for c := range nc {
		im.w, im.h = append(im.w, w), append(im.h, h)
		s := make([]int, w*h)
		for i := range s {
			k := (i*nc + c) * bps
			if bps == 2 {
				s[i] = int(px[k])<<8 | int(px[k+1])
			} else {
				s[i] = int(px[k])
			}
		}
		im.comp = append(im.comp, s)
	}
	return im, nil
}

func bitsFor(maxv int) int {
	n := 0
	for maxv > 0 {
		n++
		maxv >>= 1
	}
	return n
}

// source returns the synthetic source of a lossless test stream.
func source(t *testing.T, name string) *image {
	t.Helper()
	switch {
	case strings.Contains(name, "_s12"), strings.Contains(name, "_s16"):
		// 38×27 signed 12-bit or 40×30 signed 16-bit, 16-bit big-endian raw.
		b := readTestdata(t, "s12.raw")
		im := &image{w: []int{38}, h: []int{27}, prec: 12, signed: true}
		if strings.Contains(name, "_s16") {
			b = readTestdata(t, "s16.raw")
			im = &image{w: []int{40}, h: []int{30}, prec: 16, signed: true}
		}
		s := make([]int, im.w[0]*im.h[0])
		for i := range s {
			s[i] = int(int16(uint16(b[2*i])<<8 | uint16(b[2*i+1])))
		}
		im.comp = [][]int{s}
		return im
	case strings.Contains(name, "_b2"):
		// 31×29, 2 bits, one byte per sample.
		b := readTestdata(t, "b2.raw")
		im := &image{w: []int{31}, h: []int{29}, prec: 2}
		s := make([]int, 31*29)
		for i := range s {
			s[i] = int(b[i] & 3)
		}
		im.comp = [][]int{s}
		return im
	case strings.Contains(name, "_sub"):
		// 40×30, 8-bit planar raw, components sub-sampled 1×1, 2×2, 2×1.
		b := readTestdata(t, "sub.raw")
		im := &image{w: []int{40, 20, 20}, h: []int{30, 15, 30}, prec: 8}
		off := 0
		for c := range 3 {
			n := im.w[c] * im.h[c]
			s := make([]int, n)
			for i := range s {
				s[i] = int(b[off+i])
			}
			off += n
			im.comp = append(im.comp, s)
		}
		return im
	}
	for _, src := range []string{"g8.pgm", "g12.pgm", "g16.pgm", "rgb8.ppm"} {
		if strings.Contains(name, "_"+strings.TrimSuffix(strings.TrimSuffix(src, ".pgm"), ".ppm")) {
			im, err := readPNM(readTestdata(t, src))
			if err != nil {
				t.Fatal(err)
			}
			return im
		}
	}
	t.Fatalf("no source for %s", name)
	return nil
}

// reference reads opj_decompress's decoding of a lossy test stream: a PGM
// or PPM, a signed 16-bit little-endian raw file (s12), or one PGX file per
// component (sub-sampled streams).
func reference(t *testing.T, base string) *image {
	t.Helper()
	if refs, _ := filepath.Glob(filepath.Join("testdata", base+".ref.p[gp]m")); len(refs) == 1 {
		im, err := readPNM(readTestdata(t, filepath.Base(refs[0])))
		if err != nil {
			t.Fatal(err)
		}
		return im
	}
	if strings.Contains(base, "_s12") {
		// opj_decompress writes .raw samples little-endian, as 12-bit
		// two's complement.
		b := readTestdata(t, base+".ref.raw")
		im := &image{w: []int{38}, h: []int{27}, prec: 12, signed: true}
		s := make([]int, 38*27)
		for i := range s {
			v := (int(b[2*i]) | int(b[2*i+1])<<8) & 0xFFF
			if v >= 1<<11 {
				v -= 1 << 12
			}
			s[i] = v
		}
		im.comp = [][]int{s}
		return im
	}
	pgx, _ := filepath.Glob(filepath.Join("testdata", base+".ref_*.pgx"))
	if len(pgx) == 0 {
		t.Fatalf("no reference decoding for %s", base)
	}
	im := &image{}
	for c := range pgx {
		b := readTestdata(t, fmt.Sprintf("%s.ref_%d.pgx", base, c))
		var endian, sign string
		var prec, w, h int
		nl := bytes.IndexByte(b, '\n')
		if _, err := fmt.Sscan(string(b[3:nl]), &endian, &sign, &prec, &w, &h); err != nil || endian != "ML" || sign != "+" {
			t.Fatalf("PGX header %q: %v", b[:nl], err)
		}
		px, bps := b[nl+1:], (prec+7)/8
		s := make([]int, w*h)
		for i := range s {
			if bps == 2 {
				s[i] = int(px[2*i])<<8 | int(px[2*i+1])
			} else {
				s[i] = int(px[i])
			}
		}
		im.w, im.h, im.prec = append(im.w, w), append(im.h, h), prec
		im.comp = append(im.comp, s)
	}
	return im
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compare returns the largest |Δ| between frame f and reference im, with
// each component replicated onto component 0's grid as Decode does.
func compare(t *testing.T, f *codec.Frame, im *image) int {
	t.Helper()
	if f.Components != len(im.comp) || f.Width != im.w[0] || f.Height != im.h[0] {
		t.Fatalf("decoded %d×%d×%d, want %d×%d×%d", f.Width, f.Height, f.Components, im.w[0], im.h[0], len(im.comp))
	}
	if f.Precision != im.prec || f.Signed != im.signed {
		t.Fatalf("decoded %d bits signed %v, want %d bits signed %v", f.Precision, f.Signed, im.prec, im.signed)
	}
	maxd := 0
	for c := range f.Components {
		dx, dy := im.w[0]/im.w[c], im.h[0]/im.h[c]
		for y := range f.Height {
			for x := range f.Width {
				v := int(f.Pix[(y*f.Width+x)*f.Components+c])
				if f.Signed && v >= 1<<(f.Precision-1) {
					v -= 1 << f.Precision
				}
				want := im.comp[c][(y/dy)*im.w[c]+x/dx]
				if d := absDiff(v, want); d > maxd {
					if maxd == 0 && d > lossyTolerance(f.Precision) {
						t.Logf("first large difference at component %d (%d,%d): %d, want %d", c, x, y, v, want)
					}
					maxd = d
				}
			}
		}
	}
	return maxd
}

// TestCorpus decodes every test stream: lossless ones must reproduce their
// source exactly (which opj_decompress does on all of them), lossy ones
// opj_decompress's decoding within lossyTolerance.
func TestCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/l[ly]_*.j[2p]*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test streams: %v", err)
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			data := readTestdata(t, name)
			f, err := Decode(data, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(name, "ll_") {
				if d := compare(t, f, source(t, name)); d != 0 {
					t.Errorf("lossless decode differs from the source by up to %d", d)
				}
				return
			}
			im := reference(t, strings.TrimSuffix(name, filepath.Ext(name)))
			d := compare(t, f, im)
			t.Logf("max |Δ| vs opj_decompress: %d (%d bits)", d, f.Precision)
			if d > lossyTolerance(f.Precision) {
				t.Errorf("max |Δ| %d > %d", d, lossyTolerance(f.Precision))
			}
		})
	}
}

// TestLimits checks the pixel limit and truncation handling.
func TestLimits(t *testing.T) {
	data := readTestdata(t, "ll_g8_default.j2k")
	if _, err := Decode(data, 67*53-1); !errorsIs(err, codec.ErrTooLarge) {
		t.Errorf("limit below the image size: got %v, want ErrTooLarge", err)
	}
	if _, err := Decode(data, 67*53); err != nil {
		t.Errorf("limit at the image size: %v", err)
	}
	for _, n := range []int{0, 3, 20, 60, 100, 130} {
		if _, err := Decode(data[:n], 0); err == nil {
			t.Errorf("%d-byte prefix decoded without error", n)
		}
	}
	if _, err := Decode(bytes.Repeat([]byte{0xFF}, 64), 0); !errorsIs(err, codec.ErrFormat) {
		t.Errorf("garbage: got %v, want ErrFormat", err)
	}
}
