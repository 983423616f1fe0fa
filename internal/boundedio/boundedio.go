// Package boundedio opens and reads input files with a size limit, refusing
// non-regular files (FIFOs, devices, sockets) unless they are allowed: a
// FIFO would block forever and /dev/zero would never end.
package boundedio

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Errors, wrapped with the path.
var (
	// ErrTooLarge: the input is longer than its limit.
	ErrTooLarge = errors.New("input exceeds its size limit")
	// ErrNotRegular: the path names a FIFO, a device, a socket or a
	// directory, and such files are not allowed.
	ErrNotRegular = errors.New("not a regular file")
)

// Open opens path for reading. Unless allowNonRegular, anything but a
// regular file is refused before it is opened, and again after (without
// blocking on a FIFO that appeared in between).
func Open(path string, allowNonRegular bool) (*os.File, error) {
	if !allowNonRegular {
		st, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: %w (%v)", path, ErrNotRegular, st.Mode().Type())
		}
		f, err := openNonblock(path)
		if err != nil {
			return nil, err
		}
		if st, err = f.Stat(); err != nil || !st.Mode().IsRegular() {
			f.Close()
			if err == nil {
				err = fmt.Errorf("%s: %w (%v)", path, ErrNotRegular, st.Mode().Type())
			}
			return nil, err
		}
		return f, nil
	}
	return os.Open(path)
}

// Reader returns r, limited to limit bytes: reading past them fails with
// an error wrapping ErrTooLarge that names what was read.
func Reader(r io.Reader, limit int64, what string) io.Reader {
	return &limited{r: r, left: limit, limit: limit, what: what}
}

type limited struct {
	r           io.Reader
	left, limit int64
	what        string
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, l.err()
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n - 1, l.err()
	}
	return n, err
}

func (l *limited) err() error {
	return fmt.Errorf("%s: %w (%d bytes)", l.what, ErrTooLarge, l.limit)
}

// ReadFile reads path whole, refusing non-regular files unless allowed and
// files over limit bytes (checked from the size first, and while reading).
func ReadFile(path string, limit int64, allowNonRegular bool) ([]byte, error) {
	f, err := Open(path, allowNonRegular)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, limit %d", path, ErrTooLarge, st.Size(), limit)
	}
	return io.ReadAll(Reader(f, limit, path))
}
