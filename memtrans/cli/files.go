package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Input files are opened and read with a size limit, and anything but a
// regular file (a FIFO, a device, a socket, a folder) is refused unless
// -allow-nonregular: a FIFO without a writer would block forever and
// /dev/zero would never end. Output files are written atomically.

// Errors of the input files, wrapped with the path.
var (
	errTooLarge   = errors.New("input exceeds its size limit")
	errNotRegular = errors.New("not a regular file")
)

// openInput opens path for reading. Unless allowNonRegular, anything but a
// regular file is refused before it is opened, and again after (opened
// without blocking, should a FIFO have appeared in between).
func openInput(path string, allowNonRegular bool) (*os.File, error) {
	if allowNonRegular {
		return os.Open(path)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%v)", path, errNotRegular, st.Mode().Type())
	}
	f, err := openNonblock(path)
	if err != nil {
		return nil, err
	}
	if st, err = f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s: %w (%v)", path, errNotRegular, st.Mode().Type())
		}
		return nil, err
	}
	return f, nil
}

// readInput reads path whole, refusing non-regular files unless allowed
// and files over limit bytes (checked from the size first, and while
// reading).
func readInput(path string, limit int64, allowNonRegular bool) ([]byte, error) {
	f, err := openInput(path, allowNonRegular)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, limit %d", path, errTooLarge, st.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w (%d bytes)", path, errTooLarge, limit)
	}
	return b, nil
}

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
