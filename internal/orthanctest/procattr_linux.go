package orthanctest

import "syscall"

// procAttr has the kernel kill Orthanc when the test binary dies.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
