/* The kernel lab: for each op family of the kernel table, a float64 reference written in its
 * own file, a check of every backend against it and a benchmark, run one op at a time by klab.
 *
 * An op file (lab_<family>.c) holds, side by side:
 *   - its reference, in double, written from the op's definition in kernels.h and independent
 *     of kernels/cpu/ (the CPU backend is one of the things checked);
 *   - check(): runs the op through the backend's table at the check shape, for forward and
 *     backward where the op has one and for each precision asked, and compares every output
 *     with lab_compare() under the tolerances stated in the file;
 *   - bench(): times the op at the benchmark shape with lab_time() (the backend's own events,
 *     as kernels/bench.c does) and prints the rate with lab_rate().
 * Buffers handed to the table live in the backend's memory: lab_upload / lab_download move
 * host arrays in and out, so the same code serves the CPU and the CUDA backend. */
#ifndef DTSIM_KERNELS_LAB_H
#define DTSIM_KERNELS_LAB_H
#include <stddef.h>
#include <stdint.h>
#include "kernels.h"

/* The shape options klab accepts (--B 4 --T 64 ...). kernels.h's names: N is rows for the
 * row-wise ops and GEMM, the element count for the elementwise ones; G is grouped-query
 * attention's key/value heads and HD the head size (the rotary and GQA ops). */
enum { LAB_B, LAB_T, LAB_C, LAB_NH, LAB_N, LAB_OC, LAB_V, LAB_G, LAB_HD, LAB_NDIMS };
extern const char *const lab_dim_names[LAB_NDIMS];

#define LAB_PREC_BIT(p) (1u << (p))
#define LAB_FP32_ONLY LAB_PREC_BIT(KPREC_FP32)
#define LAB_ALL_PRECS (LAB_PREC_BIT(KPREC_FP32) | LAB_PREC_BIT(KPREC_BF16) | LAB_PREC_BIT(KPREC_FP16))
#define LAB_HALF_PRECS (LAB_PREC_BIT(KPREC_BF16) | LAB_PREC_BIT(KPREC_FP16))

/* One check or benchmark run of one op on one backend. */
typedef struct lab_run {
    const kernels_backend *k;
    long dim[LAB_NDIMS];   /* the shape of this run */
    unsigned precs;        /* precisions to run: LAB_PREC_BIT mask, within the op's */
    int repeats;           /* timed repeats per benchmark case (median reported) */
    uint64_t seed;
    int failures, compared; /* check tallies: tensors out of tolerance, tensors compared */
    kernels_event *start, *end;
} lab_run;

typedef struct lab_op {
    const char *name;    /* klab's OP argument */
    const char *what;    /* one line for --list */
    const char *dims;    /* the shape options it takes, e.g. "N C OC" */
    unsigned precs;      /* precisions the table supports for it */
    long check_dim[LAB_NDIMS];                  /* small shapes: the check, in seconds */
    long bench_cpu[LAB_NDIMS], bench_gpu[LAB_NDIMS]; /* benchmark shapes per kind of backend */
    const char *(*invalid)(const long *dim);    /* NULL, or why a shape cannot run */
    void (*check)(lab_run *r);
    void (*bench)(lab_run *r);
} lab_op;

/* The ops, one per lab_<family>.c, listed in klab_main.c. */
extern const lab_op lab_matmul, lab_attention, lab_layernorm, lab_rmsnorm, lab_rope, lab_kv_repeat, lab_swiglu,
    lab_gelu, lab_residual, lab_softmax, lab_cross_entropy, lab_encoder, lab_adamw, lab_precision, lab_reductions;

/* ---- inputs ------------------------------------------------------------------------- */
typedef struct {
    uint64_t s;
} lab_rng;
lab_rng lab_rng_make(uint64_t seed, uint64_t stream);
uint64_t lab_rng_next(lab_rng *g);
double lab_uniform(lab_rng *g);                          /* in [-1, 1) */
uint32_t lab_below(lab_rng *g, uint32_t n);              /* in [0, n) */
float *lab_floats(lab_rng *g, size_t n, double scale);   /* host, uniform in [-scale, scale) */
int *lab_ints(lab_rng *g, size_t n, int below);          /* host, uniform in [0, below) */
double *lab_widen(const float *x, size_t n);             /* host double copy */
double *lab_dzeros(size_t n);
void *lab_xmalloc(size_t bytes);                         /* aborts when out of memory */

/* ---- backend memory ----------------------------------------------------------------- */
void *lab_upload(const lab_run *r, const void *host, size_t bytes);  /* new backend buffer */
void *lab_zeros(const lab_run *r, size_t bytes);                      /* new, zero-filled */
float *lab_download(const lab_run *r, const float *dev, size_t n);   /* new host copy */
void lab_release(const lab_run *r, void *dev);

/* ---- the float64 model of the 16-bit formats ----------------------------------------- */
/* x rounded to bf16 or fp16 (round to nearest, ties to even; overflow to inf; subnormals),
 * computed with frexp/ldexp/nearbyint in double. KPREC_FP32 rounds to float. */
double lab_round(double x, kernels_precision prec);
const char *lab_prec_name(kernels_precision prec);

/* ---- checking ----------------------------------------------------------------------- */
/* An element passes when |got - ref| <= rtol * |ref| + atol * max_i |ref_i|: rtol bounds the
 * error relative to the element, atol the error relative to the tensor's scale (where sums
 * cancel, an element can be far smaller than the terms that made it). */
typedef struct {
    double rtol, atol;
} lab_tol;

/* Compares host `got` with `ref`, prints one line (backend, op, precision, tensor, max abs and
 * max rel error, the worst error as a fraction of its tolerance, ok/FAIL) and tallies it.
 * The relative error is taken over the elements with |ref| >= 1e-3 * max |ref|. A NaN or inf
 * where the reference is finite fails. Returns 1 when it passes. */
int lab_compare(lab_run *r, const char *op, kernels_precision prec, const char *tensor, const float *got,
                const double *ref, size_t n, lab_tol tol);
/* The same for results the backend returns in double (the reductions). */
int lab_compare_double(lab_run *r, const char *op, kernels_precision prec, const char *tensor, const double *got,
                       const double *ref, size_t n, lab_tol tol);
/* The same, downloading `dev` from the backend first. */
int lab_compare_dev(lab_run *r, const char *op, kernels_precision prec, const char *tensor, const float *dev,
                    const double *ref, size_t n, lab_tol tol);
/* Records an exact check already done by the caller (bit patterns, flags): prints and tallies. */
int lab_exact(lab_run *r, const char *op, kernels_precision prec, const char *tensor, size_t mismatches,
              size_t n);

/* ---- benchmarking ------------------------------------------------------------------- */
typedef void (*lab_call)(const void *args);
/* Median seconds of one call over r->repeats, after one warm-up call, timed with the
 * backend's events. */
double lab_time(lab_run *r, lab_call fn, const void *args);
/* Times fn and prints op, precision, shape, ms and the rate: `work` FLOPs when flops is set
 * (TFLOP/s on a GPU, GFLOP/s on the CPU), else bytes moved (GB/s). */
void lab_bench(lab_run *r, const char *op, kernels_precision prec, const char *shape, lab_call fn,
               const void *args, double work, int flops);
/* "B=2 T=64 ..." for the dims the op lists. */
void lab_shape_str(const lab_run *r, const char *dims, char *out, size_t len);
#endif
