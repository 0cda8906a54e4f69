/* CPU kernels against float64 references written here, independently of kernels/cpu/, on
 * random inputs of odd sizes; backward kernels also against central finite differences of the
 * float64 references. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kernels.h"

static const kernels_backend *K;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) /* uniform in [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static float *frand(size_t n, double scale)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(urand() * scale);
    return x;
}

static double *to_double(const float *x, size_t n)
{
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

/* max |got - want| / max(max |want|, 1e-30) */
static double rel_err(const float *got, const double *want, size_t n)
{
    double num = 0, den = 1e-30;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]))
            return INFINITY;
        num = fmax(num, fabs(got[i] - want[i]));
        den = fmax(den, fabs(want[i]));
    }
    return num / den;
}

/* ---- references (float64) ------------------------------------------------------------ */
static void ref_matmul(double *out, const double *in, const double *w, const double *b, int N, int C, int OC)
{
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double s = b ? b[o] : 0;
            for (int c = 0; c < C; c++)
                s += in[(size_t)i * C + c] * w[(size_t)o * C + c];
            out[(size_t)i * OC + o] = s;
        }
}

static void ref_layernorm(double *out, const double *x, const double *w, const double *b, int N, int C)
{
    for (int i = 0; i < N; i++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++)
            m += x[i * C + c];
        m /= C;
        for (int c = 0; c < C; c++)
            v += (x[i * C + c] - m) * (x[i * C + c] - m);
        v /= C;
        for (int c = 0; c < C; c++)
            out[i * C + c] = (x[i * C + c] - m) / sqrt(v + 1e-5) * w[c] + b[c];
    }
}

/* Full (T x T) causal softmax attention in double. */
static void ref_attention(double *out, const double *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH;
    double *att = malloc((size_t)T * sizeof *att);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const double *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                double m = -INFINITY, s = 0;
                for (int j = 0; j <= t; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * 3 * C + C + h * hs;
                    double d = 0;
                    for (int c = 0; c < hs; c++)
                        d += q[c] * k[c];
                    att[j] = d / sqrt((double)hs);
                    m = fmax(m, att[j]);
                }
                for (int j = 0; j <= t; j++)
                    s += (att[j] = exp(att[j] - m));
                for (int c = 0; c < hs; c++) {
                    double o = 0;
                    for (int j = 0; j <= t; j++)
                        o += att[j] / s * qkv[((size_t)b * T + j) * 3 * C + 2 * C + h * hs + c];
                    out[((size_t)b * T + t) * C + h * hs + c] = o;
                }
            }
    free(att);
}

static double ref_gelu(double x)
{
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* ---- tests ----------------------------------------------------------------------------- */
static void matmul_forward_and_backward(void **state)
{
    int N = 37, C = 29, OC = 43;
    float *in = frand((size_t)N * C, 1), *w = frand((size_t)OC * C, 1), *b = frand(OC, 1);
    float *out = calloc((size_t)N * OC, sizeof(float));
    double *din = to_double(in, (size_t)N * C), *dw = to_double(w, (size_t)OC * C), *db = to_double(b, OC);
    double *ref = malloc((size_t)N * OC * sizeof(double));
    K->matmul_forward(out, in, w, b, N, C, OC, KPREC_FP32);
    ref_matmul(ref, din, dw, db, N, C, OC);
    assert_true(rel_err(out, ref, (size_t)N * OC) < 1e-5);

    /* bf16: inputs rounded to 8 mantissa bits: within ~1e-2 of the exact product. */
    K->matmul_forward(out, in, w, b, N, C, OC, KPREC_BF16);
    assert_true(rel_err(out, ref, (size_t)N * OC) < 1e-2);
    K->matmul_forward(out, in, w, b, N, C, OC, KPREC_FP16);
    assert_true(rel_err(out, ref, (size_t)N * OC) < 5e-3);

    /* Backward of L = sum(G * out) for random G: dinp = G W, dW = G^T X, db = colsum G. */
    float *G = frand((size_t)N * OC, 1);
    float *gi = calloc((size_t)N * C, sizeof(float)), *gw = calloc((size_t)OC * C, sizeof(float)),
          *gb = calloc(OC, sizeof(float));
    K->matmul_backward(gi, gw, gb, G, in, w, N, C, OC, KPREC_FP32);
    double *ri = calloc((size_t)N * C, sizeof(double)), *rw = calloc((size_t)OC * C, sizeof(double)),
           *rb = calloc(OC, sizeof(double));
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double g = G[(size_t)i * OC + o];
            rb[o] += g;
            for (int c = 0; c < C; c++) {
                ri[(size_t)i * C + c] += g * dw[(size_t)o * C + c];
                rw[(size_t)o * C + c] += g * din[(size_t)i * C + c];
            }
        }
    assert_true(rel_err(gi, ri, (size_t)N * C) < 1e-5);
    assert_true(rel_err(gw, rw, (size_t)OC * C) < 1e-5);
    assert_true(rel_err(gb, rb, OC) < 1e-5);
    /* Backward ADDS: a second call doubles the gradients. */
    K->matmul_backward(gi, gw, gb, G, in, w, N, C, OC, KPREC_FP32);
    for (size_t i = 0; i < (size_t)OC * C; i++)
        rw[i] *= 2;
    assert_true(rel_err(gw, rw, (size_t)OC * C) < 1e-5);
    free(in); free(w); free(b); free(out); free(din); free(dw); free(db); free(ref);
    free(G); free(gi); free(gw); free(gb); free(ri); free(rw); free(rb);
}

static void layernorm_forward_and_finite_differences(void **state)
{
    int N = 5, C = 13;
    float *x = frand((size_t)N * C, 2), *w = frand(C, 1), *b = frand(C, 1);
    float *out = malloc((size_t)N * C * sizeof(float)), *mean = malloc(N * sizeof(float)), *rstd = malloc(N * sizeof(float));
    double *dx = to_double(x, (size_t)N * C), *dw = to_double(w, C), *db = to_double(b, C);
    double *ref = malloc((size_t)N * C * sizeof(double));
    K->layernorm_forward(out, mean, rstd, x, w, b, N, C);
    ref_layernorm(ref, dx, dw, db, N, C);
    assert_true(rel_err(out, ref, (size_t)N * C) < 1e-5);

    /* L = sum(G * y): compare analytic gradients with central differences of the reference. */
    float *G = frand((size_t)N * C, 1);
    float *gx = calloc((size_t)N * C, sizeof(float)), *gw = calloc(C, sizeof(float)), *gb = calloc(C, sizeof(float));
    K->layernorm_backward(gx, gw, gb, G, x, w, mean, rstd, N, C);
    double *fd = malloc((size_t)N * C * sizeof(double)), *tmp = malloc((size_t)N * C * sizeof(double));
    const double h = 1e-6;
    for (size_t i = 0; i < (size_t)N * C; i++) {
        double keep = dx[i], lp = 0, lm = 0;
        dx[i] = keep + h;
        ref_layernorm(tmp, dx, dw, db, N, C);
        for (size_t j = 0; j < (size_t)N * C; j++) lp += G[j] * tmp[j];
        dx[i] = keep - h;
        ref_layernorm(tmp, dx, dw, db, N, C);
        for (size_t j = 0; j < (size_t)N * C; j++) lm += G[j] * tmp[j];
        dx[i] = keep;
        fd[i] = (lp - lm) / (2 * h);
    }
    assert_true(rel_err(gx, fd, (size_t)N * C) < 1e-4);
    double *fw = calloc(C, sizeof(double));
    ref_layernorm(tmp, dx, dw, db, N, C);
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++)
            fw[c] += G[i * C + c] * (tmp[i * C + c] - db[c]) / dw[c]; /* dL/dw_c = sum G * normalised */
    assert_true(rel_err(gw, fw, C) < 1e-4);
    free(x); free(w); free(b); free(out); free(mean); free(rstd); free(dx); free(dw); free(db); free(ref);
    free(G); free(gx); free(gw); free(gb); free(fd); free(tmp); free(fw);
}

static void attention_forward_and_finite_differences(void **state)
{
    int B = 2, T = 7, C = 12, NH = 3;
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
    float *qkv = frand(nq, 1.5), *out = malloc(no * sizeof(float)), *lse = malloc((size_t)B * NH * T * sizeof(float));
    double *dq = to_double(qkv, nq), *ref = malloc(no * sizeof(double)), *tmp = malloc(no * sizeof(double));
    K->attention_forward(out, lse, qkv, B, T, C, NH, KPREC_FP32);
    ref_attention(ref, dq, B, T, C, NH);
    assert_true(rel_err(out, ref, no) < 1e-5);

    float *G = frand(no, 1), *g = calloc(nq, sizeof(float));
    K->attention_backward(g, G, qkv, out, lse, B, T, C, NH, KPREC_FP32);
    double *fd = malloc(nq * sizeof(double));
    const double h = 1e-6;
    for (size_t i = 0; i < nq; i++) {
        double keep = dq[i], lp = 0, lm = 0;
        dq[i] = keep + h;
        ref_attention(tmp, dq, B, T, C, NH);
        for (size_t j = 0; j < no; j++) lp += G[j] * tmp[j];
        dq[i] = keep - h;
        ref_attention(tmp, dq, B, T, C, NH);
        for (size_t j = 0; j < no; j++) lm += G[j] * tmp[j];
        dq[i] = keep;
        fd[i] = (lp - lm) / (2 * h);
    }
    assert_true(rel_err(g, fd, nq) < 1e-4);

    /* bf16: within ~1e-2 of the exact result, never NaN. */
    K->attention_forward(out, lse, qkv, B, T, C, NH, KPREC_BF16);
    assert_true(rel_err(out, ref, no) < 2e-2);
    free(qkv); free(out); free(lse); free(dq); free(ref); free(tmp); free(G); free(g); free(fd);
}

static void gelu_residual_softmax(void **state)
{
    size_t N = 101;
    float *x = frand(N, 4), *y = malloc(N * sizeof(float)), *G = frand(N, 1), *gx = calloc(N, sizeof(float));
    double *ref = malloc(N * sizeof(double)), *fd = malloc(N * sizeof(double));
    K->gelu_forward(y, x, N);
    for (size_t i = 0; i < N; i++)
        ref[i] = ref_gelu(x[i]);
    assert_true(rel_err(y, ref, N) < 1e-5);
    K->gelu_backward(gx, x, G, N);
    for (size_t i = 0; i < N; i++)
        fd[i] = G[i] * (ref_gelu(x[i] + 1e-6) - ref_gelu(x[i] - 1e-6)) / 2e-6;
    assert_true(rel_err(gx, fd, N) < 1e-4);

    float *z = malloc(N * sizeof(float));
    K->residual_forward(z, x, G, N);
    for (size_t i = 0; i < N; i++)
        ref[i] = (double)x[i] + G[i];
    assert_true(rel_err(z, ref, N) < 1e-6);

    int rows = 3, cols = 17;
    float *s = frand((size_t)rows * cols, 30), *p = malloc((size_t)rows * cols * sizeof(float));
    double *rp = malloc((size_t)rows * cols * sizeof(double));
    K->softmax_forward(p, s, rows, cols);
    for (int r = 0; r < rows; r++) {
        double m = -INFINITY, sum = 0;
        for (int c = 0; c < cols; c++) m = fmax(m, s[r * cols + c]);
        for (int c = 0; c < cols; c++) sum += exp(s[r * cols + c] - m);
        for (int c = 0; c < cols; c++) rp[r * cols + c] = exp(s[r * cols + c] - m) / sum;
    }
    assert_true(rel_err(p, rp, (size_t)rows * cols) < 1e-5);
    free(x); free(y); free(G); free(gx); free(ref); free(fd); free(z); free(s); free(p); free(rp);
}

static void cross_entropy_and_encoder(void **state)
{
    int N = 9, V = 31;
    float *logits = frand((size_t)N * V, 8), *loss = malloc(N * sizeof(float));
    int targets[9] = {0, 30, 7, 7, 12, 3, 29, 1, 15};
    K->cross_entropy_forward(loss, logits, targets, N, V);
    double ref[9], *rg = calloc((size_t)N * V, sizeof(double));
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int v = 0; v < V; v++) s += exp((double)logits[i * V + v]);
        ref[i] = log(s) - logits[i * V + targets[i]];
        for (int v = 0; v < V; v++)
            rg[i * V + v] = 0.25 * (exp((double)logits[i * V + v]) / s - (v == targets[i]));
    }
    assert_true(rel_err(loss, ref, N) < 1e-5);
    float *g = calloc((size_t)N * V, sizeof(float));
    K->cross_entropy_backward(g, logits, targets, 0.25f, N, V);
    assert_true(rel_err(g, rg, (size_t)N * V) < 1e-5);

    int B = 2, T = 3, C = 5, Vs = 7;
    int tok[6] = {1, 6, 1, 0, 3, 6};
    float *wte = frand((size_t)Vs * C, 1), *wpe = frand((size_t)T * C, 1), *o = malloc((size_t)B * T * C * sizeof(float));
    double *ro = malloc((size_t)B * T * C * sizeof(double));
    K->encoder_forward(o, tok, wte, wpe, B, T, C);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                ro[(b * T + t) * C + c] = (double)wte[tok[b * T + t] * C + c] + wpe[t * C + c];
    assert_true(rel_err(o, ro, (size_t)B * T * C) < 1e-6);
    float *dwte = calloc((size_t)Vs * C, sizeof(float)), *dwpe = calloc((size_t)T * C, sizeof(float));
    float *d = frand((size_t)B * T * C, 1);
    K->encoder_backward(dwte, dwpe, d, tok, B, T, C);
    /* token 1 appears at (b=0,t=0) and (b=0,t=2): its gradient is the sum of both rows */
    for (int c = 0; c < C; c++)
        assert_true(fabsf(dwte[1 * C + c] - (d[0 * C + c] + d[2 * C + c])) < 1e-6);
    free(logits); free(loss); free(rg); free(g); free(wte); free(wpe); free(o); free(ro); free(dwte); free(dwpe); free(d);
}

static void adamw_matches_closed_form(void **state)
{
    size_t n = 11;
    float *p = frand(n, 1), *g = frand(n, 1), *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
    double *p0 = to_double(p, n), *ref = malloc(n * sizeof(double));
    float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, scale = 0.5f;
    K->adamw_update(p, g, m, v, n, lr, b1, b2, eps, wd, 1, scale);
    /* First step: mhat = g, vhat = g^2, so the update is lr * (sign(g) + wd * p) (to eps). */
    for (size_t i = 0; i < n; i++) {
        double gs = (double)g[i] * scale;
        ref[i] = p0[i] - lr * (gs / (fabs(gs) + eps) + wd * p0[i]);
    }
    assert_true(rel_err(p, ref, n) < 1e-5);
    free(p); free(g); free(m); free(v); free(p0); free(ref);
}

static void half_conversions_are_exact(void **state)
{
    assert_int_equal(kernels_float_to_bf16(1.0f), 0x3f80);
    assert_int_equal(kernels_float_to_fp16(1.0f), 0x3c00);
    assert_int_equal(kernels_float_to_fp16(65504.0f), 0x7bff);        /* largest normal */
    assert_int_equal(kernels_float_to_fp16(65520.0f), 0x7c00);        /* ties to even: inf */
    assert_int_equal(kernels_float_to_fp16(1e6f), 0x7c00);
    assert_int_equal(kernels_float_to_fp16(ldexpf(1, -24)), 0x0001);  /* smallest subnormal */
    assert_int_equal(kernels_float_to_fp16(ldexpf(1, -25)), 0x0000);  /* tie to even: 0 */
    assert_int_equal(kernels_float_to_fp16(ldexpf(3, -25)), 0x0002);  /* 1.5 -> 2 */
    assert_int_equal(kernels_float_to_fp16(-2.0f), 0xc000);
    /* bf16 ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 */
    assert_int_equal(kernels_float_to_bf16(1.0f + ldexpf(1, -8)), 0x3f80);
    assert_int_equal(kernels_float_to_bf16(1.0f + 3 * ldexpf(1, -8)), 0x3f82);
    assert_true(isnan(kernels_bf16_to_float(kernels_float_to_bf16(NAN))));
    assert_true(isnan(kernels_fp16_to_float(kernels_float_to_fp16(NAN))));
    assert_true(isinf(kernels_bf16_to_float(kernels_float_to_bf16(3.4e38f * 1.01f))));
    /* Every fp16 value survives a round trip through float. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        uint16_t x = (uint16_t)h;
        if (((x >> 10) & 0x1f) == 0x1f && (x & 0x3ff))
            continue; /* NaN payloads */
        assert_int_equal(kernels_float_to_fp16(kernels_fp16_to_float(x)), x);
    }
    /* Rounding error bounds: 2^-8 relative for bf16, 2^-11 for fp16 (normals). */
    for (int i = 0; i < 1000; i++) {
        float f = (float)(urand() * 100);
        if (fabsf(f) < 1e-3f)
            continue;
        assert_true(fabsf(kernels_round(f, KPREC_BF16) - f) <= fabsf(f) * 0.00390625f);
        assert_true(fabsf(kernels_round(f, KPREC_FP16) - f) <= fabsf(f) * 0.00048828125f);
    }
}

static void reductions(void **state)
{
    size_t n = 1001;
    float *x = frand(n, 1);
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    assert_true(fabs(K->sum_squares(x, n) - s) < 1e-9 * s);
    assert_false(K->has_inf_or_nan(x, n));
    x[n / 3] = INFINITY;
    assert_true(K->has_inf_or_nan(x, n));
    x[n / 3] = NAN;
    assert_true(K->has_inf_or_nan(x, n));
    free(x);
}

int main(void)
{
    K = kernels_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matmul_forward_and_backward),
        cmocka_unit_test(layernorm_forward_and_finite_differences),
        cmocka_unit_test(attention_forward_and_finite_differences),
        cmocka_unit_test(gelu_residual_softmax),
        cmocka_unit_test(cross_entropy_and_encoder),
        cmocka_unit_test(adamw_matches_closed_form),
        cmocka_unit_test(half_conversions_are_exact),
        cmocka_unit_test(reductions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
