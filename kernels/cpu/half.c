/* Exact round-to-nearest-even conversions between fp32 and bf16 / fp16, shared by both
 * backends and the tests. */
#include <math.h>
#include <string.h>
#include "kernels.h"

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t kernels_float_to_bf16(float f)
{
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* NaN stays a (quiet) NaN */
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb; /* ties to even; overflow rounds to inf as it should */
    return (uint16_t)(u >> 16);
}

float kernels_bf16_to_float(uint16_t h)
{
    return float_of((uint32_t)h << 16);
}

uint16_t kernels_float_to_fp16(float f)
{
    uint32_t u = bits_of(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return sign | 0x7e00u; /* NaN */
    if (a >= 0x477ff000u)
        return sign | 0x7c00u; /* >= 65520 rounds to inf */
    if (a < 0x38800000u) {
        /* Subnormal half (or zero): value = mantissa * 2^-24, rounded to nearest even. */
        float v = float_of(a);
        float scaled = v * 16777216.0f; /* 2^24: exact */
        float r = nearbyintf(scaled);   /* default rounding mode: ties to even */
        return sign | (uint16_t)r;
    }
    /* Normal: rebias the exponent, round 13 dropped mantissa bits to nearest even. */
    uint32_t lsb = (a >> 13) & 1u;
    a += 0xfffu + lsb;
    return sign | (uint16_t)(((a >> 13) - (112u << 10)) & 0xffffu);
}

float kernels_fp16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0) {
        float v = ldexpf((float)man, -24);
        return sign ? -v : v;
    }
    if (exp == 31)
        return float_of(sign | 0x7f800000u | (man << 13));
    return float_of(sign | ((exp + 112u) << 23) | (man << 13));
}

float kernels_round(float f, kernels_precision prec)
{
    switch (prec) {
    case KPREC_BF16: return kernels_bf16_to_float(kernels_float_to_bf16(f));
    case KPREC_FP16: return kernels_fp16_to_float(kernels_float_to_fp16(f));
    default: return f;
    }
}
