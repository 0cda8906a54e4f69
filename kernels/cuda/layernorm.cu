/* LayerNorm over the last dimension (eps 1e-5, as GPT-2 and the CPU backend), one warp per row.
 *
 * Forward: two passes over the row for the mean and the variance (the CPU's formula, which
 * avoids the cancellation of E[x^2] - E[x]^2), a third for the output.
 * Backward: with n = (x - mean) * rstd and g = dout * weight,
 *     dinp += rstd * (g - mean(g) - n * mean(g * n)),   dweight += sum_rows dout * n,
 *     dbias += sum_rows dout.
 * The weight and bias gradients are sums over all rows. Instead of atomics (whose order, and
 * so whose rounding, changes from run to run) each warp accumulates its rows into its own
 * row of a partial buffer, and cuda_column_sums_add (reductions.cu) adds those partial rows in
 * a fixed order. The number of partial rows depends only on N and C, so results are
 * reproducible bit for bit. There are as many as memory allows (up to one per row): with 256
 * the backward ran 256 warps on a GPU that holds thousands, 28 times its forward's time
 * (dtcal kernels, H200, 2026-11-26). */
#include "cuda_common.cuh"

#define LAYERNORM_EPS 1e-5f
#define LN_WARPS 8            /* warps (rows in flight) per block */
#define LN_PARTIAL_FLOATS (1 << 24) /* partial rows for dweight and dbias: 2 W C floats at most this */
#define LN_MIN_PARTIALS 256         /* ... unless C is so wide that fewer rows than this would fit */

__global__ static void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *inp,
                                                const float *weight, const float *bias, int N, int C)
{
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
    if (row >= N)
        return; /* the whole warp leaves together: the shuffles below stay full-warp */
    const float *x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32)
        s += x[c];
    float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32)
        v += (x[c] - m) * (x[c] - m);
    float r = 1.0f / sqrtf(warp_sum(v) / C + LAYERNORM_EPS);
    float *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32)
        o[c] = (x[c] - m) * r * weight[c] + bias[c];
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

/* Warp w of the grid handles rows w, w + W, w + 2W, ... (W = warps in the grid) and owns
 * partial rows dw_part[w][:] and db_part[w][:]. */
__global__ static void layernorm_backward_kernel(float *dinp, float *dw_part, float *db_part, const float *dout,
                                                 const float *inp, const float *weight, const float *mean,
                                                 const float *rstd, int N, int C, int W)
{
    int lane = threadIdx.x & 31;
    int w = blockIdx.x * LN_WARPS + (threadIdx.x >> 5);
    if (w >= W)
        return;
    float *dwp = dw_part + (size_t)w * C, *dbp = db_part + (size_t)w * C;
    for (int c = lane; c < C; c += 32)
        dwp[c] = dbp[c] = 0.0f;
    for (int row = w; row < N; row += W) {
        const float *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
        float m = mean[row], r = rstd[row];
        float gs = 0.0f, gns = 0.0f;
        for (int c = lane; c < C; c += 32) {
            float n = (x[c] - m) * r, g = dy[c] * weight[c];
            gs += g;
            gns += g * n;
        }
        float gmean = warp_sum(gs) / C, gnmean = warp_sum(gns) / C;
        float *dx = dinp + (size_t)row * C;
        for (int c = lane; c < C; c += 32) {
            float n = (x[c] - m) * r, g = dy[c] * weight[c];
            dbp[c] += dy[c];
            dwp[c] += dy[c] * n;
            dx[c] += r * (g - gmean - n * gnmean);
        }
    }
}

/* Partial rows of the weight gradients for N rows of width C: up to one per row. */
static int partial_rows(int N, int C)
{
    long fit = LN_PARTIAL_FLOATS / (2L * C);
    if (fit < LN_MIN_PARTIALS)
        fit = LN_MIN_PARTIALS;
    return N < fit ? N : (int)fit;
}

void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                            const float *bias, int N, int C)
{
    if (N <= 0 || C <= 0)
        return;
    layernorm_forward_kernel<<<(N + LN_WARPS - 1) / LN_WARPS, LN_WARPS * 32>>>(out, mean, rstd, inp, weight, bias,
                                                                               N, C);
    LAUNCH_CHECK();
}

void cuda_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                             const float *weight, const float *mean, const float *rstd, int N, int C)
{
    if (N <= 0 || C <= 0)
        return;
    int W = partial_rows(N, C);
    size_t tmp = cuda_column_sums_scratch_floats(W, C);
    float *part = (float *)cuda_scratch(SCRATCH_PARTIAL, (2 * (size_t)W * C + tmp) * sizeof(float));
    float *dw_part = part, *db_part = part + (size_t)W * C;
    layernorm_backward_kernel<<<(W + LN_WARPS - 1) / LN_WARPS, LN_WARPS * 32>>>(dinp, dw_part, db_part, dout, inp,
                                                                                weight, mean, rstd, N, C, W);
    LAUNCH_CHECK();
    cuda_column_sums_add(dweight, dw_part, W, C, KPREC_FP32, part + 2 * (size_t)W * C);
    cuda_column_sums_add(dbias, db_part, W, C, KPREC_FP32, part + 2 * (size_t)W * C);
}
