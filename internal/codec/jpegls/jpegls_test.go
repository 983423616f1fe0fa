package jpegls

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/radgen/radgen/internal/codec"
)

// seeds are the code streams in testdata, written by dcmtk 3.6.7's
// dcmcjpls (CharLS) from synthetic images, with the size of their images
// and a position-weighted checksum Σ (i+1)·sample_i mod 2^32 of the values
// they must decode to: the source images' for lossless streams, dcmdjpls's
// decoding for near-lossless ones.
var seeds = []struct {
	name          string
	width, height int
	comps         int
	checksum      uint32
}{
	{"mono8", 64, 48, 1, 471140813},
	{"mono12_odd", 61, 37, 1, 4203393439},
	{"mono16", 40, 30, 1, 1600211147},
	{"signed12", 33, 20, 1, 129192102},
	{"mono2bit", 24, 16, 1, 87327},
	{"near3_mono8", 64, 48, 1, 471657213},
	{"rgb8_line", 32, 24, 3, 304618276},
	{"rgb8_sample", 32, 24, 3, 304618276},
	{"rgb8_none", 32, 24, 3, 304618276},
	{"near2_rgb12_sample", 26, 20, 3, 2038319407},
	{"presets_mono8", 64, 48, 1, 471140813},
}

func readSeed(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".jls"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checksum(pix []uint16) uint32 {
	var s uint32
	for i, v := range pix {
		s += uint32(i+1) * uint32(v)
	}
	return s
}

func TestDecodeSeeds(t *testing.T) {
	for _, s := range seeds {
		f, err := Decode(readSeed(t, s.name), 1<<20)
		if err != nil {
			t.Errorf("%s: %v", s.name, err)
			continue
		}
		if f.Width != s.width || f.Height != s.height || f.Components != s.comps || len(f.Pix) != s.width*s.height*s.comps {
			t.Errorf("%s: %d×%d×%d, %d samples", s.name, f.Width, f.Height, f.Components, len(f.Pix))
			continue
		}
		if c := checksum(f.Pix); c != s.checksum {
			t.Errorf("%s: checksum %d, want %d", s.name, c, s.checksum)
		}
	}
}

// header builds SOI, a SOF55 of the given size and an SOS for one
// component with the given NEAR, followed by scan bytes and EOI.
func header(width, height, prec int, lse []byte, scanData []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0xff, markerSOI, 0xff, markerSOF, 0, 11, byte(prec)})
	binary.Write(&b, binary.BigEndian, [2]uint16{uint16(height), uint16(width)})
	b.Write([]byte{1, 1, 0x11, 0})
	if lse != nil {
		b.Write([]byte{0xff, markerLSE})
		binary.Write(&b, binary.BigEndian, uint16(len(lse)+2))
		b.Write(lse)
	}
	b.Write([]byte{0xff, markerSOS, 0, 8, 1, 1, 0, 0, 0, 0})
	b.Write(scanData)
	b.Write([]byte{0xff, markerEOI})
	return b.Bytes()
}

func TestHostile(t *testing.T) {
	good := readSeed(t, "mono8")
	// Truncation and corruption at every byte: errors, never panics.
	for n := range len(good) {
		if _, err := Decode(good[:n], 1<<20); err == nil {
			t.Fatalf("truncated to %d bytes: decoded", n)
		} else if !errors.Is(err, codec.ErrFormat) && !errors.Is(err, codec.ErrUnsupported) {
			t.Fatalf("truncated to %d bytes: unclassified %v", n, err)
		}
	}
	for i := range len(good) {
		b := bytes.Clone(good)
		b[i] ^= 0x5a
		Decode(b, 1<<20)
	}
	lse := func(maxval, t1, t2, t3, reset int) []byte {
		b := []byte{1}
		for _, v := range []int{maxval, t1, t2, t3, reset} {
			b = binary.BigEndian.AppendUint16(b, uint16(v))
		}
		return b
	}
	for _, c := range []struct {
		name string
		data []byte
		want error
	}{
		{"over the limit", header(65535, 65535, 8, nil, []byte{0}), codec.ErrTooLarge},
		{"zero width", header(0, 10, 8, nil, []byte{0}), codec.ErrFormat},
		{"precision 17", header(4, 4, 17, nil, []byte{0}), codec.ErrFormat},
		{"precision 1", header(4, 4, 1, nil, []byte{0}), codec.ErrFormat},
		{"MAXVAL over the precision", header(4, 4, 8, lse(300, 0, 0, 0, 0), []byte{0}), codec.ErrFormat},
		{"T1 over MAXVAL", header(4, 4, 8, lse(0, 300, 0, 0, 0), []byte{0}), codec.ErrFormat},
		{"T3 under T2", header(4, 4, 8, lse(0, 3, 9, 8, 0), []byte{0}), codec.ErrFormat},
		{"RESET 2", header(4, 4, 8, lse(0, 0, 0, 0, 2), []byte{0}), codec.ErrFormat},
		{"short LSE", header(4, 4, 8, []byte{1, 0, 0}, []byte{0}), codec.ErrFormat},
		{"mapping table", header(4, 4, 8, []byte{2, 1, 1, 0}, []byte{0}), codec.ErrUnsupported},
		{"scan data short", header(64, 64, 8, nil, []byte{0x00}), codec.ErrFormat},
		{"scan of zeros", header(64, 64, 16, nil, make([]byte, 64)), codec.ErrFormat},
		{"not JPEG-LS", []byte{0xff, 0xd8, 0xff, 0xc0, 0, 2, 0xff, 0xd9}, codec.ErrUnsupported},
		{"no SOI", []byte{0, 0, 0, 0}, codec.ErrFormat},
		{"HP colour transform", append([]byte{0xff, 0xd8, 0xff, 0xe8, 0, 7, 'm', 'r', 'f', 'x', 1}, header(4, 4, 8, nil, []byte{0})[2:]...), codec.ErrUnsupported},
	} {
		if _, err := Decode(c.data, 1<<16); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestLimitBeforeAllocation: a header declaring 65535² samples is refused
// with a few kilobytes allocated, and one within the limit allocates no
// more than its frame (2 bytes a sample) and lines.
func TestLimitBeforeAllocation(t *testing.T) {
	alloc := func(data []byte, limit int64) uint64 {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		Decode(data, limit)
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	if n := alloc(header(65535, 65535, 16, nil, []byte{0}), 1<<20); n > 64<<10 {
		t.Errorf("refused header allocated %d bytes", n)
	}
	// 1000×1000 16-bit within the limit, with scan data of zeros: the
	// frame (2 MB) and the quantization table (128 KB) at most.
	if n := alloc(header(1000, 1000, 16, nil, make([]byte, 16)), 1<<20); n > 2_000_000+300<<10 {
		t.Errorf("corrupt 1000² frame allocated %d bytes", n)
	}
}

func FuzzDecode(f *testing.F) {
	// Small seeds (tens of bytes, from images of a few pixels) keep the
	// fuzzer fast; the larger test images join them.
	small, err := filepath.Glob(filepath.Join("testdata", "fuzz_*.jls"))
	if err != nil || len(small) == 0 {
		f.Fatalf("no fuzz seeds: %v", err)
	}
	for _, name := range small {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range seeds {
		f.Add(readSeed(f, s.name))
	}
	const limit = 1 << 14
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := Decode(b, limit)
		if err != nil {
			if !errors.Is(err, codec.ErrFormat) && !errors.Is(err, codec.ErrUnsupported) && !errors.Is(err, codec.ErrTooLarge) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if n := fr.Width * fr.Height * fr.Components; int64(n) > limit || len(fr.Pix) != n {
			t.Fatalf("decoded %d×%d×%d with %d samples", fr.Width, fr.Height, fr.Components, len(fr.Pix))
		}
		for _, v := range fr.Pix {
			if int(v) >= 1<<fr.Precision {
				t.Fatalf("sample %d of %d-bit frame", v, fr.Precision)
			}
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	data := readSeed(b, "mono16")
	for b.Loop() {
		if _, err := Decode(data, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}
