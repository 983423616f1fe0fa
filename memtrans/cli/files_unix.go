//go:build unix

package cli

import (
	"os"
	"syscall"
)

// openNonblock opens path read-only without blocking on a FIFO; for a
// regular file O_NONBLOCK has no effect.
func openNonblock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
