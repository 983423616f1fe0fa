//go:build !amd64 || purego || noasm || !gc

package f32

// pickKernels returns the portable kernels: this build has no assembly.
func pickKernels() *kernelSet { return &goKernels }

// winoInKernel returns the portable Winograd input transform.
func winoInKernel() winoIn { return goWinoIn }

// winoOutKernel returns the portable Winograd output transform.
func winoOutKernel() winoOut { return goWinoOut }

// dotNoEscape is never called in this build: the portable kernel set has
// no dot kernels.
func dotNoEscape(ks *kernelSet, r, k int, a []float32, lda int, b []float32, ldb int, n int, dst []float32, ldd int, bias []float32, flags int) {
	panic("f32: no dot kernels in this build")
}
