// Package f32 holds the float32 CPU kernels that the rest of radgen stands on:
// GEMM (plain and strided-batched) and the elementwise, reduction and
// normalisation loops of the model, and the inference kernels of the
// convolutions: GemmPacked, a product with a matrix packed once (a layer's
// weights) whose bias, ReLU and residual sum are fused into the store of its
// tiles, and Winograd's F(2×2, 3×3) transforms for 3×3 convolutions.
//
// All matrices are row-major with an explicit leading dimension (the stride
// between consecutive rows, as in gonum's blas/gonum), and every kernel writes
// into a caller-provided dst. Kernels panic, with messages prefixed "f32: ", on
// programmer errors such as short slices; they never allocate on hot paths.
package f32
