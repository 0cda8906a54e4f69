/* Elementwise and row-wise kernels: embeddings, GELU, residual, softmax, fused softmax
 * cross-entropy, AdamW, precision rounding and casts, and the two host-visible reductions. */
#include "cuda_common.cuh"

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)
#define GELU_SCALE 0.7978845608028654f

__global__ static void encoder_forward_kernel(float *out, const int *tokens, const float *wte, const float *wpe,
                                              int T, int C, size_t n)
{
    GRID_STRIDE(i, n) {
        size_t bt = i / C;
        int c = (int)(i % C), t = (int)(bt % T);
        out[i] = wte[(size_t)tokens[bt] * C + c] + wpe[(size_t)t * C + c];
    }
}

__global__ static void encoder_backward_kernel(float *dwte, float *dwpe, const float *dout, const int *tokens, int T,
                                               int C, size_t n)
{
    GRID_STRIDE(i, n) {
        size_t bt = i / C;
        int c = (int)(i % C), t = (int)(bt % T);
        atomicAdd(&dwte[(size_t)tokens[bt] * C + c], dout[i]);
        atomicAdd(&dwpe[(size_t)t * C + c], dout[i]);
    }
}

__global__ static void gelu_forward_kernel(float *out, const float *inp, size_t n)
{
    GRID_STRIDE(i, n) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + 0.044715f * x * x * x)));
    }
}

__global__ static void gelu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t n)
{
    GRID_STRIDE(i, n) {
        float x = inp[i];
        float th = tanhf(GELU_SCALE * (x + 0.044715f * x * x * x));
        float grad = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += grad * dout[i];
    }
}

__global__ static void residual_kernel(float *out, const float *a, const float *b, size_t n)
{
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ static void softmax_kernel(float *out, const float *inp, int cols)
{
    __shared__ float shared[32];
    const float *x = inp + (size_t)blockIdx.x * cols;
    float *y = out + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        m = fmaxf(m, x[c]);
    m = block_max(m, shared);
    float s = 0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        s += expf(x[c] - m);
    s = block_sum(s, shared);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        y[c] = expf(x[c] - m) / s;
}

/* One block per row: log-sum-exp of the logits, then the loss or the gradient. */
__device__ static float row_lse(const float *x, int V, float *shared)
{
    float m = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        m = fmaxf(m, x[v]);
    m = block_max(m, shared);
    float s = 0;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        s += expf(x[v] - m);
    return m + logf(block_sum(s, shared));
}

__global__ static void cross_entropy_forward_kernel(float *losses, const float *logits, const int *targets, int V)
{
    __shared__ float shared[32];
    const float *x = logits + (size_t)blockIdx.x * V;
    float lse = row_lse(x, V, shared);
    if (threadIdx.x == 0)
        losses[blockIdx.x] = lse - x[targets[blockIdx.x]];
}

__global__ static void cross_entropy_backward_kernel(float *dlogits, const float *logits, const int *targets,
                                                     float dloss, int V)
{
    __shared__ float shared[32];
    const float *x = logits + (size_t)blockIdx.x * V;
    float *d = dlogits + (size_t)blockIdx.x * V;
    float lse = row_lse(x, V, shared);
    int target = targets[blockIdx.x];
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        d[v] += dloss * (expf(x[v] - lse) - (v == target ? 1.0f : 0.0f));
}

__global__ static void adamw_kernel(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                                    float eps, float wd, float c1, float c2, float grad_scale)
{
    GRID_STRIDE(i, n) {
        float gi = g[i] * grad_scale;
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        p[i] -= lr * ((m[i] / c1) / (sqrtf(v[i] / c2) + eps) + wd * p[i]);
    }
}

__global__ static void round_kernel(float *x, size_t n, int prec)
{
    GRID_STRIDE(i, n) x[i] = round_prec(x[i], prec);
}

__global__ static void cast_to_half_kernel(uint16_t *out, const float *in, size_t n, int prec)
{
    GRID_STRIDE(i, n) {
        if (prec == KPREC_FP16)
            out[i] = __half_as_ushort(__float2half_rn(in[i]));
        else
            out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
    }
}

__global__ static void cast_from_half_kernel(float *out, const uint16_t *in, size_t n, int prec)
{
    GRID_STRIDE(i, n) {
        if (prec == KPREC_FP16)
            out[i] = __half2float(__ushort_as_half(in[i]));
        else
            out[i] = __bfloat162float(__ushort_as_bfloat16(in[i]));
    }
}

__global__ static void sum_squares_kernel(double *acc, const float *x, size_t n)
{
    __shared__ float shared[32];
    float s = 0;
    GRID_STRIDE(i, n) s += x[i] * x[i];
    /* float per thread, double across blocks: enough for a global norm used for clipping */
    s = block_sum(s, shared);
    if (threadIdx.x == 0)
        atomicAdd(acc, (double)s);
}

__global__ static void inf_nan_kernel(int *flag, const float *x, size_t n)
{
    GRID_STRIDE(i, n) if (!isfinite(x[i])) atomicExch(flag, 1);
}

#define T256 256
void cuda_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    encoder_forward_kernel<<<blocks_for(n, T256), T256>>>(out, tokens, wte, wpe, T, C, n);
    LAUNCH_CHECK();
}

void cuda_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    encoder_backward_kernel<<<blocks_for(n, T256), T256>>>(dwte, dwpe, dout, tokens, T, C, n);
    LAUNCH_CHECK();
}

void cuda_gelu_forward(float *out, const float *inp, size_t N)
{
    gelu_forward_kernel<<<blocks_for(N, T256), T256>>>(out, inp, N);
    LAUNCH_CHECK();
}

void cuda_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
    gelu_backward_kernel<<<blocks_for(N, T256), T256>>>(dinp, inp, dout, N);
    LAUNCH_CHECK();
}

void cuda_residual_forward(float *out, const float *a, const float *b, size_t N)
{
    residual_kernel<<<blocks_for(N, T256), T256>>>(out, a, b, N);
    LAUNCH_CHECK();
}

void cuda_softmax_forward(float *out, const float *inp, int rows, int cols)
{
    softmax_kernel<<<rows, T256>>>(out, inp, cols);
    LAUNCH_CHECK();
}

void cuda_cross_entropy_forward(float *losses, const float *logits, const int *targets, int N, int V)
{
    cross_entropy_forward_kernel<<<N, T256>>>(losses, logits, targets, V);
    LAUNCH_CHECK();
}

void cuda_cross_entropy_backward(float *dlogits, const float *logits, const int *targets, float dloss, int N, int V)
{
    cross_entropy_backward_kernel<<<N, T256>>>(dlogits, logits, targets, dloss, V);
    LAUNCH_CHECK();
}

void cuda_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr, float beta1,
                       float beta2, float eps, float weight_decay, int t, float grad_scale)
{
    float c1 = 1.0f - powf(beta1, (float)t), c2 = 1.0f - powf(beta2, (float)t);
    adamw_kernel<<<blocks_for(n, T256), T256>>>(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, c1, c2,
                                                grad_scale);
    LAUNCH_CHECK();
}

void cuda_round_to_precision(float *x, size_t n, kernels_precision prec)
{
    if (prec == KPREC_FP32)
        return;
    round_kernel<<<blocks_for(n, T256), T256>>>(x, n, (int)prec);
    LAUNCH_CHECK();
}

void cuda_cast_to_half(uint16_t *out, const float *in, size_t n, kernels_precision prec)
{
    cast_to_half_kernel<<<blocks_for(n, T256), T256>>>(out, in, n, (int)prec);
    LAUNCH_CHECK();
}

void cuda_cast_from_half(float *out, const uint16_t *in, size_t n, kernels_precision prec)
{
    cast_from_half_kernel<<<blocks_for(n, T256), T256>>>(out, in, n, (int)prec);
    LAUNCH_CHECK();
}

double cuda_sum_squares(const float *x, size_t n)
{
    double *acc = (double *)cuda_scratch(2, sizeof(double));
    CUDA_CHECK(cudaMemset(acc, 0, sizeof(double)));
    unsigned blocks = blocks_for(n, T256);
    if (blocks > 1024)
        blocks = 1024;
    sum_squares_kernel<<<blocks, T256>>>(acc, x, n);
    LAUNCH_CHECK();
    double h;
    CUDA_CHECK(cudaMemcpy(&h, acc, sizeof h, cudaMemcpyDeviceToHost));
    return h;
}

int cuda_has_inf_or_nan(const float *x, size_t n)
{
    int *flag = (int *)cuda_scratch(2, sizeof(int));
    CUDA_CHECK(cudaMemset(flag, 0, sizeof(int)));
    unsigned blocks = blocks_for(n, T256);
    if (blocks > 1024)
        blocks = 1024;
    inf_nan_kernel<<<blocks, T256>>>(flag, x, n);
    LAUNCH_CHECK();
    int h;
    CUDA_CHECK(cudaMemcpy(&h, flag, sizeof h, cudaMemcpyDeviceToHost));
    return h;
}
