/* LayerNorm forward and backward: one block per row; weight and bias gradients accumulated
 * with atomics (exact order differs from the CPU's, within fp32 rounding). */
#include "cuda_common.cuh"

#define LN_THREADS 256
#define LAYERNORM_EPS 1e-5f

__global__ static void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *inp,
                                                const float *weight, const float *bias, int C)
{
    __shared__ float shared[32];
    const float *x = inp + (size_t)blockIdx.x * C;
    float s = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        s += x[c];
    float m = block_sum(s, shared) / C;
    float v = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        v += (x[c] - m) * (x[c] - m);
    float r = rsqrtf(block_sum(v, shared) / C + LAYERNORM_EPS);
    float *o = out + (size_t)blockIdx.x * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        o[c] = (x[c] - m) * r * weight[c] + bias[c];
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = m;
        rstd[blockIdx.x] = r;
    }
}

__global__ static void layernorm_backward_kernel(float *dinp, float *dweight, float *dbias, const float *dout,
                                                 const float *inp, const float *weight, const float *mean,
                                                 const float *rstd, int C)
{
    __shared__ float shared[32];
    size_t row = blockIdx.x;
    const float *x = inp + row * C, *dy = dout + row * C;
    float m = mean[row], r = rstd[row];
    float gs = 0, gns = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float n = (x[c] - m) * r, g = dy[c] * weight[c];
        gs += g;
        gns += g * n;
    }
    float gmean = block_sum(gs, shared) / C;
    float gnmean = block_sum(gns, shared) / C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float n = (x[c] - m) * r, g = dy[c] * weight[c];
        atomicAdd(&dbias[c], dy[c]);
        atomicAdd(&dweight[c], dy[c] * n);
        dinp[row * C + c] += r * (g - gmean - n * gnmean);
    }
}

void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                            const float *bias, int N, int C)
{
    layernorm_forward_kernel<<<N, LN_THREADS>>>(out, mean, rstd, inp, weight, bias, C);
    LAUNCH_CHECK();
}

void cuda_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                             const float *weight, const float *mean, const float *rstd, int N, int C)
{
    layernorm_backward_kernel<<<N, LN_THREADS>>>(dinp, dweight, dbias, dout, inp, weight, mean, rstd, C);
    LAUNCH_CHECK();
}
