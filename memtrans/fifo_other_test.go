//go:build !unix

package memtrans

import "errors"

func mkfifo(string) error { return errors.New("no FIFOs on this system") }
