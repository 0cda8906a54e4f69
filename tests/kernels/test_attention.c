/* Causal attention against a float64 implementation that materialises the whole (T, T) score
 * matrix per (batch, head) and masks it: output, the saved log-sum-exp, the backward against
 * central differences of L = sum(G * out), accumulation, bf16 emulation, and stability. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>
#include "kref.h"

enum { B = 3, T = 7, C = 12, NH = 3, HS = C / NH };
#define NQKV ((size_t)B * T * 3 * C)
#define NOUT ((size_t)B * T * C)
#define NLSE ((size_t)B * NH * T)

/* Full masked attention: S = Q K^T / sqrt(hs) with -inf above the diagonal, P = softmax rows. */
static void ref_attention(double *out, double *lse, const double *qkv)
{
    double S[T][T];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++)
                for (int j = 0; j < T; j++) {
                    double d = 0;
                    for (int c = 0; c < HS; c++)
                        d += qkv[(b * T + t) * 3 * C + h * HS + c] * qkv[(b * T + j) * 3 * C + C + h * HS + c];
                    S[t][j] = j <= t ? d / sqrt((double)HS) : -INFINITY;
                }
            for (int t = 0; t < T; t++) {
                double m = S[t][0], z = 0;
                for (int j = 1; j < T; j++)
                    m = fmax(m, S[t][j]);
                for (int j = 0; j < T; j++)
                    z += exp(S[t][j] - m);
                if (lse)
                    lse[(b * NH + h) * T + t] = m + log(z);
                for (int c = 0; c < HS; c++) {
                    double o = 0;
                    for (int j = 0; j < T; j++)
                        o += exp(S[t][j] - m) / z * qkv[(b * T + j) * 3 * C + 2 * C + h * HS + c];
                    out[(b * T + t) * C + h * HS + c] = o;
                }
            }
        }
}

typedef struct {
    double *qkv, *out;
    const float *G;
} at_ctx;

static double at_loss(void *p)
{
    at_ctx *c = p;
    ref_attention(c->out, NULL, c->qkv);
    return kr_dot(c->G, c->out, NOUT);
}

static void forward_and_lse(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {21};
    float *qkv = kr_floats(&r, NQKV, 1.5), *out = malloc(NOUT * sizeof(float)), *lse = malloc(NLSE * sizeof(float));
    double *dq = kr_to_double(qkv, NQKV), *ref = kr_doubles(NOUT), *rl = kr_doubles(NLSE);
    ref_attention(ref, rl, dq);
    K->attention_forward(out, lse, qkv, B, T, C, NH, KPREC_FP32);
    assert_true(kr_rel_err(out, ref, NOUT) < 1e-5);
    assert_true(kr_rel_err(lse, rl, NLSE) < 1e-5);
    /* Row t = 0 sees only itself: its output is its own v. */
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            assert_true(out[(size_t)b * T * C + c] == qkv[(size_t)b * T * 3 * C + 2 * C + c]);
    free(qkv); free(out); free(lse); free(dq); free(ref); free(rl);
}

static void backward_finite_differences_and_adds(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {22};
    float *qkv = kr_floats(&r, NQKV, 1.5), *out = malloc(NOUT * sizeof(float)), *lse = malloc(NLSE * sizeof(float));
    float *G = kr_floats(&r, NOUT, 1);
    K->attention_forward(out, lse, qkv, B, T, C, NH, KPREC_FP32);
    at_ctx c = {kr_to_double(qkv, NQKV), kr_doubles(NOUT), G};
    double *fd = kr_doubles(NQKV);
    kr_finite_diff(at_loss, &c, c.qkv, NQKV, 1e-5, fd);

    float *g = calloc(NQKV, sizeof(float));
    K->attention_backward(g, G, qkv, out, lse, B, T, C, NH, KPREC_FP32);
    assert_true(kr_rel_err(g, fd, NQKV) < 1e-4);
    /* Accumulation: on top of random values R the result is R + gradient. */
    float *g2 = kr_floats(&r, NQKV, 1);
    double *want = kr_to_double(g2, NQKV);
    for (size_t i = 0; i < NQKV; i++)
        want[i] += g[i];
    K->attention_backward(g2, G, qkv, out, lse, B, T, C, NH, KPREC_FP32);
    assert_true(kr_rel_err(g2, want, NQKV) < 1e-6);
    free(qkv); free(out); free(lse); free(G); free(c.qkv); free(c.out); free(fd); free(g); free(g2); free(want);
}

/* bf16: the float64 attention of the rounded q, k, v, then rounded, is what the kernel computes
 * (up to one bf16 ulp where fp32 sums differ); within ~1e-2 of the exact attention. */
static void forward_bf16(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {23};
    float *qkv = kr_floats(&r, NQKV, 1.5), *out = malloc(NOUT * sizeof(float)), *lse = malloc(NLSE * sizeof(float));
    double *dq = kr_to_double(qkv, NQKV), *exact = kr_doubles(NOUT), *emul = kr_doubles(NOUT);
    ref_attention(exact, NULL, dq);
    for (size_t i = 0; i < NQKV; i++)
        dq[i] = kr_round(dq[i], KPREC_BF16);
    ref_attention(emul, NULL, dq);
    K->attention_forward(out, lse, qkv, B, T, C, NH, KPREC_BF16);
    for (size_t i = 0; i < NOUT; i++) {
        double want = kr_round(emul[i], KPREC_BF16);
        assert_true((double)out[i] == kr_round(out[i], KPREC_BF16));
        assert_true(fabs(out[i] - want) <= kr_ulp(want, KPREC_BF16) + 1e-6);
    }
    assert_true(kr_rel_err(out, exact, NOUT) < 2e-2);
    /* The backward in bf16 stays finite and close to fp32's. */
    float *G = kr_floats(&r, NOUT, 1), *g = calloc(NQKV, sizeof(float)), *g32 = calloc(NQKV, sizeof(float));
    K->attention_backward(g, G, qkv, out, lse, B, T, C, NH, KPREC_BF16);
    K->attention_forward(out, lse, qkv, B, T, C, NH, KPREC_FP32);
    K->attention_backward(g32, G, qkv, out, lse, B, T, C, NH, KPREC_FP32);
    double *w32 = kr_to_double(g32, NQKV);
    assert_true(kr_rel_err(g, w32, NQKV) < 5e-2);
    free(qkv); free(out); free(lse); free(dq); free(exact); free(emul); free(G); free(g); free(g32); free(w32);
}

/* Scores of several hundred: exp without the row max would overflow to inf. */
static void large_scores_stay_finite(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {24};
    float *qkv = kr_floats(&r, NQKV, 30), *out = malloc(NOUT * sizeof(float)), *lse = malloc(NLSE * sizeof(float));
    double *dq = kr_to_double(qkv, NQKV), *ref = kr_doubles(NOUT);
    ref_attention(ref, NULL, dq);
    K->attention_forward(out, lse, qkv, B, T, C, NH, KPREC_FP32);
    assert_false(K->has_inf_or_nan(lse, NLSE));
    assert_true(kr_rel_err(out, ref, NOUT) < 1e-4);
    float *G = kr_floats(&r, NOUT, 1), *g = calloc(NQKV, sizeof(float));
    K->attention_backward(g, G, qkv, out, lse, B, T, C, NH, KPREC_FP32);
    assert_false(K->has_inf_or_nan(g, NQKV));
    free(qkv); free(out); free(lse); free(dq); free(ref); free(G); free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forward_and_lse),
        cmocka_unit_test(backward_finite_differences_and_adds),
        cmocka_unit_test(forward_bf16),
        cmocka_unit_test(large_scores_stay_finite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
