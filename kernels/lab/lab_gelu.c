/* gelu: the tanh approximation GPT-2 uses,
 *   gelu(x) = x/2 (1 + tanh u),  u = sqrt(2/pi) (x + 0.044715 x^3),
 *   gelu'(x) = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2);
 * the backward adds dout gelu'(x) into dinp. fp32 only.
 *
 * Tolerances (rtol, atol): forward and backward 1e-5, 1e-6 (fp32 tanh and polynomial; near
 * x = -0.75 gelu'(x) crosses zero, which the atol covers). */
#include <math.h>
#include <stdlib.h>
#include "lab.h"

static const double K = 0.79788456080286535588; /* sqrt(2 / pi) */
static const double A = 0.044715;

static double ref_gelu(double x) { return 0.5 * x * (1.0 + tanh(K * (x + A * x * x * x))); }

static double ref_dgelu(double x)
{
    double th = tanh(K * (x + A * x * x * x));
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * K * (1.0 + 3.0 * A * x * x);
}

static void check(lab_run *r)
{
    size_t n = (size_t)r->dim[LAB_N];
    lab_rng g = lab_rng_make(r->seed, 7);
    float *x = lab_floats(&g, n, 6.0), *dout = lab_floats(&g, n, 1.0), *dinp0 = lab_floats(&g, n, 0.1);
    if (n > 2) { /* the far tails, where tanh saturates */
        x[0] = -12.0f;
        x[1] = 12.0f;
    }
    float *d_x = lab_upload(r, x, n * 4), *d_out = lab_zeros(r, n * 4);
    float *d_dout = lab_upload(r, dout, n * 4), *d_dinp = lab_upload(r, dinp0, n * 4);
    double *ref = lab_dzeros(n), *rdinp = lab_widen(dinp0, n);
    lab_tol tol = {1e-5, 1e-6};
    r->k->gelu_forward(d_out, d_x, n, KPREC_FP32);
    for (size_t i = 0; i < n; i++)
        ref[i] = ref_gelu(x[i]);
    lab_compare_dev(r, "gelu_forward", KPREC_FP32, "out", d_out, ref, n, tol);
    r->k->gelu_backward(d_dinp, d_x, d_dout, n, KPREC_FP32);
    for (size_t i = 0; i < n; i++)
        rdinp[i] += ref_dgelu(x[i]) * dout[i];
    lab_compare_dev(r, "gelu_backward", KPREC_FP32, "dinp", d_dinp, rdinp, n, tol);
    free(x);
    free(dout);
    free(dinp0);
    free(ref);
    free(rdinp);
    lab_release(r, d_x);
    lab_release(r, d_out);
    lab_release(r, d_dout);
    lab_release(r, d_dinp);
}

typedef struct {
    const kernels_backend *k;
    float *x, *out, *dout, *dinp;
    size_t n;
} gelu_args;

static void call_fwd(const void *p)
{
    const gelu_args *a = p;
    a->k->gelu_forward(a->out, a->x, a->n, KPREC_FP32);
}

static void call_bwd(const void *p)
{
    const gelu_args *a = p;
    a->k->gelu_backward(a->dinp, a->x, a->dout, a->n, KPREC_FP32);
}

/* Bytes: forward reads x, writes out; backward reads x and dout, reads and writes dinp. */
static void bench(lab_run *r)
{
    size_t n = (size_t)r->dim[LAB_N];
    lab_rng g = lab_rng_make(r->seed, 8);
    float *h = lab_floats(&g, n, 4.0);
    gelu_args a = {.k = r->k, .n = n};
    a.x = lab_upload(r, h, n * 4);
    a.dout = lab_upload(r, h, n * 4);
    a.out = lab_zeros(r, n * 4);
    a.dinp = lab_zeros(r, n * 4);
    char shape[96];
    lab_shape_str(r, "N", shape, sizeof shape);
    lab_bench(r, "gelu_forward", KPREC_FP32, shape, call_fwd, &a, 2.0 * n * 4, 0);
    lab_bench(r, "gelu_backward", KPREC_FP32, shape, call_bwd, &a, 4.0 * n * 4, 0);
    lab_release(r, a.x);
    lab_release(r, a.dout);
    lab_release(r, a.out);
    lab_release(r, a.dinp);
    free(h);
}

const lab_op lab_gelu = {
    .name = "gelu",
    .what = "GELU (tanh form) forward and backward over N elements; fp32",
    .dims = "N",
    .precs = LAB_FP32_ONLY,
    .check_dim = {[LAB_N] = 4099},
    .bench_cpu = {[LAB_N] = 1 << 21},
    .bench_gpu = {[LAB_N] = 8192 * 3072},
    .check = check,
    .bench = bench,
};
