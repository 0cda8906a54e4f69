/* rmsnorm: over the last dim C of N rows, eps = 1e-5 (kernels.h),
 *   rstd = 1 / sqrt(sum_c x_c^2 / C + eps),  out = x rstd weight;  rstd is saved.
 * Backward (adds): d out_c / d x_j = rstd w_c (delta_cj - x_c x_j rstd^2 / C), so with
 * n = x rstd and g = dout weight,
 *   dinp += rstd (g - n mean_c(g n)),  dweight += sum over rows of dout n.
 * That derivation is not taken on trust: the reference backward is checked against central
 * differences of the reference forward, all in double. The backend's backward gets the
 * reference's rstd as floats, so it is checked on its own. fp32 only.
 *
 * Rows: random at several scales and offsets, plus an all-zero row (rstd = 1/sqrt(eps)), a
 * tiny one (mean(x^2) ~ 3e-7, below eps, which then dominates) and a large one (|x| ~ 100).
 * dout is scaled by 1/rstd on the rows where rstd > 1, so that every row's dinp (~ rstd g)
 * has a similar size and the atol, relative to the tensor's largest element, stays tight.
 *
 * Tolerances (rtol, atol):
 *   forward rstd, out    1e-5, 0     no cancellation anywhere: a sum of squares, a sqrt and
 *                                    products, a few ulp (~1e-6); every element is held to its
 *                                    own size, zeros included
 *   backward dinp        1e-4, 1e-5  g - n mean(g n) subtracts nearly equal terms (as LayerNorm)
 *   backward dweight     1e-5, 1e-6  fp32 sums over N rows of terms of both signs
 *   reference vs central differences (double): dinp 1e-6, 1e-8 and dweight 1e-9, 1e-10. The
 *   step for x is 3e-4 of the row's rms: truncation ~ h^2 (~1e-7 relative) and the roundoff
 *   of a C-term loss divided by h (~1e-9 at C = 768) balance there. The loss is linear in the
 *   weight: a step of 1e-2 leaves only roundoff. A wrong derivative is off by O(1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "lab.h"

#define EPS 1e-5

static double ref_rstd(const double *x, int C)
{
    double ss = 0;
    for (int c = 0; c < C; c++)
        ss += x[c] * x[c];
    return 1.0 / sqrt(ss / C + EPS);
}

static void ref_forward(double *out, double *rstd, const double *x, const double *w, int N, int C)
{
    for (int i = 0; i < N; i++) {
        const double *xi = x + (size_t)i * C;
        double s = ref_rstd(xi, C);
        for (int c = 0; c < C; c++)
            out[(size_t)i * C + c] = xi[c] * s * w[c];
        rstd[i] = s;
    }
}

/* Adds into dinp and dw; rstd is the saved one. */
static void ref_backward(double *dinp, double *dw, const double *dout, const double *x, const double *w,
                         const double *rstd, int N, int C)
{
    for (int i = 0; i < N; i++) {
        const double *xi = x + (size_t)i * C, *dy = dout + (size_t)i * C;
        double gn = 0;
        for (int c = 0; c < C; c++)
            gn += dy[c] * w[c] * xi[c] * rstd[i];
        gn /= C;
        for (int c = 0; c < C; c++) {
            double n = xi[c] * rstd[i];
            dw[c] += dy[c] * n;
            dinp[(size_t)i * C + c] += rstd[i] * (dy[c] * w[c] - n * gn);
        }
    }
}

/* sum_c dout_c out_c for one row: the loss whose gradient the backward is. */
static double row_loss(const double *x, const double *w, const double *dy, int C)
{
    double s = ref_rstd(x, C), l = 0;
    for (int c = 0; c < C; c++)
        l += dy[c] * x[c] * s * w[c];
    return l;
}

/* The reference backward against central differences of the reference forward. */
static void check_reference(lab_run *r, const char *op, double *x, double *w, const double *dout, int N, int C)
{
    size_t nx = (size_t)N * C;
    double *rstd = lab_dzeros(N), *out = lab_dzeros(nx), *dinp = lab_dzeros(nx), *dw = lab_dzeros(C);
    double *fd_dinp = lab_dzeros(nx), *fd_dw = lab_dzeros(C);
    ref_forward(out, rstd, x, w, N, C);
    ref_backward(dinp, dw, dout, x, w, rstd, N, C);
    for (int i = 0; i < N; i++) {
        double *xi = x + (size_t)i * C;
        double h = 3e-4 / rstd[i];
        for (int c = 0; c < C; c++) {
            double keep = xi[c];
            xi[c] = keep + h;
            double up = row_loss(xi, w, dout + (size_t)i * C, C);
            xi[c] = keep - h;
            double down = row_loss(xi, w, dout + (size_t)i * C, C);
            xi[c] = keep;
            fd_dinp[(size_t)i * C + c] = (up - down) / (2 * h);
        }
    }
    for (int c = 0; c < C; c++) {
        double keep = w[c], h = 1e-2, up = 0, down = 0;
        w[c] = keep + h;
        for (int i = 0; i < N; i++)
            up += row_loss(x + (size_t)i * C, w, dout + (size_t)i * C, C);
        w[c] = keep - h;
        for (int i = 0; i < N; i++)
            down += row_loss(x + (size_t)i * C, w, dout + (size_t)i * C, C);
        w[c] = keep;
        fd_dw[c] = (up - down) / (2 * h);
    }
    lab_compare_double(r, op, KPREC_FP32, "dinp", dinp, fd_dinp, nx, (lab_tol){1e-6, 1e-8});
    lab_compare_double(r, op, KPREC_FP32, "dweight", dw, fd_dw, C, (lab_tol){1e-9, 1e-10});
    void *hosts[] = {rstd, out, dinp, dw, fd_dinp, fd_dw};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++)
        free(hosts[i]);
}

static void check_case(lab_run *r, int N, int C, uint64_t stream)
{
    size_t nx = (size_t)N * C;
    lab_rng g = lab_rng_make(r->seed, stream);
    float *x = lab_floats(&g, nx, 1.0), *w = lab_floats(&g, C, 1.0), *dout = lab_floats(&g, nx, 1.0);
    float *dinp0 = lab_floats(&g, nx, 0.1), *dw0 = lab_floats(&g, C, 0.1);
    for (int i = 0; i < N; i++) {
        static const double scale[] = {0.5, 1, 2, 4};
        double s = i == 0 ? 0 : i == 1 ? 1e-3 : i == 2 ? 100 : scale[i % 4], off = i < 3 ? 0 : 0.25 * (i % 5);
        for (int c = 0; c < C; c++)
            x[(size_t)i * C + c] = (float)(x[(size_t)i * C + c] * s + off * s);
    }
    double *xd = lab_widen(x, nx), *wd = lab_widen(w, C);
    double *rout = lab_dzeros(nx), *rrstd = lab_dzeros(N);
    ref_forward(rout, rrstd, xd, wd, N, C);
    for (int i = 0; i < N; i++)
        if (rrstd[i] > 1)
            for (int c = 0; c < C; c++)
                dout[(size_t)i * C + c] = (float)(dout[(size_t)i * C + c] / rrstd[i]);

    char fwd_name[40], bwd_name[40], ref_name[40];
    snprintf(fwd_name, sizeof fwd_name, "rmsnorm_forward C=%d", C);
    snprintf(bwd_name, sizeof bwd_name, "rmsnorm_backward C=%d", C);
    snprintf(ref_name, sizeof ref_name, "rmsnorm_ref_vs_fd C=%d", C);
    float *d_x = lab_upload(r, x, nx * 4), *d_w = lab_upload(r, w, (size_t)C * 4);
    float *d_out = lab_zeros(r, nx * 4), *d_rstd = lab_zeros(r, (size_t)N * 4);
    r->k->rmsnorm_forward(d_out, d_rstd, d_x, d_w, N, C);
    lab_compare_dev(r, fwd_name, KPREC_FP32, "out", d_out, rout, nx, (lab_tol){1e-5, 0});
    lab_compare_dev(r, fwd_name, KPREC_FP32, "rstd", d_rstd, rrstd, N, (lab_tol){1e-5, 0});

    float *rstd_f = lab_xmalloc((size_t)N * 4);
    for (int i = 0; i < N; i++)
        rstd_f[i] = (float)rrstd[i];
    double *srstd = lab_widen(rstd_f, N), *doutd = lab_widen(dout, nx);
    float *d_srstd = lab_upload(r, rstd_f, (size_t)N * 4), *d_dout = lab_upload(r, dout, nx * 4);
    float *d_dinp = lab_upload(r, dinp0, nx * 4), *d_dw = lab_upload(r, dw0, (size_t)C * 4);
    r->k->rmsnorm_backward(d_dinp, d_dw, d_dout, d_x, d_w, d_srstd, N, C);
    double *rdinp = lab_widen(dinp0, nx), *rdw = lab_widen(dw0, C);
    ref_backward(rdinp, rdw, doutd, xd, wd, srstd, N, C);
    lab_compare_dev(r, bwd_name, KPREC_FP32, "dinp", d_dinp, rdinp, nx, (lab_tol){1e-4, 1e-5});
    lab_compare_dev(r, bwd_name, KPREC_FP32, "dweight", d_dw, rdw, C, (lab_tol){1e-5, 1e-6});

    check_reference(r, ref_name, xd, wd, doutd, N, C);

    void *hosts[] = {x, w, dout, dinp0, dw0, xd, wd, rout, rrstd, rstd_f, srstd, doutd, rdinp, rdw};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++)
        free(hosts[i]);
    void *devs[] = {d_x, d_w, d_out, d_rstd, d_srstd, d_dout, d_dinp, d_dw};
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++)
        lab_release(r, devs[i]);
}

/* The shape asked, and GPT-2 small's width 768 (a row of 24 floats per lane on a warp-per-row
 * kernel, where the narrow case has 3). */
static void check(lab_run *r)
{
    int N = (int)r->dim[LAB_N], C = (int)r->dim[LAB_C];
    check_case(r, N, C, 41);
    if (C != 768)
        check_case(r, N, 768, 42);
}

typedef struct {
    const kernels_backend *k;
    float *x, *w, *out, *rstd, *dout, *dinp, *dw;
    int N, C;
} rms_args;

static void call_fwd(const void *p)
{
    const rms_args *a = p;
    a->k->rmsnorm_forward(a->out, a->rstd, a->x, a->w, a->N, a->C);
}

static void call_bwd(const void *p)
{
    const rms_args *a = p;
    a->k->rmsnorm_backward(a->dinp, a->dw, a->dout, a->x, a->w, a->rstd, a->N, a->C);
}

/* Bytes: the forward reads x and writes out (N C each); the backward reads x and dout and
 * reads and writes dinp. The C-sized and N-sized vectors are left out. */
static void bench(lab_run *r)
{
    int N = (int)r->dim[LAB_N], C = (int)r->dim[LAB_C];
    size_t nx = (size_t)N * C;
    lab_rng g = lab_rng_make(r->seed, 43);
    float *hx = lab_floats(&g, nx, 2.0), *hw = lab_floats(&g, C, 1.0);
    rms_args a = {.k = r->k, .N = N, .C = C};
    a.x = lab_upload(r, hx, nx * 4);
    a.dout = lab_upload(r, hx, nx * 4);
    a.w = lab_upload(r, hw, (size_t)C * 4);
    a.out = lab_zeros(r, nx * 4);
    a.dinp = lab_zeros(r, nx * 4);
    a.rstd = lab_zeros(r, (size_t)N * 4);
    a.dw = lab_zeros(r, (size_t)C * 4);
    call_fwd(&a); /* a real rstd for the backward */
    char shape[96];
    lab_shape_str(r, "N C", shape, sizeof shape);
    double bytes = (double)nx * 4;
    lab_bench(r, "rmsnorm_forward", KPREC_FP32, shape, call_fwd, &a, 2 * bytes, 0);
    lab_bench(r, "rmsnorm_backward", KPREC_FP32, shape, call_bwd, &a, 4 * bytes, 0);
    float *devs[] = {a.x, a.dout, a.w, a.out, a.dinp, a.rstd, a.dw};
    for (int i = 0; i < 7; i++)
        lab_release(r, devs[i]);
    free(hx);
    free(hw);
}

const lab_op lab_rmsnorm = {
    .name = "rmsnorm",
    .what = "RMSNorm forward (out, rstd) and backward (dinp, dweight), at C and at 768; fp32",
    .dims = "N C",
    .precs = LAB_FP32_ONLY,
    .check_dim = {[LAB_N] = 37, [LAB_C] = 96},
    .bench_cpu = {[LAB_N] = 1024, [LAB_C] = 768},
    .bench_gpu = {[LAB_N] = 8192, [LAB_C] = 768},
    .check = check,
    .bench = bench,
};
