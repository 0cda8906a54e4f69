/* CUDA precision helpers and host-visible reductions against the CPU's:
 *  - round_to_precision and cast_to_half: bit for bit against the CPU's exact RNE conversions
 *    over random bit patterns (every exponent: subnormals, overflow to inf) and hand-picked
 *    ties; a NaN must stay a NaN (its payload may differ, so it is compared as "is NaN");
 *  - cast_from_half: all 65536 bit patterns of each format;
 *  - sum_squares (double accumulation) and has_inf_or_nan. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "gpu_check.h"

static gpu_pair P;

/* Random bit patterns, then values where rounding is delicate. */
static float *tricky_floats(size_t *n_out)
{
    static const float fixed[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, 70000.0f,
                                  6.0e-8f, 2.98e-8f, 2.99e-8f, 5.9604645e-8f, 1.0e-40f, 3.4e38f,
                                  1.00390625f,   /* 1 + 2^-8: a bf16 tie, rounds to even (1.0) */
                                  1.01171875f,   /* 1 + 3 * 2^-8: a bf16 tie, rounds up */
                                  1.00048828125f /* 1 + 2^-11: an fp16 tie */};
    size_t nf = sizeof fixed / sizeof fixed[0], nr = 200003;
    float *x = malloc((nf + nr + 3) * sizeof(float));
    memcpy(x, fixed, sizeof fixed);
    for (size_t i = 0; i < nr; i++) {
        uint32_t u = (uint32_t)gpu_rand_int(&P, 1 << 16) << 16 | (uint32_t)gpu_rand_int(&P, 1 << 16);
        memcpy(&x[nf + i], &u, sizeof u);
    }
    x[nf + nr] = INFINITY;
    x[nf + nr + 1] = -INFINITY;
    x[nf + nr + 2] = NAN;
    *n_out = nf + nr + 3;
    return x;
}

/* Same bits, or both NaN. */
static void expect_same_floats(const char *what, const float *want, const float *got, size_t n)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        int same = isnan(want[i]) ? isnan(got[i]) : memcmp(&want[i], &got[i], sizeof(float)) == 0;
        if (!same && bad++ == 0)
            first = i;
    }
    printf("  %-44s %zu of %zu differ\n", what, bad, n);
    if (bad)
        fail_msg("%s: first at %zu: CPU %.9g, GPU %.9g", what, first, want[first], got[first]);
}

static int half_is_nan(uint16_t h, kernels_precision prec)
{
    return prec == KPREC_FP16 ? (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) : (h & 0x7f80u) == 0x7f80u && (h & 0x7fu);
}

static void check_round_and_cast(kernels_precision prec)
{
    const char *pn = prec == KPREC_FP16 ? "fp16" : "bf16";
    size_t n;
    float *x = tricky_floats(&n);
    float *gx = gpu_upload(&P, x, n);
    float *want = gpu_host_copy(x, n);
    P.cpu->round_to_precision(want, n, prec);
    P.gpu->round_to_precision(gx, n, prec);
    float *got = gpu_download(&P, gx, n);
    char name[64];
    printf("%s: %zu values\n", pn, n);
    snprintf(name, sizeof name, "round_to_precision %s", pn);
    expect_same_floats(name, want, got, n);

    uint16_t *hw = malloc(n * sizeof(uint16_t)), *hg = malloc(n * sizeof(uint16_t));
    P.gpu->copy_to_device(gx, x, n * sizeof(float));
    uint16_t *gh = P.gpu->alloc(n * sizeof(uint16_t));
    P.cpu->cast_to_half(hw, x, n, prec);
    P.gpu->cast_to_half(gh, gx, n, prec);
    P.gpu->copy_to_host(hg, gh, n * sizeof(uint16_t));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += half_is_nan(hw[i], prec) ? !half_is_nan(hg[i], prec) : hw[i] != hg[i];
    printf("  %-44s %zu of %zu differ\n", "cast_to_half", bad, n);
    assert_int_equal(bad, 0);
    free(x), free(want), free(got), free(hw), free(hg);
    P.gpu->free(gx), P.gpu->free(gh);
}

static void check_cast_from_half(kernels_precision prec)
{
    size_t n = 65536;
    uint16_t *h = malloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++)
        h[i] = (uint16_t)i;
    float *want = malloc(n * sizeof(float));
    P.cpu->cast_from_half(want, h, n, prec);
    uint16_t *gh = gpu_upload_bytes(&P, h, n * sizeof(uint16_t));
    float *gf = P.gpu->alloc(n * sizeof(float));
    P.gpu->cast_from_half(gf, gh, n, prec);
    float *got = gpu_download(&P, gf, n);
    expect_same_floats(prec == KPREC_FP16 ? "cast_from_half fp16 (all patterns)" : "cast_from_half bf16 (all patterns)",
                       want, got, n);
    free(h), free(want), free(got);
    P.gpu->free(gh), P.gpu->free(gf);
}

static void test_bf16(void **state)
{
    (void)state;
    check_round_and_cast(KPREC_BF16);
    check_cast_from_half(KPREC_BF16);
}

static void test_fp16(void **state)
{
    (void)state;
    check_round_and_cast(KPREC_FP16);
    check_cast_from_half(KPREC_FP16);
}

static double sum_squares1(const kernels_backend *k, const float *x, size_t n)
{
    double s = -1;
    k->sum_squares(&x, &n, 1, &s);
    return s;
}

static void test_sum_squares(void **state)
{
    (void)state;
    size_t sizes[] = {1, 1000, 1234567}; /* the last beyond one pass of the grid (1024 x 256) */
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        float *x = gpu_rand(&P, n, 3);
        float *gx = gpu_upload(&P, x, n);
        double want = sum_squares1(P.cpu, x, n), got = sum_squares1(P.gpu, gx, n), again = sum_squares1(P.gpu, gx, n);
        printf("  sum_squares n=%-8zu CPU %.17g GPU %.17g\n", n, want, got);
        assert_true(fabs(got - want) <= 1e-12 * want);
        assert_memory_equal(&got, &again, sizeof got); /* deterministic */
        free(x);
        P.gpu->free(gx);
    }
    assert_true(sum_squares1(P.gpu, NULL, 0) == 0.0);

    /* ranges of one buffer at once (a model's tensors): each as the CPU's, and the same bits
     * as that range alone */
    size_t n = 1500000;
    float *x = gpu_rand(&P, n, 3);
    float *gx = gpu_upload(&P, x, n);
    const float *hx[4] = {x, x + 7, x + 7, x + 300007}, *dx[4] = {gx, gx + 7, gx + 7, gx + 300007};
    size_t len[4] = {7, 0, 300000, n - 300007};
    double want[4], got[4];
    P.cpu->sum_squares(hx, len, 4, want);
    P.gpu->sum_squares(dx, len, 4, got);
    for (int r = 0; r < 4; r++) {
        assert_true(fabs(got[r] - want[r]) <= 1e-12 * want[r]);
        double alone = sum_squares1(P.gpu, dx[r], len[r]);
        assert_memory_equal(&got[r], &alone, sizeof alone);
    }

    /* many ranges in one launch, as a model's ~150 tensors (empty ones, ones past one pass of
     * the grid among them): each block must find its own range */
    enum { MANY = 300 };
    const float *hm[MANY], *dm[MANY];
    size_t lm[MANY], at = 0;
    double wm[MANY], gm[MANY];
    for (int r = 0; r < MANY; r++) {
        lm[r] = r % 37 == 5 ? 0 : r % 50 == 7 ? 400000 : (size_t)(r * 7919) % 3001;
        if (at + lm[r] > n)
            lm[r] = 0;
        hm[r] = x + at;
        dm[r] = gx + at;
        at += lm[r] / 2; /* ranges may overlap: each is read on its own */
    }
    P.cpu->sum_squares(hm, lm, MANY, wm);
    P.gpu->sum_squares(dm, lm, MANY, gm);
    for (int r = 0; r < MANY; r++)
        assert_true(fabs(gm[r] - wm[r]) <= 1e-12 * wm[r]);
    free(x);
    P.gpu->free(gx);
}

static void test_has_inf_or_nan(void **state)
{
    (void)state;
    size_t n = 300001;
    float *x = gpu_rand(&P, n, 60000);
    float *gx = gpu_upload(&P, x, n);
    assert_int_equal(P.gpu->has_inf_or_nan(gx, n), 0);
    const float bad[] = {INFINITY, -INFINITY, NAN};
    const size_t where[] = {n - 1, 0, n / 2};
    for (int k = 0; k < 3; k++) {
        P.gpu->copy_to_device(gx + where[k], &bad[k], sizeof(float));
        assert_int_equal(P.gpu->has_inf_or_nan(gx, n), 1);
        P.gpu->copy_to_device(gx + where[k], &x[where[k]], sizeof(float));
        assert_int_equal(P.gpu->has_inf_or_nan(gx, n), 0);
    }
    assert_int_equal(P.gpu->has_inf_or_nan(gx, 0), 0);
    printf("  has_inf_or_nan: finite, +inf, -inf, NaN, empty: ok\n");
    free(x);
    P.gpu->free(gx);
}

int main(void)
{
    int rc = gpu_pair_open(&P);
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_fp16),
        cmocka_unit_test(test_sum_squares),
        cmocka_unit_test(test_has_inf_or_nan),
    };
    return cmocka_run_group_tests_name("gpu_precision", tests, NULL, NULL);
}
