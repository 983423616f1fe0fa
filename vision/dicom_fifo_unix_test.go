//go:build unix

package vision

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDICOMFileFIFO: a FIFO given as a DICOM file is refused at once, not
// read forever.
func TestDICOMFileFIFO(t *testing.T) {
	name := filepath.Join(t.TempDir(), "fifo.dcm")
	if err := syscall.Mkfifo(name, 0o600); err != nil {
		t.Skip(err)
	}
	if _, err := DecodeDICOMFile(name); !errors.Is(err, ErrNotRegular) {
		t.Errorf("DecodeDICOMFile(FIFO): %v", err)
	}
	if _, err := DecodeDICOMFrameFile(name); !errors.Is(err, ErrNotRegular) {
		t.Errorf("DecodeDICOMFrameFile(FIFO): %v", err)
	}
}
