/* Rounding to bf16/fp16 precision in place (storage emulation) and casts to and from the
 * 16-bit formats, all round-to-nearest-even (__float2bfloat16_rn, __float2half_rn), which is
 * what the CPU backend's kernels_float_to_bf16/fp16 compute bit for bit (NaN payloads aside). */
#include "cuda_common.cuh"

__global__ static void round_kernel(float *x, size_t n, int prec)
{
    GRID_STRIDE(i, n) x[i] = round_prec(x[i], prec);
}

__global__ static void cast_to_half_kernel(uint16_t *out, const float *in, size_t n, int prec)
{
    GRID_STRIDE(i, n) {
        out[i] = prec == KPREC_FP16 ? __half_as_ushort(__float2half_rn(in[i]))
                                    : __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
    }
}

__global__ static void cast_from_half_kernel(float *out, const uint16_t *in, size_t n, int prec)
{
    GRID_STRIDE(i, n) {
        out[i] = prec == KPREC_FP16 ? __half2float(__ushort_as_half(in[i]))
                                    : __bfloat162float(__ushort_as_bfloat16(in[i]));
    }
}

void cuda_round_to_precision(float *x, size_t n, kernels_precision prec)
{
    if (prec == KPREC_FP32 || !n)
        return;
    round_kernel<<<blocks_for(n, THREADS), THREADS>>>(x, n, (int)prec);
    LAUNCH_CHECK();
}

/* As the CPU backend: KPREC_FP16 means fp16, anything else bf16. */
void cuda_cast_to_half(uint16_t *out, const float *in, size_t n, kernels_precision prec)
{
    if (!n)
        return;
    cast_to_half_kernel<<<blocks_for(n, THREADS), THREADS>>>(out, in, n, (int)prec);
    LAUNCH_CHECK();
}

void cuda_cast_from_half(float *out, const uint16_t *in, size_t n, kernels_precision prec)
{
    if (!n)
        return;
    cast_from_half_kernel<<<blocks_for(n, THREADS), THREADS>>>(out, in, n, (int)prec);
    LAUNCH_CHECK();
}
