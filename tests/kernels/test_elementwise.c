/* GELU (tanh form) forward and backward, the residual add, and the row softmax against float64;
 * the GELU backward also against central differences. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
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
    K->gelu_forward(y, x, n);
    assert_true(kr_rel_err(y, ref, n) < 1e-5);

    gelu_ctx c = {kr_to_double(x, n), G, n};
    double *fd = kr_doubles(n);
    kr_finite_diff(gelu_loss, &c, c.x, n, 1e-5, fd);
    float *g = kr_floats(&r, n, 1);
    double *want = kr_to_double(g, n);
    for (size_t i = 0; i < n; i++)
        want[i] += fd[i];
    K->gelu_backward(g, x, G, n);
    assert_true(kr_rel_err(g, want, n) < 1e-5);
    float *z = calloc(n, sizeof(float));
    K->gelu_backward(z, x, G, n);
    assert_true(kr_rel_err(z, fd, n) < 1e-5);
    /* Far tails: gelu(x) -> x for large x and -> 0 for very negative x, without NaN. */
    float tails[4] = {-30.0f, -10.0f, 10.0f, 30.0f}, ty[4], tg[4] = {0}, ones[4] = {1, 1, 1, 1};
    K->gelu_forward(ty, tails, 4);
    K->gelu_backward(tg, tails, ones, 4);
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
    K->residual_forward(y, a, b, n);
    for (size_t i = 0; i < n; i++)
        assert_true(y[i] == a[i] + b[i]); /* one fp32 add: exactly the fp32 sum */
    K->residual_forward(a, a, b, n); /* in place, as the residual stream uses it */
    assert_memory_equal(a, y, n * sizeof(float));
    free(a); free(b); free(y);
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
        cmocka_unit_test(softmax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
