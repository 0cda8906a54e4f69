/* Row softmax of (rows, cols), one block per row: max, sum of exp(x - max), then divide. */
#include "cuda_common.cuh"

__global__ static void softmax_kernel(float *out, const float *inp, int cols)
{
    __shared__ float scratch[32];
    const float *x = inp + (size_t)blockIdx.x * cols;
    float *y = out + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        m = fmaxf(m, x[c]);
    m = block_max(m, scratch);
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        s += expf(x[c] - m);
    s = block_sum(s, scratch);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        y[c] = expf(x[c] - m) / s;
}

void cuda_softmax_forward(float *out, const float *inp, int rows, int cols)
{
    if (rows <= 0 || cols <= 0)
        return;
    softmax_kernel<<<rows, THREADS>>>(out, inp, cols);
    LAUNCH_CHECK();
}
