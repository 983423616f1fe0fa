package jpeg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/codec"
)

// seeds returns the code streams in testdata.
func seeds(t testing.TB) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", "*.jpg"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no code streams in testdata: %v", err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = b
	}
	return out
}

// checkFrame verifies what Decode promises of a frame it returns.
func checkFrame(t testing.TB, f *codec.Frame, maxPixels int64) {
	t.Helper()
	n := f.Width * f.Height * f.Components
	if f.Width <= 0 || f.Height <= 0 || f.Components < 1 || f.Components > 4 || len(f.Pix) != n || int64(n) > maxPixels {
		t.Fatalf("frame %d×%d×%d with %d samples (limit %d)", f.Width, f.Height, f.Components, len(f.Pix), maxPixels)
	}
	if f.Precision < 2 || f.Precision > 16 {
		t.Fatalf("precision %d", f.Precision)
	}
	for i, v := range f.Pix {
		if int(v) >= 1<<f.Precision {
			t.Fatalf("sample %d = %d exceeds %d bits", i, v, f.Precision)
		}
	}
}

// TestTruncated cuts every code stream at many points (every byte of the
// headers and next to every 0xFF, every fourth byte of entropy-coded data):
// each cut is an error wrapping codec.ErrFormat.
func TestTruncated(t *testing.T) {
	step := 4
	if testing.Short() {
		step = 16
	}
	for name, data := range seeds(t) {
		eoi := bytes.LastIndex(data, []byte{0xff, 0xd9})
		headers := bytes.Index(data, []byte{0xff, 0xda}) + 16
		progressive := bytes.Contains(data, []byte{0xff, 0xc2, 0})
		whole, err := Decode(data, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for cut := 0; cut < eoi+1; cut++ {
			nearFF := bytes.IndexByte(data[max(cut-2, 0):min(cut+2, len(data))], 0xff) >= 0
			if cut > headers && !nearFF && cut%step != 0 {
				continue
			}
			_, err := Decode(data[:cut], 1<<20)
			if !errors.Is(err, codec.ErrFormat) {
				t.Fatalf("%s cut at %d of %d: %v, want codec.ErrFormat", name, cut, len(data), err)
			}
			// Scan data cut short and closed with EOI, as a truncated
			// fragment repaired by a careless writer would be: an error,
			// unless the bytes cut were not needed (fill bits). (A
			// progressive stream ended after any whole scan is a valid,
			// coarser image, so those seeds are left out.)
			if cut > headers && cut < eoi && !progressive {
				f, err := Decode(append(bytes.Clone(data[:cut]), 0xff, 0xd9), 1<<20)
				if err == nil && !slices.Equal(f.Pix, whole.Pix) {
					t.Fatalf("%s cut at %d of %d and closed with EOI decodes to other samples without an error", name, cut, len(data))
				}
				if err != nil && !errors.Is(err, codec.ErrFormat) {
					t.Fatalf("%s cut at %d of %d and closed with EOI: %v, want codec.ErrFormat", name, cut, len(data), err)
				}
			}
		}
	}
}

// TestCorrupt flips bytes at random: Decode returns an error or a frame
// that keeps its promises, and never panics.
func TestCorrupt(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 60
	if testing.Short() {
		n = 10
	}
	for name, data := range seeds(t) {
		for range n {
			b := bytes.Clone(data)
			for range 1 + r.IntN(4) {
				b[r.IntN(len(b))] = byte(r.Uint32())
			}
			f, err := Decode(b, 1<<20)
			if err == nil {
				checkFrame(t, f, 1<<20)
			} else if !errors.Is(err, codec.ErrFormat) && !errors.Is(err, codec.ErrUnsupported) && !errors.Is(err, codec.ErrTooLarge) {
				t.Fatalf("%s: error %v wraps no codec sentinel", name, err)
			}
		}
	}
}

// header builds SOI, a frame header and a lossless Huffman table.
func header(sof byte, p, w, h int, comps ...[3]byte) []byte {
	b := []byte{0xff, 0xd8}
	seg := []byte{byte(p), byte(h >> 8), byte(h), byte(w >> 8), byte(w), byte(len(comps))}
	for _, c := range comps {
		seg = append(seg, c[:]...)
	}
	b = append(b, 0xff, sof, byte((len(seg)+2)>>8), byte(len(seg)+2))
	return append(b, seg...)
}

// TestPixelLimit: a frame over the limit is refused before its samples are
// allocated, and a frame within it allocates about its own size.
func TestPixelLimit(t *testing.T) {
	big := header(0xc3, 16, 60000, 60000, [3]byte{1, 0x11, 0})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Decode(big, 1<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, codec.ErrTooLarge) {
		t.Fatalf("60000×60000 with a 2^20 limit: %v, want codec.ErrTooLarge", err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<16 {
		t.Fatalf("refusing allocated %d bytes", d)
	}
	// Within the limit but with no data: an error, and no more than the
	// frame (2 bytes a sample) plus the decoder's tables allocated.
	const w, h = 1000, 1000
	data := append(header(0xc3, 16, w, h, [3]byte{1, 0x11, 0}),
		0xff, 0xc4, 0, 20, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0xff, 0xda, 0, 8, 1, 1, 0, 1, 0, 0)
	runtime.ReadMemStats(&before)
	_, err = Decode(data, w*h)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, codec.ErrFormat) {
		t.Fatalf("frame with no scan data: %v, want codec.ErrFormat", err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 2*w*h+1<<18 {
		t.Fatalf("a %d-sample frame allocated %d bytes", w*h, d)
	}
	if _, err := Decode(data, w*h-1); !errors.Is(err, codec.ErrTooLarge) {
		t.Fatalf("one sample over the limit: %v", err)
	}
}

// TestBadHeaders feeds malformed and unsupported headers.
func TestBadHeaders(t *testing.T) {
	lossless := func(extra ...byte) []byte {
		return append(header(0xc3, 16, 4, 4, [3]byte{1, 0x11, 0}), extra...)
	}
	table := func(counts [16]byte, vals ...byte) []byte {
		seg := append([]byte{0x00}, counts[:]...)
		seg = append(seg, vals...)
		return append([]byte{0xff, 0xc4, byte((len(seg) + 2) >> 8), byte(len(seg) + 2)}, seg...)
	}
	cases := []struct {
		name string
		data []byte
		want error
		msg  string
	}{
		{"empty", nil, codec.ErrFormat, "SOI"},
		{"no SOI", []byte{0xff, 0xd9}, codec.ErrFormat, "SOI"},
		{"EOI before frame", []byte{0xff, 0xd8, 0xff, 0xd9}, codec.ErrFormat, "frame"},
		{"differential progressive", header(0xc6, 8, 4, 4, [3]byte{1, 0x11, 0}), codec.ErrUnsupported, "SOF6"},
		{"progressive 16-bit", header(0xc2, 16, 4, 4, [3]byte{1, 0x11, 0}), codec.ErrFormat, "16-bit"},
		{"arithmetic lossless", header(0xcb, 8, 4, 4, [3]byte{1, 0x11, 0}), codec.ErrUnsupported, "SOF11"},
		{"hierarchical", header(0xc7, 8, 4, 4, [3]byte{1, 0x11, 0}), codec.ErrUnsupported, "SOF7"},
		{"DNL height", header(0xc3, 8, 4, 0, [3]byte{1, 0x11, 0}), codec.ErrUnsupported, "DNL"},
		{"precision 1", header(0xc3, 1, 4, 4, [3]byte{1, 0x11, 0}), codec.ErrFormat, "1-bit"},
		{"precision 17", header(0xc3, 17, 4, 4, [3]byte{1, 0x11, 0}), codec.ErrFormat, "17-bit"},
		{"baseline 12-bit", header(0xc0, 12, 4, 4, [3]byte{1, 0x11, 0}), codec.ErrFormat, "baseline"},
		{"zero width", header(0xc3, 8, 0, 4, [3]byte{1, 0x11, 0}), codec.ErrFormat, "size"},
		{"no components", header(0xc3, 8, 4, 4), codec.ErrFormat, "no components"},
		{"five components", header(0xc3, 8, 4, 4, [3]byte{1, 0x11, 0}, [3]byte{2, 0x11, 0}, [3]byte{3, 0x11, 0}, [3]byte{4, 0x11, 0}, [3]byte{5, 0x11, 0}), codec.ErrUnsupported, "5 components"},
		{"sampling 0", header(0xc1, 8, 4, 4, [3]byte{1, 0x01, 0}), codec.ErrFormat, "sampling"},
		{"sampling 5", header(0xc1, 8, 4, 4, [3]byte{1, 0x51, 0}), codec.ErrFormat, "sampling"},
		{"quant table 4", header(0xc1, 8, 4, 4, [3]byte{1, 0x11, 4}), codec.ErrFormat, "quantisation"},
		{"repeated id", header(0xc3, 8, 4, 4, [3]byte{1, 0x11, 0}, [3]byte{1, 0x11, 0}), codec.ErrFormat, "repeated"},
		{"lossless subsampled", header(0xc3, 8, 4, 4, [3]byte{1, 0x22, 0}, [3]byte{2, 0x11, 0}), codec.ErrUnsupported, "subsampled"},
		{"short segment", []byte{0xff, 0xd8, 0xff, 0xc3, 0, 40, 8}, codec.ErrFormat, "truncated"},
		{"segment length 1", []byte{0xff, 0xd8, 0xff, 0xe0, 0, 1}, codec.ErrFormat, "length"},
		{"Huffman overflow", lossless(table([16]byte{3}, 0, 1, 2)...), codec.ErrFormat, "overflow"},
		{"Huffman all ones", lossless(table([16]byte{2}, 0, 1)...), codec.ErrFormat, "overflow"},
		{"Huffman count", lossless(table([16]byte{0, 1}, 0, 1)...), codec.ErrFormat, "DHT"},
		{"Huffman empty", lossless(table([16]byte{})...), codec.ErrFormat, "codes"},
		{"category 17", lossless(append(table([16]byte{0, 2}, 0, 17), 0xff, 0xda, 0, 8, 1, 1, 0, 1, 0, 0)...), codec.ErrFormat, "category 17"},
		{"undefined table", lossless(0xff, 0xda, 0, 8, 1, 1, 0, 1, 0, 0), codec.ErrFormat, "undefined"},
		{"scan component", lossless(append(table([16]byte{0, 1}, 0), 0xff, 0xda, 0, 8, 1, 9, 0, 1, 0, 0)...), codec.ErrFormat, "not in the frame"},
		{"predictor 8", lossless(append(table([16]byte{0, 1}, 0), 0xff, 0xda, 0, 8, 1, 1, 0, 8, 0, 0)...), codec.ErrFormat, "predictor 8"},
		{"point transform", append(append(header(0xc3, 8, 4, 4, [3]byte{1, 0x11, 0}), table([16]byte{0, 1}, 0)...), 0xff, 0xda, 0, 8, 1, 1, 0, 1, 0, 8), codec.ErrFormat, "point transform 8"},
		{"restart not whole lines", lossless(append(table([16]byte{0, 1}, 0), 0xff, 0xdd, 0, 4, 0, 3, 0xff, 0xda, 0, 8, 1, 1, 0, 1, 0, 0)...), codec.ErrUnsupported, "restart interval 3"},
		{"DRI length", lossless(0xff, 0xdd, 0, 3, 0), codec.ErrFormat, "DRI"},
		{"second frame", append(lossless(), header(0xc3, 8, 4, 4, [3]byte{1, 0x11, 0})[2:]...), codec.ErrFormat, "second frame"},
	}
	for _, c := range cases {
		_, err := Decode(c.data, 1<<20)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %v mentioning %q", c.name, err, c.want, c.msg)
		}
	}
}

// TestRestartMarkers: a restart marker with the wrong number, or missing,
// is an error.
func TestRestartMarkers(t *testing.T) {
	data := seeds(t)["ll_own_gray16_sv1_rst.jpg"]
	if data == nil {
		t.Fatal("testdata/ll_own_gray16_sv1_rst.jpg missing")
	}
	i := bytes.Index(data, []byte{0xff, 0xd1})
	if i < 0 {
		t.Fatal("no RST1 marker")
	}
	b := bytes.Clone(data)
	b[i+1] = 0xd3
	if _, err := Decode(b, 1<<20); !errors.Is(err, codec.ErrFormat) || !strings.Contains(err.Error(), "RST1") {
		t.Errorf("RST3 where RST1 belongs: %v", err)
	}
	b = append(bytes.Clone(data[:i]), data[i+2:]...)
	if _, err := Decode(b, 1<<20); !errors.Is(err, codec.ErrFormat) {
		t.Errorf("RST1 removed: %v", err)
	}
	// A lossless restart interval that is a multiple of the line length
	// but spans several lines is read as such (the seed's is 2 lines).
	dri := bytes.Index(data, []byte{0xff, 0xdd, 0, 4})
	if dri < 0 || int(binary.BigEndian.Uint16(data[dri+4:])) == 0 {
		t.Fatal("no DRI segment in the seed")
	}
}

// samePaths checks that the fast entropy decoder (lookahead tables, eight
// bytes a refill) and the reference one agree on data.
func samePaths(t *testing.T, data []byte, limit int64) (*codec.Frame, error) {
	t.Helper()
	fast, err := decode(data, limit, false)
	plain, perr := decode(data, limit, true)
	if (err == nil) != (perr == nil) || (err != nil && err.Error() != perr.Error()) {
		t.Fatalf("fast path: %v; reference path: %v", err, perr)
	}
	if err == nil && !slices.Equal(fast.Pix, plain.Pix) {
		t.Fatal("fast and reference paths decode different samples")
	}
	return fast, err
}

// TestPaths compares the fast and reference entropy decoders on every seed.
func TestPaths(t *testing.T) {
	for name, data := range seeds(t) {
		t.Run(name, func(t *testing.T) {
			if _, err := samePaths(t, data, 1<<20); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// FuzzDecode: no input panics, allocates beyond the limit or returns a frame
// that breaks Decode's promises, and the fast and reference entropy decoders
// agree.
func FuzzDecode(f *testing.F) {
	for _, b := range seeds(f) {
		f.Add(b)
	}
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := samePaths(t, data, limit)
		if err != nil {
			if !errors.Is(err, codec.ErrFormat) && !errors.Is(err, codec.ErrUnsupported) && !errors.Is(err, codec.ErrTooLarge) {
				t.Fatalf("error %v wraps no codec sentinel", err)
			}
			return
		}
		checkFrame(t, fr, limit)
	})
}
