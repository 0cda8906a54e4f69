/* reductions: the two whose results come back to the host.
 *   sum_squares(x_r)  = sum_i x_r,i^2 for each of several ranges (a model's gradient tensors:
 *                       the global gradient norm squared), returned in double;
 *   has_inf_or_nan(x) = 1 when any element is +-inf or NaN (fp16 loss scaling), else 0.
 * sum_squares is checked over the whole vector and over it cut into ranges of unequal lengths
 * (one empty, one of a single element), each against its own float64 sum; a range's result must not depend on the ranges beside it (the
 * same bits as that range alone). has_inf_or_nan covers a clean vector, then one with +inf
 * last, -inf first, a NaN in the middle.
 *
 * Tolerances: sum_squares rtol 1e-9 (the table accumulates in double, so only the order of the
 * additions may differ: n 2^-53 at worst, up to n = 10^7; an fp32 accumulator misses it by
 * orders of magnitude); has_inf_or_nan exact. */
#include <math.h>
#include <stdlib.h>
#include "lab.h"

static void check(lab_run *r)
{
    size_t n = (size_t)r->dim[LAB_N];
    lab_rng g = lab_rng_make(r->seed, 19);
    float *x = lab_floats(&g, n, 3.0);
    float *d_x = lab_upload(r, x, n * 4);
    double ref = 0;
    for (size_t i = 0; i < n; i++)
        ref += (double)x[i] * x[i];
    double got;
    const float *whole = d_x;
    r->k->sum_squares(&whole, &n, 1, &got);
    lab_compare_double(r, "sum_squares", KPREC_FP32, "sum", &got, &ref, 1, (lab_tol){1e-9, 0});

    /* cut points: empty, one element, then thirds of the rest (clamped for small n) */
    enum { RANGES = 5 };
    size_t cut[RANGES + 1] = {0, 0, n > 0 ? 1 : 0, 0, 0, n};
    cut[3] = cut[2] + (n - cut[2]) / 3;
    cut[4] = cut[3] + (n - cut[3]) / 2;
    const float *at[RANGES];
    size_t len[RANGES];
    double each[RANGES], each_ref[RANGES], alone[RANGES];
    for (int c = 0; c < RANGES; c++) {
        at[c] = d_x + cut[c];
        len[c] = cut[c + 1] - cut[c];
        each_ref[c] = 0;
        for (size_t i = cut[c]; i < cut[c + 1]; i++)
            each_ref[c] += (double)x[i] * x[i];
    }
    r->k->sum_squares(at, len, RANGES, each);
    lab_compare_double(r, "sum_squares", KPREC_FP32, "ranges", each, each_ref, RANGES, (lab_tol){1e-9, 0});
    size_t differ = 0;
    for (int c = 0; c < RANGES; c++) {
        r->k->sum_squares(&at[c], &len[c], 1, &alone[c]);
        differ += alone[c] != each[c];
    }
    lab_exact(r, "sum_squares", KPREC_FP32, "ranges alone", differ, RANGES);

    /* (index, value) planted one at a time; -1: none */
    const struct {
        long at;
        float value;
    } cases[] = {{-1, 0}, {(long)n - 1, INFINITY}, {0, -INFINITY}, {(long)n / 2, NAN}};
    size_t wrong = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (cases[c].at >= 0)
            r->k->copy_to_device(d_x + cases[c].at, &cases[c].value, 4);
        int want = cases[c].at >= 0;
        wrong += (r->k->has_inf_or_nan(d_x, n) != 0) != want;
        if (cases[c].at >= 0)
            r->k->copy_to_device(d_x + cases[c].at, &x[cases[c].at], 4);
    }
    lab_exact(r, "has_inf_or_nan", KPREC_FP32, "flag", wrong, sizeof cases / sizeof cases[0]);
    free(x);
    lab_release(r, d_x);
}

typedef struct {
    const kernels_backend *k;
    float *x;
    size_t n;
} red_args;

static void call_ss(const void *p)
{
    const red_args *a = p;
    const float *x = a->x;
    double s;
    a->k->sum_squares(&x, &a->n, 1, &s);
}

static void call_inf(const void *p)
{
    const red_args *a = p;
    (void)a->k->has_inf_or_nan(a->x, a->n);
}

/* Bytes: one read of x each. */
static void bench(lab_run *r)
{
    size_t n = (size_t)r->dim[LAB_N];
    lab_rng g = lab_rng_make(r->seed, 20);
    float *h = lab_floats(&g, n, 1.0);
    red_args a = {.k = r->k, .n = n};
    a.x = lab_upload(r, h, n * 4);
    char shape[96];
    lab_shape_str(r, "N", shape, sizeof shape);
    lab_bench(r, "sum_squares", KPREC_FP32, shape, call_ss, &a, (double)n * 4, 0);
    lab_bench(r, "has_inf_or_nan", KPREC_FP32, shape, call_inf, &a, (double)n * 4, 0);
    lab_release(r, a.x);
    free(h);
}

const lab_op lab_reductions = {
    .name = "reductions",
    .what = "sum_squares (double result) and has_inf_or_nan over N elements; fp32 input",
    .dims = "N",
    .precs = LAB_FP32_ONLY,
    .check_dim = {[LAB_N] = 10007},
    .bench_cpu = {[LAB_N] = 1 << 22},
    .bench_gpu = {[LAB_N] = 124 << 20},
    .check = check,
    .bench = bench,
};
