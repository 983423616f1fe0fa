//go:build !unix

package data

import "errors"

func mkfifo(string) error { return errors.New("no FIFOs on this system") }
