/* attention: causal multi-head self-attention over qkv (B,T,3C) = q, k, v each (B,T,NH,hs),
 * hs = C/NH. For query t of head h: s_j = (q_t . k_j) / sqrt(hs) for j <= t, p = softmax(s),
 * out_t = sum_j p_j v_j, lse_t = log sum_j exp(s_j). The backward gets the saved out and lse
 * and adds into dqkv:  dv_j += p_j dO,  ds_j = p_j (dO . v_j - dO . out_t),
 * dq += ds_j k_j / sqrt(hs),  dk_j += ds_j q / sqrt(hs),  with p_j = exp(s_j - lse_t).
 * In bf16/fp16 q, k, v are rounded before any product and out is rounded; scores, softmax and
 * lse stay fp32 (the reference rounds the same values with lab_round and works in double).
 *
 * The backward is checked on its own: backend and reference both get the reference forward's
 * out (rounded to the precision) and lse as floats, so the forward's error does not enter.
 *
 * Tolerances (rtol, atol):
 *   fp32 forward out, lse          1e-5, 1e-6
 *   bf16 / fp16 forward out        2^-7 / 2^-10, 1e-5   one ulp of the rounded output
 *   lse (all precisions)           1e-5, 1e-6
 *   backward dqkv (all)            1e-4, 1e-5   scores recomputed through exp, then summed again */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "lab.h"

/* ---- the float64 reference ----------------------------------------------------------- */
typedef struct {
    const double *qkv; /* rounded to the precision */
    int T, C, hs;
} view;

static const double *q_at(const view *v, int b, int t, int h)
{
    return v->qkv + ((size_t)b * v->T + t) * 3 * v->C + (size_t)h * v->hs;
}

static double dotd(const double *a, const double *b, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static double *rounded(const float *x, size_t n, kernels_precision prec)
{
    double *d = lab_xmalloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++)
        d[i] = prec == KPREC_FP32 ? (double)x[i] : lab_round(x[i], prec);
    return d;
}

static void ref_forward(double *out, double *lse, const float *qkv, int B, int T, int C, int NH,
                        kernels_precision prec)
{
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    double *rq = rounded(qkv, (size_t)B * T * 3 * C, prec);
    view v = {rq, T, C, hs};
    double *s = lab_xmalloc((size_t)T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                double m = -INFINITY, l = 0;
                for (int j = 0; j <= t; j++) {
                    s[j] = dotd(q_at(&v, b, t, h), q_at(&v, b, j, h) + C, hs) * scale;
                    m = fmax(m, s[j]);
                }
                for (int j = 0; j <= t; j++)
                    l += exp(s[j] - m);
                for (int j = 0; j <= t; j++)
                    s[j] = exp(s[j] - m) / l; /* now the probabilities */
                double *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
                for (int c = 0; c < hs; c++) {
                    double acc = 0;
                    for (int j = 0; j <= t; j++)
                        acc += s[j] * q_at(&v, b, j, h)[2 * C + c];
                    o[c] = prec == KPREC_FP32 ? acc : lab_round(acc, prec);
                }
                lse[((size_t)b * NH + h) * T + t] = m + log(l);
            }
    free(s);
    free(rq);
}

/* Adds into dqkv. out and lse are the saved tensors, as floats, exactly as the kernel gets them. */
static void ref_backward(double *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                         int B, int T, int C, int NH, kernels_precision prec)
{
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    double *rq = rounded(qkv, (size_t)B * T * 3 * C, prec);
    view v = {rq, T, C, hs};
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                size_t row = ((size_t)b * T + t) * C + (size_t)h * hs;
                const double *q = q_at(&v, b, t, h);
                double D = 0;
                for (int c = 0; c < hs; c++)
                    D += (double)dout[row + c] * out[row + c];
                double L = lse[((size_t)b * NH + h) * T + t];
                double *dq = dqkv + ((size_t)b * T + t) * 3 * C + (size_t)h * hs;
                for (int j = 0; j <= t; j++) {
                    const double *k = q_at(&v, b, j, h) + C, *vv = k + C;
                    double p = exp(dotd(q, k, hs) * scale - L), dp = 0;
                    for (int c = 0; c < hs; c++)
                        dp += dout[row + c] * vv[c];
                    double ds = p * (dp - D) * scale;
                    double *dk = dqkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * hs, *dv = dk + C;
                    for (int c = 0; c < hs; c++) {
                        dq[c] += ds * k[c];
                        dk[c] += ds * q[c];
                        dv[c] += p * dout[row + c];
                    }
                }
            }
    free(rq);
}

/* ---- the check --------------------------------------------------------------------- */
static float *narrow(const double *x, size_t n)
{
    float *f = lab_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        f[i] = (float)x[i];
    return f;
}

static void check(lab_run *r)
{
    int B = (int)r->dim[LAB_B], T = (int)r->dim[LAB_T], C = (int)r->dim[LAB_C], NH = (int)r->dim[LAB_NH];
    size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, nlse = (size_t)B * NH * T;
    lab_rng g = lab_rng_make(r->seed, 3);
    float *qkv = lab_floats(&g, nqkv, 1.5), *dout = lab_floats(&g, nout, 1.0), *dqkv0 = lab_floats(&g, nqkv, 0.1);
    float *d_qkv = lab_upload(r, qkv, nqkv * 4), *d_dout = lab_upload(r, dout, nout * 4);
    float *d_out = lab_zeros(r, nout * 4), *d_lse = lab_zeros(r, nlse * 4);
    double *rout = lab_dzeros(nout), *rlse = lab_dzeros(nlse);
    for (int p = KPREC_FP32; p <= KPREC_FP16; p++) {
        if (!(r->precs & LAB_PREC_BIT(p)))
            continue;
        kernels_precision prec = (kernels_precision)p;
        lab_tol fwd = prec == KPREC_FP32   ? (lab_tol){1e-5, 1e-6}
                      : prec == KPREC_BF16 ? (lab_tol){0x1p-7, 1e-5}
                                           : (lab_tol){0x1p-10, 1e-5};
        lab_tol tol_lse = {1e-5, 1e-6}, bwd = {1e-4, 1e-5};

        r->k->attention_forward(d_out, d_lse, d_qkv, B, T, C, NH, prec);
        ref_forward(rout, rlse, qkv, B, T, C, NH, prec);
        lab_compare_dev(r, "attention_forward", prec, "out", d_out, rout, nout, fwd);
        lab_compare_dev(r, "attention_forward", prec, "lse", d_lse, rlse, nlse, tol_lse);

        /* the backward from the reference's saved tensors and non-zero gradients */
        float *out_f = narrow(rout, nout), *lse_f = narrow(rlse, nlse);
        float *d_sout = lab_upload(r, out_f, nout * 4), *d_slse = lab_upload(r, lse_f, nlse * 4);
        float *d_dqkv = lab_upload(r, dqkv0, nqkv * 4);
        r->k->attention_backward(d_dqkv, d_dout, d_qkv, d_sout, d_slse, B, T, C, NH, prec);
        double *rdqkv = lab_widen(dqkv0, nqkv);
        ref_backward(rdqkv, dout, qkv, out_f, lse_f, B, T, C, NH, prec);
        lab_compare_dev(r, "attention_backward", prec, "dqkv", d_dqkv, rdqkv, nqkv, bwd);
        free(rdqkv);
        free(out_f);
        free(lse_f);
        lab_release(r, d_sout);
        lab_release(r, d_slse);
        lab_release(r, d_dqkv);
    }
    free(rout);
    free(rlse);
    lab_release(r, d_qkv);
    lab_release(r, d_dout);
    lab_release(r, d_out);
    lab_release(r, d_lse);
    free(qkv);
    free(dout);
    free(dqkv0);
}

/* ---- the benchmark ------------------------------------------------------------------- */
typedef struct {
    const kernels_backend *k;
    float *qkv, *out, *lse, *dout, *dqkv;
    int B, T, C, NH;
    kernels_precision prec;
} att_args;

static void call_fwd(const void *p)
{
    const att_args *a = p;
    a->k->attention_forward(a->out, a->lse, a->qkv, a->B, a->T, a->C, a->NH, a->prec);
}

static void call_bwd(const void *p)
{
    const att_args *a = p;
    a->k->attention_backward(a->dqkv, a->dout, a->qkv, a->out, a->lse, a->B, a->T, a->C, a->NH, a->prec);
}

/* FLOPs: QK^T and PV over the T(T+1)/2 visible pairs (2 FLOPs a multiply-add); the backward
 * recomputes QK^T and adds dV, dP, dQ and dK: five such products to the forward's two. */
static void bench(lab_run *r)
{
    int B = (int)r->dim[LAB_B], T = (int)r->dim[LAB_T], C = (int)r->dim[LAB_C], NH = (int)r->dim[LAB_NH];
    size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C;
    lab_rng g = lab_rng_make(r->seed, 4);
    float *h_qkv = lab_floats(&g, nqkv, 1.0), *h_dout = lab_floats(&g, nout, 1.0);
    att_args a = {.k = r->k, .B = B, .T = T, .C = C, .NH = NH};
    a.qkv = lab_upload(r, h_qkv, nqkv * 4);
    a.dout = lab_upload(r, h_dout, nout * 4);
    a.out = lab_zeros(r, nout * 4);
    a.lse = lab_zeros(r, (size_t)B * NH * T * 4);
    a.dqkv = lab_zeros(r, nqkv * 4);
    char shape[96];
    lab_shape_str(r, "B T C NH", shape, sizeof shape);
    double pair = 2.0 * B * C * (double)T * (T + 1) / 2;
    for (int p = KPREC_FP32; p <= KPREC_FP16; p++) {
        if (!(r->precs & LAB_PREC_BIT(p)))
            continue;
        a.prec = (kernels_precision)p;
        lab_bench(r, "attention_forward", a.prec, shape, call_fwd, &a, 2 * pair, 1);
        lab_bench(r, "attention_backward", a.prec, shape, call_bwd, &a, 5 * pair, 1);
    }
    float *devs[] = {a.qkv, a.dout, a.out, a.lse, a.dqkv};
    for (int i = 0; i < 5; i++)
        lab_release(r, devs[i]);
    free(h_qkv);
    free(h_dout);
}

static const char *invalid(const long *dim)
{
    if (dim[LAB_C] % dim[LAB_NH] != 0)
        return "C must be a multiple of NH";
    if (dim[LAB_C] / dim[LAB_NH] > 256)
        return "the head size C/NH must be at most 256 (the CUDA kernel's limit)";
    return NULL;
}

const lab_op lab_attention = {
    .name = "attention",
    .what = "causal multi-head attention forward (out, lse) and backward (dqkv); fp32, bf16, fp16",
    .dims = "B T C NH",
    .precs = LAB_ALL_PRECS,
    .check_dim = {[LAB_B] = 2, [LAB_T] = 29, [LAB_C] = 48, [LAB_NH] = 3},
    .bench_cpu = {[LAB_B] = 1, [LAB_T] = 256, [LAB_C] = 768, [LAB_NH] = 12},
    .bench_gpu = {[LAB_B] = 8, [LAB_T] = 1024, [LAB_C] = 768, [LAB_NH] = 12},
    .invalid = invalid,
    .check = check,
    .bench = bench,
};
