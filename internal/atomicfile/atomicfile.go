package atomicfile

import (
	"io"
	"os"
	"path/filepath"
	"strings"
)

// TempPrefix returns the prefix of the temporary files of saves of path.
func TempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp" }

// Write creates or replaces path with what write writes, atomically (see
// the package doc). perm applies to a new file.
func Write(path string, perm os.FileMode, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	unlock, err := lock(filepath.Join(dir, "."+filepath.Base(path)+".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	removeStale(dir, TempPrefix(path))
	tmp, err := os.CreateTemp(dir, TempPrefix(path)+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil { // persist the rename
		d.Sync()
		d.Close()
	}
	return nil
}

// WriteFile is Write of a byte slice, as os.WriteFile.
func WriteFile(path string, b []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// removeStale removes the temporary files a killed save of the same target
// left in dir. The caller holds the target's lock, so none is in use.
func removeStale(dir, prefix string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && e.Type().IsRegular() {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
