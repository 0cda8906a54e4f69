/* Rotary position embeddings, rotate-half form (kernels.h), forward and backward in place.
 * The backward turns by the negative angle: the rotation is orthogonal, its transpose is its
 * inverse.
 *
 * theta_i is computed on the host with the CPU backend's expression (fp32 powf), so both
 * backends turn by the same fp32 angle p * theta_i: at positions in the thousands one ulp of
 * theta moves the angle by ~1e-4 rad, far more than the cosf/sinf differences. The angle is
 * formed in fp32 on the device and turned with the accurate cosf/sinf.
 *
 * kernels.h passes pos as a host array. A copy from pageable host memory waits for all work
 * queued on the stream, and the engine calls rope with the same positions and shape in every
 * layer, so the thetas and positions are uploaded only when they differ from the last upload. */
#include <string.h>
#include "cuda_common.cuh"

/* One thread per (row, i < hd/2): one angle, applied to every rotated head of the row. */
__global__ static void rope_kernel(float *x, const float *theta, const int *pos, int T, int row, int nheads, int hd,
                                   float sign, size_t n)
{
    int half = hd / 2;
    GRID_STRIDE(k, n) {
        size_t bt = k / half;
        int i = (int)(k % half), t = (int)(bt % T);
        float p = (float)(pos ? pos[t] : t);
        float angle = p * theta[i];
        float c = cosf(angle), s = sign * sinf(angle);
        float *r = x + bt * row + i;
        for (int h = 0; h < nheads; h++) {
            float *a = r + (size_t)h * hd, *z = a + half;
            float x0 = *a, x1 = *z;
            *a = x0 * c - x1 * s;
            *z = x1 * c + x0 * s;
        }
    }
}

/* What the scratch slot holds: theta (hd/2 floats), then pos (T ints) when one was given. */
static struct {
    int valid, hd, T, has_pos;
    float base;
    int *pos;          /* host copy of the positions last uploaded */
    size_t pos_cap;    /* ints allocated in pos */
    void *dev;
} uploaded;

static int same_as_uploaded(void *dev, const int *pos, int T, int hd, float base)
{
    return uploaded.valid && uploaded.dev == dev && uploaded.hd == hd && uploaded.T == T &&
           uploaded.base == base && uploaded.has_pos == (pos != NULL) &&
           (!pos || !memcmp(uploaded.pos, pos, (size_t)T * sizeof(int)));
}

static void out_of_memory(void)
{
    fprintf(stderr, "kernels(cuda): out of host memory in rope\n");
    abort();
}

/* Device pointers to theta and to the positions (NULL: p = t), uploading them if needed. */
static void rope_tables(const float **theta_dev, const int **pos_dev, const int *pos, int T, int hd, float base)
{
    int half = hd / 2;
    size_t bytes = (size_t)half * sizeof(float) + (pos ? (size_t)T * sizeof(int) : 0);
    void *dev = cuda_scratch(SCRATCH_ROPE, bytes);
    *theta_dev = (const float *)dev;
    *pos_dev = pos ? (const int *)((float *)dev + half) : NULL;
    if (same_as_uploaded(dev, pos, T, hd, base))
        return;
    if (pos && uploaded.pos_cap < (size_t)T) {
        int *grown = (int *)realloc(uploaded.pos, (size_t)T * sizeof(int));
        if (!grown)
            out_of_memory();
        uploaded.pos = grown;
        uploaded.pos_cap = (size_t)T;
    }
    char *host = (char *)malloc(bytes);
    if (!host)
        out_of_memory();
    float *theta = (float *)host;
    for (int i = 0; i < half; i++)
        theta[i] = 1.0f / powf(base, (float)(2 * i) / (float)hd);
    if (pos) {
        memcpy(theta + half, pos, (size_t)T * sizeof(int));
        memcpy(uploaded.pos, pos, (size_t)T * sizeof(int));
    }
    CUDA_CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
    free(host);
    uploaded.valid = 1;
    uploaded.dev = dev;
    uploaded.hd = hd;
    uploaded.T = T;
    uploaded.base = base;
    uploaded.has_pos = pos != NULL;
}

static void rope(float *x, const int *pos, int B, int T, int row, int nheads, int hd, float base, float sign)
{
    if (B <= 0 || T <= 0 || nheads <= 0 || hd < 2)
        return;
    if (hd % 2 || (size_t)nheads * hd > (size_t)row) {
        fprintf(stderr, "kernels(cuda): rope: head size %d must be even and %d heads fit a row of %d\n", hd, nheads,
                row);
        abort();
    }
    const float *theta;
    const int *pos_dev;
    rope_tables(&theta, &pos_dev, pos, T, hd, base);
    size_t n = (size_t)B * T * (hd / 2);
    rope_kernel<<<blocks_for(n, THREADS), THREADS>>>(x, theta, pos_dev, T, row, nheads, hd, sign, n);
    LAUNCH_CHECK();
}

void cuda_rope_forward(float *x, const int *pos, int B, int T, int row, int nheads, int hd, float base)
{
    rope(x, pos, B, T, row, nheads, hd, base, 1.0f);
}

void cuda_rope_backward(float *dx, const int *pos, int B, int T, int row, int nheads, int hd, float base)
{
    rope(dx, pos, B, T, row, nheads, hd, base, -1.0f);
}
