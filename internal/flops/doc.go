// Package flops holds what radgen's benchmarks measure their speed against:
// the floating-point work of a step, counted from a model's shapes, and the
// machine's float32 GEMM peak, measured with radgen's own product kernel
// (internal/f32) on every core GOMAXPROCS allows.
//
// A count is the nominal work of the products and convolutions (2 FLOPs per
// multiply-add, a convolution as the direct one); norms, activations,
// softmax and optimiser updates are left out, as is customary. Training
// counts forward and backward: each product's backward is two products of
// its size (the gradients of its input and of its weights), so a step is
// about three forwards, less the input gradients nothing needs (those of
// the images or of given features). A kernel that does fewer
// multiplications than the direct convolution (Winograd's) still counts
// the direct figure, so its fraction of peak can exceed what the product
// kernel reaches.
//
// Benchmarks report these as GFLOP/step and peak-frac, the achieved FLOP/s
// over [Peak]: the share of the machine's product speed a step reaches.
// Nothing here belongs in a test's assertion: a peak measured on shared
// cores is only as steady as the machine.
package flops
