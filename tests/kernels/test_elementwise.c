/* GELU (tanh form) forward and backward, the residual add, and the row softmax against float64;
 * the GELU backward also against central differences. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <cmocka.h>
#include "kref.h"

#define SQRT_2_OVER_PI 0.79788456080286535588

static double ref_gelu(double x)
{
    return 0.5 * x * (1 + tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
}

typedef struct {
    double *x;
    const float *G;
    size_t n;
} gelu_ctx;

static double gelu_loss(void *p)
{
    gelu_ctx *c = p;
    double s = 0;
    for (size_t i = 0; i < c->n; i++)
        s += c->G[i] * ref_gelu(c->x[i]);
    return s;
}

static void gelu(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {31};
    size_t n = 1031;
    float *x = kr_floats(&r, n, 5), *y = malloc(n * sizeof(float)), *G = kr_floats(&r, n, 1);
    double *ref = kr_doubles(n);
    for (size_t i = 0; i < n; i++)
        ref[i] = ref_gelu(x[i]);
    K->gelu_forward(y, x, n, KPREC_FP32);
    assert_true(kr_rel_err(y, ref, n) < 1e-5);

    gelu_ctx c = {kr_to_double(x, n), G, n};
    double *fd = kr_doubles(n);
    kr_finite_diff(gelu_loss, &c, c.x, n, 1e-5, fd);
    float *g = kr_floats(&r, n, 1);
    double *want = kr_to_double(g, n);
    for (size_t i = 0; i < n; i++)
        want[i] += fd[i];
    K->gelu_backward(g, x, G, n, KPREC_FP32);
    assert_true(kr_rel_err(g, want, n) < 1e-5);
    float *z = calloc(n, sizeof(float));
    K->gelu_backward(z, x, G, n, KPREC_FP32);
    assert_true(kr_rel_err(z, fd, n) < 1e-5);
    /* Far tails: gelu(x) -> x for large x and -> 0 for very negative x, without NaN. */
    float tails[4] = {-30.0f, -10.0f, 10.0f, 30.0f}, ty[4], tg[4] = {0}, ones[4] = {1, 1, 1, 1};
    K->gelu_forward(ty, tails, 4, KPREC_FP32);
    K->gelu_backward(tg, tails, ones, 4, KPREC_FP32);
    assert_true(fabsf(ty[0]) < 1e-6f && fabsf(ty[3] - 30.0f) < 1e-5f);
    assert_true(fabsf(tg[0]) < 1e-6f && fabsf(tg[3] - 1.0f) < 1e-6f);
    free(x); free(y); free(G); free(ref); free(c.x); free(fd); free(g); free(want); free(z);
}

static void residual(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {32};
    size_t n = 1031;
    float *a = kr_floats(&r, n, 3), *b = kr_floats(&r, n, 3), *y = malloc(n * sizeof(float));
    K->residual_forward(y, a, b, n, KPREC_FP32);
    for (size_t i = 0; i < n; i++)
        assert_true(y[i] == a[i] + b[i]); /* one fp32 add: exactly the fp32 sum */
    K->residual_forward(a, a, b, n, KPREC_FP32); /* in place, as the residual stream uses it */
    assert_memory_equal(a, y, n * sizeof(float));
    free(a); free(b); free(y);
}

/* The stored precision: each output is the fp32 result rounded to bf16 / fp16 to nearest, in
 * the same kernel. Checked against the fp32 kernel's output: it lies within half a unit in the
 * last place of the fp32 value (2^-8 relative for bf16, 2^-11 for a normal fp16; below 2^-14,
 * half of fp16's subnormal spacing, 2^-25); a bf16 value has its low 16 bits zero and no nearer
 * neighbour (one bf16 ulp either side is farther); an fp16 value survives a trip through fp16. */
static void assert_rounded(const float *got, const float *exact, size_t n, kernels_precision prec)
{
    for (size_t i = 0; i < n; i++) {
        double e = exact[i], g = got[i], rel = prec == KPREC_BF16 ? 0x1p-8 : 0x1p-11;
        assert_true(fabs(g - e) <= rel * fabs(e) + (prec == KPREC_FP16 ? 0x1p-25 : 1e-30));
        if (prec == KPREC_BF16) {
            uint32_t u;
            memcpy(&u, &got[i], sizeof u);
            assert_int_equal(u & 0xffffu, 0);
            if (got[i] == 0.0f)
                continue; /* below zero's bit pattern lies a NaN, not a neighbour */
            float up, down;
            uint32_t uu = u + 0x10000u, ud = u - 0x10000u;
            memcpy(&up, &uu, sizeof up);
            memcpy(&down, &ud, sizeof down);
            assert_true(fabs(up - e) >= fabs(g - e) && fabs(down - e) >= fabs(g - e));
        } else {
            /* an fp16 value survives the trip through fp16 (an unrounded fp32 one would not, for
             * all but a few of 1031) */
            float back = kernels_round(got[i], KPREC_FP16);
            assert_memory_equal(&back, &got[i], sizeof back);
        }
    }
}

static void stored_precision(void **state)
{
    (void)state;
    const kernels_backend *K = kernels_cpu();
    krng r = {34};
    size_t n = 1031;
    float *a = kr_floats(&r, n, 3), *b = kr_floats(&r, n, 3), *G = kr_floats(&r, n, 1), *g0 = kr_floats(&r, n, 1);
    float *exact = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    float *ge = malloc(n * sizeof(float)), *gg = malloc(n * sizeof(float));
    kernels_precision precs[2] = {KPREC_BF16, KPREC_FP16};
    for (int p = 0; p < 2; p++) {
        K->residual_forward(exact, a, b, n, KPREC_FP32);
        K->residual_forward(got, a, b, n, precs[p]);
        assert_rounded(got, exact, n, precs[p]);
        K->gelu_forward(exact, a, n, KPREC_FP32);
        K->gelu_forward(got, a, n, precs[p]);
        assert_rounded(got, exact, n, precs[p]);
        memcpy(ge, g0, n * sizeof(float)); /* the backward rounds the sum it adds into */
        memcpy(gg, g0, n * sizeof(float));
        K->gelu_backward(ge, a, G, n, KPREC_FP32);
        K->gelu_backward(gg, a, G, n, precs[p]);
        assert_rounded(gg, ge, n, precs[p]);
    }
    /* SwiGLU over rows of [gate | up]: N 3 rows of F 7 */
    int N = 3, F = 7;
    K->swiglu_forward(exact, a, N, F, KPREC_FP32);
    K->swiglu_forward(got, a, N, F, KPREC_BF16);
    assert_rounded(got, exact, (size_t)N * F, KPREC_BF16);
    memcpy(ge, g0, (size_t)N * 2 * F * sizeof(float));
    memcpy(gg, g0, (size_t)N * 2 * F * sizeof(float));
    K->swiglu_backward(ge, a, G, N, F, KPREC_FP32);
    K->swiglu_backward(gg, a, G, N, F, KPREC_BF16);
    assert_rounded(gg, ge, (size_t)N * 2 * F, KPREC_BF16);
    K->swiglu_forward(got, a, N, F, KPREC_FP16);
    assert_rounded(got, exact, (size_t)N * F, KPREC_FP16);
    memcpy(gg, g0, (size_t)N * 2 * F * sizeof(float));
    K->swiglu_backward(gg, a, G, N, F, KPREC_FP16);
    assert_rounded(gg, ge, (size_t)N * 2 * F, KPREC_FP16);
    free(a); free(b); free(G); free(g0); free(exact); free(got); free(ge); free(gg);
}

static void softmax(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {33};
    int rows = 5, cols = 29;
    for (int big = 0; big < 2; big++) {
        /* big: logits around 1e4, where exp without subtracting the max overflows */
        float *x = kr_floats(&r, (size_t)rows * cols, big ? 50 : 3), *y = malloc((size_t)rows * cols * sizeof(float));
        if (big)
            for (int i = 0; i < rows * cols; i++)
                x[i] += 1e4f;
        double *ref = kr_doubles((size_t)rows * cols);
        for (int i = 0; i < rows; i++) {
            double m = -INFINITY, z = 0;
            for (int c = 0; c < cols; c++)
                m = fmax(m, x[i * cols + c]);
            for (int c = 0; c < cols; c++)
                z += exp(x[i * cols + c] - m);
            for (int c = 0; c < cols; c++)
                ref[i * cols + c] = exp(x[i * cols + c] - m) / z;
        }
        K->softmax_forward(y, x, rows, cols);
        for (int i = 0; i < rows; i++)
            assert_true(kr_rel_err(y + i * cols, ref + i * cols, cols) < 1e-5);
        free(x); free(y); free(ref);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gelu),
        cmocka_unit_test(residual),
        cmocka_unit_test(stored_precision),
        cmocka_unit_test(softmax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
