//go:build unix

package boundedio

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestReaderLimit(t *testing.T) {
	for _, n := range []int{0, 9, 10} {
		b, err := io.ReadAll(Reader(bytes.NewReader(make([]byte, n)), 10, "x"))
		if err != nil || len(b) != n {
			t.Errorf("%d bytes under a limit of 10: %d, %v", n, len(b), err)
		}
	}
	b, err := io.ReadAll(Reader(bytes.NewReader(make([]byte, 11)), 10, "x"))
	if !errors.Is(err, ErrTooLarge) || len(b) != 10 {
		t.Errorf("11 bytes under a limit of 10: %d, %v", len(b), err)
	}
}

// FIFOs and devices are refused at once (a FIFO without a writer would
// block forever); /dev/zero allowed still stops at the limit.
func TestNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	for _, p := range []string{fifo, "/dev/zero", dir} {
		if _, err := Open(p, false); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: %v", p, err)
		}
		if _, err := ReadFile(p, 1<<20, false); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		b, err := ReadFile("/dev/zero", 1<<20, true)
		if !errors.Is(err, ErrTooLarge) || len(b) > 1<<20 {
			t.Errorf("/dev/zero allowed: %d bytes, %v", len(b), err)
		}
	}
	reg := filepath.Join(dir, "f")
	os.WriteFile(reg, make([]byte, 100), 0o644)
	if _, err := ReadFile(reg, 99, false); !errors.Is(err, ErrTooLarge) {
		t.Errorf("100 bytes, limit 99: %v", err)
	}
	if b, err := ReadFile(reg, 100, false); err != nil || len(b) != 100 {
		t.Errorf("100 bytes, limit 100: %d, %v", len(b), err)
	}
}
