/* Shared by the CUDA kernels: error checks, rounding helpers, launch sizes, and the backend
 * context (cuBLAS handle and scratch buffers, created on first use). */
#ifndef DTSIM_KERNELS_CUDA_COMMON_CUH
#define DTSIM_KERNELS_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include "kernels.h"

#define CUDA_CHECK(call)                                                                              \
    do {                                                                                              \
        cudaError_t err_ = (call);                                                                    \
        if (err_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "kernels(cuda): %s:%d: %s: %s\n", __FILE__, __LINE__, #call,              \
                    cudaGetErrorString(err_));                                                        \
            abort();                                                                                  \
        }                                                                                             \
    } while (0)

#define CUBLAS_CHECK(call)                                                                            \
    do {                                                                                              \
        cublasStatus_t st_ = (call);                                                                  \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                           \
            fprintf(stderr, "kernels(cuda): %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__,       \
                    #call, (int)st_);                                                                 \
            abort();                                                                                  \
        }                                                                                             \
    } while (0)

#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

static inline unsigned blocks_for(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65535u * 16u ? 65535u * 16u : (b ? b : 1)); /* grid-stride loops cover the rest */
}

/* Rounds to the emulated precision (round-to-nearest-even), as the CPU backend does. */
__device__ __forceinline__ float round_prec(float x, int prec)
{
    if (prec == KPREC_BF16)
        return __bfloat162float(__float2bfloat16_rn(x));
    if (prec == KPREC_FP16)
        return __half2float(__float2half_rn(x));
    return x;
}

/* Block-wide sum of one float per thread (blockDim.x a multiple of 32, <= 1024). */
__device__ __forceinline__ float block_sum(float v, float *shared32)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        shared32[warp] = v;
    __syncthreads();
    int warps = blockDim.x >> 5;
    v = threadIdx.x < warps ? shared32[threadIdx.x] : 0.0f;
    if (warp == 0)
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0)
        shared32[0] = v;
    __syncthreads();
    return shared32[0];
}

__device__ __forceinline__ float block_max(float v, float *shared32)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        shared32[warp] = v;
    __syncthreads();
    int warps = blockDim.x >> 5;
    v = threadIdx.x < warps ? shared32[threadIdx.x] : -INFINITY;
    if (warp == 0)
        for (int o = 16; o > 0; o >>= 1)
            v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    if (threadIdx.x == 0)
        shared32[0] = v;
    __syncthreads();
    return shared32[0];
}

/* The backend's context: one cuBLAS handle and growable scratch, on the default stream. */
typedef struct {
    cublasHandle_t cublas;
    void *scratch[3];
    size_t scratch_bytes[3];
} cuda_context;

cuda_context *cuda_ctx(void);
void *cuda_scratch(int slot, size_t bytes);

/* Entry points gathered into the table by backend.cu (extern "C" linkage is not needed:
 * everything is compiled by nvcc as C++; only kernels_cuda() is exported to C). */
void cuda_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC,
                         kernels_precision prec);
void cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                          const float *weight, int N, int C, int OC, kernels_precision prec);
void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                            const float *bias, int N, int C);
void cuda_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                             const float *weight, const float *mean, const float *rstd, int N, int C);
void cuda_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C, int NH,
                            kernels_precision prec);
void cuda_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                             int B, int T, int C, int NH, kernels_precision prec);
void cuda_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B, int T, int C);
void cuda_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T, int C);
void cuda_gelu_forward(float *out, const float *inp, size_t N);
void cuda_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N);
void cuda_residual_forward(float *out, const float *a, const float *b, size_t N);
void cuda_softmax_forward(float *out, const float *inp, int rows, int cols);
void cuda_cross_entropy_forward(float *losses, const float *logits, const int *targets, int N, int V);
void cuda_cross_entropy_backward(float *dlogits, const float *logits, const int *targets, float dloss, int N, int V);
void cuda_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr, float beta1,
                       float beta2, float eps, float weight_decay, int t, float grad_scale);
void cuda_round_to_precision(float *x, size_t n, kernels_precision prec);
void cuda_cast_to_half(uint16_t *out, const float *in, size_t n, kernels_precision prec);
void cuda_cast_from_half(float *out, const uint16_t *in, size_t n, kernels_precision prec);
double cuda_sum_squares(const float *x, size_t n);
int cuda_has_inf_or_nan(const float *x, size_t n);
#endif
