/* GEMMs through cuBLAS, row-major on top of column-major cuBLAS.
 *
 * A row-major matrix X[r][c] (leading dimension c) is, to cuBLAS, the column-major X^T.
 *  forward   out[N,OC] = inp[N,C] W[OC,C]^T   <=>  out^T (OC x N) = W (OC x C) . inp^T (C x N):
 *            gemm(T, N, m=OC, n=N, k=C, A=W lda=C, B=inp ldb=C, C=out ldc=OC)
 *  dinp      dinp[N,C] += dout[N,OC] W[OC,C]  <=>  dinp^T (C x N) += W^T (C x OC) . dout^T (OC x N):
 *            gemm(N, N, m=C, n=N, k=OC, A=W lda=C, B=dout ldb=OC, beta=1, C=dinp ldc=C)
 *  dweight   dW[OC,C] += dout^T[OC,N] inp[N,C]  <=>  dW^T (C x OC) += inp^T (C x N) . dout (N x OC):
 *            gemm(N, T, m=C, n=OC, k=N, A=inp lda=C, B=dout ldb=OC, beta=1, C=dW ldc=C)
 * Low precision (the CPU backend's emulation, done for real): inputs cast to bf16/fp16 with
 * round-to-nearest-even, multiplied with fp32 accumulation and fp32 output, output rounded.
 * fp32 uses plain fp32 math, not TF32 (tf32 would be a separate precision choice). */
#include "cuda_common.cuh"

__global__ static void add_bias_kernel(float *out, const float *bias, int N, int OC)
{
    size_t n = (size_t)N * OC;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] += bias[i % OC];
}

/* dbias[o] += sum over rows of dout[:, o]: one block per 32 columns, threads over rows. */
__global__ static void bias_grad_kernel(float *dbias, const float *dout, int N, int OC)
{
    __shared__ float partial[32][33];
    int col = blockIdx.x * 32 + threadIdx.x;
    float s = 0;
    if (col < OC)
        for (int r = threadIdx.y; r < N; r += blockDim.y)
            s += dout[(size_t)r * OC + col];
    partial[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < OC) {
        float t = 0;
        for (int y = 0; y < (int)blockDim.y; y++)
            t += partial[y][threadIdx.x];
        dbias[col] += t;
    }
}

__global__ static void to_half_kernel(void *dst, const float *src, size_t n, int prec)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        if (prec == KPREC_BF16)
            ((__nv_bfloat16 *)dst)[i] = __float2bfloat16_rn(src[i]);
        else
            ((__half *)dst)[i] = __float2half_rn(src[i]);
    }
}

static const void *half_copy(int slot, const float *src, size_t n, kernels_precision prec)
{
    void *dst = cuda_scratch(slot, n * 2);
    to_half_kernel<<<blocks_for(n, 256), 256>>>(dst, src, n, (int)prec);
    LAUNCH_CHECK();
    return dst;
}

/* C(m x n) = alpha op(A) op(B) + beta C, fp32 output, inputs in prec. */
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *A, size_t a_elems,
                 int lda, const float *B, size_t b_elems, int ldb, float beta, float *C, int ldc,
                 kernels_precision prec)
{
    cuda_context *ctx = cuda_ctx();
    float alpha = 1.0f;
    if (prec == KPREC_FP32) {
        CUBLAS_CHECK(cublasSgemm(ctx->cublas, ta, tb, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc));
        return;
    }
    cudaDataType_t t = prec == KPREC_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const void *a = half_copy(0, A, a_elems, prec), *b = half_copy(1, B, b_elems, prec);
    CUBLAS_CHECK(cublasGemmEx(ctx->cublas, ta, tb, m, n, k, &alpha, a, t, lda, b, t, ldb, &beta, C, CUDA_R_32F, ldc,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void cuda_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC,
                         kernels_precision prec)
{
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, weight, (size_t)OC * C, C, inp, (size_t)N * C, C, 0.0f, out, OC, prec);
    if (bias) {
        add_bias_kernel<<<blocks_for((size_t)N * OC, 256), 256>>>(out, bias, N, OC);
        LAUNCH_CHECK();
    }
    cuda_round_to_precision(out, (size_t)N * OC, prec);
}

void cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                          const float *weight, int N, int C, int OC, kernels_precision prec)
{
    if (dinp)
        gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, weight, (size_t)OC * C, C, dout, (size_t)N * OC, OC, 1.0f, dinp, C,
             prec);
    if (dweight)
        gemm(CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, (size_t)N * C, C, dout, (size_t)N * OC, OC, 1.0f, dweight, C,
             prec);
    if (dbias) {
        /* The CPU reference sums the rounded dout; do the same. */
        const float *d = dout;
        if (prec != KPREC_FP32) {
            float *r = (float *)cuda_scratch(2, (size_t)N * OC * sizeof(float));
            CUDA_CHECK(cudaMemcpy(r, dout, (size_t)N * OC * sizeof(float), cudaMemcpyDeviceToDevice));
            cuda_round_to_precision(r, (size_t)N * OC, prec);
            d = r;
        }
        dim3 threads(32, 32);
        bias_grad_kernel<<<(OC + 31) / 32, threads>>>(dbias, d, N, OC);
        LAUNCH_CHECK();
    }
}
