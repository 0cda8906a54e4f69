/* LayerNorm (eps 1e-5, biased variance, as GPT-2) against float64, its saved mean and rstd,
 * and the backward (dinp, dweight, dbias) against central differences of L = sum(G * out). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>
#include "kref.h"

enum { N = 37, C = 29 };

typedef struct {
    double *x, *w, *b, *out;
    const float *G;
} ln_ctx;

static void ref_layernorm(double *out, double *mean, double *rstd, const double *x, const double *w, const double *b)
{
    for (int i = 0; i < N; i++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++)
            m += x[i * C + c];
        m /= C;
        for (int c = 0; c < C; c++)
            v += (x[i * C + c] - m) * (x[i * C + c] - m);
        v /= C;
        double s = 1 / sqrt(v + 1e-5);
        for (int c = 0; c < C; c++)
            out[i * C + c] = (x[i * C + c] - m) * s * w[c] + b[c];
        if (mean) {
            mean[i] = m;
            rstd[i] = s;
        }
    }
}

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    ref_layernorm(c->out, NULL, NULL, c->x, c->w, c->b);
    return kr_dot(c->G, c->out, (size_t)N * C);
}

static void forward(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {11};
    float *x = kr_floats(&r, N * C, 3), *w = kr_floats(&r, C, 1), *b = kr_floats(&r, C, 1);
    for (int i = 0; i < N * C; i++)
        x[i] += 5.0f; /* an offset the mean must remove without losing the variance */
    float *out = malloc(N * C * sizeof(float)), *mean = malloc(N * sizeof(float)), *rstd = malloc(N * sizeof(float));
    double *dx = kr_to_double(x, N * C), *dw = kr_to_double(w, C), *db = kr_to_double(b, C);
    double *ref = kr_doubles(N * C), *rm = kr_doubles(N), *rs = kr_doubles(N);
    ref_layernorm(ref, rm, rs, dx, dw, db);
    K->layernorm_forward(out, mean, rstd, x, w, b, N, C);
    assert_true(kr_rel_err(out, ref, N * C) < 1e-5);
    assert_true(kr_rel_err(mean, rm, N) < 1e-5);
    assert_true(kr_rel_err(rstd, rs, N) < 1e-5);
    free(x); free(w); free(b); free(out); free(mean); free(rstd); free(dx); free(dw); free(db); free(ref); free(rm); free(rs);
}

static void backward_finite_differences_and_adds(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {12};
    float *x = kr_floats(&r, N * C, 2), *w = kr_floats(&r, C, 1), *b = kr_floats(&r, C, 1), *G = kr_floats(&r, N * C, 1);
    float *out = malloc(N * C * sizeof(float)), *mean = malloc(N * sizeof(float)), *rstd = malloc(N * sizeof(float));
    K->layernorm_forward(out, mean, rstd, x, w, b, N, C);

    ln_ctx c = {kr_to_double(x, N * C), kr_to_double(w, C), kr_to_double(b, C), kr_doubles(N * C), G};
    double *fx = kr_doubles(N * C), *fw = kr_doubles(C), *fb = kr_doubles(C);
    kr_finite_diff(ln_loss, &c, c.x, N * C, 1e-5, fx);
    kr_finite_diff(ln_loss, &c, c.w, C, 1e-5, fw);
    kr_finite_diff(ln_loss, &c, c.b, C, 1e-5, fb);

    float *gx = kr_floats(&r, N * C, 1), *gw = kr_floats(&r, C, 1), *gb = kr_floats(&r, C, 1);
    double *wx = kr_to_double(gx, N * C), *ww = kr_to_double(gw, C), *wb = kr_to_double(gb, C);
    for (int i = 0; i < N * C; i++) wx[i] += fx[i];
    for (int i = 0; i < C; i++) ww[i] += fw[i], wb[i] += fb[i];
    K->layernorm_backward(gx, gw, gb, G, x, w, mean, rstd, N, C);
    assert_true(kr_rel_err(gx, wx, N * C) < 1e-4);
    assert_true(kr_rel_err(gw, ww, C) < 1e-4);
    assert_true(kr_rel_err(gb, wb, C) < 1e-4);
    /* The input gradient alone, from zero, against the differences directly (the random start
     * above could hide a small error in it). */
    float *z = calloc(N * C, sizeof(float)), *zw = calloc(C, sizeof(float)), *zb = calloc(C, sizeof(float));
    K->layernorm_backward(z, zw, zb, G, x, w, mean, rstd, N, C);
    assert_true(kr_rel_err(z, fx, N * C) < 1e-4);
    free(x); free(w); free(b); free(G); free(out); free(mean); free(rstd); free(c.x); free(c.w); free(c.b); free(c.out);
    free(fx); free(fw); free(fb); free(gx); free(gw); free(gb); free(wx); free(ww); free(wb); free(z); free(zw); free(zb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forward),
        cmocka_unit_test(backward_finite_differences_and_adds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
