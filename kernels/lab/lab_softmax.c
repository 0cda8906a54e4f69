/* softmax: row softmax of (N rows, V columns), out_ij = exp(x_ij - max_i) / sum_j exp(x_ij - max_i).
 * Forward only (the table has no softmax backward: the loss's fused backward covers training).
 * fp32 only. Rows include logits near 80, where an exp without the max subtracted would
 * overflow float.
 *
 * Tolerance (rtol, atol): 1e-5, 1e-7 (fp32 exp and one division per element; tiny
 * probabilities are held to the tensor's scale). */
#include <math.h>
#include <stdlib.h>
#include "lab.h"

static void ref_softmax(double *out, const float *x, int N, int V)
{
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * V;
        double m = -INFINITY, s = 0;
        for (int j = 0; j < V; j++)
            m = fmax(m, xi[j]);
        for (int j = 0; j < V; j++)
            s += exp(xi[j] - m);
        for (int j = 0; j < V; j++)
            out[(size_t)i * V + j] = exp(xi[j] - m) / s;
    }
}

static void check(lab_run *r)
{
    int N = (int)r->dim[LAB_N], V = (int)r->dim[LAB_V];
    size_t n = (size_t)N * V;
    lab_rng g = lab_rng_make(r->seed, 11);
    float *x = lab_floats(&g, n, 8.0);
    for (int i = 0; i < N; i += 3) /* every third row shifted up to ~80 */
        for (int j = 0; j < V; j++)
            x[(size_t)i * V + j] += 80.0f;
    float *d_x = lab_upload(r, x, n * 4), *d_out = lab_zeros(r, n * 4);
    double *ref = lab_dzeros(n);
    r->k->softmax_forward(d_out, d_x, N, V);
    ref_softmax(ref, x, N, V);
    lab_compare_dev(r, "softmax_forward", KPREC_FP32, "out", d_out, ref, n, (lab_tol){1e-5, 1e-7});
    free(x);
    free(ref);
    lab_release(r, d_x);
    lab_release(r, d_out);
}

typedef struct {
    const kernels_backend *k;
    float *x, *out;
    int N, V;
} sm_args;

static void call_fwd(const void *p)
{
    const sm_args *a = p;
    a->k->softmax_forward(a->out, a->x, a->N, a->V);
}

/* Bytes: reads the logits, writes the probabilities. */
static void bench(lab_run *r)
{
    int N = (int)r->dim[LAB_N], V = (int)r->dim[LAB_V];
    size_t n = (size_t)N * V;
    lab_rng g = lab_rng_make(r->seed, 12);
    float *h = lab_floats(&g, n, 4.0);
    sm_args a = {.k = r->k, .N = N, .V = V};
    a.x = lab_upload(r, h, n * 4);
    a.out = lab_zeros(r, n * 4);
    char shape[96];
    lab_shape_str(r, "N V", shape, sizeof shape);
    lab_bench(r, "softmax_forward", KPREC_FP32, shape, call_fwd, &a, 2.0 * n * 4, 0);
    lab_release(r, a.x);
    lab_release(r, a.out);
    free(h);
}

const lab_op lab_softmax = {
    .name = "softmax",
    .what = "row softmax of (N, V), forward only; fp32",
    .dims = "N V",
    .precs = LAB_FP32_ONLY,
    .check_dim = {[LAB_N] = 13, [LAB_V] = 517},
    .bench_cpu = {[LAB_N] = 64, [LAB_V] = 8192},
    .bench_gpu = {[LAB_N] = 2048, [LAB_V] = 50304},
    .check = check,
    .bench = bench,
};
