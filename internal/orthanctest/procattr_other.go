//go:build !linux

package orthanctest

import "syscall"

func procAttr() *syscall.SysProcAttr { return nil }
