// radgen.cu: the float32 kernels of radgen's CUDA engine.
//
// Compiled to PTX by gen.sh (go generate in internal/cuda) and embedded in
// the Go binary; the driver JIT-compiles the PTX for the GPU at hand. Built
// without --use_fast_math: expf/tanhf/logf/sqrtf and division are the
// IEEE-accurate versions, so every kernel stays within 1e-5 relative of a
// float64 CPU reference (gpu_test.go).
//
// Conventions (all matrices row-major, float32, contiguous unless a leading
// dimension `ld` is given):
//   - element-wise kernels use a grid-stride loop over n elements;
//   - row kernels (softmax, log-softmax, gather, normalize) run one block per
//     row; blockDim.x is a multiple of 32 and at most 1024;
//   - kernels that may run in place (dst == src) say so and take no
//     __restrict__ on those pointers.
// The Go launchers in kernels.go hold the same parameter lists; keep them in
// sync (TestKernelEntryPoints checks the names).

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

// ---- softmax over the last axis -------------------------------------------
// src, dst: (rows, cols). In place allowed.
extern "C" __global__ void rg_softmax_f32(float* dst, const float* src, int rows, int cols) {
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
    const float inv = 1.f / s;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) y[j] = expf(x[j] - mx) * inv;
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

// ============================================================================
// Training primitives (accel.Trainer) and the optimiser (accel.Optimizer).
//
// These follow accel.Host, the reference engine, operation for operation:
// where the host rounds a float32 operation on its own, the kernel writes the
// same operation with an explicit round-to-nearest intrinsic (__fadd_rn,
// __fmul_rn, ...), which nvcc never contracts into a fused multiply-add; the
// only fused operations are the __fmaf_rn the host mirrors with math.FMA.
// So the element-wise kernels, the copies, the scatters and the Adam step
// give the host's bits. Sums the host accumulates in float64 are
// accumulated in float64 here too; where they run as a tree over a block,
// the tree has a fixed shape (it depends on the sizes only), so results are
// the same from run to run and from GPU to GPU.
//
// Strided kernels take their shape and strides in an rg_dims passed by value
// as the last parameter (the launcher packs it into consecutive 8-byte
// argument slots: kernels.go, args.dims).
// ============================================================================

#define RG_MAX_RANK 8

// rg_dims: a shape of rank ≤ 8 with two sets of element strides. aux is a
// second count some kernels use (see each kernel).
struct rg_dims {
    int rank, aux;
    int dim[RG_MAX_RANK];
    int s1[RG_MAX_RANK];
    int s2[RG_MAX_RANK];
};

// rg_conv: accel.ConvGeom with the output size.
struct rg_conv {
    int H, W, KH, KW, SH, SW, PH, PW, DH, DW, Ho, Wo;
};

// block_sum_d: the float64 sum of v over the block, in a tree whose shape
// depends only on blockDim.x (a power of two, at most 1024); every thread
// gets the result. sh holds blockDim.x doubles; it may be reused after the
// call returns.
__device__ double block_sum_d(double v, double* sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x >> 1; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] = __dadd_rn(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    v = sh[0];
    __syncthreads();
    return v;
}

// ---- fill, axpy, clamp -----------------------------------------------------

extern "C" __global__ void rg_fill_f32(float* dst, float v, long long n) {
    GRID_STRIDE(i, n) dst[i] = v;
}

// dst += alpha·src (two roundings, as the host's AddScaled). dst may equal
// src.
extern "C" __global__ void rg_axpy_f32(float* dst, const float* src, float alpha, long long n) {
    GRID_STRIDE(i, n) dst[i] = __fadd_rn(dst[i], __fmul_rn(alpha, src[i]));
}

// Go's max and min for float32: NaN if either is; max prefers +0 to −0, min
// −0 to +0.
__device__ __forceinline__ float rg_go_max(float a, float b) {
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) return signbit(a) ? b : a;
    return a > b ? a : b;
}

__device__ __forceinline__ float rg_go_min(float a, float b) {
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) return signbit(a) ? a : b;
    return a < b ? a : b;
}

// dst = min(max(x, −c), c), a NaN staying NaN (torch.clamp; the host's
// Clamp with Go's min and max).
extern "C" __global__ void rg_clamp_f32(float* dst, float c, long long n) {
    GRID_STRIDE(i, n) dst[i] = rg_go_min(rg_go_max(dst[i], -c), c);
}

// ---- strided broadcasting binary op ----------------------------------------
// dst (contiguous, shape s.dim[0..rank)) = a op b, element idx of a at
// Σ idx_i·s.s1[i], of b at Σ idx_i·s.s2[i] (stride 0 broadcasts). op: 0 add,
// 1 sub, 2 mul, 3 masked fill (a where b ≠ 0, value elsewhere). dst may
// equal a or b when that operand is contiguous with dst's shape.

__device__ __forceinline__ void rg_offsets(long long i, const rg_dims& s, long long* o1, long long* o2) {
    long long a = 0, b = 0;
    for (int d = s.rank - 1; d >= 0; d--) {
        const long long q = i / s.dim[d];
        const long long idx = i - q * s.dim[d];
        i = q;
        a += idx * s.s1[d];
        b += idx * s.s2[d];
    }
    *o1 = a;
    *o2 = b;
}

extern "C" __global__ void rg_binary_f32(float* dst, const float* a, const float* b, long long n,
                                         int op, float value, rg_dims s) {
    GRID_STRIDE(i, n) {
        long long ia, ib;
        rg_offsets(i, s, &ia, &ib);
        const float x = a[ia], y = b[ib];
        float r;
        switch (op) {
        case 0: r = __fadd_rn(x, y); break;
        case 1: r = __fsub_rn(x, y); break;
        case 2: r = __fmul_rn(x, y); break;
        default: r = y != 0.f ? x : value; break;
        }
        dst[i] = r;
    }
}

// ---- strided gather (permute) ----------------------------------------------
// dst (contiguous, shape s.dim) element idx = src[Σ idx_i·s.s1[i]].
// dst must not overlap src.
extern "C" __global__ void rg_gather_strided_f32(float* __restrict__ dst,
                                                 const float* __restrict__ src, long long n,
                                                 rg_dims s) {
    GRID_STRIDE(i, n) {
        long long is, unused;
        rg_offsets(i, s, &is, &unused);
        dst[i] = src[is];
    }
}

// ---- sum over dimensions ---------------------------------------------------
// The launcher splits the source's dimensions into the kept ones (a nonzero
// destination stride) and the summed ones: s.dim[0..rank) are the kept
// dimensions, with source strides s.s1 and destination strides s.s2, then
// s.dim[rank..rank+aux) the summed ones, with source strides s.s1. There are
// K kept positions (distinct destination elements: the launcher checks the
// strides do not alias) and R summed positions for each.

__device__ __forceinline__ void rg_kept_offsets(long long k, const rg_dims& s, long long* src, long long* dst) {
    long long a = 0, b = 0;
    for (int d = s.rank - 1; d >= 0; d--) {
        const long long q = k / s.dim[d];
        const long long idx = k - q * s.dim[d];
        k = q;
        a += idx * s.s1[d];
        b += idx * s.s2[d];
    }
    *src = a;
    *dst = b;
}

__device__ __forceinline__ long long rg_summed_offset(long long r, const rg_dims& s) {
    long long a = 0;
    for (int d = s.rank + s.aux - 1; d >= s.rank; d--) {
        const long long q = r / s.dim[d];
        a += (r - q * s.dim[d]) * s.s1[d];
        r = q;
    }
    return a;
}

__device__ __forceinline__ void rg_store_sum(float* dst, double acc, int accumulate) {
    *dst = accumulate ? __fadd_rn(*dst, (float)acc) : (float)acc;
}

// One thread per kept position sums its R elements in row-major order, as
// the host does (the same float64 additions in the same order).
extern "C" __global__ void rg_reduce_serial_f32(float* dst, const float* __restrict__ src,
                                                long long K, long long R, int accumulate,
                                                rg_dims s) {
    GRID_STRIDE(k, K) {
        long long so, dofs;
        rg_kept_offsets(k, s, &so, &dofs);
        int idx[RG_MAX_RANK];
        for (int d = 0; d < RG_MAX_RANK; d++) idx[d] = 0;
        double acc = 0.0;
        long long o = so;
        const int lo = s.rank, hi = s.rank + s.aux;
        for (long long r = 0; r < R; r++) {
            acc = __dadd_rn(acc, (double)src[o]);
            for (int d = hi - 1; d >= lo; d--) {  // odometer over the summed dimensions
                o += s.s1[d];
                if (++idx[d] < s.dim[d]) break;
                o -= (long long)s.s1[d] * s.dim[d];
                idx[d] = 0;
            }
        }
        rg_store_sum(dst + dofs, acc, accumulate);
    }
}

// One block per kept position: each thread sums every blockDim.x-th of its
// R elements in float64, then block_sum_d. blockDim.x is a power of two.
extern "C" __global__ void rg_reduce_block_f32(float* dst, const float* __restrict__ src,
                                               long long K, long long R, int accumulate,
                                               rg_dims s) {
    __shared__ double sh[1024];
    for (long long k = blockIdx.x; k < K; k += gridDim.x) {
        long long so, dofs;
        rg_kept_offsets(k, s, &so, &dofs);
        double acc = 0.0;
        for (long long r = threadIdx.x; r < R; r += blockDim.x)
            acc = __dadd_rn(acc, (double)src[so + rg_summed_offset(r, s)]);
        acc = block_sum_d(acc, sh);
        if (threadIdx.x == 0) rg_store_sum(dst + dofs, acc, accumulate);
    }
}

// ---- activation backward ---------------------------------------------------
// dx += dy·f′ in terms of the output y. act: 0 ReLU (dy where y > 0), 1 tanh
// (dy·(1 − y²)), 2 sigmoid (dy·y·(1 − y)). Host rounding, operation by
// operation.
extern "C" __global__ void rg_act_backward_f32(float* dx, const float* dy, const float* y,
                                               long long n, int act) {
    GRID_STRIDE(i, n) {
        const float v = y[i], g = dy[i];
        switch (act) {
        case 0:
            if (v > 0.f) dx[i] = __fadd_rn(dx[i], g);
            break;
        case 1:
            dx[i] = __fadd_rn(dx[i], __fmul_rn(g, __fsub_rn(1.f, __fmul_rn(v, v))));
            break;
        default:
            dx[i] = __fadd_rn(dx[i], __fmul_rn(__fmul_rn(g, v), __fsub_rn(1.f, v)));
            break;
        }
    }
}

// ---- softmax backward ------------------------------------------------------
// One block per row of (rows, cols); blockDim.x a power of two.
//   softmax:     dx += y ⊙ (dy − Σ dy·y)
//   log-softmax: dx += dy − exp(y)·Σ dy
// with the sums in float64 (internal/kernels.SoftmaxBackward and
// LogSoftmaxBackward).
extern "C" __global__ void rg_softmax_backward_f32(float* dx, const float* dy, const float* y,
                                                   int rows, int cols, int logSoftmax) {
    __shared__ double sh[1024];
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const long long off = (long long)row * cols;
        const float *g = dy + off, *v = y + off;
        float* x = dx + off;
        double s = 0.0;
        for (int j = threadIdx.x; j < cols; j += blockDim.x)
            s = __dadd_rn(s, logSoftmax ? (double)g[j] : __dmul_rn((double)g[j], (double)v[j]));
        s = block_sum_d(s, sh);
        if (logSoftmax) {
            for (int j = threadIdx.x; j < cols; j += blockDim.x)
                x[j] = __fadd_rn(x[j], __fsub_rn(g[j], (float)__dmul_rn(exp((double)v[j]), s)));
        } else {
            const float dot = (float)s;
            for (int j = threadIdx.x; j < cols; j += blockDim.x)
                x[j] = __fadd_rn(x[j], __fmul_rn(v[j], __fsub_rn(g[j], dot)));
        }
    }
}

// ---- normalisation without affine (training) -------------------------------
// One block per row of src (rows, cols): x̂ = (x − μ)/σ to dst and 1/σ to
// inv, statistics in float64 (internal/kernels.Normalize):
//   r2gen != 0: σ = std + eps, the unbiased std (NaN for one column, as torch)
//   r2gen == 0: σ = sqrt(var + eps), the biased variance.
// blockDim.x a power of two. dst may equal src.
extern "C" __global__ void rg_normalize_f32(float* dst, float* __restrict__ inv, const float* src,
                                            int rows, int cols, double eps, int r2gen) {
    __shared__ double sh[1024];
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const long long off = (long long)row * cols;
        const float* x = src + off;
        float* y = dst + off;
        double s = 0.0;
        for (int j = threadIdx.x; j < cols; j += blockDim.x) s = __dadd_rn(s, (double)x[j]);
        const double mean = __ddiv_rn(block_sum_d(s, sh), (double)cols);
        double ss = 0.0;
        for (int j = threadIdx.x; j < cols; j += blockDim.x) {
            const double d = __dsub_rn((double)x[j], mean);
            ss = __dadd_rn(ss, __dmul_rn(d, d));
        }
        ss = block_sum_d(ss, sh);
        double is;
        if (r2gen) {
            const double sd = cols > 1 ? sqrt(__ddiv_rn(ss, (double)(cols - 1))) : __longlong_as_double(0x7ff8000000000000LL);
            is = __ddiv_rn(1.0, __dadd_rn(sd, eps));
        } else {
            is = __ddiv_rn(1.0, sqrt(__dadd_rn(__ddiv_rn(ss, (double)cols), eps)));
        }
        for (int j = threadIdx.x; j < cols; j += blockDim.x)
            y[j] = (float)__dmul_rn(__dsub_rn((double)x[j], mean), is);
        if (threadIdx.x == 0) inv[row] = (float)is;
    }
}

// dx += the gradient of rg_normalize_f32 given dy, its output y and inv
// (internal/kernels.NormalizeBackward, in float64):
//   standard: dx += inv·(dy − mean(dy) − x̂·mean(dy·x̂))
//   r2gen:    dx += inv·(dy − mean(dy)) − c·x̂/inv, with s = 1/inv − eps and
//             c = inv²·(Σ dy·x̂/inv)/((n − 1)·s) (0 for a constant row, s = 0).
// One block per row; blockDim.x a power of two.
extern "C" __global__ void rg_normalize_backward_f32(float* dx, const float* dy, const float* y,
                                                     const float* inv, int rows, int cols,
                                                     double eps, int r2gen) {
    __shared__ double sh[1024];
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const long long off = (long long)row * cols;
        const float *g = dy + off, *v = y + off;
        float* x = dx + off;
        const double is = (double)inv[row];
        double sdy = 0.0, sdyy = 0.0;
        for (int j = threadIdx.x; j < cols; j += blockDim.x) {
            sdy = __dadd_rn(sdy, (double)g[j]);
            sdyy = __dadd_rn(sdyy, __dmul_rn((double)g[j], (double)v[j]));
        }
        sdy = block_sum_d(sdy, sh);
        sdyy = block_sum_d(sdyy, sh);
        const double mdy = __ddiv_rn(sdy, (double)cols);
        if (r2gen) {
            const double s = __dsub_rn(__ddiv_rn(1.0, is), eps);
            double c = 0.0;
            if (s != 0.0)
                c = __ddiv_rn(__dmul_rn(__dmul_rn(is, is), __ddiv_rn(sdyy, is)),
                              __dmul_rn((double)(cols - 1), s));
            for (int j = threadIdx.x; j < cols; j += blockDim.x) {
                const double xm = __ddiv_rn((double)v[j], is);
                const double d = __dsub_rn(__dmul_rn(is, __dsub_rn((double)g[j], mdy)), __dmul_rn(c, xm));
                x[j] = __fadd_rn(x[j], (float)d);
            }
        } else {
            const double myy = __ddiv_rn(sdyy, (double)cols);
            for (int j = threadIdx.x; j < cols; j += blockDim.x) {
                const double d = __dmul_rn(is, __dsub_rn(__dsub_rn((double)g[j], mdy), __dmul_rn((double)v[j], myy)));
                x[j] = __fadd_rn(x[j], (float)d);
            }
        }
    }
}

// ---- strided row copy ------------------------------------------------------
// Row r of src (at r·lds; lds 0 repeats one row) copied to, or with
// accumulate added to, row r of dst (at r·ldd), cols floats each.
extern "C" __global__ void rg_copy_rows_f32(float* dst, int ldd, const float* src, int lds,
                                            int rows, int cols, int accumulate) {
    const long long n = (long long)rows * cols;
    GRID_STRIDE(i, n) {
        const long long r = i / cols;
        const int c = (int)(i - r * cols);
        const float v = src[r * lds + c];
        float* d = dst + r * ldd + c;
        *d = accumulate ? __fadd_rn(*d, v) : v;
    }
}

// ---- scatter-add (embedding backward) --------------------------------------
// dst[ids[i], :] += src[i, :] for i < n, dst (vocab, dim); ids outside
// [0, vocab) are skipped. Without atomics: block (x, y) owns columns
// x·blockDim.x ... and the ids in [y·vocab/gridDim.y, (y+1)·vocab/gridDim.y);
// each thread walks all n ids in order and adds the rows it owns. So every
// element of dst receives its rows in order of i, one addition at a time,
// exactly as on the host: the result does not depend on the schedule.
extern "C" __global__ void rg_scatter_add_f32(float* dst, const float* __restrict__ src,
                                              const int* __restrict__ ids, int n, int vocab,
                                              int dim) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int lo = (int)((long long)blockIdx.y * vocab / gridDim.y);
    const int hi = (int)((long long)(blockIdx.y + 1) * vocab / gridDim.y);
    if (j >= dim) return;
    for (int i = 0; i < n; i++) {
        const int id = ids[i];
        if (id < lo || id >= hi) continue;
        float* d = dst + (long long)id * dim + j;
        *d = __fadd_rn(*d, src[(long long)i * dim + j]);
    }
}

// ---- convolution unfolding -------------------------------------------------
// im2col: one image x (c, H, W) into dst (c·KH·KW, Ho·Wo), row stride ldd:
// dst[(ch·KH + ky)·KW + kx][oy·Wo + ox] = x[ch][oy·SH − PH + ky·DH][ox·SW −
// PW + kx·DW], 0 in the padding (internal/kernels.Im2col). One thread per
// element of the column matrix.
extern "C" __global__ void rg_im2col_f32(float* __restrict__ dst, int ldd,
                                         const float* __restrict__ x, int c, rg_conv g) {
    const int npix = g.Ho * g.Wo;
    const long long n = (long long)c * g.KH * g.KW * npix;
    GRID_STRIDE(i, n) {
        const long long row = i / npix;
        const int p = (int)(i - row * npix);
        const int oy = p / g.Wo, ox = p - oy * g.Wo;
        const int kx = (int)(row % g.KW);
        const long long t = row / g.KW;
        const int ky = (int)(t % g.KH);
        const long long ch = t / g.KH;
        const int iy = oy * g.SH - g.PH + ky * g.DH, ix = ox * g.SW - g.PW + kx * g.DW;
        float v = 0.f;
        if (iy >= 0 && iy < g.H && ix >= 0 && ix < g.W) v = x[(ch * g.H + iy) * g.W + ix];
        dst[row * ldd + p] = v;
    }
}

// col2im, im2col's adjoint: dx (c, H, W) += every entry of col (c·KH·KW,
// Ho·Wo), row stride ldc, read from it. One thread per element of dx, which
// adds its taps in the host's order (ky, then kx): no atomics, the host's
// bits.
extern "C" __global__ void rg_col2im_f32(float* dx, const float* __restrict__ col, int ldc,
                                         int c, rg_conv g) {
    const long long n = (long long)c * g.H * g.W;
    GRID_STRIDE(i, n) {
        const int ix = (int)(i % g.W);
        const long long t = i / g.W;
        const int iy = (int)(t % g.H);
        const long long ch = t / g.H;
        float acc = dx[i];
        for (int ky = 0; ky < g.KH; ky++) {
            const int ty = iy + g.PH - ky * g.DH;
            if (ty < 0 || ty % g.SH != 0) continue;
            const int oy = ty / g.SH;
            if (oy >= g.Ho) continue;
            for (int kx = 0; kx < g.KW; kx++) {
                const int tx = ix + g.PW - kx * g.DW;
                if (tx < 0 || tx % g.SW != 0) continue;
                const int ox = tx / g.SW;
                if (ox >= g.Wo) continue;
                const long long row = (ch * g.KH + ky) * g.KW + kx;
                acc = __fadd_rn(acc, col[row * ldc + (long long)oy * g.Wo + ox]);
            }
        }
        dx[i] = acc;
    }
}

// ---- max pooling -----------------------------------------------------------
// dst (planes, Ho, Wo) = the maximum of each window of x (planes, H, W); arg
// = its index iy·W + ix in the plane (the first maximum scanning rows then
// columns; a NaN wins; −1 and −∞ for a window of padding only), as
// internal/kernels.MaxPool. One thread per output.
extern "C" __global__ void rg_maxpool_f32(float* __restrict__ dst, int* __restrict__ arg,
                                          const float* __restrict__ x, int planes, rg_conv g) {
    const int npix = g.Ho * g.Wo;
    const long long n = (long long)planes * npix;
    GRID_STRIDE(i, n) {
        const long long pl = i / npix;
        const int p = (int)(i - pl * npix);
        const int oy = p / g.Wo, ox = p - oy * g.Wo;
        const float* plane = x + pl * g.H * g.W;
        float best = 0.f;
        int at = -1;
        for (int ky = 0; ky < g.KH; ky++) {
            const int iy = oy * g.SH - g.PH + ky * g.DH;
            if (iy < 0 || iy >= g.H) continue;
            for (int kx = 0; kx < g.KW; kx++) {
                const int ix = ox * g.SW - g.PW + kx * g.DW;
                if (ix < 0 || ix >= g.W) continue;
                const float v = plane[iy * g.W + ix];
                if (at < 0 || v > best || v != v) {
                    best = v;
                    at = iy * g.W + ix;
                }
            }
        }
        dst[i] = at < 0 ? -INFINITY : best;
        arg[i] = at;
    }
}

// dx[p][arg] += dy for each output of plane p (arg −1, or outside the
// plane, is skipped). One thread per plane walks its outputs in order, as
// the host does: overlapping windows add into the same input in the host's
// order, without atomics.
extern "C" __global__ void rg_maxpool_backward_f32(float* dx, const float* __restrict__ dy,
                                                   const int* __restrict__ arg, int planes,
                                                   int planeIn, int planeOut) {
    GRID_STRIDE(pl, (long long)planes) {
        float* d = dx + pl * planeIn;
        const long long o = pl * planeOut;
        for (int i = 0; i < planeOut; i++) {
            const int a = arg[o + i];
            if (a >= 0 && a < planeIn) d[a] = __fadd_rn(d[a], dy[o + i]);
        }
    }
}

// ---- Adam ------------------------------------------------------------------
// One Adam (AMSGrad when amsgrad) step over n parameters, rounding for
// rounding as accel.AdamUpdate (ATen's CPU step): the two additions ATen's
// vectorised add(x, alpha) fuses are __fmaf_rn, every other operation is
// rounded on its own.
//   decoupled (AdamW): p = p·decay first; else with wd ≠ 0: g = fma(p, wd, g)
//   m = fma(g, 1−β1, m·β1)
//   v = v·β2 + ((1−β2)·g)·g
//   v̂ = amsgrad ? vmax = max(vmax, v) : v
//   p += (negStep·m) / (sqrt(v̂)/bc2sqrt + eps)

extern "C" __global__ void rg_adam_f32(float* p, const float* __restrict__ g, float* m, float* v,
                                       float* vmax, long long n, float wd, float decay,
                                       int decoupled, float beta1, float omb1, float beta2,
                                       float omb2, float bc2sqrt, float eps, float negStep,
                                       int amsgrad) {
    GRID_STRIDE(i, n) {
        float gi = g[i], pi = p[i];
        if (decoupled) {
            pi = __fmul_rn(pi, decay);
        } else if (wd != 0.f) {
            gi = __fmaf_rn(pi, wd, gi);
        }
        const float mi = __fmaf_rn(gi, omb1, __fmul_rn(m[i], beta1));
        float vi = __fadd_rn(__fmul_rn(v[i], beta2), __fmul_rn(__fmul_rn(omb2, gi), gi));
        m[i] = mi;
        v[i] = vi;
        if (amsgrad) {
            vi = rg_go_max(vmax[i], vi);
            vmax[i] = vi;
        }
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2sqrt), eps);
        p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(negStep, mi), denom));
    }
}
