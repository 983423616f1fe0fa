// Package kernels holds the CPU forward and backward loops of radgen's ops,
// generic over float32 and float64 (float64 serves the finite-difference
// gradient checks). Slices are row-major; every kernel writes into dst and
// allocates nothing. Kernels panic, prefixed "kernels: ", on programmer errors.
//
// Each backward kernel sits beside its forward kernel and restates the line it
// differentiates.
package kernels

// Float is the element type of a kernel.
type Float interface{ ~float32 | ~float64 }
