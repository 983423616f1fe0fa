package jpeg2000

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
)

// BenchmarkRealCR decodes the real 2140×1760 lossless CR code stream, and,
// as baselines in the same run, has opj_decompress and gdcmconv --raw (when
// installed) decode the same code stream and file. Compare the ns/op.
func BenchmarkRealCR(b *testing.B) {
	dir := testutil.Dir(b, "RADGEN_REAL_DICOM", "real/dicom")
	path := filepath.Join(dir, "cr_j2k_lossless.dcm")
	file, err := os.ReadFile(path)
	if err != nil {
		b.Skip(err)
	}
	t := &testing.T{}
	cs := firstFragment(t, file)
	b.Run("go", func(b *testing.B) {
		b.SetBytes(int64(len(cs)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(cs, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	tmp := b.TempDir()
	j2k := filepath.Join(tmp, "cr.j2k")
	if err := os.WriteFile(j2k, cs, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("opj_decompress", func(b *testing.B) {
		if _, err := exec.LookPath("opj_decompress"); err != nil {
			b.Skip("opj_decompress not installed (apt-get install libopenjp2-tools)")
		}
		b.SetBytes(int64(len(cs)))
		for b.Loop() {
			out, err := exec.Command("opj_decompress", "-i", j2k, "-o", filepath.Join(tmp, "cr.pgm")).CombinedOutput()
			if err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
	b.Run("gdcmconv", func(b *testing.B) {
		if _, err := exec.LookPath("gdcmconv"); err != nil {
			b.Skip("gdcmconv not installed (apt-get install libgdcm-tools)")
		}
		b.SetBytes(int64(len(cs)))
		for b.Loop() {
			out, err := exec.Command("gdcmconv", "--raw", path, filepath.Join(tmp, "raw.dcm")).CombinedOutput()
			if err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
}
