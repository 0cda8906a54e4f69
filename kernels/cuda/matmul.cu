/* GEMMs through cuBLAS: out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias, and its backward.
 *
 * Row-major on top of column-major cuBLAS. A row-major R x K buffer with leading dimension K
 * is, read column-major with the same leading dimension, the K x R matrix X^T. So every
 * row-major product Y = P Q is computed as the column-major product Y^T = Q^T P^T:
 *
 *  forward  out[N,OC] = inp[N,C] W[OC,C]^T  <=>  out^T (OC x N) = W (OC x C) . inp^T (C x N)
 *           The W buffer reads as W^T (C x OC), so op(A) = T: gemm(T, N, m=OC, n=N, k=C,
 *           A=W lda=C, B=inp ldb=C, C=out ldc=OC).
 *  dinp     dinp[N,C] += dout[N,OC] W[OC,C]  <=>  dinp^T (C x N) += W^T (C x OC) . dout^T (OC x N)
 *           Both buffers already read as the needed transposes: gemm(N, N, m=C, n=N, k=OC,
 *           A=W lda=C, B=dout ldb=OC, beta=1, C=dinp ldc=C).
 *  dweight  dW[OC,C] += dout^T[OC,N] inp[N,C]  <=>  dW^T (C x OC) += inp^T (C x N) . dout (N x OC)
 *           The dout buffer reads as dout^T, so op(B) = T: gemm(N, T, m=C, n=OC, k=N,
 *           A=inp lda=C, B=dout ldb=OC, beta=1, C=dW ldc=C).
 * beta = 1 makes the backward add into the gradients, as the interface requires.
 *
 * Precision, exactly what the CPU backend emulates: for bf16/fp16 the operands are cast into
 * 16-bit scratch copies (round-to-nearest-even), multiplied on tensor cores with fp32
 * accumulation and fp32 output (CUBLAS_COMPUTE_32F), and the forward output is then rounded
 * to the precision. fp32 is plain fp32 (CUBLAS_COMPUTE_32F, no TF32; see backend.cu). */
#include "cuda_common.cuh"

/* out = round(out + bias) over (N, OC), fused so the output is touched once more, not twice. */
__global__ static void bias_round_kernel(float *out, const float *bias, int OC, size_t n, int prec)
{
    GRID_STRIDE(i, n) {
        float x = out[i];
        if (bias)
            x += bias[i % (size_t)OC];
        out[i] = round_prec(x, prec);
    }
}

__global__ static void to_16bit_kernel(uint16_t *dst, const float *src, size_t n, int prec)
{
    GRID_STRIDE(i, n) {
        dst[i] = prec == KPREC_BF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(src[i]))
                                    : __half_as_ushort(__float2half_rn(src[i]));
    }
}

/* A GEMM operand as cuBLAS takes it: fp32 as is, or a 16-bit copy in a scratch slot. */
typedef struct {
    const void *ptr;
    cudaDataType_t type;
} operand;

static operand make_operand(const float *x, size_t n, kernels_precision prec, cuda_scratch_slot slot)
{
    operand o;
    if (prec == KPREC_FP32) {
        o.ptr = x;
        o.type = CUDA_R_32F;
        return o;
    }
    uint16_t *h = (uint16_t *)cuda_scratch(slot, n * sizeof(uint16_t));
    to_16bit_kernel<<<blocks_for(n, THREADS), THREADS>>>(h, x, n, (int)prec);
    LAUNCH_CHECK();
    o.ptr = h;
    o.type = prec == KPREC_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    return o;
}

/* C (m x n, fp32, column-major) = op(A) op(B) + beta C, accumulated in fp32. */
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, operand A, int lda, operand B,
                 int ldb, float beta, float *C, int ldc)
{
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasGemmEx(cuda_ctx()->cublas, ta, tb, m, n, k, &alpha, A.ptr, A.type, lda, B.ptr, B.type, ldb,
                              &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void cuda_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC,
                         kernels_precision prec)
{
    if (N <= 0 || OC <= 0)
        return;
    size_t n_out = (size_t)N * OC;
    if (C <= 0) {
        /* An empty sum: out = bias (or 0). cuBLAS would leave out untouched for k = 0. */
        CUDA_CHECK(cudaMemset(out, 0, n_out * sizeof(float)));
    } else {
        operand w = make_operand(weight, (size_t)OC * C, prec, SCRATCH_GEMM_A);
        operand x = make_operand(inp, (size_t)N * C, prec, SCRATCH_GEMM_B);
        gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, w, C, x, C, 0.0f, out, OC);
    }
    if (bias || prec != KPREC_FP32) {
        bias_round_kernel<<<blocks_for(n_out, THREADS), THREADS>>>(out, bias, OC, n_out, (int)prec);
        LAUNCH_CHECK();
    }
}

void cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                          const float *weight, int N, int C, int OC, kernels_precision prec)
{
    if (N <= 0 || OC <= 0)
        return; /* nothing flows back (C <= 0 leaves dinp and dweight empty too) */
    if (C > 0 && (dinp || dweight)) {
        /* dout is cast once and shared by both products (its own slot, so casting weight or
         * inp for the second product cannot overwrite it). */
        operand d = make_operand(dout, (size_t)N * OC, prec, SCRATCH_GEMM_C);
        if (dinp) {
            operand w = make_operand(weight, (size_t)OC * C, prec, SCRATCH_GEMM_A);
            gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, w, C, d, OC, 1.0f, dinp, C);
        }
        if (dweight) {
            operand x = make_operand(inp, (size_t)N * C, prec, SCRATCH_GEMM_B);
            gemm(CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, x, C, d, OC, 1.0f, dweight, C);
        }
    }
    if (dbias) {
        /* The CPU sums the rounded dout (the GEMMs see the rounded dout too); so does this. */
        float *tmp = (float *)cuda_scratch(SCRATCH_PARTIAL, cuda_column_sums_scratch_floats(N, OC) * sizeof(float));
        cuda_column_sums_add(dbias, dout, N, OC, prec, tmp);
    }
}
