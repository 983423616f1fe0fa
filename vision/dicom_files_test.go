package vision

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/testutil"
)

// realDICOMEntry is one entry of the manifest.json of a directory of real
// DICOM files (see ../shared/real/README.md).
type realDICOMEntry struct {
	File           string  `json:"file"`
	TransferSyntax string  `json:"transfer_syntax"`
	Reference      string  `json:"reference"`
	MaxAbsDiff     float64 `json:"max_abs_diff"`
}

// TestDICOMCodecFiles runs the same comparison on the small synthetic files
// of testdata/dicom (see its README): JPEG-LS lossless and near-lossless in
// every interleave mode, LSE presets, RLE, colour, signed data, multi-frame
// files with and without offset tables, fragmented frames.
func TestDICOMCodecFiles(t *testing.T) {
	checkDICOMManifest(t, filepath.Join("testdata", "dicom"))
}

// checkDICOMManifest decodes every entry of dir/manifest.json and compares
// it with its reference.
func checkDICOMManifest(t *testing.T, dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []realDICOMEntry
	if err := json.Unmarshal(b, &entries); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(entries) == 0 {
		t.Fatal("manifest.json lists no files")
	}
	for _, e := range entries {
		t.Run(e.File, func(t *testing.T) {
			start := time.Now()
			got, err := DecodeDICOMFrameFile(filepath.Join(dir, e.File))
			elapsed := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			want, err := DecodeDICOMFrameFile(filepath.Join(dir, e.Reference))
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			if got.TransferSyntax != e.TransferSyntax {
				t.Errorf("transfer syntax %s, manifest says %s", got.TransferSyntax, e.TransferSyntax)
			}
			type shape struct {
				Rows, Columns, Samples, BitsStored int
				Signed                             bool
				Photometric                        string
			}
			gs := shape{got.Rows, got.Columns, got.SamplesPerPixel, got.BitsStored, got.Signed, got.Photometric}
			ws := shape{want.Rows, want.Columns, want.SamplesPerPixel, want.BitsStored, want.Signed, want.Photometric}
			if gs != ws {
				t.Fatalf("decoded %+v, reference %+v", gs, ws)
			}
			var maxDiff int64
			at := -1
			for i := range got.Len() {
				d := got.Value(i) - want.Value(i)
				if d < 0 {
					d = -d
				}
				if d > maxDiff {
					maxDiff, at = d, i
				}
			}
			t.Logf("%s (%s, %d×%d×%d, %d bits): max |Δ| %d, decoded in %v", e.File, e.TransferSyntax,
				got.Columns, got.Rows, got.SamplesPerPixel, got.BitsStored, maxDiff, elapsed.Round(time.Microsecond))
			if float64(maxDiff) > e.MaxAbsDiff {
				t.Errorf("max |Δ| %d at sample %d (%d, reference %d) exceeds %g", maxDiff, at, got.Value(at), want.Value(at), e.MaxAbsDiff)
			}
			// The file renders too, at its size, gray or RGB.
			p, err := DecodeDICOMFile(filepath.Join(dir, e.File))
			if err != nil {
				t.Fatalf("rendering: %v", err)
			}
			if p.W != got.Columns || p.H != got.Rows || p.C != got.SamplesPerPixel || len(p.Pix) != p.W*p.H*p.C {
				t.Errorf("rendered %d×%d×%d for a %d×%d×%d frame", p.W, p.H, p.C, got.Columns, got.Rows, got.SamplesPerPixel)
			}
		})
	}
}

// dicomRealDir returns $RADGEN_REAL_DICOM (default ../shared/real/dicom)
// or skips.
func dicomRealDir(t testing.TB) string {
	t.Helper()
	return testutil.Dir(t, "RADGEN_REAL_DICOM", "real/dicom")
}

// TestDICOMFirstFrameBytes checks where the first frame of a multi-frame
// file ends, located by the basic offset table, the Extended Offset Table,
// or the first fragment that ends a JPEG code stream: the codecs stop at
// their end-of-image marker, so a frame taken too long would still decode.
// The three files hold the same frames in 1 KiB fragments (four for the
// first frame, whose code stream is 3602 bytes).
func TestDICOMFirstFrameBytes(t *testing.T) {
	for _, name := range []string{"jls_mf64_frag_bot.dcm", "jls_mf64_frag_nobot.dcm", "jls_mf64_frag_eot.dcm"} {
		data, err := os.ReadFile(filepath.Join("testdata", "dicom", name))
		if err != nil {
			t.Fatal(err)
		}
		o, _ := newOptions(nil)
		im, w, err := readDICOMHeader(bytes.NewReader(data), int64(len(data)), o)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := w.elemHeader(w.bo, w.implicit, false); err != nil {
			t.Fatal(err)
		}
		frame, err := firstFrameBytes(w, im)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(frame) != 3602 || !endsJPEG(frame) {
			t.Errorf("%s: first frame of %d bytes, want 3602 ending with EOI", name, len(frame))
		}
		if w.pos >= int64(len(data))-8 {
			t.Errorf("%s: read to byte %d of %d: past the first frame", name, w.pos, len(data))
		}
	}
}
