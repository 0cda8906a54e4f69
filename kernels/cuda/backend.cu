/* The CUDA backend: device memory, events, the context, and the kernel table. */
#include <string.h>
#include "cuda_common.cuh"

struct kernels_event {
    cudaEvent_t e;
};

static cuda_context g_ctx; /* CUDA's own state is per process; ours follows it */
static int g_ctx_ready;

cuda_context *cuda_ctx(void)
{
    if (!g_ctx_ready) {
        CUBLAS_CHECK(cublasCreate(&g_ctx.cublas));
        /* Plain fp32 GEMMs for KPREC_FP32 (no TF32), so results match the CPU reference. */
        CUBLAS_CHECK(cublasSetMathMode(g_ctx.cublas, CUBLAS_PEDANTIC_MATH));
        g_ctx_ready = 1;
    }
    return &g_ctx;
}

void *cuda_scratch(int slot, size_t bytes)
{
    cuda_context *c = cuda_ctx();
    if (c->scratch_bytes[slot] < bytes) {
        if (c->scratch[slot])
            CUDA_CHECK(cudaFree(c->scratch[slot]));
        CUDA_CHECK(cudaMalloc(&c->scratch[slot], bytes));
        c->scratch_bytes[slot] = bytes;
    }
    return c->scratch[slot];
}

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    CUDA_CHECK(cudaMemset(p, 0, bytes ? bytes : 1));
    return p;
}

static void dev_free(void *p)
{
    if (p)
        CUDA_CHECK(cudaFree(p));
}

static void dev_memset_zero(void *p, size_t bytes) { CUDA_CHECK(cudaMemset(p, 0, bytes)); }
static void dev_h2d(void *d, const void *s, size_t n) { CUDA_CHECK(cudaMemcpy(d, s, n, cudaMemcpyHostToDevice)); }
static void dev_d2h(void *d, const void *s, size_t n) { CUDA_CHECK(cudaMemcpy(d, s, n, cudaMemcpyDeviceToHost)); }
static void dev_d2d(void *d, const void *s, size_t n) { CUDA_CHECK(cudaMemcpy(d, s, n, cudaMemcpyDeviceToDevice)); }
static void dev_sync(void) { CUDA_CHECK(cudaDeviceSynchronize()); }

static kernels_event *ev_create(void)
{
    kernels_event *e = (kernels_event *)malloc(sizeof *e);
    CUDA_CHECK(cudaEventCreate(&e->e));
    return e;
}

static void ev_destroy(kernels_event *e)
{
    CUDA_CHECK(cudaEventDestroy(e->e));
    free(e);
}

static void ev_record(kernels_event *e) { CUDA_CHECK(cudaEventRecord(e->e, 0)); }

static double ev_elapsed(kernels_event *a, kernels_event *b)
{
    float ms = 0;
    CUDA_CHECK(cudaEventSynchronize(b->e));
    CUDA_CHECK(cudaEventElapsedTime(&ms, a->e, b->e));
    return ms * 1e-3;
}

static kernels_backend make_table(void)
{
    kernels_backend t;
    memset(&t, 0, sizeof t);
    t.name = "cuda";
    t.alloc = dev_alloc;
    t.free = dev_free;
    t.memset_zero = dev_memset_zero;
    t.copy_to_device = dev_h2d;
    t.copy_to_host = dev_d2h;
    t.copy = dev_d2d;
    t.synchronize = dev_sync;
    t.event_create = ev_create;
    t.event_destroy = ev_destroy;
    t.event_record = ev_record;
    t.event_elapsed_s = ev_elapsed;
    t.encoder_forward = cuda_encoder_forward;
    t.encoder_backward = cuda_encoder_backward;
    t.layernorm_forward = cuda_layernorm_forward;
    t.layernorm_backward = cuda_layernorm_backward;
    t.matmul_forward = cuda_matmul_forward;
    t.matmul_backward = cuda_matmul_backward;
    t.attention_forward = cuda_attention_forward;
    t.attention_backward = cuda_attention_backward;
    t.gelu_forward = cuda_gelu_forward;
    t.gelu_backward = cuda_gelu_backward;
    t.residual_forward = cuda_residual_forward;
    t.softmax_forward = cuda_softmax_forward;
    t.cross_entropy_forward = cuda_cross_entropy_forward;
    t.cross_entropy_backward = cuda_cross_entropy_backward;
    t.adamw_update = cuda_adamw_update;
    t.round_to_precision = cuda_round_to_precision;
    t.cast_to_half = cuda_cast_to_half;
    t.cast_from_half = cuda_cast_from_half;
    t.sum_squares = cuda_sum_squares;
    t.has_inf_or_nan = cuda_has_inf_or_nan;
    return t;
}

static kernels_backend g_table;

extern "C" const kernels_backend *kernels_cuda(char *why, size_t whylen)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n == 0) {
        if (why && whylen)
            snprintf(why, whylen, "no CUDA device (%s)", err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return NULL;
    }
    if (!g_table.name)
        g_table = make_table();
    return &g_table;
}
