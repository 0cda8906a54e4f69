/* Shared by the GPU tests: the two backends, random inputs, uploads, and comparisons of a
 * CUDA result (in device memory) with the CPU result (in host memory).
 *
 * Error measure, as in tests/kernels: max |gpu - cpu| / max |cpu| over the tensor, so a bound
 * reads as "relative to the tensor's scale". Any NaN or infinity in the GPU result where the
 * CPU has a finite value fails, whatever the bound. */
#ifndef DTSIM_TESTS_GPU_CHECK_H
#define DTSIM_TESTS_GPU_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include "kernels.h"

/* Bounds used across the GPU tests (see tests/gpu/README.md for why each is what it is). */
#define TOL_FP32 1e-5     /* same math, different summation order */
#define TOL_FP32_BWD 1e-4 /* backward kernels with long reductions (attention, layernorm) */
#define TOL_BF16 1e-2     /* outputs rounded to bf16: one ulp is at most 2^-7 of the value */
#define TOL_FP16 5e-3     /* outputs rounded to fp16: one ulp is at most 2^-10 of the value */

typedef struct {
    const kernels_backend *cpu, *gpu;
    uint64_t rng;
} gpu_pair;

/* Opens both backends. Returns 0, or 77 (CTest's skip code) after printing why there is no
 * CUDA backend; a test's main returns that at once. */
int gpu_pair_open(gpu_pair *p);

/* Host arrays (malloc'd, the caller frees). */
float *gpu_rand(gpu_pair *p, size_t n, float scale); /* uniform in [-scale, scale) */
int gpu_rand_int(gpu_pair *p, int bound);             /* uniform in [0, bound) */
float *gpu_host_copy(const float *x, size_t n);

/* Device arrays (the caller frees with p->gpu->free). */
float *gpu_upload(gpu_pair *p, const float *host, size_t n);
void *gpu_upload_bytes(gpu_pair *p, const void *host, size_t bytes);
float *gpu_download(gpu_pair *p, const float *dev, size_t n); /* host copy, malloc'd */

/* cmocka assertions: prints one line per check, fails the test when outside the bound. */
void gpu_expect_close(gpu_pair *p, const char *what, const float *cpu_host, const float *gpu_dev, size_t n,
                      double tol);
/* Bit-for-bit equality of two arrays of n bytes (one host, one device). */
void gpu_expect_same_bytes(gpu_pair *p, const char *what, const void *host, const void *dev, size_t bytes);
#endif
