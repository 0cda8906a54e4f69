/* Shared helpers of the CPU kernel tests: a seeded generator, float<->double copies, error
 * measures, central finite differences, and an independent float64 model of bf16/fp16
 * rounding. Nothing here calls a kernel, so the references stay independent of kernels/cpu/. */
#ifndef DTSIM_TESTS_KREF_H
#define DTSIM_TESTS_KREF_H
#include <stddef.h>
#include <stdint.h>
#include "kernels.h"

typedef struct {
    uint64_t s;
} krng;

double krng_uniform(krng *r);                   /* in [-1, 1) */
uint32_t krng_below(krng *r, uint32_t n);       /* in [0, n) */
float *kr_floats(krng *r, size_t n, double scale); /* malloc'ed, uniform in [-scale, scale) */
double *kr_to_double(const float *x, size_t n);    /* malloc'ed copy */
double *kr_doubles(size_t n);                      /* calloc'ed */

/* max_i |got_i - want_i| / max(max_i |want_i|, tiny): the error relative to the array's scale.
 * Infinite if got holds a NaN or an inf. */
double kr_rel_err(const float *got, const double *want, size_t n);

/* Central differences of a scalar loss: grad[i] = (f(x + h e_i) - f(x - h e_i)) / 2h. f reads x
 * through ctx; x is perturbed in place and restored. */
typedef double (*kr_loss_fn)(void *ctx);
void kr_finite_diff(kr_loss_fn f, void *ctx, double *x, size_t n, double h, double *grad);

/* sum_i g_i * y_i: the scalar loss every backward test differentiates. */
double kr_dot(const float *g, const double *y, size_t n);

/* Round x to the format with `mant` stored mantissa bits, smallest normal exponent emin and
 * largest finite value maxval, to nearest with ties to even, overflowing to inf. Written with
 * frexp/nearbyint in double, independently of kernels/cpu/half.c. */
double kr_round_format(double x, int mant, int emin, double maxval);
double kr_round(double x, kernels_precision prec);
/* The spacing of the format's values at x's magnitude (one unit in the last place). */
double kr_ulp(double x, kernels_precision prec);
#endif
