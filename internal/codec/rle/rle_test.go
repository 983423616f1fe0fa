package rle

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

// The seeds in testdata are RLE frames written by dcmtk 3.6.7's dcmcrle
// from synthetic images, each after a 6-byte prefix: width and height
// (uint16, little endian), samples per pixel and bits allocated. checksums
// are Σ (i+1)·sample_i mod 2^32 over the source images' values.
var seeds = []struct {
	name     string
	checksum uint32
}{
	{"mono8", 471140813},
	{"mono16", 1600211147},
	{"signed12", 129192102},
	{"rgb8", 304618276},
	{"rgb12", 2038240426},
}

// split parses a seed's prefix.
func split(b []byte) (w, h, s, bits int, data []byte, ok bool) {
	if len(b) < 6 {
		return 0, 0, 0, 0, nil, false
	}
	return int(binary.LittleEndian.Uint16(b)), int(binary.LittleEndian.Uint16(b[2:])), int(b[4]), int(b[5]), b[6:], true
}

func readSeed(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".rle"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeSeeds(t *testing.T) {
	for _, s := range seeds {
		w, h, n, bits, data, _ := split(readSeed(t, s.name))
		f, err := Decode(data, w, h, n, bits, 1<<20)
		if err != nil {
			t.Errorf("%s: %v", s.name, err)
			continue
		}
		var c uint32
		for i, v := range f.Pix {
			c += uint32(i+1) * uint32(v)
		}
		if f.Width != w || f.Height != h || f.Components != n || len(f.Pix) != w*h*n || c != s.checksum {
			t.Errorf("%s: %d×%d×%d, checksum %d, want %d", s.name, f.Width, f.Height, f.Components, c, s.checksum)
		}
	}
}

// frame builds an RLE frame from PackBits segments.
func frame(segs ...[]byte) []byte {
	h := make([]byte, 64)
	binary.LittleEndian.PutUint32(h, uint32(len(segs)))
	off := 64
	var body []byte
	for i, s := range segs {
		binary.LittleEndian.PutUint32(h[4+4*i:], uint32(off))
		off += len(s)
		body = append(body, s...)
	}
	return append(h, body...)
}

func TestPackBits(t *testing.T) {
	// Literal run of 3, replicate run of 4 (−3), a no-op (−128), literal 1.
	f, err := Decode(frame([]byte{2, 1, 2, 3, 0xfd, 9, 0x80, 0, 7}), 4, 2, 1, 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint16{1, 2, 3, 9, 9, 9, 9, 7}
	for i, v := range want {
		if f.Pix[i] != v {
			t.Fatalf("pixels %v, want %v", f.Pix, want)
		}
	}
	// 16 bits: high bytes, then low bytes.
	f, err = Decode(frame([]byte{1, 0x12, 0xff}, []byte{1, 0x34, 0x01}), 2, 1, 1, 16, 0)
	if err != nil || f.Pix[0] != 0x1234 || f.Pix[1] != 0xff01 {
		t.Fatalf("16-bit: %v %v", f, err)
	}
}

func TestHostile(t *testing.T) {
	w, h, n, bits, good, _ := split(readSeed(t, "mono16"))
	for k := range len(good) {
		if _, err := Decode(good[:k], w, h, n, bits, 1<<20); !errors.Is(err, codec.ErrFormat) {
			t.Fatalf("truncated to %d bytes: %v", k, err)
		}
	}
	for i := range len(good) {
		b := bytes.Clone(good)
		b[i] ^= 0xa5
		Decode(b, w, h, n, bits, 1<<20)
	}
	for _, c := range []struct {
		name                 string
		data                 []byte
		w, h, samples, alloc int
		want                 error
	}{
		{"over the limit", frame([]byte{0}), 65535, 65535, 1, 8, codec.ErrTooLarge},
		{"segment count", frame([]byte{0, 1}), 1, 1, 1, 16, codec.ErrFormat},
		{"offset past the end", append(frame([]byte{0, 1})[:4], append(binary.LittleEndian.AppendUint32(nil, 1<<30), make([]byte, 56)...)...), 1, 1, 1, 8, codec.ErrFormat},
		{"literal overruns the plane", frame([]byte{5, 1, 2, 3, 4, 5, 6}), 2, 1, 1, 8, codec.ErrFormat},
		{"replicate overruns the plane", frame([]byte{0x81, 1}), 2, 1, 1, 8, codec.ErrFormat},
		{"short segment", frame([]byte{0x80, 0x80}), 2, 1, 1, 8, codec.ErrFormat},
		{"32 bits", frame([]byte{0}), 1, 1, 1, 32, codec.ErrUnsupported},
		{"16 segments", frame([]byte{0}), 1, 1, 8, 16, codec.ErrUnsupported},
	} {
		if _, err := Decode(c.data, c.w, c.h, c.samples, c.alloc, 1<<20); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A refused size allocates nothing proportional to it.
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	Decode(frame([]byte{0}), 60000, 60000, 3, 16, 1<<20)
	runtime.ReadMemStats(&m1)
	if d := m1.TotalAlloc - m0.TotalAlloc; d > 16<<10 {
		t.Errorf("refused frame allocated %d bytes", d)
	}
}

func FuzzDecode(f *testing.F) {
	// Small seeds (tens of bytes, from images of a few pixels) keep the
	// fuzzer fast; the larger test images join them.
	small, err := filepath.Glob(filepath.Join("testdata", "fuzz_*.rle"))
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
		w, h, n, bits, data, ok := split(b)
		if !ok {
			return
		}
		fr, err := Decode(data, w, h, n, bits, limit)
		if err != nil {
			if !errors.Is(err, codec.ErrFormat) && !errors.Is(err, codec.ErrUnsupported) && !errors.Is(err, codec.ErrTooLarge) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if k := w * h * n; k > limit || len(fr.Pix) != k {
			t.Fatalf("decoded %d×%d×%d with %d samples", w, h, n, len(fr.Pix))
		}
	})
}
