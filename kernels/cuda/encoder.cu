/* Token + position embeddings: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:], and the backward
 * that adds dout into the rows of dwte and dwpe. Under rotary embeddings there is no position
 * table: wpe (dwpe) is NULL, out is the token row alone and dwpe is not touched.
 *
 * The backward is deterministic, and adds in the CPU's order, so it matches the CPU bit for
 * bit: every (row, c) element of dwte and dwpe has one thread that adds its contributions
 * in increasing (b, t) order. For dwpe that is a loop over b. For dwte the positions of each
 * distinct token must be known: the tokens (B*T ints, small) are copied to the host, bucketed
 * by token with a stable counting sort, and the buckets uploaded. That costs one host round
 * trip per backward, which atomics would avoid at the price of run-to-run differences. */
#include <string.h>
#include "cuda_common.cuh"

__global__ static void encoder_forward_kernel(float *out, const int *tokens, const float *wte, const float *wpe,
                                              int T, int C, size_t n)
{
    GRID_STRIDE(i, n) {
        size_t bt = i / C;
        size_t c = i % C, t = bt % T;
        float v = wte[(size_t)tokens[bt] * C + c];
        if (wpe) /* no `+ 0` without a table: it would turn a -0 into +0, unlike the CPU */
            v += wpe[t * C + c];
        out[i] = v;
    }
}

/* dwpe[t, c] += sum over b of dout[b, t, c], b in increasing order. */
__global__ static void encoder_dwpe_kernel(float *dwpe, const float *dout, int B, int T, int C)
{
    GRID_STRIDE(i, (size_t)T * C) {
        float acc = dwpe[i];
        for (int b = 0; b < B; b++)
            acc += dout[(size_t)b * T * C + i];
        dwpe[i] = acc;
    }
}

/* Block k handles bucket k (token bucket_token[k], positions order[start[k] .. start[k+1]),
 * ascending); its threads walk the C columns. */
__global__ static void encoder_dwte_kernel(float *dwte, const float *dout, const int *order, const int *start,
                                           const int *bucket_token, int C)
{
    int k = blockIdx.x;
    float *row = dwte + (size_t)bucket_token[k] * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = row[c];
        for (int i = start[k]; i < start[k + 1]; i++)
            acc += dout[(size_t)order[i] * C + c];
        row[c] = acc;
    }
}

void cuda_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    if (B <= 0 || T <= 0 || C <= 0)
        return;
    encoder_forward_kernel<<<blocks_for(n, THREADS), THREADS>>>(out, tokens, wte, wpe, T, C, n);
    LAUNCH_CHECK();
}

static void *host_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "kernels(cuda): out of host memory (%zu bytes) in encoder_backward\n", bytes);
        abort();
    }
    return p;
}

void cuda_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T, int C)
{
    if (B <= 0 || T <= 0 || C <= 0)
        return;
    if (dwpe) {
        encoder_dwpe_kernel<<<blocks_for((size_t)T * C, THREADS), THREADS>>>(dwpe, dout, B, T, C);
        LAUNCH_CHECK();
    }

    /* Bucket the positions by token on the host (stable counting sort: positions stay in
     * increasing order within a bucket). */
    int n = B * T;
    int *tok = (int *)host_alloc((size_t)n * sizeof(int));
    CUDA_CHECK(cudaMemcpy(tok, tokens, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost));
    int vmax = 0;
    for (int i = 0; i < n; i++) {
        if (tok[i] < 0) {
            fprintf(stderr, "kernels(cuda): encoder_backward: negative token %d at position %d\n", tok[i], i);
            abort();
        }
        if (tok[i] > vmax)
            vmax = tok[i];
    }
    int *count = (int *)calloc((size_t)vmax + 2, sizeof(int));
    if (!count) {
        fprintf(stderr, "kernels(cuda): out of host memory in encoder_backward\n");
        abort();
    }
    for (int i = 0; i < n; i++)
        count[tok[i] + 1]++;
    for (int v = 0; v <= vmax; v++)
        count[v + 1] += count[v]; /* count[v] = first slot of token v */
    /* One upload buffer: order[n], start[buckets + 1], bucket_token[buckets]; buckets <= n. */
    int *idx = (int *)host_alloc((3 * (size_t)n + 1) * sizeof(int));
    int *order = idx;
    for (int i = 0; i < n; i++)
        order[count[tok[i]]++] = i; /* count[v] ends as one past token v's last slot */
    int buckets = 0;
    int *start = idx + n;
    for (int i = 0; i < n; i++)
        if (i == 0 || tok[order[i]] != tok[order[i - 1]])
            start[buckets++] = i;
    start[buckets] = n;
    int *bucket_token = start + buckets + 1;
    for (int k = 0; k < buckets; k++)
        bucket_token[k] = tok[order[start[k]]];
    size_t used = (size_t)n + 2 * (size_t)buckets + 1;
    int *dev = (int *)cuda_scratch(SCRATCH_INDEX, used * sizeof(int));
    CUDA_CHECK(cudaMemcpy(dev, idx, used * sizeof(int), cudaMemcpyHostToDevice));
    encoder_dwte_kernel<<<buckets, THREADS>>>(dwte, dout, dev, dev + n, dev + n + buckets + 1, C);
    LAUNCH_CHECK();
    free(idx);
    free(count);
    free(tok);
}
