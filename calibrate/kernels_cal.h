/* dtcal kernels: times the engine's own kernels through the kernel interface and fits the
 * calibration's compute figures: a GEMM efficiency table over transformer-like shapes, the
 * achieved bandwidth of each memory-bound op class, the launch overhead, and the fused
 * attention kernel's fraction of the best GEMM rate. */
#ifndef DTSIM_CALIBRATE_KERNELS_CAL_H
#define DTSIM_CALIBRATE_KERNELS_CAL_H
#include <jansson.h>
#include "kernels.h"

/* Adds the GEMM table of precision prec to doc's "gemm" (beside tables already there) and,
 * unless gemm_only, "ops" and "launch_overhead_us" measured in that precision; quick: the
 * reduced grid (< 1 min here). peak_tflops: the platform's peak for the precision, which the
 * simulator scales the attention efficiency by (0: the best measured GEMM rate stands in). */
int kernels_calibrate(const kernels_backend *k, kernels_precision prec, int quick, double peak_tflops, int gemm_only,
                      json_t *doc);

/* The rate, in TFLOP/s (2mnk / time), of the engine's GEMM out[m,n] = in[m,k] @ w[n,k]^T + bias
 * in precision prec, timed as kernels_calibrate times each shape of its grid: one warm-up call,
 * then the median of `repeats` timed calls (inputs rotating; on the CPU each after
 * single-threaded work). -1 when the timing could not be made. */
double kernels_gemm_tflops(const kernels_backend *k, kernels_precision prec, int m, int n, int kk, int repeats);

/* Work started right before each timed call of kernels_gemm_seconds and ended right after its
 * time is taken (dtcal overlap: all-reduces running beside the GEMM); neither is timed, and the
 * warm-up runs without them. */
typedef struct {
    void (*before)(void *ctx);
    void (*after)(void *ctx);
    void *ctx;
} kernels_gemm_beside;

/* The same GEMM timed the same way, in seconds (the median), with `beside` (NULL: none) around
 * every timed call. -1 when the timing could not be made. */
double kernels_gemm_seconds(const kernels_backend *k, kernels_precision prec, int m, int n, int kk, int repeats,
                            const kernels_gemm_beside *beside);
#endif
