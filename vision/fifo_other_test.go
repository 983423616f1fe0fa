//go:build !unix

package vision

import "errors"

func mkfifo(string) error { return errors.New("no FIFOs on this system") }
