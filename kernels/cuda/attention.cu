/* Causal multi-head self-attention that never materialises the (T, T) score matrix.
 *
 * qkv is (B, T, 3C): for token t the C values of q, then k, then v, each split into NH heads
 * of hs = C / NH. One warp handles one (b, h, row) triple; lane l holds the head elements
 * c = l, l + 32, ... in registers, so a dot product is a per-lane partial sum and one warp
 * reduction, and neighbouring lanes read neighbouring addresses.
 *
 * Forward (per query row t): a loop over keys j <= t with an online softmax (running max m,
 * running sum l, output accumulator rescaled by exp(m_old - m_new) whenever the max grows);
 * it writes the normalised output and lse = m + log l, all in O(hs) registers.
 * Backward, with p_j = exp(s_j * scale - lse), dp_j = dO . v_j, D = dO . O and
 * ds_j = p_j (dp_j - D) scale:
 *     dq_t += sum_{j<=t} ds_tj k_j,   dk_j += sum_{t>=j} ds_tj q_t,   dv_j += sum_{t>=j} p_tj dO_t.
 * It runs as three kernels: D for every query row; dq with one warp per query row looping
 * over its keys; dk and dv with one warp per key row looping over its queries. Each output
 * row has exactly one writer, so there are no atomics and the result is deterministic; the
 * price is computing the scores twice.
 *
 * Precision: q, k and v are rounded to the precision as they are loaded, the output is rounded
 * when stored; dout, out and lse are used as given (the CPU backend does the same).
 *
 * This is the simple, obviously-right version: every key is re-read from L2/HBM once per query
 * row (about 1 TFLOP/s on an H200). It is the fallback of attention_gemm.cu, the backend's
 * attention, for sequences whose (T, T) scores of one head would not fit its scratch; it needs
 * O(T) memory. The next step for speed is a tiled FlashAttention-2 kernel (blocks of queries and
 * keys staged in shared memory, the two products on tensor cores). */
#include "cuda_common.cuh"

#define ATTN_WARPS 4                          /* rows per block */
#define ATTN_PER_LANE 8                       /* head elements per lane */
#define ATTN_MAX_HS (32 * ATTN_PER_LANE)      /* largest head size this kernel takes: 256 */

/* Row r of the (B, NH, T) row space (the layout of lse) as (b, h, t). */
struct attn_row {
    int b, h, t;
};

__device__ __forceinline__ attn_row split_row(size_t r, int T, int NH)
{
    attn_row x;
    x.t = (int)(r % T);
    x.h = (int)((r / T) % NH);
    x.b = (int)(r / ((size_t)T * NH));
    return x;
}

/* Head h of the q (part 0), k (1) or v (2) vector of token t of sequence b. */
__device__ __forceinline__ const float *qkv_at(const float *qkv, int b, int t, int h, int part, int T, int C, int hs)
{
    return qkv + ((size_t)b * T + t) * 3 * C + (size_t)part * C + (size_t)h * hs;
}

/* Loads this lane's elements of a head vector (zero past hs), rounded to the precision. */
__device__ __forceinline__ void load_lane(float *dst, const float *src, int hs, int lane, int prec)
{
#pragma unroll
    for (int i = 0; i < ATTN_PER_LANE; i++) {
        int c = lane + 32 * i;
        dst[i] = c < hs ? round_prec(src[c], prec) : 0.0f;
    }
}

/* This lane's share of a . src (src read from memory, rounded). */
__device__ __forceinline__ float lane_dot(const float *a, const float *src, int hs, int lane, int prec)
{
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < ATTN_PER_LANE; i++) {
        int c = lane + 32 * i;
        if (c < hs)
            s += a[i] * round_prec(src[c], prec);
    }
    return s;
}

__global__ static void attention_forward_kernel(float *out, float *lse, const float *qkv, int B, int T, int C,
                                                int NH, float scale, int prec)
{
    size_t r = (size_t)blockIdx.x * ATTN_WARPS + (threadIdx.x >> 5);
    if (r >= (size_t)B * NH * T)
        return; /* whole warp: shuffles stay full-warp */
    int lane = threadIdx.x & 31, hs = C / NH;
    attn_row x = split_row(r, T, NH);
    float q[ATTN_PER_LANE], acc[ATTN_PER_LANE];
    load_lane(q, qkv_at(qkv, x.b, x.t, x.h, 0, T, C, hs), hs, lane, prec);
#pragma unroll
    for (int i = 0; i < ATTN_PER_LANE; i++)
        acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int j = 0; j <= x.t; j++) {
        float s = warp_sum(lane_dot(q, qkv_at(qkv, x.b, j, x.h, 1, T, C, hs), hs, lane, prec)) * scale;
        float m_new = fmaxf(m, s);
        float correction = expf(m - m_new); /* 0 on the first key, where m = -inf */
        float p = expf(s - m_new);
        l = l * correction + p;
        const float *v = qkv_at(qkv, x.b, j, x.h, 2, T, C, hs);
#pragma unroll
        for (int i = 0; i < ATTN_PER_LANE; i++) {
            int c = lane + 32 * i;
            if (c < hs)
                acc[i] = acc[i] * correction + p * round_prec(v[c], prec);
        }
        m = m_new;
    }
    float *o = out + ((size_t)x.b * T + x.t) * C + (size_t)x.h * hs;
#pragma unroll
    for (int i = 0; i < ATTN_PER_LANE; i++) {
        int c = lane + 32 * i;
        if (c < hs)
            o[c] = round_prec(acc[i] / l, prec);
    }
    if (lane == 0)
        lse[r] = m + logf(l);
}

/* D[r] = dO . O for every query row (the row's share of the softmax backward). */
__global__ static void attention_backward_d_kernel(float *D, const float *dout, const float *out, int B, int T,
                                                   int C, int NH)
{
    size_t r = (size_t)blockIdx.x * ATTN_WARPS + (threadIdx.x >> 5);
    if (r >= (size_t)B * NH * T)
        return;
    int lane = threadIdx.x & 31, hs = C / NH;
    attn_row x = split_row(r, T, NH);
    size_t off = ((size_t)x.b * T + x.t) * C + (size_t)x.h * hs;
    float s = 0.0f;
    for (int c = lane; c < hs; c += 32)
        s += dout[off + c] * out[off + c];
    s = warp_sum(s);
    if (lane == 0)
        D[r] = s;
}

/* dq of query row t: a loop over its keys j <= t. */
__global__ static void attention_backward_dq_kernel(float *dqkv, const float *dout, const float *qkv,
                                                    const float *lse, const float *D, int B, int T, int C, int NH,
                                                    float scale, int prec)
{
    size_t r = (size_t)blockIdx.x * ATTN_WARPS + (threadIdx.x >> 5);
    if (r >= (size_t)B * NH * T)
        return;
    int lane = threadIdx.x & 31, hs = C / NH;
    attn_row x = split_row(r, T, NH);
    float q[ATTN_PER_LANE], dO[ATTN_PER_LANE], acc[ATTN_PER_LANE];
    load_lane(q, qkv_at(qkv, x.b, x.t, x.h, 0, T, C, hs), hs, lane, prec);
    load_lane(dO, dout + ((size_t)x.b * T + x.t) * C + (size_t)x.h * hs, hs, lane, KPREC_FP32);
#pragma unroll
    for (int i = 0; i < ATTN_PER_LANE; i++)
        acc[i] = 0.0f;
    float L = lse[r], Dr = D[r];
    for (int j = 0; j <= x.t; j++) {
        const float *k = qkv_at(qkv, x.b, j, x.h, 1, T, C, hs);
        float s = warp_sum(lane_dot(q, k, hs, lane, prec));
        float dp = warp_sum(lane_dot(dO, k + C, hs, lane, prec)); /* k + C: v of the same token */
        float ds = expf(s * scale - L) * (dp - Dr) * scale;
#pragma unroll
        for (int i = 0; i < ATTN_PER_LANE; i++) {
            int c = lane + 32 * i;
            if (c < hs)
                acc[i] += ds * round_prec(k[c], prec);
        }
    }
    float *dq = dqkv + ((size_t)x.b * T + x.t) * 3 * C + (size_t)x.h * hs;
#pragma unroll
    for (int i = 0; i < ATTN_PER_LANE; i++) {
        int c = lane + 32 * i;
        if (c < hs)
            dq[c] += acc[i];
    }
}

/* dk and dv of key row j: a loop over the query rows t >= j that see it. */
__global__ static void attention_backward_dkv_kernel(float *dqkv, const float *dout, const float *qkv,
                                                     const float *lse, const float *D, int B, int T, int C, int NH,
                                                     float scale, int prec)
{
    size_t r = (size_t)blockIdx.x * ATTN_WARPS + (threadIdx.x >> 5);
    if (r >= (size_t)B * NH * T)
        return;
    int lane = threadIdx.x & 31, hs = C / NH;
    attn_row x = split_row(r, T, NH); /* x.t is the key row j here */
    float k[ATTN_PER_LANE], v[ATTN_PER_LANE], dk[ATTN_PER_LANE], dv[ATTN_PER_LANE];
    load_lane(k, qkv_at(qkv, x.b, x.t, x.h, 1, T, C, hs), hs, lane, prec);
    load_lane(v, qkv_at(qkv, x.b, x.t, x.h, 2, T, C, hs), hs, lane, prec);
#pragma unroll
    for (int i = 0; i < ATTN_PER_LANE; i++)
        dk[i] = dv[i] = 0.0f;
    size_t row0 = r - (size_t)x.t; /* row of query 0 in the same (b, h) */
    for (int t = x.t; t < T; t++) {
        const float *q = qkv_at(qkv, x.b, t, x.h, 0, T, C, hs);
        const float *dO = dout + ((size_t)x.b * T + t) * C + (size_t)x.h * hs;
        float s = warp_sum(lane_dot(k, q, hs, lane, prec));
        float dp = warp_sum(lane_dot(v, dO, hs, lane, KPREC_FP32));
        float p = expf(s * scale - lse[row0 + t]);
        float ds = p * (dp - D[row0 + t]) * scale;
#pragma unroll
        for (int i = 0; i < ATTN_PER_LANE; i++) {
            int c = lane + 32 * i;
            if (c < hs) {
                dk[i] += ds * round_prec(q[c], prec);
                dv[i] += p * dO[c];
            }
        }
    }
    float *dkp = dqkv + ((size_t)x.b * T + x.t) * 3 * C + C + (size_t)x.h * hs, *dvp = dkp + C;
#pragma unroll
    for (int i = 0; i < ATTN_PER_LANE; i++) {
        int c = lane + 32 * i;
        if (c < hs) {
            dkp[c] += dk[i];
            dvp[c] += dv[i];
        }
    }
}

/* Head sizes past ATTN_MAX_HS would need more registers per lane than this kernel keeps. */
static void check_shape(int C, int NH)
{
    if (NH <= 0 || C % NH != 0 || C / NH > ATTN_MAX_HS) {
        fprintf(stderr, "kernels(cuda): attention needs C %% NH == 0 and a head size of at most %d (C=%d, NH=%d)\n",
                ATTN_MAX_HS, C, NH);
        abort();
    }
}

static unsigned attn_blocks(int B, int T, int NH)
{
    size_t rows = (size_t)B * NH * T;
    return (unsigned)((rows + ATTN_WARPS - 1) / ATTN_WARPS);
}

void cuda_attention_forward_rowwise(float *out, float *lse, const float *qkv, int B, int T, int C, int NH,
                                    kernels_precision prec)
{
    if (B <= 0 || T <= 0)
        return;
    check_shape(C, NH);
    float scale = 1.0f / sqrtf((float)(C / NH));
    attention_forward_kernel<<<attn_blocks(B, T, NH), ATTN_WARPS * 32>>>(out, lse, qkv, B, T, C, NH, scale,
                                                                          (int)prec);
    LAUNCH_CHECK();
}

float *cuda_attention_backward_d(const float *dout, const float *out, int B, int T, int C, int NH)
{
    float *D = (float *)cuda_scratch(SCRATCH_ATTN_D, (size_t)B * NH * T * sizeof(float));
    attention_backward_d_kernel<<<attn_blocks(B, T, NH), ATTN_WARPS * 32>>>(D, dout, out, B, T, C, NH);
    LAUNCH_CHECK();
    return D;
}

void cuda_attention_backward_rowwise(float *dqkv, const float *dout, const float *qkv, const float *out,
                                     const float *lse, int B, int T, int C, int NH, kernels_precision prec)
{
    if (B <= 0 || T <= 0)
        return;
    check_shape(C, NH);
    float scale = 1.0f / sqrtf((float)(C / NH));
    unsigned blocks = attn_blocks(B, T, NH);
    float *D = cuda_attention_backward_d(dout, out, B, T, C, NH);
    attention_backward_dq_kernel<<<blocks, ATTN_WARPS * 32>>>(dqkv, dout, qkv, lse, D, B, T, C, NH, scale,
                                                              (int)prec);
    LAUNCH_CHECK();
    attention_backward_dkv_kernel<<<blocks, ATTN_WARPS * 32>>>(dqkv, dout, qkv, lse, D, B, T, C, NH, scale,
                                                               (int)prec);
    LAUNCH_CHECK();
}
