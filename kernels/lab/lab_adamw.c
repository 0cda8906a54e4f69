/* adamw: AdamW (Loshchilov & Hutter) over N parameters, step t (1-based):
 *   g = grad * grad_scale,  m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
 *   p -= lr ( (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd p ).
 * The check runs three steps with fresh gradients (so the bias corrections differ) and
 * compares params, m and v after each; the reference keeps its state in double. fp32 only.
 *
 * Tolerances (rtol, atol): params, m, v 1e-5, 1e-7 (a few fp32 operations per step; the
 * double state and the fp32 state drift apart by rounding only). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "lab.h"

static const float LR = 1e-2f, B1 = 0.9f, B2 = 0.95f, EPS = 1e-8f, WD = 0.1f, SCALE = 0.5f;

static void ref_step(double *p, double *m, double *v, const float *grad, size_t n, int t)
{
    /* the hyper-parameters are floats in the interface: use their float values exactly */
    double b1 = B1, b2 = B2, c1 = 1 - pow(b1, t), c2 = 1 - pow(b2, t);
    for (size_t i = 0; i < n; i++) {
        double g = (double)grad[i] * SCALE;
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        p[i] -= (double)LR * ((m[i] / c1) / (sqrt(v[i] / c2) + (double)EPS) + (double)WD * p[i]);
    }
}

static void check(lab_run *r)
{
    size_t n = (size_t)r->dim[LAB_N];
    lab_rng g = lab_rng_make(r->seed, 17);
    float *p0 = lab_floats(&g, n, 1.0);
    float *d_p = lab_upload(r, p0, n * 4), *d_m = lab_zeros(r, n * 4), *d_v = lab_zeros(r, n * 4);
    float *d_g = lab_zeros(r, n * 4);
    double *rp = lab_widen(p0, n), *rm = lab_dzeros(n), *rv = lab_dzeros(n);
    lab_tol tol = {1e-5, 1e-7};
    for (int t = 1; t <= 3; t++) {
        float *grad = lab_floats(&g, n, 1e-2);
        r->k->copy_to_device(d_g, grad, n * 4);
        r->k->adamw_update(d_p, d_g, d_m, d_v, n, LR, B1, B2, EPS, WD, t, SCALE);
        ref_step(rp, rm, rv, grad, n, t);
        char name[32];
        snprintf(name, sizeof name, "adamw_update t=%d", t);
        lab_compare_dev(r, name, KPREC_FP32, "params", d_p, rp, n, tol);
        lab_compare_dev(r, name, KPREC_FP32, "m", d_m, rm, n, tol);
        lab_compare_dev(r, name, KPREC_FP32, "v", d_v, rv, n, tol);
        free(grad);
    }
    free(p0);
    free(rp);
    free(rm);
    free(rv);
    lab_release(r, d_p);
    lab_release(r, d_m);
    lab_release(r, d_v);
    lab_release(r, d_g);
}

typedef struct {
    const kernels_backend *k;
    float *p, *g, *m, *v;
    size_t n;
} adamw_args;

static void call_update(const void *p)
{
    const adamw_args *a = p;
    a->k->adamw_update(a->p, a->g, a->m, a->v, a->n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f);
}

/* Bytes: reads params, grads, m, v; writes params, m, v. */
static void bench(lab_run *r)
{
    size_t n = (size_t)r->dim[LAB_N];
    lab_rng g = lab_rng_make(r->seed, 18);
    float *h = lab_floats(&g, n, 1.0);
    adamw_args a = {.k = r->k, .n = n};
    a.p = lab_upload(r, h, n * 4);
    a.g = lab_upload(r, h, n * 4);
    a.m = lab_zeros(r, n * 4);
    a.v = lab_zeros(r, n * 4);
    char shape[96];
    lab_shape_str(r, "N", shape, sizeof shape);
    lab_bench(r, "adamw_update", KPREC_FP32, shape, call_update, &a, 7.0 * n * 4, 0);
    lab_release(r, a.p);
    lab_release(r, a.g);
    lab_release(r, a.m);
    lab_release(r, a.v);
    free(h);
}

const lab_op lab_adamw = {
    .name = "adamw",
    .what = "AdamW update of N parameters (params, m, v over three steps); fp32",
    .dims = "N",
    .precs = LAB_FP32_ONLY,
    .check_dim = {[LAB_N] = 4099},
    .bench_cpu = {[LAB_N] = 1 << 22},
    .bench_gpu = {[LAB_N] = 124 << 20},
    .check = check,
    .bench = bench,
};
