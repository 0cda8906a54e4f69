/* Causal multi-head self-attention through cuBLAS: the score matrix of a few heads at a time in
 * a scratch buffer, its products as strided-batched SGEMMs, the softmax in one kernel. This is
 * llm.c's attention without cuDNN (scores materialised per head, never kept between calls), and
 * the CUDA backend's default; attention.cu's row-per-warp kernels, which need no (T, T) memory,
 * take the sequences whose score matrix for one head outgrows ATTN_GEMM_CHUNK_BYTES.
 *
 * Measured on an H200 (2026-11-26, kernels_bench, B=8 T=1024 C=768 NH=12, fp32): the
 * row-per-warp kernels ran the forward at 0.87 TFLOP/s and the backward at 1.16, 89% of a GPT-2
 * 124M training step (dtcal validate's profile): each key row was re-read once per query row.
 *
 * Layout, with no copies: head h of token t of sequence b sits at qkv + (b T + t) 3C + part C
 * + h hs, so for one b the heads' q (or k, v) are column-major hs x T matrices with leading
 * dimension 3C, one head apart by hs: a strided batch. Score rows are query rows: S[t][j] at
 * t T + j, which cuBLAS sees as the column-major T x T matrix K^T Q. Every product:
 *     S = K^T Q,   O = V P,   dV += dO P^T,   dP = V^T dO,   dQ += K dS,   dK += Q dS^T
 * (P, dP, dS in S's layout; O, dO column-major hs x T with leading dimension C).
 *
 * Precision, as the row-per-warp kernels and the CPU reference: q, k, v rounded to the precision
 * (a rounded copy of qkv in scratch), every product in fp32 (CUBLAS_COMPUTE_32F, no TF32,
 * backend.cu), scores, softmax and lse in fp32, the output rounded when stored. The masked upper
 * triangle is computed and thrown away (zero P): half the products' FLOPs, as llm.c does.
 * Deterministic: cuBLAS's fp32 GEMMs and the row kernels below have fixed summation orders. */
#include "cuda_common.cuh"

/* One scratch buffer of scores holds this much: 48 MiB a head at GPT-2's T = 1024 (10 heads at
 * once), 256 MiB at T = 8192 (2 heads); past T = 11585 a single head outgrows it. The backward
 * holds two such buffers. */
#define ATTN_GEMM_CHUNK_BYTES ((size_t)512 << 20)
#define SOFTMAX_THREADS 256

/* Row (bh, t) of the chunk's scores: masked softmax over j <= t, P written over S (zeros past t),
 * lse of the row (scale applied to the scores first) to lse[(b NH + h0 + bh) T + t]. */
__global__ static void causal_softmax_kernel(float *S, float *lse, int T, float scale, size_t lse_row0)
{
    __shared__ float red[32];
    size_t r = blockIdx.x; /* row within the chunk: bh * T + t */
    int t = (int)(r % T);
    float *row = S + r * (size_t)T;
    float m = -INFINITY;
    for (int j = threadIdx.x; j <= t; j += blockDim.x)
        m = fmaxf(m, row[j] * scale);
    m = block_max(m, red); /* block_sum's leading barrier lets it reuse red */
    float l = 0.0f;
    for (int j = threadIdx.x; j <= t; j += blockDim.x)
        l += expf(row[j] * scale - m);
    l = block_sum(l, red);
    float inv = 1.0f / l;
    for (int j = threadIdx.x; j < T; j += blockDim.x)
        row[j] = j <= t ? expf(row[j] * scale - m) * inv : 0.0f;
    if (threadIdx.x == 0)
        lse[lse_row0 + r] = m + logf(l);
}

/* Backward of row (bh, t): P = exp(S scale - lse) over j <= t (zeros past t), written over S. */
__global__ static void causal_probs_kernel(float *S, const float *lse, int T, float scale, size_t lse_row0)
{
    size_t r = blockIdx.x;
    int t = (int)(r % T);
    float *row = S + r * (size_t)T;
    float L = lse[lse_row0 + r];
    for (int j = threadIdx.x; j < T; j += blockDim.x)
        row[j] = j <= t ? expf(row[j] * scale - L) : 0.0f;
}

/* dS = P (dP - D_t) scale over j <= t (zeros past t), written over dP. */
__global__ static void softmax_grad_kernel(float *dP, const float *P, const float *D, int T, float scale,
                                           size_t d_row0)
{
    size_t r = blockIdx.x;
    int t = (int)(r % T);
    float *drow = dP + r * (size_t)T;
    const float *prow = P + r * (size_t)T;
    float Dt = D[d_row0 + r];
    for (int j = threadIdx.x; j < T; j += blockDim.x)
        drow[j] = j <= t ? prow[j] * (drow[j] - Dt) * scale : 0.0f;
}

__global__ static void round_copy_kernel(float *dst, const float *src, size_t n, int prec)
{
    GRID_STRIDE(i, n) dst[i] = round_prec(src[i], prec);
}

__global__ static void round_inplace_kernel(float *x, size_t n, int prec)
{
    GRID_STRIDE(i, n) x[i] = round_prec(x[i], prec);
}

/* C[batch] = alpha op(A[batch]) op(B[batch]) + beta C[batch], fp32, column-major. */
static void sgemm_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *A, int lda,
                          long long sa, const float *B, int ldb, long long sb, float beta, float *C, int ldc,
                          long long sc, int batch)
{
    const float one = 1.0f;
    CUBLAS_CHECK(cublasSgemmStridedBatched(cuda_ctx()->cublas, ta, tb, m, n, k, &one, A, lda, sa, B, ldb, sb, &beta,
                                           C, ldc, sc, batch));
}

/* Heads per chunk: as many as fit ATTN_GEMM_CHUNK_BYTES, at most NH; 0 when one does not. */
static int heads_per_chunk(int T, int NH)
{
    size_t per_head = (size_t)T * T * sizeof(float);
    size_t n = ATTN_GEMM_CHUNK_BYTES / per_head;
    return (int)(n < (size_t)NH ? n : (size_t)NH);
}

/* qkv as the products read it: rounded to the precision in a scratch copy, or itself in fp32. */
static const float *rounded_qkv(const float *qkv, size_t n, kernels_precision prec)
{
    if (prec == KPREC_FP32)
        return qkv;
    float *r = (float *)cuda_scratch(SCRATCH_ATTN_QKV, n * sizeof(float));
    round_copy_kernel<<<blocks_for(n, THREADS), THREADS>>>(r, qkv, n, (int)prec);
    LAUNCH_CHECK();
    return r;
}

void cuda_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C, int NH,
                            kernels_precision prec)
{
    if (B <= 0 || T <= 0)
        return;
    int hc = NH > 0 && C % NH == 0 ? heads_per_chunk(T, NH) : 0;
    if (hc == 0) {
        cuda_attention_forward_rowwise(out, lse, qkv, B, T, C, NH, prec);
        return;
    }
    int hs = C / NH, ld = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    const float *x = rounded_qkv(qkv, (size_t)B * T * 3 * C, prec);
    float *S = (float *)cuda_scratch(SCRATCH_ATTN_S, (size_t)hc * T * T * sizeof(float));
    long long TT = (long long)T * T;
    for (int b = 0; b < B; b++)
        for (int h0 = 0; h0 < NH; h0 += hc) {
            int nh = NH - h0 < hc ? NH - h0 : hc;
            const float *q = x + (size_t)b * T * ld + (size_t)h0 * hs, *k = q + C, *v = q + 2 * C;
            sgemm_batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, k, ld, hs, q, ld, hs, 0.0f, S, T, TT, nh);
            causal_softmax_kernel<<<(unsigned)((size_t)nh * T), SOFTMAX_THREADS>>>(
                S, lse, T, scale, ((size_t)b * NH + h0) * T);
            LAUNCH_CHECK();
            float *o = out + (size_t)b * T * C + (size_t)h0 * hs;
            sgemm_batched(CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, v, ld, hs, S, T, TT, 0.0f, o, C, hs, nh);
        }
    if (prec != KPREC_FP32) {
        size_t n = (size_t)B * T * C;
        round_inplace_kernel<<<blocks_for(n, THREADS), THREADS>>>(out, n, (int)prec);
        LAUNCH_CHECK();
    }
}

void cuda_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                             int B, int T, int C, int NH, kernels_precision prec)
{
    if (B <= 0 || T <= 0)
        return;
    int hc = NH > 0 && C % NH == 0 ? heads_per_chunk(T, NH) : 0;
    if (hc == 0) {
        cuda_attention_backward_rowwise(dqkv, dout, qkv, out, lse, B, T, C, NH, prec);
        return;
    }
    int hs = C / NH, ld = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    float *D = cuda_attention_backward_d(dout, out, B, T, C, NH);
    const float *x = rounded_qkv(qkv, (size_t)B * T * 3 * C, prec);
    float *P = (float *)cuda_scratch(SCRATCH_ATTN_S, (size_t)hc * T * T * sizeof(float));
    float *dP = (float *)cuda_scratch(SCRATCH_ATTN_DS, (size_t)hc * T * T * sizeof(float));
    long long TT = (long long)T * T;
    for (int b = 0; b < B; b++)
        for (int h0 = 0; h0 < NH; h0 += hc) {
            int nh = NH - h0 < hc ? NH - h0 : hc;
            size_t row0 = ((size_t)b * NH + h0) * T;
            unsigned rows = (unsigned)((size_t)nh * T);
            const float *q = x + (size_t)b * T * ld + (size_t)h0 * hs, *k = q + C, *v = q + 2 * C;
            const float *dO = dout + (size_t)b * T * C + (size_t)h0 * hs;
            float *dq = dqkv + (size_t)b * T * ld + (size_t)h0 * hs, *dk = dq + C, *dv = dq + 2 * C;
            sgemm_batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, k, ld, hs, q, ld, hs, 0.0f, P, T, TT, nh);
            causal_probs_kernel<<<rows, SOFTMAX_THREADS>>>(P, lse, T, scale, row0);
            LAUNCH_CHECK();
            sgemm_batched(CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, dO, C, hs, P, T, TT, 1.0f, dv, ld, hs, nh);
            sgemm_batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, v, ld, hs, dO, C, hs, 0.0f, dP, T, TT, nh);
            softmax_grad_kernel<<<rows, SOFTMAX_THREADS>>>(dP, P, D, T, scale, row0);
            LAUNCH_CHECK();
            sgemm_batched(CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, k, ld, hs, dP, T, TT, 1.0f, dq, ld, hs, nh);
            sgemm_batched(CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, q, ld, hs, dP, T, TT, 1.0f, dk, ld, hs, nh);
        }
}
