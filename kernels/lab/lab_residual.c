/* residual: out = a + b over N elements (the residual stream's add). Its backward is the
 * identity (the engine adds dout into both branches), so the table has no residual_backward.
 * fp32 only.
 *
 * Tolerance (rtol, atol): 2^-24, 0, i.e. the correctly rounded fp32 sum (half an ulp), which
 * every backend's single addition gives. */
#include <stdlib.h>
#include "lab.h"

static void check(lab_run *r)
{
    size_t n = (size_t)r->dim[LAB_N];
    lab_rng g = lab_rng_make(r->seed, 9);
    float *a = lab_floats(&g, n, 3.0), *b = lab_floats(&g, n, 1e-3); /* different scales: rounding happens */
    float *d_a = lab_upload(r, a, n * 4), *d_b = lab_upload(r, b, n * 4), *d_out = lab_zeros(r, n * 4);
    double *ref = lab_dzeros(n);
    for (size_t i = 0; i < n; i++)
        ref[i] = (double)a[i] + (double)b[i];
    r->k->residual_forward(d_out, d_a, d_b, n, KPREC_FP32);
    lab_compare_dev(r, "residual_forward", KPREC_FP32, "out", d_out, ref, n, (lab_tol){0x1p-24, 0});
    free(a);
    free(b);
    free(ref);
    lab_release(r, d_a);
    lab_release(r, d_b);
    lab_release(r, d_out);
}

typedef struct {
    const kernels_backend *k;
    float *a, *b, *out;
    size_t n;
} res_args;

static void call_fwd(const void *p)
{
    const res_args *a = p;
    a->k->residual_forward(a->out, a->a, a->b, a->n, KPREC_FP32);
}

/* Bytes: reads a and b, writes out. */
static void bench(lab_run *r)
{
    size_t n = (size_t)r->dim[LAB_N];
    lab_rng g = lab_rng_make(r->seed, 10);
    float *h = lab_floats(&g, n, 1.0);
    res_args a = {.k = r->k, .n = n};
    a.a = lab_upload(r, h, n * 4);
    a.b = lab_upload(r, h, n * 4);
    a.out = lab_zeros(r, n * 4);
    char shape[96];
    lab_shape_str(r, "N", shape, sizeof shape);
    lab_bench(r, "residual_forward", KPREC_FP32, shape, call_fwd, &a, 3.0 * n * 4, 0);
    lab_release(r, a.a);
    lab_release(r, a.b);
    lab_release(r, a.out);
    free(h);
}

const lab_op lab_residual = {
    .name = "residual",
    .what = "residual add out = a + b over N elements (no backward: it is the identity); fp32",
    .dims = "N",
    .precs = LAB_FP32_ONLY,
    .check_dim = {[LAB_N] = 4099},
    .bench_cpu = {[LAB_N] = 1 << 22},
    .bench_gpu = {[LAB_N] = 8192 * 768 * 4},
    .check = check,
    .bench = bench,
};
