/* Precision emulation: rounding fp32 values to bf16/fp16 in place (what storing them in that
 * format would do), rounded copies for the GEMM and attention inputs, and the casts to and
 * from the 16-bit formats. The per-element work is half_bits.h's inline RNE, so the CPU and
 * the public kernels_* helpers give the same bits by construction. */
#include <stdlib.h>
#include <string.h>
#include "cpu_internal.h"
#include "half_bits.h"

/* dst[i] = x[i] rounded to prec (dst may be x). */
static void round_into(float *dst, const float *x, size_t n, kernels_precision prec)
{
    if (prec != KPREC_BF16 && prec != KPREC_FP16) {
        if (dst != x)
            memcpy(dst, x, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i++)
        dst[i] = half_round_to(x[i], prec);
}

void cpu_round_to_precision(float *x, size_t n, kernels_precision prec)
{
    round_into(x, x, n, prec);
}

float *cpu_rounded_copy(const float *x, size_t n, kernels_precision prec)
{
    if (prec == KPREC_FP32)
        return NULL;
    float *c = malloc(n ? n * sizeof(float) : 1); /* every element is written: no need to zero it */
    if (!c)
        c = cpu_alloc(n * sizeof(float)); /* aborts with the backend's message */
    round_into(c, x, n, prec);
    return c;
}

/* prec names the 16-bit format: KPREC_FP16 for IEEE half, anything else bf16. */
void cpu_cast_to_half(uint16_t *out, const float *in, size_t n, kernels_precision prec)
{
    if (prec == KPREC_FP16)
        for (size_t i = 0; i < n; i++)
            out[i] = half_bits_from_float_fp16(in[i]);
    else
        for (size_t i = 0; i < n; i++)
            out[i] = half_bits_from_float_bf16(in[i]);
}

void cpu_cast_from_half(float *out, const uint16_t *in, size_t n, kernels_precision prec)
{
    if (prec == KPREC_FP16)
        for (size_t i = 0; i < n; i++)
            out[i] = half_bits_to_float_fp16(in[i]);
    else
        for (size_t i = 0; i < n; i++)
            out[i] = half_bits_to_float_bf16(in[i]);
}
