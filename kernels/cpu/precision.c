/* Rounding to bf16/fp16 precision (storage emulation) and casts to 16-bit formats. */
#include <stdlib.h>
#include <string.h>
#include "cpu_internal.h"

void cpu_round_to_precision(float *x, size_t n, kernels_precision prec)
{
    if (prec == KPREC_FP32)
        return;
    for (size_t i = 0; i < n; i++)
        x[i] = kernels_round(x[i], prec);
}

float *cpu_rounded_copy(const float *x, size_t n, kernels_precision prec)
{
    if (prec == KPREC_FP32)
        return NULL;
    float *c = cpu_alloc(n * sizeof(float));
    memcpy(c, x, n * sizeof(float));
    cpu_round_to_precision(c, n, prec);
    return c;
}

void cpu_cast_to_half(uint16_t *out, const float *in, size_t n, kernels_precision prec)
{
    for (size_t i = 0; i < n; i++)
        out[i] = prec == KPREC_FP16 ? kernels_float_to_fp16(in[i]) : kernels_float_to_bf16(in[i]);
}

void cpu_cast_from_half(float *out, const uint16_t *in, size_t n, kernels_precision prec)
{
    for (size_t i = 0; i < n; i++)
        out[i] = prec == KPREC_FP16 ? kernels_fp16_to_float(in[i]) : kernels_bf16_to_float(in[i]);
}
