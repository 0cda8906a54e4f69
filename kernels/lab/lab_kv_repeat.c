/* kv_repeat: grouped-query attention's keys and values for the multi-head attention kernel
 * (kernels.h). Rows of inp hold (NH + 2G) HD floats: NH query heads, G key heads, G value
 * heads; rows of out hold 3 NH HD: the query heads as they are, then NH key heads and NH value
 * heads, head h a copy of group h / (NH / G). The backward adds dout's query part into dinp's
 * and the NH / G gradients of each group's repeated heads into the group's key (value) head.
 * kv_repeat is linear, so instead of finite differences the reference's backward is checked to
 * be its forward's adjoint, <F x, y> = <x, F^T y>, in double. fp32 only.
 *
 * Cases: G as asked (2: groups of 4 heads), G = NH (no grouping: a plain copy) and G = 1 (one
 * key and value head for all, multi-query attention).
 *
 * Tolerances:
 *   forward out            exact      copies: every bit
 *   backward dinp          1e-6, 1e-6 fp32 sums of NH / G + 1 terms (9 at most here), whose
 *                                     rounding is within (NH / G) 2^-24 of the sum of their
 *                                     magnitudes, a few 1e-7 of the tensor's largest
 *   reference adjoint      1e-12, 0   double */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lab.h"

typedef struct {
    int B, T, NH, G, hd;
} kv_shape;

static size_t in_size(const kv_shape *s) { return (size_t)s->B * s->T * (s->NH + 2 * s->G) * s->hd; }
static size_t out_size(const kv_shape *s) { return (size_t)s->B * s->T * 3 * s->NH * s->hd; }

/* Where element e of an out row comes from in an inp row. */
static size_t source(const kv_shape *s, size_t e)
{
    size_t qn = (size_t)s->NH * s->hd;
    if (e < qn)
        return e;
    size_t kv = (e - qn) / qn, h = (e - qn) % qn / s->hd, d = (e - qn) % s->hd; /* kv 0: keys, 1: values */
    size_t group = h / (size_t)(s->NH / s->G);
    return qn + (kv * s->G + group) * s->hd + d;
}

static void ref_forward(double *out, const double *inp, const kv_shape *s)
{
    size_t in_row = (size_t)(s->NH + 2 * s->G) * s->hd, out_row = (size_t)3 * s->NH * s->hd;
    for (size_t r = 0; r < (size_t)s->B * s->T; r++)
        for (size_t e = 0; e < out_row; e++)
            out[r * out_row + e] = inp[r * in_row + source(s, e)];
}

/* Adds into dinp. */
static void ref_backward(double *dinp, const double *dout, const kv_shape *s)
{
    size_t in_row = (size_t)(s->NH + 2 * s->G) * s->hd, out_row = (size_t)3 * s->NH * s->hd;
    for (size_t r = 0; r < (size_t)s->B * s->T; r++)
        for (size_t e = 0; e < out_row; e++)
            dinp[r * in_row + source(s, e)] += dout[r * out_row + e];
}

static void check_case(lab_run *r, const kv_shape *s, uint64_t stream)
{
    size_t nin = in_size(s), nout = out_size(s);
    lab_rng g = lab_rng_make(r->seed, stream);
    float *inp = lab_floats(&g, nin, 1.0), *dout = lab_floats(&g, nout, 1.0), *dinp0 = lab_floats(&g, nin, 0.1);
    double *inpd = lab_widen(inp, nin), *doutd = lab_widen(dout, nout), *rout = lab_dzeros(nout);
    double *rdinp = lab_widen(dinp0, nin);
    char fwd[48], bwd[48], refname[48];
    snprintf(fwd, sizeof fwd, "kv_repeat_forward G=%d", s->G);
    snprintf(bwd, sizeof bwd, "kv_repeat_backward G=%d", s->G);
    snprintf(refname, sizeof refname, "kv_repeat_reference G=%d", s->G);

    float *d_inp = lab_upload(r, inp, nin * 4), *d_out = lab_zeros(r, nout * 4);
    r->k->kv_repeat_forward(d_out, d_inp, s->B, s->T, s->NH, s->G, s->hd);
    ref_forward(rout, inpd, s);
    float *got = lab_download(r, d_out, nout);
    size_t bad = 0;
    for (size_t i = 0; i < nout; i++) {
        float want = (float)rout[i];
        bad += memcmp(&got[i], &want, sizeof want) != 0;
    }
    lab_exact(r, fwd, KPREC_FP32, "out", bad, nout);
    free(got);

    float *d_dout = lab_upload(r, dout, nout * 4), *d_dinp = lab_upload(r, dinp0, nin * 4);
    r->k->kv_repeat_backward(d_dinp, d_dout, s->B, s->T, s->NH, s->G, s->hd);
    ref_backward(rdinp, doutd, s);
    lab_compare_dev(r, bwd, KPREC_FP32, "dinp", d_dinp, rdinp, nin, (lab_tol){1e-6, 1e-6});

    /* the reference backward is the forward's transpose: <F x, y> = <x, F^T y> */
    double *ft_y = lab_dzeros(nin), lhs = 0, rhs = 0;
    ref_backward(ft_y, doutd, s);
    for (size_t i = 0; i < nout; i++)
        lhs += rout[i] * doutd[i];
    for (size_t i = 0; i < nin; i++)
        rhs += inpd[i] * ft_y[i];
    lab_compare_double(r, refname, KPREC_FP32, "adjoint", &lhs, &rhs, 1, (lab_tol){1e-12, 0});

    void *hosts[] = {inp, dout, dinp0, inpd, doutd, rout, rdinp, ft_y};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++)
        free(hosts[i]);
    void *devs[] = {d_inp, d_out, d_dout, d_dinp};
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++)
        lab_release(r, devs[i]);
}

static void check(lab_run *r)
{
    kv_shape s = {(int)r->dim[LAB_B], (int)r->dim[LAB_T], (int)r->dim[LAB_NH], (int)r->dim[LAB_G],
                  (int)r->dim[LAB_HD]};
    int groups[] = {s.G, s.NH, 1};
    for (int k = 0; k < 3; k++) {
        if ((k == 1 && s.NH == groups[0]) || (k == 2 && (groups[0] == 1 || s.NH == 1)))
            continue; /* already run */
        kv_shape c = s;
        c.G = groups[k];
        check_case(r, &c, 71 + (uint64_t)k);
    }
}

typedef struct {
    const kernels_backend *k;
    float *inp, *out, *dout, *dinp;
    kv_shape s;
} kv_args;

static void call_fwd(const void *p)
{
    const kv_args *a = p;
    a->k->kv_repeat_forward(a->out, a->inp, a->s.B, a->s.T, a->s.NH, a->s.G, a->s.hd);
}

static void call_bwd(const void *p)
{
    const kv_args *a = p;
    a->k->kv_repeat_backward(a->dinp, a->dout, a->s.B, a->s.T, a->s.NH, a->s.G, a->s.hd);
}

/* Bytes: the forward reads inp and writes out; the backward reads dout and reads and writes
 * dinp. */
static void bench(lab_run *r)
{
    kv_args a = {.k = r->k,
                 .s = {(int)r->dim[LAB_B], (int)r->dim[LAB_T], (int)r->dim[LAB_NH], (int)r->dim[LAB_G],
                       (int)r->dim[LAB_HD]}};
    size_t nin = in_size(&a.s), nout = out_size(&a.s);
    lab_rng g = lab_rng_make(r->seed, 75);
    float *h = lab_floats(&g, nout, 1.0);
    a.inp = lab_upload(r, h, nin * 4);
    a.dout = lab_upload(r, h, nout * 4);
    a.out = lab_zeros(r, nout * 4);
    a.dinp = lab_zeros(r, nin * 4);
    char shape[96];
    lab_shape_str(r, "B T NH G HD", shape, sizeof shape);
    lab_bench(r, "kv_repeat_forward", KPREC_FP32, shape, call_fwd, &a, 4.0 * (nin + nout), 0);
    lab_bench(r, "kv_repeat_backward", KPREC_FP32, shape, call_bwd, &a, 4.0 * (2 * nin + nout), 0);
    lab_release(r, a.inp);
    lab_release(r, a.dout);
    lab_release(r, a.out);
    lab_release(r, a.dinp);
    free(h);
}

static const char *invalid(const long *dim)
{
    if (dim[LAB_NH] % dim[LAB_G])
        return "G must divide NH";
    return NULL;
}

const lab_op lab_kv_repeat = {
    .name = "kv_repeat",
    .what = "grouped-query K/V repeated to NH heads, forward (exact) and backward, G, NH and 1; fp32",
    .dims = "B T NH G HD",
    .precs = LAB_FP32_ONLY,
    .check_dim = {[LAB_B] = 2, [LAB_T] = 5, [LAB_NH] = 8, [LAB_G] = 2, [LAB_HD] = 16},
    .bench_cpu = {[LAB_B] = 2, [LAB_T] = 256, [LAB_NH] = 12, [LAB_G] = 4, [LAB_HD] = 64},
    .bench_gpu = {[LAB_B] = 8, [LAB_T] = 1024, [LAB_NH] = 32, [LAB_G] = 8, [LAB_HD] = 128},
    .invalid = invalid,
    .check = check,
    .bench = bench,
};
