/* The public fp32 <-> bf16 / fp16 helpers (kernels.h): exact round-to-nearest-even, shared by
 * both backends (the CUDA backend's casts must give the same bits) and the tests. The bit
 * manipulation itself is in half_bits.h. */
#include "half_bits.h"
#include "kernels.h"

uint16_t kernels_float_to_bf16(float f) { return half_bits_from_float_bf16(f); }
float kernels_bf16_to_float(uint16_t h) { return half_bits_to_float_bf16(h); }
uint16_t kernels_float_to_fp16(float f) { return half_bits_from_float_fp16(f); }
float kernels_fp16_to_float(uint16_t h) { return half_bits_to_float_fp16(h); }

float kernels_round(float f, kernels_precision prec)
{
    return half_round_to(f, prec);
}
