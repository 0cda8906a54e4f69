/* GELU (tanh approximation, as GPT-2) forward and backward, and the residual add. The
 * formulas are the CPU backend's, term for term. */
#include "cuda_common.cuh"

#define GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_CUBIC 0.044715f

__global__ static void gelu_forward_kernel(float *out, const float *inp, size_t n)
{
    GRID_STRIDE(i, n) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + GELU_CUBIC * x * x * x)));
    }
}

/* d/dx [0.5 x (1 + tanh u)] with u = s (x + a x^3): 0.5 (1 + tanh u) + 0.5 x sech^2(u) s (1 + 3 a x^2). */
__global__ static void gelu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t n)
{
    GRID_STRIDE(i, n) {
        float x = inp[i];
        float th = tanhf(GELU_SCALE * (x + GELU_CUBIC * x * x * x));
        float sech2 = 1.0f - th * th;
        float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * GELU_CUBIC * x * x);
        dinp[i] += grad * dout[i];
    }
}

__global__ static void residual_kernel(float *out, const float *a, const float *b, size_t n)
{
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

void cuda_gelu_forward(float *out, const float *inp, size_t N)
{
    if (!N)
        return;
    gelu_forward_kernel<<<blocks_for(N, THREADS), THREADS>>>(out, inp, N);
    LAUNCH_CHECK();
}

void cuda_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
    if (!N)
        return;
    gelu_backward_kernel<<<blocks_for(N, THREADS), THREADS>>>(dinp, inp, dout, N);
    LAUNCH_CHECK();
}

void cuda_residual_forward(float *out, const float *a, const float *b, size_t N)
{
    if (!N)
        return;
    residual_kernel<<<blocks_for(N, THREADS), THREADS>>>(out, a, b, N);
    LAUNCH_CHECK();
}
