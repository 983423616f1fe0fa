//go:build cuda

package cuda

/*
#cgo CFLAGS: -std=gnu11 -O2
#cgo LDFLAGS: -ldl
#cgo nocallback rg_launch
#cgo noescape rg_launch
#cgo nocallback rg_htod
#cgo noescape rg_htod
#cgo nocallback rg_dtoh
#cgo noescape rg_dtoh
#cgo nocallback rg_sgemm
#cgo nocallback rg_sgemm_strided_batched
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"
)

// Sentinel errors; test with errors.Is. Errors from the driver or cuBLAS are
// *Error values, which match the sentinel that fits their code.
var (
	// ErrNoDriver: libcuda.so.1 could not be opened (no NVIDIA driver), or it
	// lacks an entry point radgen needs, or it is too old for the device.
	ErrNoDriver = errors.New("cuda: no usable CUDA driver")
	// ErrNoDevice: the driver is there but sees no such GPU.
	ErrNoDevice = errors.New("cuda: no CUDA device")
	// ErrNoCUBLAS: no libcublas.so.{13,12,11} could be opened; the engine
	// runs its own kernels but Gemm and GemmStrided return this.
	ErrNoCUBLAS = errors.New("cuda: cuBLAS not available")
	// ErrOutOfMemory: the device is out of memory (after the engine's cache
	// was released and the allocation retried).
	ErrOutOfMemory = errors.New("cuda: out of device memory")
	// ErrClosed: the engine was closed.
	ErrClosed = errors.New("cuda: engine closed")
	// ErrNotAllocated: Free was given memory this engine did not allocate
	// (or already freed, or a view into an allocation).
	ErrNotAllocated = errors.New("cuda: memory not allocated by this engine")
)

// CUDA driver error codes radgen tells apart (cuda.h, CUresult).
const (
	cudaErrorOutOfMemory          = 2
	cudaErrorInsufficientDriver   = 35
	cudaErrorNoDevice             = 100
	cudaErrorInvalidDevice        = 101
	cudaErrorSystemDriverMismatch = 803
	cublasStatusAllocFailed       = C.RG_BLAS_BASE + 3
)

// Error is a failed driver, cuBLAS or loader call.
type Error struct {
	Op     string // the radgen operation, e.g. "Alloc" or "Gemm"
	Code   int    // CUresult, or 10000+cublasStatus_t, or 20000+ for the loader
	Name   string // e.g. CUDA_ERROR_OUT_OF_MEMORY
	Detail string // the driver's description or the loader's message
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cuda: %s: %s (%d)", e.Op, e.Name, e.Code)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is matches the sentinel errors by code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNoDriver:
		return e.Code == C.RG_SHIM_NO_DRIVER || e.Code == C.RG_SHIM_NO_SYMBOL ||
			e.Code == C.RG_SHIM_NOT_LOADED || e.Code == cudaErrorInsufficientDriver ||
			e.Code == cudaErrorSystemDriverMismatch
	case ErrNoDevice:
		return e.Code == cudaErrorNoDevice || e.Code == cudaErrorInvalidDevice
	case ErrNoCUBLAS:
		return e.Code == C.RG_SHIM_NO_CUBLAS
	case ErrOutOfMemory:
		return e.Code == cudaErrorOutOfMemory || e.Code == cublasStatusAllocFailed
	}
	return false
}

func status(op string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return &Error{
		Op:     op,
		Code:   int(rc),
		Name:   C.GoString(C.rg_error_name(rc)),
		Detail: C.GoString(C.rg_error_string(rc)),
	}
}

// Library search order. RADGEN_LIBCUDA / RADGEN_LIBCUBLAS name a file to try
// first (a full path, or a name for the dynamic loader's search).
var (
	driverNames = []string{"libcuda.so.1", "libcuda.so"}
	cublasNames = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}
)

var (
	driverOnce sync.Once
	driverErr  error
	cublasOnce sync.Once
	cublasErr  error
)

// loadDriver opens libcuda and calls cuInit once per process.
func loadDriver() error {
	driverOnce.Do(func() {
		driverErr = loadLib("load driver", "RADGEN_LIBCUDA", driverNames, func(p *C.char, buf *C.char, n C.int) C.int {
			return C.rg_driver_load(p, buf, n)
		}, C.RG_SHIM_NO_DRIVER)
	})
	return driverErr
}

// loadCUBLAS opens libcublas once per process.
func loadCUBLAS() error {
	cublasOnce.Do(func() {
		cublasErr = loadLib("load cuBLAS", "RADGEN_LIBCUBLAS", cublasNames, func(p *C.char, buf *C.char, n C.int) C.int {
			return C.rg_cublas_load(p, buf, n)
		}, C.RG_SHIM_NO_CUBLAS)
	})
	return cublasErr
}

func loadLib(op, env string, names []string, load func(path, buf *C.char, n C.int) C.int, notFound C.int) error {
	if p := os.Getenv(env); p != "" {
		names = append([]string{p}, names...)
	}
	const bufLen = 512
	buf := (*C.char)(C.malloc(bufLen))
	defer C.free(unsafe.Pointer(buf))
	var tried []string
	for _, name := range names {
		cname := C.CString(name)
		rc := load(cname, buf, bufLen)
		C.free(unsafe.Pointer(cname))
		if rc == 0 {
			return nil
		}
		msg := C.GoString(buf)
		if rc != notFound {
			// Opened, but unusable (missing symbol, or cuInit failed).
			e := status(op, rc).(*Error)
			if rc >= C.RG_SHIM_BASE && msg != "" {
				e.Detail = name + ": " + msg
			}
			return e
		}
		tried = append(tried, msg)
	}
	err := status(op, notFound).(*Error)
	err.Detail = fmt.Sprint(tried)
	return err
}

// Available reports whether a CUDA device can be used: nil when the driver
// loads and sees at least one GPU, else an error matching ErrNoDriver or
// ErrNoDevice. It never exits the process and costs one dlopen and cuInit.
func Available() error {
	n, err := DeviceCount()
	if err != nil {
		return err
	}
	if n == 0 {
		return &Error{Op: "Available", Code: cudaErrorNoDevice, Name: "CUDA_ERROR_NO_DEVICE"}
	}
	return nil
}

// DeviceCount returns the number of CUDA devices the driver sees.
func DeviceCount() (int, error) {
	if err := loadDriver(); err != nil {
		return 0, err
	}
	var n C.int
	if err := status("DeviceCount", C.rg_device_count(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DriverVersion returns the CUDA version the driver supports, as
// 1000*major + 10*minor (13000 for CUDA 13.0).
func DriverVersion() (int, error) {
	if err := loadDriver(); err != nil {
		return 0, err
	}
	var v C.int
	if err := status("DriverVersion", C.rg_driver_version(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// HeadersChecked reports whether this binary's shim was compiled against the
// real CUDA headers, which verifies every prototype it declares (CI does).
func HeadersChecked() bool { return C.rg_have_cuda_headers() != 0 }
