// Package half stores weight matrices in IEEE 754 half precision (binary16)
// and multiplies them by a few rows of float32 activations: the
// matrix-vector products of incremental decoding, whose cost is reading the
// weights from memory.
//
// A binary16 value keeps 11 significant bits (a relative rounding error of
// at most 2⁻¹¹ ≈ 4.9·10⁻⁴), 5 exponent bits (normal numbers from 6.1·10⁻⁵ to
// 65504, subnormals down to 6·10⁻⁸) and a sign. FromFloat32 and Encode round
// to nearest, ties to even, as the F16C instruction VCVTPS2PH does;
// ToFloat32 and Decode are exact. Storing a weight matrix in half precision
// halves the bytes a product reads; all arithmetic stays float32 (each
// weight is widened before its fused multiply-add).
//
// The products, y = act(x·Wᵀ + b) for m rows of x and W stored n×k as
// PyTorch's Linear stores it, are [Op]s: a [Runner] batches independent
// ones (or runs a single one), reads every matrix
// once for all rows, and shares the output columns of the whole batch out in
// chunks of 64 KB of weights among the calling goroutine and the
// GOMAXPROCS−1 helpers of internal/f32's pool (one pool serves the skinny
// products of both packages), so that every core streams weights. The
// chunks are claimed as the goroutines come free, so a helper that starts
// late (or a core taken by another process) costs little. The same path
// serves float32 weights ([Float32]) through internal/f32's dot kernels
// (f32.Dots), so a decoder has one code path whatever the storage.
//
// [NewWeights] lays a binary16 copy out for the kernels: the rows in groups
// of four, interleaved in blocks of eight columns, so that a product reads
// one sequential stream (with software prefetch), which streams faster than
// four rows at a time when three rows of x share each weight.
//
// On amd64 the kernels are Go assembly using AVX2, FMA and F16C (generated
// by ./_gen), chosen at run time when the CPU has them; elsewhere, with the
// build tag purego or noasm, or on CPUs without them, pure-Go loops compute
// the same products (with another summation order).
package half

//go:generate go run ./_gen
