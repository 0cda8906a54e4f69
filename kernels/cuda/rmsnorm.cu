/* RMSNorm over the last dimension (Llama; eps 1e-5, as the CPU backend), one warp per row, the
 * layout of layernorm.cu without the mean and the bias.
 *
 * Forward: rstd = 1 / sqrt(mean(x^2) + eps), out = x * rstd * weight.
 * Backward: with n = x * rstd and g = dout * weight,
 *     dinp += rstd * (g - n * mean(g * n)),   dweight += sum_rows dout * n.
 * dweight is a sum over all rows: as in layernorm.cu each warp accumulates its rows into its
 * own partial row (up to one per row, as memory allows) and cuda_column_sums_add adds the
 * partial rows in a fixed order, so the result is the same bits on every run (no atomics). */
#include "cuda_common.cuh"

#define RMSNORM_EPS 1e-5f
#define RMS_WARPS 8            /* warps (rows in flight) per block */
#define RMS_PARTIAL_FLOATS (1 << 24) /* partial rows for dweight: W C floats at most this */
#define RMS_MIN_PARTIALS 256         /* ... unless C is so wide that fewer rows than this would fit */

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

/* Partial rows of the weight gradient for N rows of width C: up to one per row. */
static int partial_rows(int N, int C)
{
    long fit = RMS_PARTIAL_FLOATS / (long)C;
    if (fit < RMS_MIN_PARTIALS)
        fit = RMS_MIN_PARTIALS;
    return N < fit ? N : (int)fit;
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
    int W = partial_rows(N, C);
    size_t tmp = cuda_column_sums_scratch_floats(W, C);
    float *dw_part = (float *)cuda_scratch(SCRATCH_PARTIAL, ((size_t)W * C + tmp) * sizeof(float));
    rmsnorm_backward_kernel<<<(W + RMS_WARPS - 1) / RMS_WARPS, RMS_WARPS * 32>>>(dinp, dw_part, dout, inp, weight,
                                                                                 rstd, N, C, W);
    LAUNCH_CHECK();
    cuda_column_sums_add(dweight, dw_part, W, C, KPREC_FP32, dw_part + (size_t)W * C);
}
