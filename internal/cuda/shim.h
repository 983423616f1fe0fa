//go:build cuda

// shim.h: radgen's own, minimal binding to the CUDA driver API and cuBLAS.
//
// Nothing here links against libcuda or libcublas: shim.c dlopen()s them at
// run time (rg_driver_load, rg_cublas_load), so a binary built with the cuda
// tag starts on any machine and reports "no driver" / "no device" as errors.
// The types below mirror the few CUDA types the shim needs; when the real
// headers are on the include path, shim.c checks every prototype against
// them at compile time (see RG_HAVE_CUDA_H there).
#ifndef RADGEN_CUDA_SHIM_H
#define RADGEN_CUDA_SHIM_H

#include <stddef.h>
#include <stdint.h>

typedef unsigned int rg_CUresult;          /* CUresult (enum, unsigned in gcc) */
typedef int rg_CUdevice;                   /* CUdevice */
typedef unsigned long long rg_CUdeviceptr; /* CUdeviceptr (v2, 64-bit) */
typedef struct CUctx_st *rg_CUcontext;
typedef struct CUmod_st *rg_CUmodule;
typedef struct CUfunc_st *rg_CUfunction;
typedef struct CUstream_st *rg_CUstream;
typedef unsigned int rg_cublasStatus;      /* cublasStatus_t */
typedef struct cublasContext *rg_cublasHandle;

/* Status domains of the int every rg_* function returns:
   0                  success
   1..9999            a CUresult from the driver
   RG_BLAS_BASE + s   cublasStatus_t s
   RG_SHIM_BASE + e   a shim error below */
#define RG_BLAS_BASE 10000
#define RG_SHIM_BASE 20000
#define RG_SHIM_NO_DRIVER (RG_SHIM_BASE + 1) /* libcuda could not be opened */
#define RG_SHIM_NO_SYMBOL (RG_SHIM_BASE + 2) /* a required symbol is missing */
#define RG_SHIM_NO_CUBLAS (RG_SHIM_BASE + 3) /* libcublas could not be opened */
#define RG_SHIM_NOT_LOADED (RG_SHIM_BASE + 4)
#define RG_SHIM_TOO_MANY_ARGS (RG_SHIM_BASE + 5)

#define RG_MAX_KERNEL_ARGS 24

/* One engine's device state. Every call below makes c->ctx current on the
   calling OS thread first, so callers may come from any goroutine. */
typedef struct rg_ctx {
	rg_CUdevice dev;
	rg_CUcontext ctx; /* the device's primary context (retained) */
	rg_CUstream stream;
	rg_cublasHandle blas; /* NULL when cuBLAS is not loaded */
} rg_ctx;

int rg_driver_load(const char *path, char *err, int errlen);
int rg_cublas_load(const char *path, char *err, int errlen);
int rg_cublas_loaded(void);
const char *rg_error_name(int status);
const char *rg_error_string(int status);
int rg_have_cuda_headers(void);

int rg_driver_version(int *version);
int rg_device_count(int *n);
int rg_ctx_open(int ordinal, rg_ctx **out);
int rg_ctx_close(rg_ctx *c);
int rg_device_info(rg_ctx *c, char *name, int namelen, size_t *total, int *ccMajor,
                   int *ccMinor, int *smCount, int *busWidthBits, int *memClockKHz);
int rg_mem_info(rg_ctx *c, size_t *freeBytes, size_t *totalBytes);

int rg_malloc(rg_ctx *c, size_t n, rg_CUdeviceptr *p);
int rg_free(rg_ctx *c, rg_CUdeviceptr p);
int rg_htod(rg_ctx *c, rg_CUdeviceptr dst, const void *src, size_t n);
int rg_dtoh(rg_ctx *c, void *dst, rg_CUdeviceptr src, size_t n);
int rg_dtod(rg_ctx *c, rg_CUdeviceptr dst, rg_CUdeviceptr src, size_t n);
int rg_memset_d32(rg_ctx *c, rg_CUdeviceptr dst, unsigned int v, size_t n);
int rg_memset_d8(rg_ctx *c, rg_CUdeviceptr dst, unsigned char v, size_t n);
int rg_sync(rg_ctx *c);

int rg_module_load(rg_ctx *c, const char *ptx, rg_CUmodule *m, char *log, int loglen);
int rg_module_unload(rg_ctx *c, rg_CUmodule m);
int rg_module_function(rg_ctx *c, rg_CUmodule m, const char *name, rg_CUfunction *f);
int rg_launch(rg_ctx *c, rg_CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
              unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
              const uint64_t *args, int nargs);

int rg_blas_version(rg_ctx *c, int *version);
int rg_blas_set_math_mode(rg_ctx *c, unsigned int mode);
int rg_sgemm(rg_ctx *c, unsigned int opA, unsigned int opB, int m, int n, int k, float alpha,
             rg_CUdeviceptr A, int lda, rg_CUdeviceptr B, int ldb, float beta, rg_CUdeviceptr C,
             int ldc);
int rg_sgemm_strided_batched(rg_ctx *c, unsigned int opA, unsigned int opB, int m, int n, int k,
                             float alpha, rg_CUdeviceptr A, int lda, long long strideA,
                             rg_CUdeviceptr B, int ldb, long long strideB, float beta,
                             rg_CUdeviceptr C, int ldc, long long strideC, int batch);

#endif
