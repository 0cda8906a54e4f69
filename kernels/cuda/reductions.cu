/* Reductions whose results go back to the host: the sum of squares (for the global gradient
 * norm) and the overflow check (for fp16 loss scaling).
 *
 * sum_squares accumulates in double, as the CPU does, and is deterministic: a fixed number of
 * blocks (a function of n only) each write one partial sum, and the host adds the partials
 * in order. No floating-point atomics, whose order would vary from run to run. */
#include "cuda_common.cuh"

#define SS_THREADS 256
#define SS_MAX_BLOCKS 1024

__global__ static void sum_squares_kernel(double *partial, const float *x, size_t n)
{
    __shared__ double s[SS_THREADS];
    double acc = 0.0;
    GRID_STRIDE(i, n) acc += (double)x[i] * (double)x[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int half = SS_THREADS / 2; half > 0; half >>= 1) { /* fixed-shape tree: same order every run */
        if ((int)threadIdx.x < half)
            s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partial[blockIdx.x] = s[0];
}

/* Any writer stores the same 1, so the order of writers does not matter. */
__global__ static void inf_nan_kernel(int *flag, const float *x, size_t n)
{
    GRID_STRIDE(i, n) {
        if (!isfinite(x[i]))
            atomicOr(flag, 1);
    }
}

double cuda_sum_squares(const float *x, size_t n)
{
    if (!n)
        return 0.0;
    unsigned blocks = blocks_for(n, SS_THREADS);
    if (blocks > SS_MAX_BLOCKS)
        blocks = SS_MAX_BLOCKS;
    double *partial = (double *)cuda_scratch(SCRATCH_PARTIAL, blocks * sizeof(double));
    sum_squares_kernel<<<blocks, SS_THREADS>>>(partial, x, n);
    LAUNCH_CHECK();
    double host[SS_MAX_BLOCKS];
    CUDA_CHECK(cudaMemcpy(host, partial, blocks * sizeof(double), cudaMemcpyDeviceToHost));
    double total = 0.0;
    for (unsigned b = 0; b < blocks; b++)
        total += host[b];
    return total;
}

int cuda_has_inf_or_nan(const float *x, size_t n)
{
    if (!n)
        return 0;
    int *flag = (int *)cuda_scratch(SCRATCH_PARTIAL, sizeof(int));
    CUDA_CHECK(cudaMemset(flag, 0, sizeof(int)));
    unsigned blocks = blocks_for(n, THREADS);
    if (blocks > 1024)
        blocks = 1024;
    inf_nan_kernel<<<blocks, THREADS>>>(flag, x, n);
    LAUNCH_CHECK();
    int host = 0;
    CUDA_CHECK(cudaMemcpy(&host, flag, sizeof host, cudaMemcpyDeviceToHost));
    return host;
}
