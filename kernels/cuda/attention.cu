/* Causal self-attention that never materialises (T, T): one block per (batch, head, query
 * row) holds that row's scores in shared memory (O(T)), normalises them, and writes the
 * output and the row's log-sum-exp. The backward recomputes the row's probabilities from the
 * log-sum-exp. A tiled FlashAttention-2 kernel (blocks of queries and keys in shared memory,
 * tensor cores) is the next step for speed; this one is simple enough to be obviously right.
 * Rows longer than ATTN_MAX_T are refused with a message. */
#include "cuda_common.cuh"

#define ATTN_THREADS 128
#define ATTN_MAX_T 8192   /* 32 KiB of shared scores per block */

__global__ static void attention_forward_kernel(float *out, float *lse, const float *qkv, int T, int C, int NH,
                                                float scale, int prec)
{
    extern __shared__ float scores[];
    __shared__ float shared[32];
    int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, hs = C / NH;
    const float *q = qkv + ((size_t)b * T + t) * 3 * C + (size_t)h * hs;
    for (int j = threadIdx.x; j <= t; j += blockDim.x) {
        const float *k = qkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * hs;
        float s = 0;
        for (int c = 0; c < hs; c++)
            s += round_prec(q[c], prec) * round_prec(k[c], prec);
        scores[j] = s * scale;
    }
    __syncthreads();
    float m = -INFINITY;
    for (int j = threadIdx.x; j <= t; j += blockDim.x)
        m = fmaxf(m, scores[j]);
    m = block_max(m, shared);
    float l = 0;
    for (int j = threadIdx.x; j <= t; j += blockDim.x) {
        scores[j] = __expf(scores[j] - m);
        l += scores[j];
    }
    l = block_sum(l, shared);
    float *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
    for (int c = threadIdx.x; c < hs; c += blockDim.x) {
        float acc = 0;
        for (int j = 0; j <= t; j++)
            acc += scores[j] * round_prec(qkv[((size_t)b * T + j) * 3 * C + 2 * C + (size_t)h * hs + c], prec);
        o[c] = round_prec(acc / l, prec);
    }
    if (threadIdx.x == 0)
        lse[((size_t)b * NH + h) * T + t] = m + logf(l);
}

__global__ static void attention_backward_kernel(float *dqkv, const float *dout, const float *qkv, const float *out,
                                                 const float *lse, int T, int C, int NH, float scale, int prec)
{
    extern __shared__ float p[];   /* p[0..t]: probabilities, then ds[0..t] */
    __shared__ float shared[32];
    int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, hs = C / NH;
    float *ds = p + (t + 1);
    const float *q = qkv + ((size_t)b * T + t) * 3 * C + (size_t)h * hs;
    const float *dO = dout + ((size_t)b * T + t) * C + (size_t)h * hs;
    const float *O = out + ((size_t)b * T + t) * C + (size_t)h * hs;
    float L = lse[((size_t)b * NH + h) * T + t];
    float d = 0;
    for (int c = threadIdx.x; c < hs; c += blockDim.x)
        d += dO[c] * O[c];
    float D = block_sum(d, shared);
    for (int j = threadIdx.x; j <= t; j += blockDim.x) {
        const float *k = qkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * hs;
        const float *v = k + C;
        float s = 0, dp = 0;
        for (int c = 0; c < hs; c++) {
            s += round_prec(q[c], prec) * round_prec(k[c], prec);
            dp += dO[c] * round_prec(v[c], prec);
        }
        p[j] = __expf(s * scale - L);
        ds[j] = p[j] * (dp - D) * scale;
    }
    __syncthreads();
    float *dq = dqkv + ((size_t)b * T + t) * 3 * C + (size_t)h * hs;
    for (int c = threadIdx.x; c < hs; c += blockDim.x) {
        float acc = 0;
        for (int j = 0; j <= t; j++)
            acc += ds[j] * round_prec(qkv[((size_t)b * T + j) * 3 * C + C + (size_t)h * hs + c], prec);
        dq[c] += acc; /* only this block writes row t's dq */
    }
    /* dK and dV of earlier rows receive contributions from many query rows: atomics. */
    for (int idx = threadIdx.x; idx < (t + 1) * hs; idx += blockDim.x) {
        int j = idx / hs, c = idx % hs;
        float *dk = dqkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * hs;
        atomicAdd(&dk[c], ds[j] * round_prec(q[c], prec));
        atomicAdd(&dk[C + c], p[j] * dO[c]);
    }
}

static void check_length(int T)
{
    if (T > ATTN_MAX_T) {
        fprintf(stderr, "kernels(cuda): attention over %d tokens exceeds this kernel's %d\n", T, ATTN_MAX_T);
        abort();
    }
}

void cuda_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C, int NH,
                            kernels_precision prec)
{
    check_length(T);
    dim3 grid(T, NH, B);
    size_t shmem = (size_t)T * sizeof(float);
    attention_forward_kernel<<<grid, ATTN_THREADS, shmem>>>(out, lse, qkv, T, C, NH, 1.0f / sqrtf((float)(C / NH)), (int)prec);
    LAUNCH_CHECK();
}

void cuda_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                             int B, int T, int C, int NH, kernels_precision prec)
{
    check_length(T / 2);
    dim3 grid(T, NH, B);
    size_t shmem = 2 * (size_t)T * sizeof(float);
    if (shmem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(attention_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)shmem));
    attention_backward_kernel<<<grid, ATTN_THREADS, shmem>>>(dqkv, dout, qkv, out, lse, T, C, NH,
                                                            1.0f / sqrtf((float)(C / NH)), (int)prec);
    LAUNCH_CHECK();
}
