package jpeg2000

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/testutil"
)

// manifestEntry is one entry of the shared real-DICOM manifest.json.
type manifestEntry struct {
	File           string `json:"file"`
	TransferSyntax string `json:"transfer_syntax"`
	Reference      string `json:"reference"`
	MaxAbsDiff     int    `json:"max_abs_diff"`
}

// firstFragment returns the first pixel data fragment of an encapsulated
// DICOM file: the item after the basic offset table that follows the
// Pixel Data element of undefined length.
func firstFragment(t *testing.T, b []byte) []byte {
	t.Helper()
	tag := []byte{0xE0, 0x7F, 0x10, 0x00}
	i := bytes.LastIndex(b, tag)
	if i < 0 {
		t.Fatal("no Pixel Data element")
	}
	p := i + 4
	if b[p] == 'O' && (b[p+1] == 'B' || b[p+1] == 'W') {
		p += 4
	}
	if binary.LittleEndian.Uint32(b[p:]) != 0xFFFFFFFF {
		t.Fatal("Pixel Data is not encapsulated")
	}
	p += 4
	for item := 0; item < 2; item++ {
		if p+8 > len(b) || binary.LittleEndian.Uint32(b[p:]) != 0xE000FFFE {
			t.Fatalf("no item at byte %d", p)
		}
		n := int(binary.LittleEndian.Uint32(b[p+4:]))
		if p+8+n > len(b) {
			t.Fatalf("item of %d bytes at %d overruns the file", n, p)
		}
		if item == 1 {
			return b[p+8 : p+8+n]
		}
		p += 8 + n
	}
	return nil
}

// nativePixels returns the 16-bit little-endian samples of a native DICOM
// file's Pixel Data element.
func nativePixels(t *testing.T, b []byte) []uint16 {
	t.Helper()
	i := bytes.LastIndex(b, []byte{0xE0, 0x7F, 0x10, 0x00})
	if i < 0 {
		t.Fatal("no Pixel Data element")
	}
	p := i + 4
	var n int
	if b[p] == 'O' && (b[p+1] == 'B' || b[p+1] == 'W') {
		n = int(binary.LittleEndian.Uint32(b[p+4:]))
		p += 8
	} else {
		n = int(binary.LittleEndian.Uint32(b[p:]))
		p += 4
	}
	if p+n > len(b) || n%2 != 0 {
		t.Fatalf("Pixel Data of %d bytes at %d in %d", n, p, len(b))
	}
	out := make([]uint16, n/2)
	for k := range out {
		out[k] = binary.LittleEndian.Uint16(b[p+2*k:])
	}
	return out
}

// TestRealDICOM decodes the JPEG 2000 entries of the shared real-DICOM
// manifest and compares them with their uncompressed references.
func TestRealDICOM(t *testing.T) {
	dir := testutil.Dir(t, "RADGEN_REAL_DICOM", "real/dicom")
	mb, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []manifestEntry
	if err := json.Unmarshal(mb, &entries); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.TransferSyntax != "1.2.840.10008.1.2.4.90" && e.TransferSyntax != "1.2.840.10008.1.2.4.91" {
			continue
		}
		n++
		t.Run(e.File, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, e.File))
			if err != nil {
				t.Fatal(err)
			}
			rb, err := os.ReadFile(filepath.Join(dir, e.Reference))
			if err != nil {
				t.Fatal(err)
			}
			want := nativePixels(t, rb)
			start := time.Now()
			f, err := Decode(firstFragment(t, b), 1<<26)
			if err != nil {
				t.Fatal(err)
			}
			el := time.Since(start)
			if f.Components != 1 || len(f.Pix) != len(want) {
				t.Fatalf("decoded %d×%d×%d, reference has %d samples", f.Width, f.Height, f.Components, len(want))
			}
			maxd := 0
			for i, v := range f.Pix {
				maxd = max(maxd, absDiff(int(v), int(want[i])))
			}
			t.Logf("%s: %d×%d, %d bits, max |Δ| %d, decoded in %v", e.File, f.Width, f.Height, f.Precision, maxd, el)
			if maxd > e.MaxAbsDiff {
				t.Errorf("max |Δ| %d > %d", maxd, e.MaxAbsDiff)
			}
		})
	}
	if n == 0 {
		t.Skip("no JPEG 2000 entries in the manifest")
	}
}

func absDiff(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}
