/* RMSNorm over the last dimension (Llama; eps 1e-5, as the CPU backend), one warp per row, the
 * layout of layernorm.cu without the mean and the bias.
 *
 * Forward: rstd = 1 / sqrt(mean(x^2) + eps), out = x * rstd * weight.
 * Backward: with n = x * rstd and g = dout * weight,
 *     dinp += rstd * (g - n * mean(g * n)),   dweight += sum_rows dout * n.
 * dweight is a sum over all rows: as in layernorm.cu each warp accumulates its rows into its
 * own partial row and a second kernel adds the partial rows in a fixed order, so the result is
 * the same bits on every run (no atomics). */
#include "cuda_common.cuh"

#define RMSNORM_EPS 1e-5f
#define RMS_WARPS 8            /* warps (rows in flight) per block */
#define RMS_MAX_PARTIALS 256   /* partial rows for dweight: bounds scratch to 256*C floats */

__global__ static void rmsnorm_forward_kernel(float *out, float *rstd, const float *inp, const float *weight, int N,
                                              int C)
{
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * RMS_WARPS + (threadIdx.x >> 5);
    if (row >= N)
        return; /* the whole warp leaves together: the shuffles below stay full-warp */
    const float *x = inp + (size_t)row * C;
    float ss = 0.0f;
    for (int c = lane; c < C; c += 32)
        ss += x[c] * x[c];
    float r = 1.0f / sqrtf(warp_sum(ss) / C + RMSNORM_EPS);
    float *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32)
        o[c] = x[c] * r * weight[c];
    if (lane == 0)
        rstd[row] = r;
}

/* Warp w of the grid handles rows w, w + W, w + 2W, ... (W = warps in the grid) and owns
 * partial row dw_part[w][:]. */
__global__ static void rmsnorm_backward_kernel(float *dinp, float *dw_part, const float *dout, const float *inp,
                                               const float *weight, const float *rstd, int N, int C, int W)
{
    int lane = threadIdx.x & 31;
    int w = blockIdx.x * RMS_WARPS + (threadIdx.x >> 5);
    if (w >= W)
        return;
    float *dwp = dw_part + (size_t)w * C;
    for (int c = lane; c < C; c += 32)
        dwp[c] = 0.0f;
    for (int row = w; row < N; row += W) {
        const float *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
        float r = rstd[row];
        float gns = 0.0f;
        for (int c = lane; c < C; c += 32)
            gns += (dy[c] * weight[c]) * (x[c] * r);
        float gnmean = warp_sum(gns) / C;
        float *dx = dinp + (size_t)row * C;
        for (int c = lane; c < C; c += 32) {
            float n = x[c] * r;
            dwp[c] += dy[c] * n;
            dx[c] += r * (dy[c] * weight[c] - n * gnmean);
        }
    }
}

/* dweight[c] += sum_w dw_part[w][c] in order w = 0..W-1: one thread per column. */
__global__ static void rmsnorm_weight_grad_kernel(float *dweight, const float *dw_part, int C, int W)
{
    GRID_STRIDE(c, C) {
        float s = 0.0f;
        for (int w = 0; w < W; w++)
            s += dw_part[(size_t)w * C + c];
        dweight[c] += s;
    }
}

void cuda_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C)
{
    if (N <= 0 || C <= 0)
        return;
    rmsnorm_forward_kernel<<<(N + RMS_WARPS - 1) / RMS_WARPS, RMS_WARPS * 32>>>(out, rstd, inp, weight, N, C);
    LAUNCH_CHECK();
}

void cuda_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                           const float *rstd, int N, int C)
{
    if (N <= 0 || C <= 0)
        return;
    int W = N < RMS_MAX_PARTIALS ? N : RMS_MAX_PARTIALS;
    float *dw_part = (float *)cuda_scratch(SCRATCH_PARTIAL, (size_t)W * C * sizeof(float));
    rmsnorm_backward_kernel<<<(W + RMS_WARPS - 1) / RMS_WARPS, RMS_WARPS * 32>>>(dinp, dw_part, dout, inp, weight,
                                                                                 rstd, N, C, W);
    LAUNCH_CHECK();
    rmsnorm_weight_grad_kernel<<<blocks_for((size_t)C, THREADS), THREADS>>>(dweight, dw_part, C, W);
    LAUNCH_CHECK();
}
