/* swiglu: each of N rows of inp holds [gate | up], F floats each (kernels.h);
 *   out = silu(gate) up,  silu(x) = x sig(x),  sig(x) = 1 / (1 + exp(-x)).
 * Backward (adds into dinp (N, 2F)), with silu'(x) = sig(x) (1 + x (1 - sig(x))):
 *   dgate += dout up silu'(gate),  dup += dout silu(gate).
 * The reference backward is checked against central differences of the reference forward
 * (double), so silu' is not taken on trust. fp32 only.
 *
 * Inputs span [-8, 8) (sig from 3e-4 to 1 - 3e-4); the first row's gates also hold 0, +-20
 * (sig rounds to 1 in fp32) and +-100 (exp(100) overflows fp32: silu must go to -0, not NaN).
 *
 * Tolerances (rtol, atol):
 *   forward out, backward dup   1e-5, 1e-7   exp, a division and two products, no cancellation:
 *                                            a few ulp; the atol only covers silu(-100) ~ 4e-42,
 *                                            which fp32 flushes to 0
 *   backward dgate              1e-5, 1e-6   1 + x (1 - sig) crosses zero at x ~ -1.28, where
 *                                            its fp32 rounding (~1e-7 absolute) is all relative
 *   reference vs central differences (double): 1e-7, 1e-10, step 1e-5 (1 + |x|): truncation
 *   ~ h^2 silu''' and roundoff ~ 1e-16 / h, both under 1e-9 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "lab.h"

static double ref_sig(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_silu(double x) { return x * ref_sig(x); }
static double ref_dsilu(double x)
{
    double s = ref_sig(x);
    return s * (1.0 + x * (1.0 - s));
}

static void ref_forward(double *out, const double *inp, int N, int F)
{
    for (size_t r = 0; r < (size_t)N; r++)
        for (int i = 0; i < F; i++)
            out[r * F + i] = ref_silu(inp[r * 2 * F + i]) * inp[r * 2 * F + F + i];
}

/* Adds into dinp. */
static void ref_backward(double *dinp, const double *inp, const double *dout, int N, int F)
{
    for (size_t r = 0; r < (size_t)N; r++)
        for (int i = 0; i < F; i++) {
            double g = inp[r * 2 * F + i], u = inp[r * 2 * F + F + i], d = dout[r * F + i];
            dinp[r * 2 * F + i] += d * u * ref_dsilu(g);
            dinp[r * 2 * F + F + i] += d * ref_silu(g);
        }
}

/* Splits (N, 2F) rows into their gate and up halves, for one report line each. */
static void split(double *gate, double *up, const double *x, int N, int F)
{
    for (size_t r = 0; r < (size_t)N; r++)
        for (int i = 0; i < F; i++) {
            gate[r * F + i] = x[r * 2 * F + i];
            up[r * F + i] = x[r * 2 * F + F + i];
        }
}

static void compare_halves(lab_run *r, const char *op, const double *got, const double *ref, int N, int F,
                           lab_tol tg, lab_tol tu)
{
    size_t n = (size_t)N * F;
    double *gg = lab_dzeros(n), *gu = lab_dzeros(n), *rg = lab_dzeros(n), *ru = lab_dzeros(n);
    split(gg, gu, got, N, F);
    split(rg, ru, ref, N, F);
    lab_compare_double(r, op, KPREC_FP32, "dgate", gg, rg, n, tg);
    lab_compare_double(r, op, KPREC_FP32, "dup", gu, ru, n, tu);
    free(gg);
    free(gu);
    free(rg);
    free(ru);
}

/* The reference backward against central differences of sum(dout * out): each element of
 * inp moves only its own output, out = silu(gate) up. */
static void check_reference(lab_run *r, const double *inp, const double *dout, int N, int F)
{
    size_t n2 = (size_t)N * 2 * F;
    double *dinp = lab_dzeros(n2), *fd = lab_dzeros(n2);
    ref_backward(dinp, inp, dout, N, F);
    for (size_t row = 0; row < (size_t)N; row++)
        for (int i = 0; i < F; i++)
            for (int half = 0; half < 2; half++) {
                /* a one-element row (N = 1, F = 1) of the reference forward: [gate, up] */
                double gu[2] = {inp[row * 2 * F + i], inp[row * 2 * F + F + i]}, up, down;
                double keep = gu[half], h = 1e-5 * (1 + fabs(keep));
                gu[half] = keep + h;
                ref_forward(&up, gu, 1, 1);
                gu[half] = keep - h;
                ref_forward(&down, gu, 1, 1);
                fd[row * 2 * F + (size_t)half * F + i] = dout[row * F + i] * (up - down) / (2 * h);
            }
    compare_halves(r, "swiglu_ref_vs_fd", dinp, fd, N, F, (lab_tol){1e-7, 1e-10}, (lab_tol){1e-7, 1e-10});
    free(dinp);
    free(fd);
}

static void check(lab_run *r)
{
    int N = (int)r->dim[LAB_N], F = (int)r->dim[LAB_C];
    size_t n = (size_t)N * F, n2 = 2 * n;
    lab_rng g = lab_rng_make(r->seed, 51);
    float *inp = lab_floats(&g, n2, 8.0), *dout = lab_floats(&g, n, 1.0), *dinp0 = lab_floats(&g, n2, 0.1);
    static const float tails[] = {0.0f, 20.0f, -20.0f, 100.0f, -100.0f};
    for (int i = 0; i < 5 && i < F; i++)
        inp[i] = tails[i];
    double *inpd = lab_widen(inp, n2), *doutd = lab_widen(dout, n);
    double *rout = lab_dzeros(n), *rdinp = lab_widen(dinp0, n2);
    float *d_inp = lab_upload(r, inp, n2 * 4), *d_out = lab_zeros(r, n * 4);
    float *d_dout = lab_upload(r, dout, n * 4), *d_dinp = lab_upload(r, dinp0, n2 * 4);

    r->k->swiglu_forward(d_out, d_inp, N, F, KPREC_FP32);
    ref_forward(rout, inpd, N, F);
    lab_compare_dev(r, "swiglu_forward", KPREC_FP32, "out", d_out, rout, n, (lab_tol){1e-5, 1e-7});

    r->k->swiglu_backward(d_dinp, d_inp, d_dout, N, F, KPREC_FP32);
    ref_backward(rdinp, inpd, doutd, N, F);
    float *got = lab_download(r, d_dinp, n2);
    double *gotd = lab_widen(got, n2);
    compare_halves(r, "swiglu_backward", gotd, rdinp, N, F, (lab_tol){1e-5, 1e-6}, (lab_tol){1e-5, 1e-7});

    check_reference(r, inpd, doutd, N, F);

    void *hosts[] = {inp, dout, dinp0, inpd, doutd, rout, rdinp, got, gotd};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++)
        free(hosts[i]);
    void *devs[] = {d_inp, d_out, d_dout, d_dinp};
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++)
        lab_release(r, devs[i]);
}

typedef struct {
    const kernels_backend *k;
    float *inp, *out, *dout, *dinp;
    int N, F;
} swiglu_args;

static void call_fwd(const void *p)
{
    const swiglu_args *a = p;
    a->k->swiglu_forward(a->out, a->inp, a->N, a->F, KPREC_FP32);
}

static void call_bwd(const void *p)
{
    const swiglu_args *a = p;
    a->k->swiglu_backward(a->dinp, a->inp, a->dout, a->N, a->F, KPREC_FP32);
}

/* Bytes (in N F floats): the forward reads inp (2) and writes out (1); the backward reads inp
 * (2) and dout (1) and reads and writes dinp (2 + 2). */
static void bench(lab_run *r)
{
    int N = (int)r->dim[LAB_N], F = (int)r->dim[LAB_C];
    size_t n = (size_t)N * F;
    lab_rng g = lab_rng_make(r->seed, 52);
    float *h = lab_floats(&g, 2 * n, 4.0);
    swiglu_args a = {.k = r->k, .N = N, .F = F};
    a.inp = lab_upload(r, h, 2 * n * 4);
    a.dout = lab_upload(r, h, n * 4);
    a.out = lab_zeros(r, n * 4);
    a.dinp = lab_zeros(r, 2 * n * 4);
    char shape[96];
    lab_shape_str(r, "N C", shape, sizeof shape);
    double bytes = (double)n * 4;
    lab_bench(r, "swiglu_forward", KPREC_FP32, shape, call_fwd, &a, 3 * bytes, 0);
    lab_bench(r, "swiglu_backward", KPREC_FP32, shape, call_bwd, &a, 7 * bytes, 0);
    lab_release(r, a.inp);
    lab_release(r, a.dout);
    lab_release(r, a.out);
    lab_release(r, a.dinp);
    free(h);
}

const lab_op lab_swiglu = {
    .name = "swiglu",
    .what = "SwiGLU forward and backward over N rows of [gate | up], C = F each; fp32",
    .dims = "N C",
    .precs = LAB_FP32_ONLY,
    .check_dim = {[LAB_N] = 33, [LAB_C] = 100},
    .bench_cpu = {[LAB_N] = 1024, [LAB_C] = 2048},
    .bench_gpu = {[LAB_N] = 8192, [LAB_C] = 2048},
    .check = check,
    .bench = bench,
};
