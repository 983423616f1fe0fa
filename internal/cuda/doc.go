//go:build cuda

// Package cuda is radgen's GPU engine: CUDA device memory behind
// gorgonia.org/tensor's Engine interface, the float32 kernels of
// internal/accel's primitives (the forward and backward passes of the root
// package's ops, and the optimiser's update), and cuBLAS GEMMs. It is built
// only with the cuda build tag; the default build of radgen has no cgo and
// no CUDA.
//
// # Overview
//
// NewEngine(0) opens the first GPU. A *tensor.Dense whose engine is the
// Engine (NewDense, FromHost, WrapDense, or tensor.WithEngine) keeps its data
// in device memory; kernels take device addresses ([Ptr], from
// Ptr(dense.Uintptr())) and sizes, write into a caller-provided dst, and are
// queued on the engine's one stream. Copies to and from the host wait for
// queued work, so CopyOut after a chain of kernels sees their results.
//
// Memory comes from a caching allocator (size-class free lists); Free and
// FreeDense return blocks to it, EmptyCache gives cached blocks back to the
// driver, Close frees everything. Nothing is freed by finalizers.
//
// # Loading CUDA
//
// The package does not link against libcuda or libcublas and does not use
// gorgonia.org/cu: a small cgo shim (shim.c) dlopen()s libcuda.so.1 and
// libcublas.so.{13,12,11} when an engine is first asked for. A binary built
// with the cuda tag therefore starts on a machine without a GPU, where
// NewEngine and Available return errors matching ErrNoDriver or ErrNoDevice
// (gorgonia.org/cu's package init would os.Exit(1) instead, and its link-time
// libcuda dependency would stop the binary from loading at all).
// RADGEN_LIBCUDA and RADGEN_LIBCUBLAS name libraries to try first.
//
// # Threads
//
// CUDA contexts are per OS thread and goroutines move between threads, so
// every shim call makes the engine's (primary) context current before it
// does anything; no goroutine has to be locked to a thread.
//
// # Layout
//
// Matrices are row-major float32 with an explicit leading dimension where
// one is taken, as in internal/f32; Gemm and GemmStrided mirror f32.Gemm and
// f32.GemmStrided. Programmer errors (negative sizes, short leading
// dimensions) panic with a "cuda: " message; failures of the device return
// errors.
package cuda
