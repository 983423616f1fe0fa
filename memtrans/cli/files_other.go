//go:build !unix

package cli

import "os"

func openNonblock(path string) (*os.File, error) { return os.Open(path) }
