/* cross_entropy: fused softmax + cross-entropy over logits (N, V) with targets (N):
 *   losses_i = log sum_j exp(x_ij) - x_i,target_i,
 *   backward (adds): dlogits_ij += dloss (softmax(x_i)_j - [j == target_i]).
 * fp32 only. Logits include rows near 80 (a stable kernel subtracts the row's max).
 *
 * Tolerances (rtol, atol):
 *   losses      1e-5, 1e-6   one log-sum-exp per row
 *   dlogits     1e-5, 1e-6   fp32 exp per element, scaled by dloss */
#include <math.h>
#include <stdlib.h>
#include "lab.h"

static double row_lse(const float *x, int V)
{
    double m = -INFINITY, s = 0;
    for (int j = 0; j < V; j++)
        m = fmax(m, x[j]);
    for (int j = 0; j < V; j++)
        s += exp(x[j] - m);
    return m + log(s);
}

static void check(lab_run *r)
{
    int N = (int)r->dim[LAB_N], V = (int)r->dim[LAB_V];
    size_t n = (size_t)N * V;
    lab_rng g = lab_rng_make(r->seed, 13);
    float *x = lab_floats(&g, n, 6.0), *d0 = lab_floats(&g, n, 0.01);
    int *tg = lab_ints(&g, (size_t)N, V);
    for (int i = 0; i < N; i += 4)
        for (int j = 0; j < V; j++)
            x[(size_t)i * V + j] += 80.0f;
    float dloss = 1.0f / (float)N;
    float *d_x = lab_upload(r, x, n * 4), *d_loss = lab_zeros(r, (size_t)N * 4), *d_dx = lab_upload(r, d0, n * 4);
    int *d_tg = lab_upload(r, tg, (size_t)N * sizeof(int));
    double *rloss = lab_dzeros(N), *rdx = lab_widen(d0, n);
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * V;
        double lse = row_lse(xi, V);
        rloss[i] = lse - xi[tg[i]];
        for (int j = 0; j < V; j++)
            rdx[(size_t)i * V + j] += (double)dloss * (exp(xi[j] - lse) - (j == tg[i]));
    }
    r->k->cross_entropy_forward(d_loss, d_x, d_tg, N, V);
    lab_compare_dev(r, "cross_entropy_forward", KPREC_FP32, "losses", d_loss, rloss, N, (lab_tol){1e-5, 1e-6});
    r->k->cross_entropy_backward(d_dx, d_x, d_tg, dloss, N, V);
    lab_compare_dev(r, "cross_entropy_backward", KPREC_FP32, "dlogits", d_dx, rdx, n, (lab_tol){1e-5, 1e-6});
    free(x);
    free(d0);
    free(tg);
    free(rloss);
    free(rdx);
    lab_release(r, d_x);
    lab_release(r, d_loss);
    lab_release(r, d_dx);
    lab_release(r, d_tg);
}

typedef struct {
    const kernels_backend *k;
    float *x, *loss, *dx;
    int *tg;
    int N, V;
} ce_args;

static void call_fwd(const void *p)
{
    const ce_args *a = p;
    a->k->cross_entropy_forward(a->loss, a->x, a->tg, a->N, a->V);
}

static void call_bwd(const void *p)
{
    const ce_args *a = p;
    a->k->cross_entropy_backward(a->dx, a->x, a->tg, 1.0f / a->N, a->N, a->V);
}

/* Bytes: the forward reads the logits; the backward reads them and reads and writes dlogits. */
static void bench(lab_run *r)
{
    int N = (int)r->dim[LAB_N], V = (int)r->dim[LAB_V];
    size_t n = (size_t)N * V;
    lab_rng g = lab_rng_make(r->seed, 14);
    float *h = lab_floats(&g, n, 4.0);
    int *tg = lab_ints(&g, (size_t)N, V);
    ce_args a = {.k = r->k, .N = N, .V = V};
    a.x = lab_upload(r, h, n * 4);
    a.tg = lab_upload(r, tg, (size_t)N * sizeof(int));
    a.loss = lab_zeros(r, (size_t)N * 4);
    a.dx = lab_zeros(r, n * 4);
    char shape[96];
    lab_shape_str(r, "N V", shape, sizeof shape);
    lab_bench(r, "cross_entropy_forward", KPREC_FP32, shape, call_fwd, &a, (double)n * 4, 0);
    lab_bench(r, "cross_entropy_backward", KPREC_FP32, shape, call_bwd, &a, 3.0 * n * 4, 0);
    lab_release(r, a.x);
    lab_release(r, a.tg);
    lab_release(r, a.loss);
    lab_release(r, a.dx);
    free(h);
    free(tg);
}

const lab_op lab_cross_entropy = {
    .name = "cross_entropy",
    .what = "fused softmax + cross-entropy over (N, V): losses and dlogits; fp32",
    .dims = "N V",
    .precs = LAB_FP32_ONLY,
    .check_dim = {[LAB_N] = 9, [LAB_V] = 1031},
    .bench_cpu = {[LAB_N] = 64, [LAB_V] = 8192},
    .bench_gpu = {[LAB_N] = 2048, [LAB_V] = 50304},
    .check = check,
    .bench = bench,
};
