//go:build !cuda

package accel

// OpenCUDA returns ErrNoCUDA: this build has no CUDA engine. Build with
// -tags cuda (see internal/cuda/README.md).
func OpenCUDA(ordinal int) (Engine, error) { return nil, ErrNoCUDA }
