//go:build !amd64 || purego || noasm || !gc

package f32

// pickKernels returns the portable kernels: this build has no assembly.
func pickKernels() *kernelSet { return &goKernels }

// winoInKernel returns the portable Winograd input transform.
func winoInKernel() winoIn { return goWinoIn }

// winoOutKernel returns the portable Winograd output transform.
func winoOutKernel() winoOut { return goWinoOut }
