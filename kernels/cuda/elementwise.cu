/* GELU (tanh approximation, as GPT-2) and SwiGLU, forward and backward, and the residual add.
 * The formulas are the CPU backend's, term for term; each rounds what it stores to the
 * precision in the same pass (round_prec: the CPU's half_round_to, bit for bit but for NaN payloads). */
#include "cuda_common.cuh"

#define GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_CUBIC 0.044715f

__global__ static void gelu_forward_kernel(float *out, const float *inp, size_t n, int prec)
{
    GRID_STRIDE(i, n) {
        float x = inp[i];
        out[i] = round_prec(0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + GELU_CUBIC * x * x * x))), prec);
    }
}

/* d/dx [0.5 x (1 + tanh u)] with u = s (x + a x^3): 0.5 (1 + tanh u) + 0.5 x sech^2(u) s (1 + 3 a x^2). */
__global__ static void gelu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t n, int prec)
{
    GRID_STRIDE(i, n) {
        float x = inp[i];
        float th = tanhf(GELU_SCALE * (x + GELU_CUBIC * x * x * x));
        float sech2 = 1.0f - th * th;
        float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * GELU_CUBIC * x * x);
        dinp[i] = round_prec(dinp[i] + grad * dout[i], prec);
    }
}

/* SwiGLU over rows of [gate | up] (F each): out = silu(gate) * up, silu(x) = x sig(x) with
 * sig(x) = 1 / (1 + exp(-x)); expf overflows to inf for x < -88 and sig goes to 0, as it should. */
__global__ static void swiglu_forward_kernel(float *out, const float *inp, int F, size_t n, int prec)
{
    GRID_STRIDE(i, n) {
        size_t r = i / F, c = i % F;
        float g = inp[r * 2 * F + c], u = inp[r * 2 * F + F + c];
        float sig = 1.0f / (1.0f + expf(-g));
        out[i] = round_prec(g * sig * u, prec);
    }
}

/* d silu(x)/dx = sig (1 + x (1 - sig)); dgate += dout up silu', dup += dout silu(gate). */
__global__ static void swiglu_backward_kernel(float *dinp, const float *inp, const float *dout, int F, size_t n,
                                              int prec)
{
    GRID_STRIDE(i, n) {
        size_t r = i / F, c = i % F;
        size_t gi = r * 2 * F + c, ui = gi + F;
        float g = inp[gi], u = inp[ui], d = dout[i];
        float sig = 1.0f / (1.0f + expf(-g));
        dinp[gi] = round_prec(dinp[gi] + d * u * sig * (1.0f + g * (1.0f - sig)), prec);
        dinp[ui] = round_prec(dinp[ui] + d * g * sig, prec);
    }
}

__global__ static void residual_kernel(float *out, const float *a, const float *b, size_t n, int prec)
{
    GRID_STRIDE(i, n) out[i] = round_prec(a[i] + b[i], prec);
}

void cuda_gelu_forward(float *out, const float *inp, size_t N, kernels_precision prec)
{
    if (!N)
        return;
    gelu_forward_kernel<<<blocks_for(N, THREADS), THREADS>>>(out, inp, N, (int)prec);
    LAUNCH_CHECK();
}

void cuda_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N, kernels_precision prec)
{
    if (!N)
        return;
    gelu_backward_kernel<<<blocks_for(N, THREADS), THREADS>>>(dinp, inp, dout, N, (int)prec);
    LAUNCH_CHECK();
}

void cuda_swiglu_forward(float *out, const float *inp, int N, int F, kernels_precision prec)
{
    size_t n = (size_t)N * F;
    if (N <= 0 || F <= 0)
        return;
    swiglu_forward_kernel<<<blocks_for(n, THREADS), THREADS>>>(out, inp, F, n, (int)prec);
    LAUNCH_CHECK();
}

void cuda_swiglu_backward(float *dinp, const float *inp, const float *dout, int N, int F, kernels_precision prec)
{
    size_t n = (size_t)N * F;
    if (N <= 0 || F <= 0)
        return;
    swiglu_backward_kernel<<<blocks_for(n, THREADS), THREADS>>>(dinp, inp, dout, F, n, (int)prec);
    LAUNCH_CHECK();
}

void cuda_residual_forward(float *out, const float *a, const float *b, size_t N, kernels_precision prec)
{
    if (!N)
        return;
    residual_kernel<<<blocks_for(N, THREADS), THREADS>>>(out, a, b, N, (int)prec);
    LAUNCH_CHECK();
}
