// radgen.cu: the float32 kernels of radgen's CUDA engine.
//
// Compiled to PTX by gen.sh (go generate in internal/cuda) and embedded in
// the Go binary; the driver JIT-compiles the PTX for the GPU at hand. Built
// without --use_fast_math: expf/tanhf/logf/sqrtf and division are the
// IEEE-accurate versions, so every kernel stays within 1e-5 relative of a
// float64 CPU reference (engine_gpu_test.go).
//
// Conventions (all matrices row-major, float32, contiguous unless a leading
// dimension `ld` is given):
//   - element-wise kernels use a grid-stride loop over n elements;
//   - row kernels (softmax, log-softmax, layer norm, gather) run one block per
//     row; blockDim.x is a multiple of 32 and at most 1024;
//   - kernels that may run in place (dst == src) say so and take no
//     __restrict__ on those pointers.
// The Go launchers in kernels.go hold the same parameter lists; keep them in
// sync (TestKernelEntryPoints checks the names).

#define RG_MASKED (-1e9f)  // R2Gen: scores.masked_fill(mask == 0, -1e9)

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// block_sum/block_max: every thread of the block gets the result. sh holds 32
// floats; it may be reused after the call returns.
__device__ float block_sum(float v, float* sh) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : 0.f;
        v = warp_sum(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    v = sh[0];
    __syncthreads();
    return v;
}

__device__ float block_max(float v, float* sh) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : -INFINITY;
        v = warp_max(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    v = sh[0];
    __syncthreads();
    return v;
}

#define GRID_STRIDE(i, n) \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (long long)gridDim.x * blockDim.x)

// ---- element-wise with row broadcast --------------------------------------
// a, dst: (rows, cols) with n = rows*cols. b: (bRows, cols); row r of a is
// paired with row (r / bDiv) % bRows of b. Same shape: bRows = rows, bDiv = 1;
// a bias row: bRows = 1; positional encodings (T, D) over (B*T, D): bRows = T,
// bDiv = 1; one row per batch over S slots: bRows = B, bDiv = S.
// In place: dst may equal a or b.

extern "C" __global__ void rg_add_f32(float* dst, const float* a, const float* b, long long n,
                                      int cols, int bRows, int bDiv) {
    GRID_STRIDE(i, n) {
        long long r = i / cols;
        int c = (int)(i - r * cols);
        long long br = (r / bDiv) % bRows;
        dst[i] = a[i] + b[br * cols + c];
    }
}

extern "C" __global__ void rg_mul_f32(float* dst, const float* a, const float* b, long long n,
                                      int cols, int bRows, int bDiv) {
    GRID_STRIDE(i, n) {
        long long r = i / cols;
        int c = (int)(i - r * cols);
        long long br = (r / bDiv) % bRows;
        dst[i] = a[i] * b[br * cols + c];
    }
}

// ---- unary (in place allowed) ----------------------------------------------

extern "C" __global__ void rg_scale_f32(float* dst, const float* src, float alpha, long long n) {
    GRID_STRIDE(i, n) dst[i] = src[i] * alpha;
}

extern "C" __global__ void rg_relu_f32(float* dst, const float* src, long long n) {
    GRID_STRIDE(i, n) {
        float x = src[i];
        dst[i] = x > 0.f ? x : 0.f;
    }
}

extern "C" __global__ void rg_tanh_f32(float* dst, const float* src, long long n) {
    GRID_STRIDE(i, n) dst[i] = tanhf(src[i]);
}

__device__ __forceinline__ float sigmoidf(float x) { return 1.f / (1.f + expf(-x)); }

extern "C" __global__ void rg_sigmoid_f32(float* dst, const float* src, long long n) {
    GRID_STRIDE(i, n) dst[i] = sigmoidf(src[i]);
}

// ---- softmax over the last axis, with R2Gen's -1e9 masking -----------------
// src, dst: (rows, cols), e.g. attention scores (B, H, Tq, Tk) as rows =
// B*H*Tq, cols = Tk. A position is masked (its score replaced by -1e9 before
// the softmax, exactly as R2Gen's masked_fill) when
//   mask != NULL and mask[(b*maskRows + q') * cols + j] == 0, where
//       b = row / rowsPerBatch, q = row % qLen, q' = maskRows > 1 ? q : 0
//       (mask is (B, maskRows, Tk) bytes: (B, 1, Tk) key padding or
//       (B, Tq, Tk) full masks), or
//   causal != 0 and j > qOffset + q (subsequent mask; qOffset is the position
//       of the first query, for incremental decoding).
// A fully masked row comes out uniform, as in PyTorch. In place allowed.
extern "C" __global__ void rg_softmax_f32(float* dst, const float* src, int rows, int cols,
                                          const unsigned char* mask, int rowsPerBatch,
                                          int maskRows, int qLen, int causal, int qOffset) {
    __shared__ float sh[32];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const float* x = src + (long long)row * cols;
    float* y = dst + (long long)row * cols;
    const int q = row % qLen;
    const unsigned char* m = 0;
    if (mask) {
        long long mr = (long long)(row / rowsPerBatch) * maskRows + (maskRows > 1 ? q : 0);
        m = mask + mr * cols;
    }
    const int limit = causal ? qOffset + q : 0x7fffffff;

    float mx = -INFINITY;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = (j > limit || (m && m[j] == 0)) ? RG_MASKED : x[j];
        mx = fmaxf(mx, v);
    }
    mx = block_max(mx, sh);
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = (j > limit || (m && m[j] == 0)) ? RG_MASKED : x[j];
        s += expf(v - mx);
    }
    s = block_sum(s, sh);
    const float inv = 1.f / s;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = (j > limit || (m && m[j] == 0)) ? RG_MASKED : x[j];
        y[j] = expf(v - mx) * inv;
    }
}

// log_softmax over the last axis: y = x - max - log(sum(exp(x - max))).
// In place allowed.
extern "C" __global__ void rg_log_softmax_f32(float* dst, const float* src, int rows, int cols) {
    __shared__ float sh[32];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const float* x = src + (long long)row * cols;
    float* y = dst + (long long)row * cols;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) mx = fmaxf(mx, x[j]);
    mx = block_max(mx, sh);
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(x[j] - mx);
    s = block_sum(s, sh);
    const float lse = mx + logf(s);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) y[j] = x[j] - lse;
}

// ---- layer norm over the last axis -----------------------------------------
// src, dst: (rows, cols). gamma, beta: (cols) when paramStride == 0, or one
// row each, (rows, cols), when paramStride == cols: the conditional layer norm
// of R2Gen's MCLN (Chen et al. 2020, Eqs. 11-15), gamma_hat = gamma +
// mlp_gamma(M_t) per position, precomputed by the caller.
//   r2gen != 0: R2Gen's LayerNorm, gamma * (x - mean) / (std + eps) + beta
//               with the unbiased (Bessel, n-1) std and eps added to the std.
//   r2gen == 0: the standard one, gamma * (x - mean) / sqrt(var + eps) + beta
//               with the biased variance (torch.nn.LayerNorm).
// Two passes over the row (mean, then squared deviations) for accuracy.
// In place allowed.
extern "C" __global__ void rg_layer_norm_f32(float* dst, const float* src, const float* gamma,
                                             const float* beta, int rows, int cols,
                                             int paramStride, float eps, int r2gen) {
    __shared__ float sh[32];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const float* x = src + (long long)row * cols;
    float* y = dst + (long long)row * cols;
    const float* g = gamma + (long long)row * paramStride;
    const float* b = beta + (long long)row * paramStride;

    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += x[j];
    const float mean = block_sum(s, sh) / (float)cols;
    float ss = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float d = x[j] - mean;
        ss += d * d;
    }
    ss = block_sum(ss, sh);
    if (r2gen) {
        const float denom = sqrtf(ss / (float)(cols - 1)) + eps;
        for (int j = threadIdx.x; j < cols; j += blockDim.x)
            y[j] = g[j] * (x[j] - mean) / denom + b[j];
    } else {
        const float inv = 1.f / sqrtf(ss / (float)cols + eps);
        for (int j = threadIdx.x; j < cols; j += blockDim.x)
            y[j] = (x[j] - mean) * inv * g[j] + b[j];
    }
}

// ---- embedding / row gather ------------------------------------------------
// dst[i, :] = table[ids[i], :] * scale for i < n; table is (vocab, dim).
// An id outside [0, vocab) yields a row of zeros (the launcher checks ids it
// uploads itself). Embedding: scale = sqrt(d_model) in R2Gen. Beam reorder:
// table = state, ids = beam indices, scale = 1. dst must not overlap table.
extern "C" __global__ void rg_gather_f32(float* __restrict__ dst, const float* __restrict__ table,
                                         const int* __restrict__ ids, int n, int vocab, int dim,
                                         float scale) {
    for (int i = blockIdx.x; i < n; i += gridDim.x) {
        const int id = ids[i];
        float* y = dst + (long long)i * dim;
        if (id < 0 || id >= vocab) {
            for (int j = threadIdx.x; j < dim; j += blockDim.x) y[j] = 0.f;
            continue;
        }
        const float* t = table + (long long)id * dim;
        for (int j = threadIdx.x; j < dim; j += blockDim.x) y[j] = t[j] * scale;
    }
}

// ---- relational memory gate update (Chen et al. 2020, Eqs. 9-10) -----------
// R2Gen RelationalMemory.forward_step, after the attention + MLP:
//   gates = W(input) + U(tanh(M)); ig, fg = split(gates, d); sigmoid both
//   next  = sigmoid(ig) * tanh(next) + sigmoid(fg) * M     (fg multiplies M)
// next, mem, dst: (B*S, d). gw = W(input) + bias: (B, 2d), one row per batch,
// broadcast over the S slots. gu = U(tanh(M)) + bias: (B*S, 2d). dst may equal
// next or mem.
extern "C" __global__ void rg_rm_gate_f32(float* dst, const float* next, const float* mem,
                                          const float* __restrict__ gw,
                                          const float* __restrict__ gu, int rows, int slots,
                                          int d) {
    const long long n = (long long)rows * d;
    GRID_STRIDE(i, n) {
        const long long r = i / d;
        const int j = (int)(i - r * d);
        const long long b = r / slots;
        const float ig = gw[b * 2 * d + j] + gu[r * 2 * d + j];
        const float fg = gw[b * 2 * d + d + j] + gu[r * 2 * d + d + j];
        dst[i] = sigmoidf(ig) * tanhf(next[i]) + sigmoidf(fg) * mem[i];
    }
}

// ---- head split / merge and transpose --------------------------------------
// split: src rows (B*T) with leading dimension ld; head h of row (b, t) is
// columns colOff + h*dk ... + dk - 1 (so Q, K, V can be cut from one fused
// (B, T, 3D) projection). dst: (B, H, dstT, dk) contiguous, row (b, h, t)
// written at position dstOff + t: dstT = T, dstOff = 0 is a plain split;
// dstT = capacity, dstOff = steps so far appends to a key/value cache.
extern "C" __global__ void rg_split_heads_f32(float* __restrict__ dst,
                                              const float* __restrict__ src, int B, int T,
                                              int H, int dk, int ld, int colOff, int dstT,
                                              int dstOff) {
    const long long n = (long long)B * H * T * dk;
    GRID_STRIDE(i, n) {
        const int k = (int)(i % dk);
        long long r = i / dk;
        const int t = (int)(r % T);
        r /= T;
        const int h = (int)(r % H);
        const long long b = r / H;
        dst[((b * H + h) * dstT + dstOff + t) * dk + k] =
            src[(b * T + t) * ld + colOff + (long long)h * dk + k];
    }
}

// merge: src (B, H, T, dk) contiguous; dst rows (B*T) with leading dimension
// ld, head h at columns h*dk ... (the inverse of split with colOff = 0).
extern "C" __global__ void rg_merge_heads_f32(float* __restrict__ dst,
                                              const float* __restrict__ src, int B, int T,
                                              int H, int dk, int ld) {
    const long long n = (long long)B * T * H * dk;
    GRID_STRIDE(i, n) {
        const int k = (int)(i % dk);
        long long r = i / dk;
        const int h = (int)(r % H);
        r /= H;
        const int t = (int)(r % T);
        const long long b = r / T;
        dst[(b * T + t) * ld + (long long)h * dk + k] = src[((b * H + h) * T + t) * dk + k];
    }
}

// transpose: src (batch, rows, cols) → dst (batch, cols, rows), 32×32 tiles
// through shared memory; block (32, 8), grid (ceil(cols/32), ceil(rows/32),
// batch). dst must not overlap src.
extern "C" __global__ void rg_transpose_f32(float* __restrict__ dst,
                                            const float* __restrict__ src, int rows, int cols) {
    __shared__ float tile[32][33];
    const long long off = (long long)blockIdx.z * rows * cols;
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {
        const int r = r0 + dy, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[dy][threadIdx.x] = src[off + (long long)r * cols + c];
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {
        const int c = c0 + dy, r = r0 + threadIdx.x;  // dst row c, column r
        if (r < rows && c < cols) dst[off + (long long)c * rows + r] = tile[threadIdx.x][dy];
    }
}
