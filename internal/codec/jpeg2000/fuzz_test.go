package jpeg2000

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/radgen/radgen/internal/codec"
)

// FuzzDecode feeds arbitrary bytes to Decode, seeded with the test streams:
// it must return a frame consistent with itself or an error wrapping one of
// the codec errors, never panic.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.j[2p]*")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := Decode(data, limit)
		if err != nil {
			if !errors.Is(err, codec.ErrFormat) && !errors.Is(err, codec.ErrUnsupported) && !errors.Is(err, codec.ErrTooLarge) {
				t.Fatalf("error wraps no codec error: %v", err)
			}
			return
		}
		if n := fr.Width * fr.Height * fr.Components; n > limit || len(fr.Pix) != n {
			t.Fatalf("frame %d×%d×%d with %d samples", fr.Width, fr.Height, fr.Components, len(fr.Pix))
		}
		mask := uint16(1)<<fr.Precision - 1
		for _, v := range fr.Pix {
			if v&^mask != 0 {
				t.Fatalf("sample %#x beyond %d bits", v, fr.Precision)
			}
		}
	})
}
