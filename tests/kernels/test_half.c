/* bf16/fp16 conversions and the precision helpers, against known bit patterns and the
 * independent float64 rounding model of kref.c: every 16-bit pattern, every midpoint between
 * neighbouring 16-bit values (exact ties) and the floats either side of each midpoint, plus a
 * strided sweep over all 2^32 float patterns. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kref.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t to_half(float f, kernels_precision p)
{
    return p == KPREC_BF16 ? kernels_float_to_bf16(f) : kernels_float_to_fp16(f);
}

static float from_half(uint16_t h, kernels_precision p)
{
    return p == KPREC_BF16 ? kernels_bf16_to_float(h) : kernels_fp16_to_float(h);
}

static int is_half_nan(uint16_t h, kernels_precision p)
{
    return p == KPREC_BF16 ? (h & 0x7f80) == 0x7f80 && (h & 0x7f) : (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

/* The conversion of f must equal the float64 model's rounding, bit for bit (signed zeros too). */
static void expect_model(float f, kernels_precision p)
{
    double want = kr_round(f, p);
    float got = from_half(to_half(f, p), p);
    if (isnan(want)) {
        assert_true(isnan(got));
        return;
    }
    if (bits(got) != bits((float)want))
        fail_msg("%s(%a = 0x%08x) gives %a, want %a", p == KPREC_BF16 ? "bf16" : "fp16", f, bits(f), got, want);
}

static void known_bit_patterns(void **state)
{
    assert_int_equal(kernels_float_to_bf16(1.0f), 0x3f80);
    assert_int_equal(kernels_float_to_bf16(-2.0f), 0xc000);
    assert_int_equal(kernels_float_to_bf16(0x1.fep127f), 0x7f7f);         /* largest bf16 */
    assert_int_equal(kernels_float_to_bf16(0x1.ffp127f), 0x7f80);         /* tie past it, even -> inf */
    assert_int_equal(kernels_float_to_bf16(0x1.fffffep127f), 0x7f80);     /* FLT_MAX -> inf */
    assert_int_equal(kernels_float_to_bf16(0x1p-133f), 0x0001);           /* smallest bf16 subnormal */
    assert_int_equal(kernels_float_to_bf16(1.0f + 0x1p-8f), 0x3f80);      /* tie, even: down */
    assert_int_equal(kernels_float_to_bf16(1.0f + 0x3p-8f), 0x3f82);      /* tie, even: up */
    assert_int_equal(kernels_float_to_bf16(1.0f + 0x1p-8f + 0x1p-23f), 0x3f81); /* just past the tie */
    assert_int_equal(kernels_float_to_bf16(-0.0f), 0x8000);
    assert_int_equal(kernels_float_to_bf16(INFINITY), 0x7f80);
    assert_int_equal(kernels_float_to_bf16(-INFINITY), 0xff80);

    assert_int_equal(kernels_float_to_fp16(1.0f), 0x3c00);
    assert_int_equal(kernels_float_to_fp16(-2.0f), 0xc000);
    assert_int_equal(kernels_float_to_fp16(65504.0f), 0x7bff);  /* largest normal */
    assert_int_equal(kernels_float_to_fp16(65519.996f), 0x7bff); /* just below the tie */
    assert_int_equal(kernels_float_to_fp16(65520.0f), 0x7c00);  /* tie, even: inf */
    assert_int_equal(kernels_float_to_fp16(1e6f), 0x7c00);
    assert_int_equal(kernels_float_to_fp16(-1e6f), 0xfc00);
    assert_int_equal(kernels_float_to_fp16(0x1p-14f), 0x0400);  /* smallest normal */
    assert_int_equal(kernels_float_to_fp16(0x1p-24f), 0x0001);  /* smallest subnormal */
    assert_int_equal(kernels_float_to_fp16(0x1p-25f), 0x0000);  /* tie, even: 0 */
    assert_int_equal(kernels_float_to_fp16(0x1.000002p-25f), 0x0001); /* just past it */
    assert_int_equal(kernels_float_to_fp16(0x3p-25f), 0x0002);  /* 1.5 units -> 2 */
    assert_int_equal(kernels_float_to_fp16(0x5p-25f), 0x0002);  /* 2.5 units -> 2 */
    assert_int_equal(kernels_float_to_fp16(0x1.ff8p-15f), 0x03ff); /* largest subnormal */
    assert_int_equal(kernels_float_to_fp16(0x1.ffcp-15f), 0x0400); /* tie above it -> smallest normal */
    assert_int_equal(kernels_float_to_fp16(1.0f + 0x1p-11f), 0x3c00); /* tie, even: down */
    assert_int_equal(kernels_float_to_fp16(1.0f + 0x3p-11f), 0x3c02); /* tie, even: up */
    assert_int_equal(kernels_float_to_fp16(0x1p-149f), 0x0000);  /* float subnormal underflows */
    assert_int_equal(kernels_float_to_fp16(-0x1p-149f), 0x8000); /* ...keeping its sign */

    assert_true(kernels_fp16_to_float(0x0001) == 0x1p-24f);
    assert_true(kernels_fp16_to_float(0x03ff) == 0x1.ff8p-15f);
    assert_true(kernels_fp16_to_float(0x7bff) == 65504.0f);
    assert_true(isinf(kernels_fp16_to_float(0x7c00)) && kernels_fp16_to_float(0xfc00) < 0);
    assert_true(kernels_bf16_to_float(0x0001) == 0x1p-133f);

    /* NaN stays NaN, whatever the payload and sign; quiet NaNs keep their sign. */
    float nans[] = {NAN, -NAN, from_bits(0x7f800001u), from_bits(0x7fc00000u), from_bits(0xff812345u)};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        assert_true(is_half_nan(kernels_float_to_bf16(nans[i]), KPREC_BF16));
        assert_true(is_half_nan(kernels_float_to_fp16(nans[i]), KPREC_FP16));
        assert_true(isnan(kernels_round(nans[i], KPREC_BF16)));
        assert_true(isnan(kernels_round(nans[i], KPREC_FP16)));
    }
    assert_true(isnan(kernels_fp16_to_float(0x7e00)) && isnan(kernels_bf16_to_float(0x7fc0)));
    assert_true(kernels_round(0.1f, KPREC_FP32) == 0.1f);
}

/* Every 16-bit pattern: decoding matches the format's definition, re-encoding gives it back. */
static void every_pattern_round_trips(void **state)
{
    for (int pi = 0; pi < 2; pi++) {
        kernels_precision p = pi ? KPREC_FP16 : KPREC_BF16;
        int mant = p == KPREC_BF16 ? 7 : 10, bias = p == KPREC_BF16 ? 127 : 15;
        for (uint32_t h = 0; h < 0x10000; h++) {
            uint16_t x = (uint16_t)h;
            float f = from_half(x, p);
            int e = (x >> mant) & ((1 << (15 - mant)) - 1), m = x & ((1 << mant) - 1);
            int emax = (1 << (15 - mant)) - 1;
            double want = e == emax ? (m ? NAN : INFINITY)
                                    : e ? ldexp(1.0 + ldexp(m, -mant), e - bias) : ldexp(m, 1 - bias - mant);
            if (x & 0x8000)
                want = -want;
            if (isnan(want)) {
                assert_true(isnan(f));
                assert_true(is_half_nan(to_half(f, p), p));
                continue;
            }
            assert_true((double)f == want);
            assert_true(!!signbit(f) == ((x & 0x8000) != 0));
            assert_int_equal(to_half(f, p), x);
        }
    }
}

/* The hard cases of rounding: exact midpoints between neighbours (ties) and the floats one ulp
 * either side of them, for every pair of neighbouring 16-bit values; then 2^32 / 4099 floats. */
static void rounding_matches_model(void **state)
{
    for (int pi = 0; pi < 2; pi++) {
        kernels_precision p = pi ? KPREC_FP16 : KPREC_BF16;
        uint16_t inf = p == KPREC_BF16 ? 0x7f80 : 0x7c00;
        for (uint32_t h = 0; h < inf; h++) {
            for (int s = 0; s < 2; s++) {
                uint16_t lo = (uint16_t)(h | (s ? 0x8000 : 0)), hi = (uint16_t)((h + 1) | (s ? 0x8000 : 0));
                double a = from_half(lo, p), b = h + 1 == inf ? (s ? -1 : 1) * (fabs(a) + kr_ulp(a, p)) : from_half(hi, p);
                float mid = (float)((a + b) / 2); /* exact: at most 12 significant bits */
                assert_true((double)mid == (a + b) / 2);
                expect_model(mid, p);
                expect_model(nextafterf(mid, 0), p);
                expect_model(nextafterf(mid, INFINITY), p);
                expect_model(nextafterf(mid, -INFINITY), p);
                expect_model((float)a, p);
            }
        }
        for (uint64_t u = 0; u < 0x100000000ull; u += 4099)
            expect_model(from_bits((uint32_t)u), p);
    }
}

/* round_to_precision: the model's rounding elementwise; relative error at most half an ulp,
 * i.e. 2^-8 for bf16 and 2^-11 for fp16 on normals. cast_to/from_half: the helpers' bits. */
static void round_and_cast_helpers(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {7};
    size_t n = 4097;
    float *x = kr_floats(&r, n, 1.0), *y = malloc(n * sizeof(float));
    uint16_t *h = malloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) /* magnitudes spread over many binades, fp16 subnormals included */
        x[i] = ldexpf(x[i], (int)krng_below(&r, 40) - 24);
    for (int pi = 0; pi < 2; pi++) {
        kernels_precision p = pi ? KPREC_FP16 : KPREC_BF16;
        double bound = p == KPREC_BF16 ? 0x1p-8 : 0x1p-11;
        memcpy(y, x, n * sizeof(float));
        K->round_to_precision(y, n, p);
        for (size_t i = 0; i < n; i++) {
            assert_true((double)y[i] == kr_round(x[i], p));
            if (p == KPREC_BF16 || fabsf(x[i]) >= 0x1p-14f)
                assert_true(fabs((double)y[i] - x[i]) <= bound * fabs(x[i]));
        }
        K->cast_to_half(h, x, n, p);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(h[i], to_half(x[i], p));
        K->cast_from_half(y, h, n, p);
        for (size_t i = 0; i < n; i++)
            assert_true((double)y[i] == kr_round(x[i], p));
    }
    memcpy(y, x, n * sizeof(float));
    K->round_to_precision(y, n, KPREC_FP32);
    assert_memory_equal(y, x, n * sizeof(float));
    free(x);
    free(y);
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(known_bit_patterns),
        cmocka_unit_test(every_pattern_round_trips),
        cmocka_unit_test(rounding_matches_model),
        cmocka_unit_test(round_and_cast_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
