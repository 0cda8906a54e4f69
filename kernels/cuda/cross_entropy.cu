/* Fused softmax + cross-entropy over logits (N, V), one block per row: the row's
 * log-sum-exp (max subtracted, so no overflow), then the loss or the gradient
 * dloss * (softmax - onehot). The probabilities are never stored. A target outside [0, V)
 * gives a NaN loss (and no one-hot term in the gradient) rather than a wild read. */
#include "cuda_common.cuh"

__device__ static float row_logsumexp(const float *x, int V, float *scratch)
{
    float m = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        m = fmaxf(m, x[v]);
    m = block_max(m, scratch);
    float s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        s += expf(x[v] - m);
    return m + logf(block_sum(s, scratch));
}

__global__ static void cross_entropy_forward_kernel(float *losses, const float *logits, const int *targets, int V)
{
    __shared__ float scratch[32];
    const float *x = logits + (size_t)blockIdx.x * V;
    float lse = row_logsumexp(x, V, scratch);
    if (threadIdx.x == 0) {
        int tgt = targets[blockIdx.x];
        losses[blockIdx.x] = (tgt >= 0 && tgt < V) ? lse - x[tgt] : NAN;
    }
}

__global__ static void cross_entropy_backward_kernel(float *dlogits, const float *logits, const int *targets,
                                                     float dloss, int V)
{
    __shared__ float scratch[32];
    const float *x = logits + (size_t)blockIdx.x * V;
    float *d = dlogits + (size_t)blockIdx.x * V;
    float lse = row_logsumexp(x, V, scratch);
    int tgt = targets[blockIdx.x];
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        d[v] += dloss * (expf(x[v] - lse) - (v == tgt ? 1.0f : 0.0f));
}

#define CE_THREADS 512 /* rows are vocabulary-long: more threads per row */

void cuda_cross_entropy_forward(float *losses, const float *logits, const int *targets, int N, int V)
{
    if (N <= 0 || V <= 0)
        return;
    cross_entropy_forward_kernel<<<N, CE_THREADS>>>(losses, logits, targets, V);
    LAUNCH_CHECK();
}

void cuda_cross_entropy_backward(float *dlogits, const float *logits, const int *targets, float dloss, int N, int V)
{
    if (N <= 0 || V <= 0)
        return;
    cross_entropy_backward_kernel<<<N, CE_THREADS>>>(dlogits, logits, targets, dloss, V);
    LAUNCH_CHECK();
}
