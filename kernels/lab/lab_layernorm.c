/* layernorm: over the last dim C of N rows, with eps = 1e-5 (GPT-2):
 *   mean = sum x / C,  var = sum (x - mean)^2 / C,  rstd = 1 / sqrt(var + eps),
 *   n = (x - mean) rstd,  out = n weight + bias;  mean and rstd are saved.
 * Backward (adds): with g = dout weight,
 *   dbias += dout,  dweight += dout n,  dinp += rstd (g - mean_c(g) - n mean_c(g n)).
 * fp32 only (the table has no low-precision LayerNorm). The backward is checked on its own:
 * both sides get the reference forward's mean and rstd as floats.
 *
 * Tolerances (rtol, atol):
 *   forward out, mean, rstd     1e-5, 1e-6
 *   backward dinp               1e-4, 1e-5   the two row means subtract nearly equal terms
 *   backward dweight, dbias     1e-5, 1e-6   sums over N rows */
#include <math.h>
#include <stdlib.h>
#include "lab.h"

#define EPS 1e-5

static void ref_forward(double *out, double *mean, double *rstd, const float *x, const float *w, const float *b,
                        int N, int C)
{
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C;
        double m = 0, v = 0;
        for (int c = 0; c < C; c++)
            m += xi[c];
        m /= C;
        for (int c = 0; c < C; c++)
            v += (xi[c] - m) * (xi[c] - m);
        double s = 1.0 / sqrt(v / C + EPS);
        for (int c = 0; c < C; c++)
            out[(size_t)i * C + c] = (xi[c] - m) * s * w[c] + b[c];
        mean[i] = m;
        rstd[i] = s;
    }
}

static void ref_backward(double *dinp, double *dw, double *db, const float *dout, const float *x, const float *w,
                         const float *mean, const float *rstd, int N, int C)
{
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C, *dy = dout + (size_t)i * C;
        double gs = 0, gns = 0;
        for (int c = 0; c < C; c++) {
            double n = (xi[c] - (double)mean[i]) * rstd[i], g = (double)dy[c] * w[c];
            gs += g;
            gns += g * n;
        }
        gs /= C;
        gns /= C;
        for (int c = 0; c < C; c++) {
            double n = (xi[c] - (double)mean[i]) * rstd[i], g = (double)dy[c] * w[c];
            db[c] += dy[c];
            dw[c] += dy[c] * n;
            dinp[(size_t)i * C + c] += rstd[i] * (g - gs - n * gns);
        }
    }
}

static void check(lab_run *r)
{
    int N = (int)r->dim[LAB_N], C = (int)r->dim[LAB_C];
    size_t nx = (size_t)N * C;
    lab_rng g = lab_rng_make(r->seed, 5);
    float *x = lab_floats(&g, nx, 2.0), *w = lab_floats(&g, C, 1.0), *b = lab_floats(&g, C, 0.5);
    for (int i = 0; i < N; i++) /* rows off centre, as activations are: mean matters */
        for (int c = 0; c < C; c++)
            x[(size_t)i * C + c] += (float)(0.5 * (i % 5));
    float *dout = lab_floats(&g, nx, 1.0), *dinp0 = lab_floats(&g, nx, 0.1), *dw0 = lab_floats(&g, C, 0.1),
          *db0 = lab_floats(&g, C, 0.1);
    float *d_x = lab_upload(r, x, nx * 4), *d_w = lab_upload(r, w, (size_t)C * 4), *d_b = lab_upload(r, b, (size_t)C * 4);
    float *d_out = lab_zeros(r, nx * 4), *d_mean = lab_zeros(r, (size_t)N * 4), *d_rstd = lab_zeros(r, (size_t)N * 4);
    double *rout = lab_dzeros(nx), *rmean = lab_dzeros(N), *rrstd = lab_dzeros(N);
    lab_tol fwd = {1e-5, 1e-6}, bwd_in = {1e-4, 1e-5}, bwd_w = {1e-5, 1e-6};

    r->k->layernorm_forward(d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C);
    ref_forward(rout, rmean, rrstd, x, w, b, N, C);
    lab_compare_dev(r, "layernorm_forward", KPREC_FP32, "out", d_out, rout, nx, fwd);
    lab_compare_dev(r, "layernorm_forward", KPREC_FP32, "mean", d_mean, rmean, N, fwd);
    lab_compare_dev(r, "layernorm_forward", KPREC_FP32, "rstd", d_rstd, rrstd, N, fwd);

    float *mean_f = lab_xmalloc((size_t)N * 4), *rstd_f = lab_xmalloc((size_t)N * 4);
    for (int i = 0; i < N; i++) {
        mean_f[i] = (float)rmean[i];
        rstd_f[i] = (float)rrstd[i];
    }
    float *d_smean = lab_upload(r, mean_f, (size_t)N * 4), *d_srstd = lab_upload(r, rstd_f, (size_t)N * 4);
    float *d_dout = lab_upload(r, dout, nx * 4), *d_dinp = lab_upload(r, dinp0, nx * 4);
    float *d_dw = lab_upload(r, dw0, (size_t)C * 4), *d_db = lab_upload(r, db0, (size_t)C * 4);
    r->k->layernorm_backward(d_dinp, d_dw, d_db, d_dout, d_x, d_w, d_smean, d_srstd, N, C);
    double *rdinp = lab_widen(dinp0, nx), *rdw = lab_widen(dw0, C), *rdb = lab_widen(db0, C);
    ref_backward(rdinp, rdw, rdb, dout, x, w, mean_f, rstd_f, N, C);
    lab_compare_dev(r, "layernorm_backward", KPREC_FP32, "dinp", d_dinp, rdinp, nx, bwd_in);
    lab_compare_dev(r, "layernorm_backward", KPREC_FP32, "dweight", d_dw, rdw, C, bwd_w);
    lab_compare_dev(r, "layernorm_backward", KPREC_FP32, "dbias", d_db, rdb, C, bwd_w);

    void *hosts[] = {x, w, b, dout, dinp0, dw0, db0, rout, rmean, rrstd, mean_f, rstd_f, rdinp, rdw, rdb};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++)
        free(hosts[i]);
    void *devs[] = {d_x, d_w, d_b, d_out, d_mean, d_rstd, d_smean, d_srstd, d_dout, d_dinp, d_dw, d_db};
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++)
        lab_release(r, devs[i]);
}

typedef struct {
    const kernels_backend *k;
    float *x, *w, *b, *out, *mean, *rstd, *dout, *dinp, *dw, *db;
    int N, C;
} ln_args;

static void call_fwd(const void *p)
{
    const ln_args *a = p;
    a->k->layernorm_forward(a->out, a->mean, a->rstd, a->x, a->w, a->b, a->N, a->C);
}

static void call_bwd(const void *p)
{
    const ln_args *a = p;
    a->k->layernorm_backward(a->dinp, a->dw, a->db, a->dout, a->x, a->w, a->mean, a->rstd, a->N, a->C);
}

/* Bytes: the forward reads x and writes out (N C each); the backward reads x and dout and
 * reads and writes dinp. The C-sized and N-sized vectors are left out. */
static void bench(lab_run *r)
{
    int N = (int)r->dim[LAB_N], C = (int)r->dim[LAB_C];
    size_t nx = (size_t)N * C;
    lab_rng g = lab_rng_make(r->seed, 6);
    float *hx = lab_floats(&g, nx, 2.0), *hw = lab_floats(&g, C, 1.0);
    ln_args a = {.k = r->k, .N = N, .C = C};
    a.x = lab_upload(r, hx, nx * 4);
    a.dout = lab_upload(r, hx, nx * 4);
    a.w = lab_upload(r, hw, (size_t)C * 4);
    a.b = lab_zeros(r, (size_t)C * 4);
    a.out = lab_zeros(r, nx * 4);
    a.dinp = lab_zeros(r, nx * 4);
    a.mean = lab_zeros(r, (size_t)N * 4);
    a.rstd = lab_zeros(r, (size_t)N * 4);
    a.dw = lab_zeros(r, (size_t)C * 4);
    a.db = lab_zeros(r, (size_t)C * 4);
    char shape[96];
    lab_shape_str(r, "N C", shape, sizeof shape);
    double bytes = (double)nx * 4;
    lab_bench(r, "layernorm_forward", KPREC_FP32, shape, call_fwd, &a, 2 * bytes, 0);
    lab_bench(r, "layernorm_backward", KPREC_FP32, shape, call_bwd, &a, 4 * bytes, 0);
    float *devs[] = {a.x, a.dout, a.w, a.b, a.out, a.dinp, a.mean, a.rstd, a.dw, a.db};
    for (int i = 0; i < 10; i++)
        lab_release(r, devs[i]);
    free(hx);
    free(hw);
}

const lab_op lab_layernorm = {
    .name = "layernorm",
    .what = "LayerNorm forward (out, mean, rstd) and backward (dinp, dweight, dbias); fp32",
    .dims = "N C",
    .precs = LAB_FP32_ONLY,
    .check_dim = {[LAB_N] = 19, [LAB_C] = 133},
    .bench_cpu = {[LAB_N] = 1024, [LAB_C] = 768},
    .bench_gpu = {[LAB_N] = 8192, [LAB_C] = 768},
    .check = check,
    .bench = bench,
};
