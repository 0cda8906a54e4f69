/* Exact round-to-nearest-even conversions between fp32 and bf16 / fp16, as static inline
 * functions so that the CPU backend's rounding loops (precision.c) run them without a call per
 * element; half.c wraps them as the public kernels_* helpers both backends and the tests use.
 * Integer arithmetic on the bit patterns only, so the result never depends on the FPU's
 * current rounding mode or on flush-to-zero settings. */
#ifndef DTSIM_KERNELS_CPU_HALF_BITS_H
#define DTSIM_KERNELS_CPU_HALF_BITS_H
#include <stdint.h>
#include <string.h>
#include "kernels.h"

static inline uint32_t half_bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float half_float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Drop the low `shift` bits of `mant` (1 <= shift <= 31), rounding to nearest, ties to even.
 * A carry out of the kept bits is what the callers want: it moves the value to the next
 * binade (or to infinity) exactly as rounding should. */
static inline uint32_t half_round_shift(uint32_t mant, unsigned shift)
{
    uint32_t kept = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (kept & 1u)))
        kept++;
    return kept;
}

static inline uint16_t half_bits_from_float_bf16(float f)
{
    uint32_t u = half_bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u); /* NaN stays NaN: keep sign and payload, set quiet bit */
    /* bf16 is the top half of fp32: same exponent, so rounding the low 16 bits is all there is;
     * the largest finite floats carry into the exponent and become inf, as RNE says. */
    return (uint16_t)half_round_shift(u, 16);
}

static inline float half_bits_to_float_bf16(uint16_t h)
{
    return half_float_of((uint32_t)h << 16);
}

static inline uint16_t half_bits_from_float_fp16(float f)
{
    uint32_t u = half_bits_of(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x03ffu)); /* NaN: quiet, top payload bits kept */
    if (a >= 0x477ff000u)
        return sign | 0x7c00u; /* >= 65520 (max normal 65504 + half an ulp, a tie to even) -> inf */
    if (a >= 0x38800000u) {
        /* Normal half: rebias the exponent (127 -> 15) and round away 13 mantissa bits. A carry
         * from 0x3ff mantissa lands in the next exponent, which is right. */
        return sign | (uint16_t)(half_round_shift(a, 13) - (112u << 10));
    }
    if (a < 0x33000000u)
        return sign; /* below 2^-25 (half the smallest subnormal, a tie that goes to even 0) */
    /* Subnormal half: value / 2^-24 = mant * 2^(e - 126) with the implicit bit restored;
     * e is 102..112 here, so the shift is 14..24. Rounding up from 0x3ff gives 0x400, which is
     * exactly the smallest normal's encoding. */
    uint32_t e = a >> 23, mant = (a & 0x007fffffu) | 0x00800000u;
    return sign | (uint16_t)half_round_shift(mant, 126u - e);
}

static inline float half_bits_to_float_fp16(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 31) /* inf or NaN (payload kept) */
        return half_float_of(sign | 0x7f800000u | (man << 13));
    if (exp != 0)
        return half_float_of(sign | ((exp + 112u) << 23) | (man << 13));
    if (man == 0)
        return half_float_of(sign);
    /* Subnormal half: normalise into an fp32 normal (every half subnormal is one). */
    exp = 113;
    while (!(man & 0x400u)) {
        man <<= 1;
        exp--;
    }
    return half_float_of(sign | (exp << 23) | ((man & 0x3ffu) << 13));
}

/* f rounded to prec as a kernel stores it (KPREC_FP32: f itself): the one per-element rounding
 * the CPU kernels, precision.c's loops and kernels_round share. */
static inline float half_round_to(float f, kernels_precision prec)
{
    if (prec == KPREC_BF16)
        return half_bits_to_float_bf16(half_bits_from_float_bf16(f));
    if (prec == KPREC_FP16)
        return half_bits_to_float_fp16(half_bits_from_float_fp16(f));
    return f;
}
#endif
