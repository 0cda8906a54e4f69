/* AdamW against its closed form and a float64 run of several steps; the reductions the
 * optimizer needs (sum of squares, inf/NaN detection); the CPU backend's memory and events. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kref.h"

/* Step 1 from zero moments: mhat = g, vhat = g^2, so p <- p - lr (g / (|g| + eps) + wd p). */
static void adamw_first_step_closed_form(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {51};
    size_t n = 101;
    float *p = kr_floats(&r, n, 1), *g = kr_floats(&r, n, 4), *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
    double *want = kr_to_double(p, n);
    double lr = 1e-2, wd = 0.1, eps = 1e-8, scale = 0.25;
    for (size_t i = 0; i < n; i++) {
        double gs = g[i] * scale;
        want[i] -= lr * (gs / (fabs(gs) + eps) + wd * want[i]);
    }
    K->adamw_update(p, g, m, v, n, (float)lr, 0.9f, 0.95f, (float)eps, (float)wd, 1, (float)scale);
    assert_true(kr_rel_err(p, want, n) < 1e-6);
    for (size_t i = 0; i < n; i++) { /* the moments hold (1 - beta) g and (1 - beta2) g^2 */
        double gs = g[i] * scale;
        assert_true(fabs(m[i] - 0.1 * gs) <= 1e-6 * fabs(gs));
        assert_true(fabs(v[i] - 0.05 * gs * gs) <= 1e-6 * gs * gs);
    }
    free(p); free(g); free(m); free(v); free(want);
}

/* Five steps with fresh gradients against the same recurrences in float64. */
static void adamw_several_steps(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {52};
    size_t n = 53;
    /* The hyperparameters as the kernel receives them (fp32), so only its arithmetic differs. */
    double lr = 3e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-6f, wd = 0.01f, scale = 2.0f;
    float *p = kr_floats(&r, n, 1), *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
    double *P = kr_to_double(p, n), *M = kr_doubles(n), *Vv = kr_doubles(n);
    for (int t = 1; t <= 5; t++) {
        float *g = kr_floats(&r, n, 1);
        for (size_t i = 0; i < n; i++) {
            double gs = g[i] * scale;
            M[i] = b1 * M[i] + (1 - b1) * gs;
            Vv[i] = b2 * Vv[i] + (1 - b2) * gs * gs;
            double mh = M[i] / (1 - pow(b1, t)), vh = Vv[i] / (1 - pow(b2, t));
            P[i] -= lr * (mh / (sqrt(vh) + eps) + wd * P[i]);
        }
        K->adamw_update(p, g, m, v, n, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, t, (float)scale);
        free(g);
    }
    assert_true(kr_rel_err(p, P, n) < 1e-5);
    assert_true(kr_rel_err(m, M, n) < 1e-5);
    assert_true(kr_rel_err(v, Vv, n) < 1e-5);
    free(p); free(m); free(v); free(P); free(M); free(Vv);
}

/* One range's sum of squares through the many-range call. */
static double sum_squares1(const kernels_backend *K, const float *x, size_t n)
{
    double s = -1;
    K->sum_squares(&x, &n, 1, &s);
    return s;
}

static void reductions(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {53};
    size_t n = 100003;
    float *x = kr_floats(&r, n, 1);
    x[0] = 1e4f; /* its square's fp32 ulp (8) swallows every small square (< 1): fp32 sums lose them */
    double small = 0;
    for (size_t i = 1; i < n; i++)
        small += (double)x[i] * x[i];
    double s = 1e8 + small;
    assert_true(fabs(sum_squares1(K, x + 1, n - 1) - small) <= 1e-12 * small);
    assert_true(fabs(sum_squares1(K, x, n) - s) <= 1e-12 * s);
    assert_true(sum_squares1(K, x, 0) == 0);
    /* several ranges at once: each its own sum, in the order given */
    const float *at[3] = {x + 1, x, x + 5};
    size_t len[3] = {n - 1, 0, 1};
    double each[3] = {-1, -1, -1};
    K->sum_squares(at, len, 3, each);
    assert_true(fabs(each[0] - small) <= 1e-12 * small);
    assert_true(each[1] == 0);
    assert_true(each[2] == (double)x[5] * x[5]);

    x[0] = 0.5f;
    assert_false(K->has_inf_or_nan(x, n));
    float bad[3] = {INFINITY, -INFINITY, NAN};
    for (int k = 0; k < 3; k++)
        for (int rep = 0; rep < 4; rep++) {
            size_t at = krng_below(&r, (uint32_t)n);
            float keep = x[at];
            x[at] = bad[k];
            assert_true(K->has_inf_or_nan(x, n));
            assert_false(at > 0 && K->has_inf_or_nan(x, at)); /* only where it is */
            x[at] = keep;
        }
    x[n - 1] = NAN; /* the very last element is checked too */
    assert_true(K->has_inf_or_nan(x, n));
    free(x);
}

static void memory_and_events(void **state)
{
    const kernels_backend *K = kernels_cpu();
    size_t n = 1000;
    unsigned char *a = K->alloc(n), *b = K->alloc(n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(a[i], 0); /* zero-filled */
    for (size_t i = 0; i < n; i++)
        a[i] = (unsigned char)i;
    K->copy(b, a, n);
    assert_memory_equal(a, b, n);
    unsigned char host[1000];
    K->copy_to_host(host, b, n);
    assert_memory_equal(host, a, n);
    K->memset_zero(b, n);
    K->copy_to_device(a, b, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(a[i], 0);
    K->free(a);
    K->free(b);

    kernels_event *e0 = K->event_create(), *e1 = K->event_create();
    K->event_record(e0);
    volatile double sink = 0;
    for (int i = 0; i < 1000000; i++)
        sink += i * 1e-9;
    K->synchronize();
    K->event_record(e1);
    double dt = K->event_elapsed_s(e0, e1);
    assert_true(dt > 0 && dt < 10);
    K->event_destroy(e0);
    K->event_destroy(e1);
    assert_string_equal(K->name, "cpu");

    /* the description a calibration records: a model name, then the thread count */
    char what[512];
    K->describe(what, sizeof what);
    assert_true(strlen(what) > strlen(" (1 threads online)"));
    assert_non_null(strstr(what, " threads online)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(adamw_first_step_closed_form),
        cmocka_unit_test(adamw_several_steps),
        cmocka_unit_test(reductions),
        cmocka_unit_test(memory_and_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
