/* Shared by the CUDA kernels (every .cu file in kernels/cuda): error checks, the rounding that emulates
 * bf16/fp16 storage, warp and block reductions, the backend context, and the entry points
 * that backend.cu gathers into the kernels_backend table.
 *
 * Everything here runs on the legacy default stream (stream 0), as does cuBLAS (its handle is
 * left on stream 0). Stream order is therefore what makes reusing scratch buffers between
 * calls safe, and it is why no kernel needs an explicit device-wide barrier.
 *
 * Determinism: no kernel sums floats with atomics. Every reduction has a fixed order that
 * depends only on the problem size, so the same inputs give the same bits on every run
 * (the engine's resume test compares parameter CRCs bit for bit). */
#ifndef DTSIM_KERNELS_CUDA_COMMON_CUH
#define DTSIM_KERNELS_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "kernels.h"

/* Every CUDA runtime call is checked: a failure prints where and why, then aborts, since the
 * engine has no way to recover from a device error mid-step. */
#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "kernels(cuda): %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,    \
                    cudaGetErrorString(err_));                                                     \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define CUBLAS_CHECK(call)                                                                         \
    do {                                                                                           \
        cublasStatus_t st_ = (call);                                                               \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                        \
            fprintf(stderr, "kernels(cuda): %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,    \
                    cublasGetStatusString(st_));                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* After a kernel launch: catches bad launch configurations at once (execution errors surface
 * at the next synchronising call, which is checked too). */
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

/* Grid-stride loop over [0, n): any grid size covers any n. */
#define GRID_STRIDE(i, n)                                                                          \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)(n);                \
         i += (size_t)gridDim.x * blockDim.x)

#define THREADS 256 /* block size of the elementwise kernels */

/* Blocks for n elements at `threads` per block, capped (grid-stride loops cover the rest). */
static inline unsigned blocks_for(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    const size_t cap = 65536; /* plenty to fill any current GPU */
    return (unsigned)(b == 0 ? 1 : (b > cap ? cap : b));
}

/* Rounds to the emulated precision with round-to-nearest-even, bit for bit what the CPU
 * backend's kernels_round() does for every finite value and infinity (a NaN stays a NaN,
 * though its payload may differ). */
__device__ __forceinline__ float round_prec(float x, int prec)
{
    if (prec == KPREC_BF16)
        return __bfloat162float(__float2bfloat16_rn(x));
    if (prec == KPREC_FP16)
        return __half2float(__float2half_rn(x));
    return x;
}

/* Sum over the 32 lanes of a warp; every lane gets the result (xor butterfly). */
__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Block-wide sum; every thread gets the result. blockDim.x must be a multiple of 32 (at most
 * 1024) and every thread of the block must call it. `scratch` holds 32 floats of shared
 * memory; the leading barrier lets a caller reuse it for consecutive reductions. */
__device__ __forceinline__ float block_sum(float v, float *scratch)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float *scratch)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : -INFINITY;
    return warp_max(v);
}

/* Scratch buffers in device memory, grown on demand and kept for the process. Each caller
 * names its slot, so buffers that are live at the same time never alias. */
typedef enum {
    SCRATCH_GEMM_A,    /* 16-bit copy of a GEMM operand */
    SCRATCH_GEMM_B,    /* 16-bit copy of a GEMM operand */
    SCRATCH_GEMM_C,    /* 16-bit copy of a GEMM operand (dout, shared by both backward GEMMs) */
    SCRATCH_PARTIAL,   /* per-warp or per-block partial sums of a two-pass reduction */
    SCRATCH_ATTN_D,    /* attention backward: D = dO . O per query row */
    SCRATCH_ATTN_QKV,  /* attention: qkv rounded to the precision (attention_gemm.cu) */
    SCRATCH_ATTN_S,    /* attention: scores, then probabilities, of a chunk of heads */
    SCRATCH_ATTN_DS,   /* attention backward: dP, then dS, of a chunk of heads */
    SCRATCH_INDEX,     /* encoder backward: token buckets */
    SCRATCH_ROPE,      /* rope: theta_i and the positions, kept between calls (rope.cu) */
    SCRATCH_RANGES,    /* sum_squares: the table of ranges one launch reads (reductions.cu) */
    SCRATCH_SLOTS
} cuda_scratch_slot;

/* The backend's context, created on first use: the cuBLAS handle and the scratch buffers.
 * It belongs to the device current at creation (the engine selects its device before the
 * first kernel call and keeps it). */
typedef struct {
    cublasHandle_t cublas;
    void *scratch[SCRATCH_SLOTS];
    size_t scratch_bytes[SCRATCH_SLOTS];
} cuda_context;

cuda_context *cuda_ctx(void);
void *cuda_scratch(cuda_scratch_slot slot, size_t bytes);

/* Entry points, one .cu file per family; backend.cu puts them in the table. They are C++
 * functions (nvcc compiles everything here as C++); only kernels_cuda() is exported to C. */
void *cuda_alloc(size_t bytes);
void cuda_free(void *p);
void cuda_memset_zero(void *p, size_t bytes);
void cuda_copy_to_device(void *dst, const void *host_src, size_t bytes);
void cuda_copy_to_host(void *host_dst, const void *src, size_t bytes);
void cuda_copy(void *dst, const void *src, size_t bytes);
void cuda_synchronize(void);
kernels_event *cuda_event_create(void);
void cuda_event_destroy(kernels_event *e);
void cuda_event_record(kernels_event *e);
double cuda_event_elapsed_s(kernels_event *start, kernels_event *end);

void cuda_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B, int T, int C);
void cuda_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T, int C);
void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                            const float *bias, int N, int C);
void cuda_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                             const float *weight, const float *mean, const float *rstd, int N, int C);
void cuda_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C);
void cuda_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                           const float *rstd, int N, int C);
void cuda_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC,
                         kernels_precision prec);
void cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                          const float *weight, int N, int C, int OC, kernels_precision prec);
void cuda_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C, int NH,
                            kernels_precision prec);
void cuda_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                             int B, int T, int C, int NH, kernels_precision prec);
/* attention.cu: the row-per-warp kernels, which need no (T, T) memory (attention_gemm.cu's
 * fallback), and D = dO . O per query row in scratch (SCRATCH_ATTN_D), shared by both. */
void cuda_attention_forward_rowwise(float *out, float *lse, const float *qkv, int B, int T, int C, int NH,
                                    kernels_precision prec);
void cuda_attention_backward_rowwise(float *dqkv, const float *dout, const float *qkv, const float *out,
                                     const float *lse, int B, int T, int C, int NH, kernels_precision prec);
float *cuda_attention_backward_d(const float *dout, const float *out, int B, int T, int C, int NH);
void cuda_rope_forward(float *x, const int *pos, int B, int T, int row, int nheads, int hd, float base);
void cuda_rope_backward(float *dx, const int *pos, int B, int T, int row, int nheads, int hd, float base);
void cuda_kv_repeat_forward(float *out, const float *inp, int B, int T, int NH, int G, int hd);
void cuda_kv_repeat_backward(float *dinp, const float *dout, int B, int T, int NH, int G, int hd);
void cuda_swiglu_forward(float *out, const float *inp, int N, int F, kernels_precision prec);
void cuda_swiglu_backward(float *dinp, const float *inp, const float *dout, int N, int F, kernels_precision prec);
void cuda_gelu_forward(float *out, const float *inp, size_t N, kernels_precision prec);
void cuda_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N, kernels_precision prec);
void cuda_residual_forward(float *out, const float *a, const float *b, size_t N, kernels_precision prec);
void cuda_softmax_forward(float *out, const float *inp, int rows, int cols);
void cuda_cross_entropy_forward(float *losses, const float *logits, const int *targets, int N, int V);
void cuda_cross_entropy_backward(float *dlogits, const float *logits, const int *targets, float dloss, int N, int V);
void cuda_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr, float beta1,
                       float beta2, float eps, float weight_decay, int t, float grad_scale);
void cuda_round_to_precision(float *x, size_t n, kernels_precision prec);
void cuda_cast_to_half(uint16_t *out, const float *in, size_t n, kernels_precision prec);
void cuda_cast_from_half(float *out, const uint16_t *in, size_t n, kernels_precision prec);
void cuda_sum_squares(const float *const *x, const size_t *n, int count, double *out);
/* dst[c] += sum over the rows of round(in[r][c]) (rows x C, row-major), in a fixed order
 * (reductions.cu); tmp holds cuda_column_sums_scratch_floats(rows, C) floats. */
void cuda_column_sums_add(float *dst, const float *in, int rows, int C, kernels_precision prec, float *tmp);
size_t cuda_column_sums_scratch_floats(int rows, int C);
int cuda_has_inf_or_nan(const float *x, size_t n);
#endif
