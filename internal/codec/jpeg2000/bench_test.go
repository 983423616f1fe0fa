//go:build unix

package jpeg2000

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/testutil"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRealCR decodes the real 2140×1760 lossless CR code stream, and,
// as baselines in the same run, has opj_decompress and gdcmconv --raw (when
// installed) decode the same code stream and file. Compare the ns/op (wall
// time, including process start-up and writing the output for the tools) and
// cpu-ns/op (CPU time over all threads), which depends less on the load of a
// shared machine.
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
		c0 := cpuTime()
		for b.Loop() {
			if _, err := Decode(cs, 0); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
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
		var cpu time.Duration
		for b.Loop() {
			cmd := exec.Command("opj_decompress", "-i", j2k, "-o", filepath.Join(tmp, "cr.pgm"))
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	})
	b.Run("gdcmconv", func(b *testing.B) {
		if _, err := exec.LookPath("gdcmconv"); err != nil {
			b.Skip("gdcmconv not installed (apt-get install libgdcm-tools)")
		}
		b.SetBytes(int64(len(cs)))
		var cpu time.Duration
		for b.Loop() {
			cmd := exec.Command("gdcmconv", "--raw", path, filepath.Join(tmp, "raw.dcm"))
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	})
}
