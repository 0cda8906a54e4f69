/* The CUDA backend: its context (cuBLAS handle and scratch, created on first use), and the
 * kernels_backend table that kernels_cuda() hands out. */
#include <string.h>
#include "cuda_common.cuh"

/* The one process-wide piece of state, as the CUDA runtime itself is per process: a cuBLAS
 * handle and scratch buffers for the current device. Plain zero-initialised statics (no
 * dynamic initialisation), so the library needs no C++ runtime support when linked into C. */
static cuda_context context;
static int context_ready;

cuda_context *cuda_ctx(void)
{
    if (!context_ready) {
        CUBLAS_CHECK(cublasCreate(&context.cublas));
        /* Default math mode: fp32 GEMMs (CUBLAS_COMPUTE_32F) use no TF32, so they match the CPU
         * reference to ~1e-6. TF32 would be a separate precision choice
         * (CUBLAS_COMPUTE_32F_FAST_TF32), not an accident of the handle's mode. */
        CUBLAS_CHECK(cublasSetMathMode(context.cublas, CUBLAS_DEFAULT_MATH));
        context_ready = 1;
    }
    return &context;
}

void *cuda_scratch(cuda_scratch_slot slot, size_t bytes)
{
    cuda_context *c = cuda_ctx();
    if (c->scratch_bytes[slot] < bytes) {
        if (c->scratch[slot]) {
            /* Work queued earlier may still read the old buffer: let it finish first. */
            CUDA_CHECK(cudaDeviceSynchronize());
            CUDA_CHECK(cudaFree(c->scratch[slot]));
        }
        size_t grown = bytes + bytes / 4; /* some headroom: sizes creep up across calls */
        CUDA_CHECK(cudaMalloc(&c->scratch[slot], grown));
        c->scratch_bytes[slot] = grown;
    }
    return c->scratch[slot];
}

static void cuda_describe(char *out, size_t len)
{
    int dev = 0, driver = 0, runtime = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        snprintf(out, len, "unknown CUDA device");
        return;
    }
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    snprintf(out, len, "%s (sm_%d%d, %d SMs, %.1f GiB; CUDA driver %d.%d, runtime %d.%d)", prop.name, prop.major,
             prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, driver / 1000,
             driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
}

/* Filled field by field, so a field added to kernels.h cannot be silently misassigned. */
static void fill_table(kernels_backend *t)
{
    memset(t, 0, sizeof *t);
    t->name = "cuda";
    t->describe = cuda_describe;
    t->alloc = cuda_alloc;
    t->free = cuda_free;
    t->memset_zero = cuda_memset_zero;
    t->copy_to_device = cuda_copy_to_device;
    t->copy_to_host = cuda_copy_to_host;
    t->copy = cuda_copy;
    t->synchronize = cuda_synchronize;
    t->event_create = cuda_event_create;
    t->event_destroy = cuda_event_destroy;
    t->event_record = cuda_event_record;
    t->event_elapsed_s = cuda_event_elapsed_s;
    t->encoder_forward = cuda_encoder_forward;
    t->encoder_backward = cuda_encoder_backward;
    t->layernorm_forward = cuda_layernorm_forward;
    t->layernorm_backward = cuda_layernorm_backward;
    t->rmsnorm_forward = cuda_rmsnorm_forward;
    t->rmsnorm_backward = cuda_rmsnorm_backward;
    t->matmul_forward = cuda_matmul_forward;
    t->matmul_backward = cuda_matmul_backward;
    t->attention_forward = cuda_attention_forward;
    t->attention_backward = cuda_attention_backward;
    t->rope_forward = cuda_rope_forward;
    t->rope_backward = cuda_rope_backward;
    t->kv_repeat_forward = cuda_kv_repeat_forward;
    t->kv_repeat_backward = cuda_kv_repeat_backward;
    t->swiglu_forward = cuda_swiglu_forward;
    t->swiglu_backward = cuda_swiglu_backward;
    t->gelu_forward = cuda_gelu_forward;
    t->gelu_backward = cuda_gelu_backward;
    t->residual_forward = cuda_residual_forward;
    t->softmax_forward = cuda_softmax_forward;
    t->cross_entropy_forward = cuda_cross_entropy_forward;
    t->cross_entropy_backward = cuda_cross_entropy_backward;
    t->adamw_update = cuda_adamw_update;
    t->round_to_precision = cuda_round_to_precision;
    t->cast_to_half = cuda_cast_to_half;
    t->cast_from_half = cuda_cast_from_half;
    t->sum_squares = cuda_sum_squares;
    t->has_inf_or_nan = cuda_has_inf_or_nan;
}

static kernels_backend table;

extern "C" const kernels_backend *kernels_cuda(char *why, size_t whylen)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n == 0) {
        if (err != cudaSuccess)
            (void)cudaGetLastError(); /* clear the error so later runtime calls start clean */
        if (why && whylen)
            snprintf(why, whylen, "no CUDA device: %s",
                     err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount reports 0 devices");
        return NULL;
    }
    if (!table.name)
        fill_table(&table);
    return &table;
}
