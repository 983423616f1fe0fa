package jpeg

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// testCase is one entry of testdata/cases.json (written by gen_testdata.go).
type testCase struct {
	Name       string `json:"name"`
	Ref        string `json:"ref"`
	Width      int    `json:"width"`
	Height     int    `json:"height"`
	Components int    `json:"components"`
	Precision  int    `json:"precision"`
	MaxDiff    int    `json:"max_diff"`
	ToRGB      bool   `json:"ycbcr_to_rgb"`
	Note       string `json:"note"`
}

func loadCases(t testing.TB) []testCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cs []testCase
	if err := json.Unmarshal(b, &cs); err != nil {
		t.Fatal(err)
	}
	if len(cs) == 0 {
		t.Fatal("testdata/cases.json lists no cases")
	}
	return cs
}

func readRef(t testing.TB, name string) []uint16 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".ref"))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint16, len(b)/2)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return out
}

// TestDecodeReference decodes every code stream in testdata and compares it
// with the samples dcmtk's dcmdjpeg (or libjpeg's djpeg) decoded from it.
func TestDecodeReference(t *testing.T) {
	for _, tc := range loadCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.Name+".jpg"))
			if err != nil {
				t.Fatal(err)
			}
			ref := readRef(t, tc.Ref)
			f, err := Decode(data, 1<<24)
			if err != nil {
				t.Fatalf("%s: %v", tc.Note, err)
			}
			if f.Width != tc.Width || f.Height != tc.Height || f.Components != tc.Components || f.Precision != tc.Precision || f.Signed {
				t.Fatalf("frame %d×%d×%d, %d bits, signed %v; want %d×%d×%d, %d bits",
					f.Width, f.Height, f.Components, f.Precision, f.Signed, tc.Width, tc.Height, tc.Components, tc.Precision)
			}
			if tc.ToRGB {
				if err := YCbCrToRGB(f); err != nil {
					t.Fatal(err)
				}
			}
			if len(f.Pix) != len(ref) {
				t.Fatalf("%d samples, reference has %d", len(f.Pix), len(ref))
			}
			worst, at := 0, -1
			for i := range ref {
				d := int(f.Pix[i]) - int(ref[i])
				if d < 0 {
					d = -d
				}
				if d > worst {
					worst, at = d, i
				}
			}
			if worst > tc.MaxDiff {
				nc := tc.Components
				t.Fatalf("max |Δ| %d > %d at x=%d y=%d c=%d (got %d, want %d); %s", worst, tc.MaxDiff,
					at/nc%tc.Width, at/nc/tc.Width, at%nc, f.Pix[at], ref[at], tc.Note)
			}
		})
	}
}
