/* Reductions whose results go back to the host: the sum of squares (for the global gradient
 * norm) and the overflow check (for fp16 loss scaling).
 *
 * sum_squares accumulates in double, as the CPU does, and is deterministic: a fixed number of
 * blocks (a function of n only) each write one partial sum, and the host adds the partials
 * in order. No floating-point atomics, whose order would vary from run to run. */
#include "cuda_common.cuh"

#define SS_THREADS 256
#define SS_MAX_BLOCKS 1024

/* One range of sum_squares: its blocks are partial[first .. first + blocks). */
typedef struct {
    const float *x;
    size_t n;
    unsigned first, blocks;
} ss_range;

/* Every range in one launch (a launch per tensor cost GPT-2 124M's 148 tensors 0.75 ms a step
 * on an H200, 2026-11-27, where one pass over its 0.5 GB takes 0.17). Block b sums its range
 * as a launch of that range's own `blocks` blocks would (the same grid stride), so each
 * partial, and the sum, are the same bits as a launch per range. */
__global__ static void sum_squares_kernel(double *partial, const ss_range *ranges, int count)
{
    __shared__ double s[SS_THREADS];
    unsigned blk = blockIdx.x;
    int lo = 0, hi = count - 1; /* the range holding blk: the last whose first block is <= blk */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (ranges[mid].first <= blk)
            lo = mid;
        else
            hi = mid - 1;
    }
    ss_range r = ranges[lo];
    double acc = 0.0;
    for (size_t i = (size_t)(blk - r.first) * SS_THREADS + threadIdx.x; i < r.n; i += (size_t)r.blocks * SS_THREADS)
        acc += (double)r.x[i] * (double)r.x[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int half = SS_THREADS / 2; half > 0; half >>= 1) { /* fixed-shape tree: same order every run */
        if ((int)threadIdx.x < half)
            s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partial[blk] = s[0];
}

/* Any writer stores the same 1, so the order of writers does not matter. */
__global__ static void inf_nan_kernel(int *flag, const float *x, size_t n)
{
    GRID_STRIDE(i, n) {
        if (!isfinite(x[i]))
            atomicOr(flag, 1);
    }
}

static unsigned ss_blocks(size_t n)
{
    unsigned blocks = n ? blocks_for(n, SS_THREADS) : 0;
    return blocks > SS_MAX_BLOCKS ? SS_MAX_BLOCKS : blocks;
}

/* Every range's blocks write their partials side by side; one copy brings them all back, and
 * each range's partials are added in order (so out[i] does not depend on the other ranges). */
void cuda_sum_squares(const float *const *x, const size_t *n, int count, double *out)
{
    ss_range *table = count > 0 ? (ss_range *)malloc((size_t)count * sizeof(ss_range)) : NULL;
    if (count > 0 && !table) {
        fprintf(stderr, "kernels(cuda): out of host memory for %d ranges\n", count);
        abort();
    }
    size_t total = 0;
    int used = 0; /* ranges with blocks: an empty range has none and sums to 0 */
    for (int r = 0; r < count; r++) {
        unsigned blocks = ss_blocks(n[r]);
        if (blocks)
            table[used++] = (ss_range){x[r], n[r], (unsigned)total, blocks};
        total += blocks;
    }
    if (!total) {
        for (int r = 0; r < count; r++)
            out[r] = 0.0;
        free(table);
        return;
    }
    ss_range *dev = (ss_range *)cuda_scratch(SCRATCH_RANGES, (size_t)used * sizeof(ss_range));
    CUDA_CHECK(cudaMemcpy(dev, table, (size_t)used * sizeof(ss_range), cudaMemcpyHostToDevice));
    free(table);
    double *partial = (double *)cuda_scratch(SCRATCH_PARTIAL, total * sizeof(double));
    sum_squares_kernel<<<(unsigned)total, SS_THREADS>>>(partial, dev, used);
    LAUNCH_CHECK();
    double *host = (double *)malloc(total * sizeof(double));
    if (!host) {
        fprintf(stderr, "kernels(cuda): out of host memory for %zu partial sums\n", total);
        abort();
    }
    CUDA_CHECK(cudaMemcpy(host, partial, total * sizeof(double), cudaMemcpyDeviceToHost));
    size_t at = 0;
    for (int r = 0; r < count; r++) {
        unsigned blocks = ss_blocks(n[r]);
        double s = 0.0;
        for (unsigned b = 0; b < blocks; b++)
            s += host[at + b];
        out[r] = s;
        at += blocks;
    }
    free(host);
}

int cuda_has_inf_or_nan(const float *x, size_t n)
{
    if (!n)
        return 0;
    int *flag = (int *)cuda_scratch(SCRATCH_PARTIAL, sizeof(int));
    CUDA_CHECK(cudaMemset(flag, 0, sizeof(int)));
    unsigned blocks = blocks_for(n, THREADS);
    if (blocks > 1024)
        blocks = 1024;
    inf_nan_kernel<<<blocks, THREADS>>>(flag, x, n);
    LAUNCH_CHECK();
    int host = 0;
    CUDA_CHECK(cudaMemcpy(&host, flag, sizeof host, cudaMemcpyDeviceToHost));
    return host;
}

/* Column sums of a rows x C matrix, in a fixed order: each thread sums COL_SLICE consecutive
 * rows of one column (neighbouring threads read neighbouring columns: coalesced), writing one
 * row of slice sums; the slice sums are summed the same way until one row is left, which is
 * added into dst. The order depends on rows and C only, so the result is the same bits on
 * every run and every GPU, without atomics. Every level runs rows / COL_SLICE x C threads, so
 * even a few columns over many rows fill the GPU (a thread per column walking all rows would
 * leave it nearly idle: LayerNorm's weight gradient took 28 times its forward that way). */
#define COL_SLICE 32
#define COL_THREADS 256
#define COL_MAX_GRID_Y 65535

__global__ static void column_slice_sum_kernel(float *out, const float *in, int rows, int C, int prec, int last)
{
    int c = blockIdx.x * COL_THREADS + threadIdx.x;
    if (c >= C)
        return;
    int slices = (rows + COL_SLICE - 1) / COL_SLICE;
    for (int s = blockIdx.y; s < slices; s += gridDim.y) {
        int r1 = min(rows, (s + 1) * COL_SLICE);
        float acc = 0.0f;
        for (int r = s * COL_SLICE; r < r1; r++)
            acc += round_prec(in[(size_t)r * C + c], prec);
        if (last)
            out[c] += acc;
        else
            out[(size_t)s * C + c] = acc;
    }
}

size_t cuda_column_sums_scratch_floats(int rows, int C)
{
    size_t total = 0;
    for (int r = rows; r > COL_SLICE; r = (r + COL_SLICE - 1) / COL_SLICE)
        total += (size_t)((r + COL_SLICE - 1) / COL_SLICE) * C;
    return total;
}

void cuda_column_sums_add(float *dst, const float *in, int rows, int C, kernels_precision prec, float *tmp)
{
    if (rows <= 0 || C <= 0)
        return;
    unsigned gx = (unsigned)((C + COL_THREADS - 1) / COL_THREADS);
    for (;;) {
        int slices = (rows + COL_SLICE - 1) / COL_SLICE, last = slices == 1;
        dim3 grid(gx, (unsigned)(slices < COL_MAX_GRID_Y ? slices : COL_MAX_GRID_Y));
        column_slice_sum_kernel<<<grid, COL_THREADS>>>(last ? dst : tmp, in, rows, C, (int)prec, last);
        LAUNCH_CHECK();
        if (last)
            return;
        in = tmp; /* each level's slice sums follow the previous level's in tmp */
        tmp += (size_t)slices * C;
        rows = slices;
        prec = KPREC_FP32; /* only the input is rounded: partial sums are fp32 */
    }
}
