package cli

import (
	"os"
	"path/filepath"
)

// Input files are opened and read through internal/boundedio, with a size
// limit, refusing anything but a regular file (a FIFO, a device, a socket,
// a folder) unless -allow-nonregular. Output files are written atomically.

// writeFile writes an output file atomically: a temporary file in the same
// folder, synced, then renamed over path. On any failure an existing file
// is left as it was.
func writeFile(path string, b []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(b); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
