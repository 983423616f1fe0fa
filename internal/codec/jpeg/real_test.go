package jpeg

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/testutil"
)

// dicomFile is what the tests need of a DICOM file: the image size and the
// pixel data, native or as encapsulated fragments.
type dicomFile struct {
	ts                 string
	rows, cols         int
	alloc, stored, spp int
	native             []byte
	fragments          [][]byte // the basic offset table dropped
}

// readDICOM walks an explicit or implicit VR little endian file (Part 10 or a
// bare data set) just far enough for these tests: it flattens sequences and
// items, keeps the first image attributes it meets (the top-level ones come
// before any icon sequence) and the last pixel data (the top-level one ends
// the data set).
func readDICOM(b []byte) (*dicomFile, bool) {
	f := &dicomFile{ts: "1.2.840.10008.1.2", spp: 1}
	pos, explicit := 0, false
	metaEnd := 0
	if len(b) >= 132 && string(b[128:132]) == "DICM" {
		pos, explicit = 132, true
		metaEnd = len(b)
	}
	seen := map[uint32]bool{}
	for pos+8 <= len(b) {
		g, e := binary.LittleEndian.Uint16(b[pos:]), binary.LittleEndian.Uint16(b[pos+2:])
		tag := uint32(g)<<16 | uint32(e)
		if metaEnd > 0 && g != 2 {
			// End of the file meta group: the transfer syntax decides.
			metaEnd = 0
			explicit = f.ts != "1.2.840.10008.1.2"
		}
		if g == 0xfffe { // item and delimiters: header only
			pos += 8
			continue
		}
		var vr string
		var n, hdr int
		if explicit || g == 2 {
			vr = string(b[pos+4 : pos+6])
			switch vr {
			case "OB", "OW", "OF", "OD", "OL", "OV", "SQ", "UC", "UN", "UR", "UT", "SV", "UV":
				if pos+12 > len(b) {
					return nil, false
				}
				n, hdr = int(binary.LittleEndian.Uint32(b[pos+8:])), 12
			default:
				n, hdr = int(binary.LittleEndian.Uint16(b[pos+6:])), 8
			}
		} else {
			n, hdr = int(binary.LittleEndian.Uint32(b[pos+4:])), 8
		}
		val := pos + hdr
		if tag == 0x7fe00010 {
			f.native, f.fragments = nil, nil
			if uint32(n) == 0xffffffff {
				p := val
				for p+8 <= len(b) && binary.LittleEndian.Uint32(b[p:]) == 0xe000fffe {
					m := int(binary.LittleEndian.Uint32(b[p+4:]))
					if p+8+m > len(b) {
						return nil, false
					}
					f.fragments = append(f.fragments, b[p+8:p+8+m])
					p += 8 + m
				}
				if len(f.fragments) > 0 {
					f.fragments = f.fragments[1:]
				}
				pos = p
				continue
			}
			if val+n > len(b) {
				return nil, false
			}
			f.native = b[val : val+n]
			pos = val + n
			continue
		}
		// Sequences (explicit SQ, or implicit values that start with an
		// item) are descended into, not skipped.
		if vr == "SQ" || uint32(n) == 0xffffffff || (!explicit && g != 2 && n >= 8 && val+4 <= len(b) && binary.LittleEndian.Uint32(b[val:]) == 0xe000fffe) {
			pos = val
			continue
		}
		if val+n > len(b) {
			return nil, false
		}
		v := b[val : val+n]
		us := func(p *int) {
			if !seen[tag] && len(v) >= 2 {
				*p = int(binary.LittleEndian.Uint16(v))
			}
		}
		switch tag {
		case 0x00020010:
			f.ts = strings.TrimRight(string(v), "\x00 ")
		case 0x00280002:
			us(&f.spp)
		case 0x00280010:
			us(&f.rows)
		case 0x00280011:
			us(&f.cols)
		case 0x00280100:
			us(&f.alloc)
		case 0x00280101:
			us(&f.stored)
		}
		seen[tag] = true
		pos = val + n
	}
	return f, f.rows > 0 && f.cols > 0 && (f.native != nil || f.fragments != nil)
}

// samples returns the native pixel data's first frame, masked to bits stored.
func (f *dicomFile) samples() []uint16 {
	n := f.rows * f.cols * f.spp
	out := make([]uint16, 0, n)
	mask := uint16(1<<f.stored - 1)
	for i := 0; i < n; i++ {
		if f.alloc == 8 {
			out = append(out, uint16(f.native[i])&mask)
		} else {
			out = append(out, binary.LittleEndian.Uint16(f.native[2*i:])&mask)
		}
	}
	return out
}

type manifestEntry struct {
	File           string `json:"file"`
	TransferSyntax string `json:"transfer_syntax"`
	Reference      string `json:"reference"`
	MaxAbsDiff     int    `json:"max_abs_diff"`
}

// jpegSyntaxes are the transfer syntaxes whose pixel data this package
// decodes: baseline, extended, lossless and lossless SV1.
var jpegSyntaxes = map[string]bool{
	"1.2.840.10008.1.2.4.50": true, "1.2.840.10008.1.2.4.51": true,
	"1.2.840.10008.1.2.4.57": true, "1.2.840.10008.1.2.4.70": true,
}

// realJPEG returns the manifest entries in $RADGEN_REAL_DICOM (default
// ../shared/real/dicom) with a JPEG transfer syntax this package decodes.
func realJPEG(t testing.TB) (string, []manifestEntry) {
	t.Helper()
	dir := testutil.Dir(t, "RADGEN_REAL_DICOM", "real/dicom")
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var all, out []manifestEntry
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		if jpegSyntaxes[e.TransferSyntax] {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		t.Skipf("%s/manifest.json lists no JPEG file this package decodes", dir)
	}
	return dir, out
}

func readDICOMFile(t testing.TB, path string) *dicomFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := readDICOM(b)
	if !ok {
		t.Fatalf("%s: no image found", path)
	}
	return f
}

// TestRealDICOMJPEG decodes the JPEG files of the real DICOM manifest (the
// 2140×1760 chest CR in JPEG Lossless SV1 among them) and compares the stored
// values with the reference file's within the entry's max_abs_diff.
func TestRealDICOMJPEG(t *testing.T) {
	dir, entries := realJPEG(t)
	for _, e := range entries {
		t.Run(e.File, func(t *testing.T) {
			src := readDICOMFile(t, filepath.Join(dir, e.File))
			ref := readDICOMFile(t, filepath.Join(dir, e.Reference))
			if ref.native == nil {
				t.Fatalf("reference %s is not native", e.Reference)
			}
			start := time.Now()
			fr, err := Decode(bytes.Join(src.fragments, nil), 1<<26)
			el := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if fr.Width != ref.cols || fr.Height != ref.rows || fr.Components != ref.spp {
				t.Fatalf("decoded %d×%d×%d, reference %d×%d×%d", fr.Width, fr.Height, fr.Components, ref.cols, ref.rows, ref.spp)
			}
			if fr.Precision < src.stored {
				t.Fatalf("code stream precision %d < bits stored %d", fr.Precision, src.stored)
			}
			// Stored values: the file's bits stored of the decoded samples
			// (dcmcjpeg codes 10 of 16 bits as 16-bit lossless), against the
			// reference's.
			want := ref.samples()
			mask := uint16(1<<src.stored - 1)
			worst := 0
			for i, w := range want {
				d := int(fr.Pix[i]&mask) - int(w)
				worst = max(worst, d, -d)
			}
			t.Logf("%s: %d×%d×%d, %d-bit code stream, max |Δ| %d, decoded in %v", e.File, fr.Width, fr.Height, fr.Components, fr.Precision, worst, el)
			if worst > e.MaxAbsDiff {
				t.Fatalf("max |Δ| %d > %d", worst, e.MaxAbsDiff)
			}
		})
	}
}

// BenchmarkRealJPEG decodes the real JPEG files of the manifest (the lossless
// CR among them); the dcmdjpeg sub-benchmark (when dcmtk is installed) runs
// dcmtk's decoder on the same file, as the baseline of the ratio.
func BenchmarkRealJPEG(b *testing.B) {
	dir, entries := realJPEG(b)
	for _, e := range entries {
		path := filepath.Join(dir, e.File)
		src := readDICOMFile(b, path)
		data := bytes.Join(src.fragments, nil)
		// Each sub-benchmark also reports its CPU time per operation
		// (cpu-ns/op: user and system time of the process, or of the
		// dcmdjpeg child), steadier than wall time on a shared machine.
		b.Run(e.File+"/go", func(b *testing.B) {
			b.SetBytes(int64(src.rows * src.cols * src.spp * 2))
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if _, err := Decode(data, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
		b.Run(e.File+"/go-file", func(b *testing.B) {
			// Reading the file and finding the fragments too, as dcmdjpeg does.
			b.SetBytes(int64(src.rows * src.cols * src.spp * 2))
			cpu := processCPU()
			for b.Loop() {
				f := readDICOMFile(b, path)
				if _, err := Decode(bytes.Join(f.fragments, nil), 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
		tool, err := exec.LookPath("dcmdjpeg")
		if err != nil {
			continue
		}
		out := filepath.Join(b.TempDir(), "out.dcm")
		b.Run(e.File+"/dcmdjpeg", func(b *testing.B) {
			b.SetBytes(int64(src.rows * src.cols * src.spp * 2))
			var cpu time.Duration
			for b.Loop() {
				cmd := exec.Command(tool, path, out)
				if msg, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, msg)
				}
				cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
