package vision

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/testutil"
)

// dcmtkDecoders names, by transfer syntax, the command-line decoder a
// lossless codec is compared with (dcmtk's, or GDCM's for JPEG 2000): the
// command and its arguments before the input and output files.
var dcmtkDecoders = map[string][]string{
	tsRLE:             {"dcmdrle"},
	tsJPEGLSLossless:  {"dcmdjpls"},
	tsJPEGLSNear:      {"dcmdjpls"},
	tsJPEGLosslessSV1: {"dcmdjpeg"},
	tsJPEGLossless:    {"dcmdjpeg"},
	tsJ2KLossless:     {"gdcmconv", "--raw"},
	tsJ2K:             {"gdcmconv", "--raw"},
	tsJPEGBaseline:    {"dcmdjpeg"},
}

// BenchmarkDICOMCodecs decodes each compressed file of $RADGEN_REAL_DICOM
// to stored values and, when the reference decoder of its transfer syntax
// is installed (dcmdrle, dcmdjpls, dcmdjpeg from dcmtk; gdcmconv --raw from
// GDCM), runs it on the same file in the same run. It reports the CPU time
// per decode of both (cpu-ms/op, tool-cpu-ms/op: the tool's includes its
// process start and writing its output) and their ratio (x-tool); and, as
// the tool's own overhead, its CPU time on the entry's uncompressed
// reference (tool-base-ms/op) and the ratio to the tool's time less that
// (x-tool-decode).
func BenchmarkDICOMCodecs(b *testing.B) {
	dir := testutil.Dir(b, "RADGEN_REAL_DICOM", "real/dicom")
	mb, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		b.Fatal(err)
	}
	var entries []realDICOMEntry
	if err := json.Unmarshal(mb, &entries); err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		if e.TransferSyntax == tsImplicitLE || e.TransferSyntax == tsExplicitLE || e.TransferSyntax == tsExplicitBE {
			continue
		}
		b.Run(e.File, func(b *testing.B) {
			path := filepath.Join(dir, e.File)
			data, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := DecodeDICOMFrame(bytes.NewReader(data), int64(len(data))); err != nil {
				b.Skip(err)
			}
			cpu0 := processCPU()
			for b.Loop() {
				if _, err := DecodeDICOMFrame(bytes.NewReader(data), int64(len(data))); err != nil {
					b.Fatal(err)
				}
			}
			ours := float64(processCPU()-cpu0) / float64(b.N)
			b.ReportMetric(ours/1e6, "cpu-ms/op")
			tool := dcmtkDecoders[e.TransferSyntax]
			if len(tool) == 0 {
				return
			}
			if _, err := exec.LookPath(tool[0]); err != nil {
				b.Logf("%s not installed: no comparison", tool[0])
				return
			}
			out := filepath.Join(b.TempDir(), "out.dcm")
			const runs = 5
			cost := func(in string) float64 {
				var total time.Duration
				for range runs {
					cmd := exec.Command(tool[0], append(append([]string{}, tool[1:]...), in, out)...)
					if msg, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("%s: %v: %s", tool[0], err, msg)
					}
					total += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
				}
				return float64(total) / runs
			}
			theirs := cost(path)
			base := cost(filepath.Join(dir, e.Reference))
			b.ReportMetric(theirs/1e6, "tool-cpu-ms/op")
			b.ReportMetric(ours/theirs, "x-tool")
			b.ReportMetric(base/1e6, "tool-base-ms/op")
			if theirs > base {
				b.ReportMetric(ours/(theirs-base), "x-tool-decode")
			}
		})
	}
}
