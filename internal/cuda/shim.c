//go:build cuda

// shim.c: the CUDA driver API and cuBLAS, reached through dlopen()/dlsym().
//
// Why not gorgonia.org/cu: its package init calls cuInit and os.Exit(1)s on
// failure, and it links libcuda.so.1 at load time, so any binary that imports
// it dies (exit 127 or 1) on a machine without a GPU before main or a test can
// run. Opening the libraries here, on demand, lets NewEngine return an error
// instead, lets GPU tests t.Skip, and lets the same binary pick whichever
// libcublas.so.N the host has (13 on the CUDA 13 machines, 12, 11).
//
// Every entry point that touches a context first makes the engine's context
// current on the calling OS thread (cuCtxSetCurrent is a thread-local store),
// so Go may call in from any goroutine without runtime.LockOSThread.
#include "shim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- constants (values from cuda.h / cublas_api.h; checked below) ---- */
#define RG_CU_JIT_ERROR_LOG_BUFFER 5
#define RG_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
#define RG_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define RG_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define RG_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define RG_CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH 37
#define RG_CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE 36
#define RG_CU_STREAM_DEFAULT 0

/* ---- the driver functions we use: X(name, return type, parameter list) ---- */
#define RG_DRIVER_FUNCS(X)                                                                  \
	X(cuInit, rg_CUresult, (unsigned int flags))                                            \
	X(cuDriverGetVersion, rg_CUresult, (int *v))                                            \
	X(cuGetErrorName, rg_CUresult, (rg_CUresult e, const char **s))                         \
	X(cuGetErrorString, rg_CUresult, (rg_CUresult e, const char **s))                       \
	X(cuDeviceGetCount, rg_CUresult, (int *n))                                              \
	X(cuDeviceGet, rg_CUresult, (rg_CUdevice * d, int ordinal))                             \
	X(cuDeviceGetName, rg_CUresult, (char *name, int len, rg_CUdevice d))                   \
	X(cuDeviceGetAttribute, rg_CUresult, (int *v, unsigned int attr, rg_CUdevice d))        \
	X(cuDeviceTotalMem_v2, rg_CUresult, (size_t * bytes, rg_CUdevice d))                    \
	X(cuDevicePrimaryCtxRetain, rg_CUresult, (rg_CUcontext * ctx, rg_CUdevice d))           \
	X(cuDevicePrimaryCtxRelease_v2, rg_CUresult, (rg_CUdevice d))                           \
	X(cuCtxSetCurrent, rg_CUresult, (rg_CUcontext ctx))                                     \
	X(cuMemGetInfo_v2, rg_CUresult, (size_t * freeBytes, size_t * totalBytes))              \
	X(cuMemAlloc_v2, rg_CUresult, (rg_CUdeviceptr * p, size_t n))                           \
	X(cuMemFree_v2, rg_CUresult, (rg_CUdeviceptr p))                                        \
	X(cuMemcpyHtoDAsync_v2, rg_CUresult,                                                    \
	  (rg_CUdeviceptr dst, const void *src, size_t n, rg_CUstream s))                       \
	X(cuMemcpyDtoHAsync_v2, rg_CUresult,                                                    \
	  (void *dst, rg_CUdeviceptr src, size_t n, rg_CUstream s))                             \
	X(cuMemcpyDtoDAsync_v2, rg_CUresult,                                                    \
	  (rg_CUdeviceptr dst, rg_CUdeviceptr src, size_t n, rg_CUstream s))                    \
	X(cuMemsetD32Async, rg_CUresult,                                                        \
	  (rg_CUdeviceptr dst, unsigned int v, size_t n, rg_CUstream s))                        \
	X(cuMemsetD8Async, rg_CUresult,                                                         \
	  (rg_CUdeviceptr dst, unsigned char v, size_t n, rg_CUstream s))                       \
	X(cuStreamCreate, rg_CUresult, (rg_CUstream * s, unsigned int flags))                   \
	X(cuStreamDestroy_v2, rg_CUresult, (rg_CUstream s))                                     \
	X(cuStreamSynchronize, rg_CUresult, (rg_CUstream s))                                    \
	X(cuModuleLoadDataEx, rg_CUresult,                                                      \
	  (rg_CUmodule * m, const void *image, unsigned int nopts, unsigned int *opts,          \
	   void **vals))                                                                        \
	X(cuModuleUnload, rg_CUresult, (rg_CUmodule m))                                         \
	X(cuModuleGetFunction, rg_CUresult, (rg_CUfunction * f, rg_CUmodule m, const char *name)) \
	X(cuLaunchKernel, rg_CUresult,                                                          \
	  (rg_CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, \
	   unsigned int by, unsigned int bz, unsigned int shmem, rg_CUstream s, void **params,  \
	   void **extra))

#define RG_CUBLAS_FUNCS(X)                                                                  \
	X(cublasCreate_v2, rg_cublasStatus, (rg_cublasHandle * h))                              \
	X(cublasDestroy_v2, rg_cublasStatus, (rg_cublasHandle h))                               \
	X(cublasGetVersion_v2, rg_cublasStatus, (rg_cublasHandle h, int *v))                    \
	X(cublasSetStream_v2, rg_cublasStatus, (rg_cublasHandle h, rg_CUstream s))              \
	X(cublasSetMathMode, rg_cublasStatus, (rg_cublasHandle h, unsigned int mode))           \
	X(cublasSgemm_v2, rg_cublasStatus,                                                      \
	  (rg_cublasHandle h, unsigned int opA, unsigned int opB, int m, int n, int k,          \
	   const float *alpha, const float *A, int lda, const float *B, int ldb,                \
	   const float *beta, float *C, int ldc))                                               \
	X(cublasSgemmStridedBatched, rg_cublasStatus,                                           \
	  (rg_cublasHandle h, unsigned int opA, unsigned int opB, int m, int n, int k,          \
	   const float *alpha, const float *A, int lda, long long strideA, const float *B,      \
	   int ldb, long long strideB, const float *beta, float *C, int ldc, long long strideC, \
	   int batch))

#define RG_TYPEDEF(name, ret, params) typedef ret(*rg_##name##_fn) params;
RG_DRIVER_FUNCS(RG_TYPEDEF)
RG_CUBLAS_FUNCS(RG_TYPEDEF)
#define RG_POINTER(name, ret, params) static rg_##name##_fn p_##name;
RG_DRIVER_FUNCS(RG_POINTER)
RG_CUBLAS_FUNCS(RG_POINTER)

/* ---- optional: check every prototype against the real headers ----
   .ci/cuda-deps.sh puts CUDA 11.8's headers on CGO_CFLAGS, so CI compiles
   this; a build without headers uses the declarations above unchecked. */
#if defined(__has_include) && !defined(RADGEN_NO_CUDA_HEADERS)
#if __has_include(<cuda.h>) && __has_include(<cublas_v2.h>)
#define RG_HAVE_CUDA_H 1
#include <cuda.h>
#include <cublas_v2.h>
#define RG_CHECK(name, ret, params)                                              \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&name), rg_##name##_fn), \
	               #name ": radgen's prototype differs from the CUDA headers");
RG_DRIVER_FUNCS(RG_CHECK)
RG_CUBLAS_FUNCS(RG_CHECK)
#define RG_SAME(a, b) _Static_assert((a) == (b), #a " != " #b);
RG_SAME(RG_CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER)
RG_SAME(RG_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
RG_SAME(RG_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
RG_SAME(RG_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
RG_SAME(RG_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
RG_SAME(RG_CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)
RG_SAME(RG_CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)
RG_SAME(RG_CU_STREAM_DEFAULT, CU_STREAM_DEFAULT)
RG_SAME(0, CUBLAS_OP_N)
RG_SAME(1, CUBLAS_OP_T)
RG_SAME(0, CUBLAS_DEFAULT_MATH)
RG_SAME(2, CUBLAS_PEDANTIC_MATH)
RG_SAME(3, CUBLAS_TF32_TENSOR_OP_MATH)
RG_SAME(sizeof(rg_CUdeviceptr), sizeof(CUdeviceptr))
#endif
#endif

int rg_have_cuda_headers(void) {
#ifdef RG_HAVE_CUDA_H
	return 1;
#else
	return 0;
#endif
}

static void *driver_lib;
static void *cublas_lib;

static void set_err(char *err, int errlen, const char *msg, const char *detail) {
	if (err && errlen > 0) snprintf(err, (size_t)errlen, "%s%s", msg, detail ? detail : "");
}

int rg_driver_load(const char *path, char *err, int errlen) {
	if (driver_lib) return 0;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		set_err(err, errlen, "", dlerror());
		return RG_SHIM_NO_DRIVER;
	}
#define RG_SYM(name, ret, params)                                   \
	p_##name = (rg_##name##_fn)dlsym(h, #name);                      \
	if (!p_##name) {                                                 \
		set_err(err, errlen, "missing symbol ", #name);              \
		dlclose(h);                                                  \
		return RG_SHIM_NO_SYMBOL;                                    \
	}
	RG_DRIVER_FUNCS(RG_SYM)
	driver_lib = h;
	return (int)p_cuInit(0);
}

int rg_cublas_load(const char *path, char *err, int errlen) {
	if (cublas_lib) return 0;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		set_err(err, errlen, "", dlerror());
		return RG_SHIM_NO_CUBLAS;
	}
	RG_CUBLAS_FUNCS(RG_SYM)
#undef RG_SYM
	cublas_lib = h;
	return 0;
}

int rg_cublas_loaded(void) { return cublas_lib != NULL; }

static const char *blas_names[] = {
    "CUBLAS_STATUS_SUCCESS",          "CUBLAS_STATUS_NOT_INITIALIZED",
    "", "CUBLAS_STATUS_ALLOC_FAILED", "", "", "",
    "CUBLAS_STATUS_INVALID_VALUE",    "CUBLAS_STATUS_ARCH_MISMATCH",
    "", "", "CUBLAS_STATUS_MAPPING_ERROR", "", "CUBLAS_STATUS_EXECUTION_FAILED",
    "CUBLAS_STATUS_INTERNAL_ERROR",   "CUBLAS_STATUS_NOT_SUPPORTED",
    "CUBLAS_STATUS_LICENSE_ERROR",
};

const char *rg_error_name(int status) {
	if (status >= RG_SHIM_BASE) {
		switch (status) {
		case RG_SHIM_NO_DRIVER: return "RG_SHIM_NO_DRIVER";
		case RG_SHIM_NO_SYMBOL: return "RG_SHIM_NO_SYMBOL";
		case RG_SHIM_NO_CUBLAS: return "RG_SHIM_NO_CUBLAS";
		case RG_SHIM_NOT_LOADED: return "RG_SHIM_NOT_LOADED";
		case RG_SHIM_TOO_MANY_ARGS: return "RG_SHIM_TOO_MANY_ARGS";
		}
		return "RG_SHIM_UNKNOWN";
	}
	if (status >= RG_BLAS_BASE) {
		int s = status - RG_BLAS_BASE;
		if (s >= 0 && s < (int)(sizeof blas_names / sizeof blas_names[0]) && blas_names[s][0])
			return blas_names[s];
		return "CUBLAS_STATUS_UNKNOWN";
	}
	const char *s = NULL;
	if (p_cuGetErrorName && p_cuGetErrorName((rg_CUresult)status, &s) == 0 && s) return s;
	return "CUDA_ERROR_UNKNOWN";
}

const char *rg_error_string(int status) {
	const char *s = NULL;
	if (status > 0 && status < RG_BLAS_BASE && p_cuGetErrorString &&
	    p_cuGetErrorString((rg_CUresult)status, &s) == 0 && s)
		return s;
	return "";
}

#define RG_LOADED()                            \
	do {                                       \
		if (!driver_lib) return RG_SHIM_NOT_LOADED; \
	} while (0)
#define RG_TRY(call)                       \
	do {                                   \
		rg_CUresult r_ = (call);           \
		if (r_ != 0) return (int)r_;       \
	} while (0)
#define RG_ENTER(c)                            \
	do {                                       \
		RG_LOADED();                           \
		RG_TRY(p_cuCtxSetCurrent((c)->ctx));   \
	} while (0)
#define RG_BLAS(call)                                  \
	do {                                               \
		rg_cublasStatus s_ = (call);                   \
		if (s_ != 0) return RG_BLAS_BASE + (int)s_;    \
	} while (0)

int rg_driver_version(int *version) {
	RG_LOADED();
	return (int)p_cuDriverGetVersion(version);
}

int rg_device_count(int *n) {
	RG_LOADED();
	return (int)p_cuDeviceGetCount(n);
}

int rg_ctx_open(int ordinal, rg_ctx **out) {
	RG_LOADED();
	rg_ctx *c = (rg_ctx *)calloc(1, sizeof *c);
	if (!c) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
	rg_CUresult r = p_cuDeviceGet(&c->dev, ordinal);
	if (r == 0) r = p_cuDevicePrimaryCtxRetain(&c->ctx, c->dev);
	if (r != 0) {
		free(c);
		return (int)r;
	}
	r = p_cuCtxSetCurrent(c->ctx);
	if (r == 0) r = p_cuStreamCreate(&c->stream, RG_CU_STREAM_DEFAULT);
	if (r != 0) {
		p_cuDevicePrimaryCtxRelease_v2(c->dev);
		free(c);
		return (int)r;
	}
	if (cublas_lib) {
		rg_cublasStatus s = p_cublasCreate_v2(&c->blas);
		if (s == 0) s = p_cublasSetStream_v2(c->blas, c->stream);
		if (s != 0) {
			if (c->blas) p_cublasDestroy_v2(c->blas);
			p_cuStreamDestroy_v2(c->stream);
			p_cuDevicePrimaryCtxRelease_v2(c->dev);
			free(c);
			return RG_BLAS_BASE + (int)s;
		}
	}
	*out = c;
	return 0;
}

int rg_ctx_close(rg_ctx *c) {
	RG_LOADED();
	int first = 0;
	rg_CUresult r = p_cuCtxSetCurrent(c->ctx);
	if (r == 0) r = p_cuStreamSynchronize(c->stream);
	if (r != 0) first = (int)r;
	if (c->blas) {
		rg_cublasStatus s = p_cublasDestroy_v2(c->blas);
		if (s != 0 && !first) first = RG_BLAS_BASE + (int)s;
	}
	r = p_cuStreamDestroy_v2(c->stream);
	if (r != 0 && !first) first = (int)r;
	p_cuCtxSetCurrent(NULL);
	r = p_cuDevicePrimaryCtxRelease_v2(c->dev);
	if (r != 0 && !first) first = (int)r;
	free(c);
	return first;
}

int rg_device_info(rg_ctx *c, char *name, int namelen, size_t *total, int *ccMajor, int *ccMinor,
                   int *smCount, int *busWidthBits, int *memClockKHz) {
	RG_ENTER(c);
	RG_TRY(p_cuDeviceGetName(name, namelen, c->dev));
	RG_TRY(p_cuDeviceTotalMem_v2(total, c->dev));
	RG_TRY(p_cuDeviceGetAttribute(ccMajor, RG_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->dev));
	RG_TRY(p_cuDeviceGetAttribute(ccMinor, RG_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->dev));
	RG_TRY(p_cuDeviceGetAttribute(smCount, RG_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->dev));
	/* Both may be reported as 0 by newer drivers; the caller treats 0 as unknown. */
	if (p_cuDeviceGetAttribute(busWidthBits, RG_CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, c->dev))
		*busWidthBits = 0;
	if (p_cuDeviceGetAttribute(memClockKHz, RG_CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, c->dev))
		*memClockKHz = 0;
	return 0;
}

int rg_mem_info(rg_ctx *c, size_t *freeBytes, size_t *totalBytes) {
	RG_ENTER(c);
	return (int)p_cuMemGetInfo_v2(freeBytes, totalBytes);
}

int rg_malloc(rg_ctx *c, size_t n, rg_CUdeviceptr *p) {
	RG_ENTER(c);
	return (int)p_cuMemAlloc_v2(p, n);
}

int rg_free(rg_ctx *c, rg_CUdeviceptr p) {
	RG_ENTER(c);
	return (int)p_cuMemFree_v2(p);
}

/* Host copies are stream-ordered and waited for: when they return, the Go
   memory involved is no longer read or written by the device. */
int rg_htod(rg_ctx *c, rg_CUdeviceptr dst, const void *src, size_t n) {
	RG_ENTER(c);
	RG_TRY(p_cuMemcpyHtoDAsync_v2(dst, src, n, c->stream));
	return (int)p_cuStreamSynchronize(c->stream);
}

int rg_dtoh(rg_ctx *c, void *dst, rg_CUdeviceptr src, size_t n) {
	RG_ENTER(c);
	RG_TRY(p_cuMemcpyDtoHAsync_v2(dst, src, n, c->stream));
	return (int)p_cuStreamSynchronize(c->stream);
}

int rg_dtod(rg_ctx *c, rg_CUdeviceptr dst, rg_CUdeviceptr src, size_t n) {
	RG_ENTER(c);
	return (int)p_cuMemcpyDtoDAsync_v2(dst, src, n, c->stream);
}

int rg_memset_d32(rg_ctx *c, rg_CUdeviceptr dst, unsigned int v, size_t n) {
	RG_ENTER(c);
	return (int)p_cuMemsetD32Async(dst, v, n, c->stream);
}

int rg_memset_d8(rg_ctx *c, rg_CUdeviceptr dst, unsigned char v, size_t n) {
	RG_ENTER(c);
	return (int)p_cuMemsetD8Async(dst, v, n, c->stream);
}

int rg_sync(rg_ctx *c) {
	RG_ENTER(c);
	return (int)p_cuStreamSynchronize(c->stream);
}

int rg_module_load(rg_ctx *c, const char *ptx, rg_CUmodule *m, char *log, int loglen) {
	RG_ENTER(c);
	unsigned int opts[2] = {RG_CU_JIT_ERROR_LOG_BUFFER, RG_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)(uintptr_t)(unsigned int)loglen};
	if (log && loglen > 0) log[0] = 0;
	return (int)p_cuModuleLoadDataEx(m, ptx, log && loglen > 0 ? 2 : 0, opts, vals);
}

int rg_module_unload(rg_ctx *c, rg_CUmodule m) {
	RG_ENTER(c);
	return (int)p_cuModuleUnload(m);
}

int rg_module_function(rg_ctx *c, rg_CUmodule m, const char *name, rg_CUfunction *f) {
	RG_ENTER(c);
	return (int)p_cuModuleGetFunction(f, m, name);
}

/* args holds one 8-byte slot per kernel parameter: pointers and 64-bit values
   fill it, 4-byte ints and floats sit in its low half (little-endian), which
   is what cuLaunchKernel reads for a 4-byte parameter. The driver copies the
   values during the call, so args may be reused as soon as it returns. */
int rg_launch(rg_ctx *c, rg_CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
              unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
              const uint64_t *args, int nargs) {
	RG_ENTER(c);
	if (nargs > RG_MAX_KERNEL_ARGS) return RG_SHIM_TOO_MANY_ARGS;
	void *params[RG_MAX_KERNEL_ARGS];
	for (int i = 0; i < nargs; i++) params[i] = (void *)&args[i];
	return (int)p_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, c->stream, params, NULL);
}

#define RG_BLAS_ENTER(c)                              \
	do {                                              \
		RG_ENTER(c);                                  \
		if (!(c)->blas) return RG_SHIM_NO_CUBLAS;     \
	} while (0)

int rg_blas_version(rg_ctx *c, int *version) {
	RG_BLAS_ENTER(c);
	RG_BLAS(p_cublasGetVersion_v2(c->blas, version));
	return 0;
}

int rg_blas_set_math_mode(rg_ctx *c, unsigned int mode) {
	RG_BLAS_ENTER(c);
	RG_BLAS(p_cublasSetMathMode(c->blas, mode));
	return 0;
}

/* Column-major, as cuBLAS itself; the row-major swap is done in Go. */
int rg_sgemm(rg_ctx *c, unsigned int opA, unsigned int opB, int m, int n, int k, float alpha,
             rg_CUdeviceptr A, int lda, rg_CUdeviceptr B, int ldb, float beta, rg_CUdeviceptr C,
             int ldc) {
	RG_BLAS_ENTER(c);
	RG_BLAS(p_cublasSgemm_v2(c->blas, opA, opB, m, n, k, &alpha, (const float *)(uintptr_t)A, lda,
	                         (const float *)(uintptr_t)B, ldb, &beta, (float *)(uintptr_t)C, ldc));
	return 0;
}

int rg_sgemm_strided_batched(rg_ctx *c, unsigned int opA, unsigned int opB, int m, int n, int k,
                             float alpha, rg_CUdeviceptr A, int lda, long long strideA,
                             rg_CUdeviceptr B, int ldb, long long strideB, float beta,
                             rg_CUdeviceptr C, int ldc, long long strideC, int batch) {
	RG_BLAS_ENTER(c);
	RG_BLAS(p_cublasSgemmStridedBatched(c->blas, opA, opB, m, n, k, &alpha,
	                                    (const float *)(uintptr_t)A, lda, strideA,
	                                    (const float *)(uintptr_t)B, ldb, strideB, &beta,
	                                    (float *)(uintptr_t)C, ldc, strideC, batch));
	return 0;
}
