// emu_simt.h: a tiny host emulation of the CUDA execution model, enough to
// run radgen.cu's kernels on the CPU (no GPU, no CUDA headers): blocks run
// one after another, each thread of a block is a std::thread, __syncthreads
// is a std::barrier and warp shuffles exchange through a per-warp buffer.
// Used by emu_check.cpp (.ci/cuda-check.sh) to test the kernels' indexing,
// masking and reductions in CI; the numerics of the device's libm are
// checked on a GPU by internal/cuda's TestGPU* tests.
#pragma once
#include <thread>
#include <barrier>
#include <vector>
#include <cmath>
#include <memory>
#include <cstdio>
#include <cstring>
struct dim3 { unsigned x = 1, y = 1, z = 1; };
thread_local dim3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
static std::barrier<>* g_bar;
static std::unique_ptr<std::barrier<>> g_warp[32];
static float g_wbuf[32][32];
inline void __syncthreads() { g_bar->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int o) {
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  g_wbuf[w][lane] = v; g_warp[w]->arrive_and_wait();
  float r = g_wbuf[w][lane ^ o]; g_warp[w]->arrive_and_wait(); return r;
}
// Rounding intrinsics: on the host each operation is rounded on its own
// already (x86-64 without -mfma: g++ cannot contract), and fmaf is fused.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
using std::signbit;
template <class F> void launch(dim3 grid, dim3 block, F f) {
  blockDim = block; gridDim = grid;
  unsigned n = block.x * block.y * block.z;
  for (unsigned bz = 0; bz < grid.z; bz++) for (unsigned by = 0; by < grid.y; by++) for (unsigned bx = 0; bx < grid.x; bx++) {
    std::barrier<> bar(n); g_bar = &bar;
    for (unsigned w = 0; w < (n + 31) / 32; w++) g_warp[w] = std::make_unique<std::barrier<>>(std::min(32u, n - 32 * w));
    std::vector<std::thread> ts;
    for (unsigned tz = 0; tz < block.z; tz++) for (unsigned ty = 0; ty < block.y; ty++) for (unsigned tx = 0; tx < block.x; tx++)
      ts.emplace_back([=] { threadIdx = {tx, ty, tz}; blockIdx = {bx, by, bz}; f(); });
    for (auto& t : ts) t.join();
  }
}
