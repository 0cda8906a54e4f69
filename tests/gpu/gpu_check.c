/* Helpers of the GPU tests: see gpu_check.h. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "gpu_check.h"

int gpu_pair_open(gpu_pair *p)
{
    char why[256] = "";
    p->cpu = kernels_cpu();
    p->gpu = kernels_cuda(why, sizeof why);
    p->rng = 0x2545f4914f6cdd1dull;
    if (!p->gpu) {
        printf("skipped: %s\n", why);
        return 77;
    }
    return 0;
}

static uint64_t next(gpu_pair *p) /* xorshift64*: fixed seed, same inputs every run */
{
    p->rng ^= p->rng >> 12;
    p->rng ^= p->rng << 25;
    p->rng ^= p->rng >> 27;
    return p->rng * 0x2545f4914f6cdd1dull;
}

static void *xmalloc(size_t bytes)
{
    void *x = malloc(bytes ? bytes : 1);
    assert_non_null(x);
    return x;
}

float *gpu_rand(gpu_pair *p, size_t n, float scale)
{
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = scale * (float)((double)(next(p) >> 11) / 4503599627370496.0 - 1.0);
    return x;
}

int gpu_rand_int(gpu_pair *p, int bound)
{
    return (int)(next(p) % (uint64_t)bound);
}

float *gpu_host_copy(const float *x, size_t n)
{
    float *c = xmalloc(n * sizeof *c);
    memcpy(c, x, n * sizeof *c);
    return c;
}

void *gpu_upload_bytes(gpu_pair *p, const void *host, size_t bytes)
{
    void *d = p->gpu->alloc(bytes);
    p->gpu->copy_to_device(d, host, bytes);
    return d;
}

float *gpu_upload(gpu_pair *p, const float *host, size_t n)
{
    return gpu_upload_bytes(p, host, n * sizeof(float));
}

float *gpu_download(gpu_pair *p, const float *dev, size_t n)
{
    float *h = xmalloc(n * sizeof *h);
    p->gpu->copy_to_host(h, dev, n * sizeof *h);
    return h;
}

void gpu_expect_close(gpu_pair *p, const char *what, const float *cpu_host, const float *gpu_dev, size_t n,
                      double tol)
{
    float *g = gpu_download(p, gpu_dev, n);
    double num = 0, den = 1e-30;
    size_t worst = 0, bad = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(g[i]) && isfinite(cpu_host[i]) && bad == (size_t)-1)
            bad = i;
        double d = fabs((double)g[i] - (double)cpu_host[i]);
        if (d > num) {
            num = d;
            worst = i;
        }
        den = fmax(den, fabs((double)cpu_host[i]));
    }
    double rel = num / den;
    printf("  %-44s rel err %.2e (bound %.0e)\n", what, rel, tol);
    if (bad != (size_t)-1) {
        float gb = g[bad], cb = cpu_host[bad];
        free(g);
        fail_msg("%s: non-finite GPU value %g at %zu (CPU %g)", what, gb, bad, cb);
    }
    if (!(rel <= tol)) {
        float gw = g[worst], cw = cpu_host[worst];
        free(g);
        fail_msg("%s: rel err %.3e > %.0e (worst at %zu: GPU %.9g, CPU %.9g)", what, rel, tol, worst, gw, cw);
    }
    free(g);
}

void gpu_expect_same_bytes(gpu_pair *p, const char *what, const void *host, const void *dev, size_t bytes)
{
    unsigned char *g = xmalloc(bytes);
    p->gpu->copy_to_host(g, dev, bytes);
    const unsigned char *h = host;
    size_t first = (size_t)-1;
    for (size_t i = 0; i < bytes && first == (size_t)-1; i++)
        if (g[i] != h[i])
            first = i;
    free(g);
    printf("  %-44s %s\n", what, first == (size_t)-1 ? "bit-identical" : "DIFFERENT");
    if (first != (size_t)-1)
        fail_msg("%s: first differing byte at %zu of %zu", what, first, bytes);
}
