/* matmul: out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC], and its backward
 *   dinp += dout @ weight,  dweight += dout^T @ inp,  dbias += colsum(dout).
 * In bf16/fp16 the table rounds the GEMM operands (inp, weight; dout too in the backward) to
 * the precision, accumulates in fp32, and rounds the forward's output (after the bias); the
 * gradients stay fp32. The reference does the same roundings with lab_round and sums in double.
 *
 * Tolerances (rtol, atol as in lab.h):
 *   fp32 forward and backward   1e-5, 1e-6   fp32 sums of at most a few thousand terms
 *   bf16 forward                2^-7, 1e-5   one bf16 ulp: fp32 accumulation may move the
 *   fp16 forward                2^-10, 1e-5  result across a rounding boundary (one ulp)
 *   bf16/fp16 backward          1e-5, 1e-6   rounded operands, exact products, fp32 sums */
#include <stdlib.h>
#include "lab.h"

/* ---- the float64 reference ----------------------------------------------------------- */
static double *rounded(const float *x, size_t n, kernels_precision prec)
{
    double *d = lab_xmalloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++)
        d[i] = prec == KPREC_FP32 ? (double)x[i] : lab_round(x[i], prec);
    return d;
}

static void ref_forward(double *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC,
                        kernels_precision prec)
{
    double *a = rounded(inp, (size_t)N * C, prec), *w = rounded(weight, (size_t)OC * C, prec);
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0;
            for (int c = 0; c < C; c++)
                s += a[(size_t)i * C + c] * w[(size_t)o * C + c];
            out[(size_t)i * OC + o] = prec == KPREC_FP32 ? s : lab_round(s, prec);
        }
    free(a);
    free(w);
}

/* Adds into dinp, dweight, dbias (which hold the gradients' starting values). */
static void ref_backward(double *dinp, double *dweight, double *dbias, const float *dout, const float *inp,
                         const float *weight, int N, int C, int OC, kernels_precision prec)
{
    double *d = rounded(dout, (size_t)N * OC, prec), *a = rounded(inp, (size_t)N * C, prec),
           *w = rounded(weight, (size_t)OC * C, prec);
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double g = d[(size_t)i * OC + o];
            dbias[o] += g;
            for (int c = 0; c < C; c++) {
                dinp[(size_t)i * C + c] += g * w[(size_t)o * C + c];
                dweight[(size_t)o * C + c] += g * a[(size_t)i * C + c];
            }
        }
    free(d);
    free(a);
    free(w);
}

/* ---- the check --------------------------------------------------------------------- */
static void check(lab_run *r)
{
    int N = (int)r->dim[LAB_N], C = (int)r->dim[LAB_C], OC = (int)r->dim[LAB_OC];
    size_t nin = (size_t)N * C, nw = (size_t)OC * C, nout = (size_t)N * OC;
    lab_rng g = lab_rng_make(r->seed, 1);
    float *inp = lab_floats(&g, nin, 1.0), *weight = lab_floats(&g, nw, 0.5), *bias = lab_floats(&g, OC, 0.5);
    float *dout = lab_floats(&g, nout, 1.0);
    float *dinp0 = lab_floats(&g, nin, 0.1), *dw0 = lab_floats(&g, nw, 0.1), *db0 = lab_floats(&g, OC, 0.1);
    float *d_inp = lab_upload(r, inp, nin * 4), *d_w = lab_upload(r, weight, nw * 4);
    float *d_bias = lab_upload(r, bias, (size_t)OC * 4), *d_dout = lab_upload(r, dout, nout * 4);
    float *d_out = lab_zeros(r, nout * 4);
    double *ref = lab_dzeros(nout > nin ? (nout > nw ? nout : nw) : (nin > nw ? nin : nw));
    for (int p = KPREC_FP32; p <= KPREC_FP16; p++) {
        if (!(r->precs & LAB_PREC_BIT(p)))
            continue;
        kernels_precision prec = (kernels_precision)p;
        lab_tol fwd = prec == KPREC_FP32   ? (lab_tol){1e-5, 1e-6}
                      : prec == KPREC_BF16 ? (lab_tol){0x1p-7, 1e-5}
                                           : (lab_tol){0x1p-10, 1e-5};
        lab_tol bwd = {1e-5, 1e-6};

        r->k->matmul_forward(d_out, d_inp, d_w, d_bias, N, C, OC, prec);
        ref_forward(ref, inp, weight, bias, N, C, OC, prec);
        lab_compare_dev(r, "matmul_forward", prec, "out", d_out, ref, nout, fwd);
        r->k->matmul_forward(d_out, d_inp, d_w, NULL, N, C, OC, prec);
        ref_forward(ref, inp, weight, NULL, N, C, OC, prec);
        lab_compare_dev(r, "matmul_forward", prec, "out(nob)", d_out, ref, nout, fwd);

        /* backward from non-zero gradients: it must add */
        float *d_dinp = lab_upload(r, dinp0, nin * 4), *d_dw = lab_upload(r, dw0, nw * 4),
              *d_db = lab_upload(r, db0, (size_t)OC * 4);
        r->k->matmul_backward(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, N, C, OC, prec);
        double *rdinp = lab_widen(dinp0, nin), *rdw = lab_widen(dw0, nw), *rdb = lab_widen(db0, OC);
        ref_backward(rdinp, rdw, rdb, dout, inp, weight, N, C, OC, prec);
        lab_compare_dev(r, "matmul_backward", prec, "dinp", d_dinp, rdinp, nin, bwd);
        lab_compare_dev(r, "matmul_backward", prec, "dweight", d_dw, rdw, nw, bwd);
        lab_compare_dev(r, "matmul_backward", prec, "dbias", d_db, rdb, OC, bwd);
        free(rdinp);
        free(rdw);
        free(rdb);
        lab_release(r, d_dinp);
        lab_release(r, d_dw);
        lab_release(r, d_db);
    }
    free(ref);
    void *devs[] = {d_inp, d_w, d_bias, d_dout, d_out};
    for (int i = 0; i < 5; i++)
        lab_release(r, devs[i]);
    void *hosts[] = {inp, weight, bias, dout, dinp0, dw0, db0};
    for (int i = 0; i < 7; i++)
        free(hosts[i]);
}

/* ---- the benchmark ------------------------------------------------------------------- */
typedef struct {
    const kernels_backend *k;
    float *out, *inp, *w, *bias, *dout, *dinp, *dw, *db;
    int N, C, OC;
    kernels_precision prec;
} mm_args;

static void call_fwd(const void *p)
{
    const mm_args *a = p;
    a->k->matmul_forward(a->out, a->inp, a->w, a->bias, a->N, a->C, a->OC, a->prec);
}

static void call_bwd(const void *p)
{
    const mm_args *a = p;
    a->k->matmul_backward(a->dinp, a->dw, a->db, a->dout, a->inp, a->w, a->N, a->C, a->OC, a->prec);
}

static void bench(lab_run *r)
{
    int N = (int)r->dim[LAB_N], C = (int)r->dim[LAB_C], OC = (int)r->dim[LAB_OC];
    size_t nin = (size_t)N * C, nw = (size_t)OC * C, nout = (size_t)N * OC;
    lab_rng g = lab_rng_make(r->seed, 2);
    float *h_in = lab_floats(&g, nin, 1.0), *h_w = lab_floats(&g, nw, 0.05), *h_out = lab_floats(&g, nout, 1.0);
    mm_args a = {.k = r->k, .N = N, .C = C, .OC = OC};
    a.inp = lab_upload(r, h_in, nin * 4);
    a.w = lab_upload(r, h_w, nw * 4);
    a.dout = lab_upload(r, h_out, nout * 4);
    a.bias = lab_zeros(r, (size_t)OC * 4);
    a.out = lab_zeros(r, nout * 4);
    a.dinp = lab_zeros(r, nin * 4);
    a.dw = lab_zeros(r, nw * 4);
    a.db = lab_zeros(r, (size_t)OC * 4);
    char shape[96];
    lab_shape_str(r, "N C OC", shape, sizeof shape);
    double flops = 2.0 * N * C * OC;
    for (int p = KPREC_FP32; p <= KPREC_FP16; p++) {
        if (!(r->precs & LAB_PREC_BIT(p)))
            continue;
        a.prec = (kernels_precision)p;
        lab_bench(r, "matmul_forward", a.prec, shape, call_fwd, &a, flops, 1);
        lab_bench(r, "matmul_backward", a.prec, shape, call_bwd, &a, 2 * flops, 1);
    }
    float *devs[] = {a.inp, a.w, a.dout, a.bias, a.out, a.dinp, a.dw, a.db};
    for (int i = 0; i < 8; i++)
        lab_release(r, devs[i]);
    free(h_in);
    free(h_w);
    free(h_out);
}

const lab_op lab_matmul = {
    .name = "matmul",
    .what = "out = inp @ weight^T + bias and its backward (dinp, dweight, dbias); fp32, bf16, fp16",
    .dims = "N C OC",
    .precs = LAB_ALL_PRECS,
    .check_dim = {[LAB_N] = 37, [LAB_C] = 91, [LAB_OC] = 67},
    .bench_cpu = {[LAB_N] = 256, [LAB_C] = 768, [LAB_OC] = 2304},
    .bench_gpu = {[LAB_N] = 8192, [LAB_C] = 768, [LAB_OC] = 3072},
    .check = check,
    .bench = bench,
};
