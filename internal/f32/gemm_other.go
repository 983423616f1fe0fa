//go:build !amd64 || purego || noasm || !gc

package f32

// pickKernels returns the portable kernels: this build has no assembly.
func pickKernels() *kernelSet { return &goKernels }
