/* kernels_bench: times the kernels of a backend at transformer-like sizes (warm-up, median of
 * repeats, the backend's own events) and prints GFLOP/s or GB/s per op.
 *   kernels_bench [--backend cpu|cuda] [--quick]      exit 77 when the backend is absent */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.h"

typedef struct {
    const kernels_backend *k;
    kernels_event *a, *b;
    int repeats;
} bench;

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Median seconds of fn(ctx) over the repeats, after one warm-up call. */
static double time_median(bench *B, void (*fn)(void *), void *ctx)
{
    double t[32];
    fn(ctx);
    B->k->synchronize();
    for (int r = 0; r < B->repeats; r++) {
        B->k->event_record(B->a);
        fn(ctx);
        B->k->event_record(B->b);
        t[r] = B->k->event_elapsed_s(B->a, B->b);
    }
    qsort(t, (size_t)B->repeats, sizeof t[0], cmp_double);
    return t[B->repeats / 2];
}

static float *dev_random(const kernels_backend *k, size_t n)
{
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        h[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    float *d = k->alloc(n * sizeof(float));
    k->copy_to_device(d, h, n * sizeof(float));
    free(h);
    return d;
}

typedef struct {
    const kernels_backend *k;
    float *a, *b, *c, *d, *e;
    int *ti;
    int N, C, OC, B, T, NH, V;
    kernels_precision prec;
} args;

static void run_matmul(void *p) { args *x = p; x->k->matmul_forward(x->c, x->a, x->b, NULL, x->N, x->C, x->OC, x->prec); }
static void run_matmul_bwd(void *p)
{
    args *x = p;
    x->k->matmul_backward(x->d, x->e, NULL, x->c, x->a, x->b, x->N, x->C, x->OC, x->prec);
}
static void run_attention(void *p) { args *x = p; x->k->attention_forward(x->c, x->d, x->a, x->B, x->T, x->C, x->NH, x->prec); }
static void run_layernorm(void *p) { args *x = p; x->k->layernorm_forward(x->c, x->d, x->e, x->a, x->b, x->b, x->N, x->C); }
static void run_gelu(void *p) { args *x = p; x->k->gelu_forward(x->c, x->a, (size_t)x->N * x->C); }
static void run_ce(void *p) { args *x = p; x->k->cross_entropy_forward(x->c, x->a, x->ti, x->N, x->V); }
static void run_adamw(void *p)
{
    args *x = p;
    x->k->adamw_update(x->a, x->b, x->c, x->d, (size_t)x->N * x->C, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f);
}

int main(int argc, char **argv)
{
    const char *backend = "cpu";
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: kernels_bench [--backend cpu|cuda] [--quick]\n");
            return 0;
        } else {
            fprintf(stderr, "kernels_bench: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    char why[256];
    const kernels_backend *k = !strcmp(backend, "cuda") ? kernels_cuda(why, sizeof why) : kernels_cpu();
    if (!k) {
        printf("kernels_bench: %s\n", why);
        return 77;
    }
    int gpu = !strcmp(k->name, "cuda");
    bench B = {k, k->event_create(), k->event_create(), quick ? 3 : 7};
    /* GPT-2 124M shapes: tokens N = B*T, hidden 768; the CPU gets a smaller token count. */
    int N = gpu ? 8192 : (quick ? 256 : 1024), C = 768;
    printf("kernels_bench: backend %s, %d repeats, median\n", k->name, B.repeats);
    printf("%-22s %-26s %10s %12s\n", "op", "shape", "ms", "rate");
    kernels_precision precs[2] = {KPREC_FP32, KPREC_BF16};
    for (int pi = 0; pi < 2; pi++) {
        args x = {k, dev_random(k, (size_t)N * 4 * C), dev_random(k, (size_t)4 * C * C), dev_random(k, (size_t)N * 4 * C),
                  dev_random(k, (size_t)N * 4 * C), dev_random(k, (size_t)4 * C * C), NULL, N, C, 4 * C, 0, 0, 0, 0,
                  precs[pi]};
        double t = time_median(&B, run_matmul, &x);
        printf("%-22s N=%-5d C=%-5d OC=%-7d %10.3f %8.1f GFLOP/s\n", pi ? "matmul bf16" : "matmul fp32", N, C, 4 * C,
               t * 1e3, 2.0 * N * C * 4 * C / t / 1e9);
        t = time_median(&B, run_matmul_bwd, &x);
        printf("%-22s N=%-5d C=%-5d OC=%-7d %10.3f %8.1f GFLOP/s\n", pi ? "matmul_bwd bf16" : "matmul_bwd fp32", N, C,
               4 * C, t * 1e3, 4.0 * N * C * 4 * C / t / 1e9);
        float *bufs[] = {x.a, x.b, x.c, x.d, x.e};
        for (int i = 0; i < 5; i++)
            k->free(bufs[i]);
    }
    {
        int T = gpu ? 1024 : 256, Bt = gpu ? 8 : 1, NH = 12;
        args x = {k, dev_random(k, (size_t)Bt * T * 3 * C), NULL, dev_random(k, (size_t)Bt * T * C),
                  dev_random(k, (size_t)Bt * NH * T), NULL, NULL, 0, C, 0, Bt, T, NH, 0, KPREC_FP32};
        double t = time_median(&B, run_attention, &x);
        printf("%-22s B=%d T=%d C=%d NH=%-4d %10.3f %8.1f GFLOP/s\n", "attention fwd", Bt, T, C, NH, t * 1e3,
               2.0 * Bt * (double)T * T * C / t / 1e9); /* causal: half of the 4BT^2C convention */
        k->free(x.a); k->free(x.c); k->free(x.d);
    }
    {
        args x = {k, dev_random(k, (size_t)N * C * 4), dev_random(k, (size_t)N * C * 4), dev_random(k, (size_t)N * C * 4),
                  dev_random(k, (size_t)N * C * 4), dev_random(k, (size_t)N * C * 4), NULL, N, C, 0, 0, 0, 0, 0, KPREC_FP32};
        double t = time_median(&B, run_layernorm, &x);
        printf("%-22s N=%-5d C=%-14d %10.3f %8.1f GB/s\n", "layernorm fwd", N, C, t * 1e3, 2.0 * N * C * 4 / t / 1e9);
        t = time_median(&B, run_gelu, &x);
        printf("%-22s n=%-20d %10.3f %8.1f GB/s\n", "gelu fwd", N * C, t * 1e3, 2.0 * N * C * 4 / t / 1e9);
        t = time_median(&B, run_adamw, &x);
        printf("%-22s n=%-20d %10.3f %8.1f GB/s\n", "adamw", N * C, t * 1e3, 28.0 * N * C / t / 1e9);
        int V = gpu ? 50304 : 8192, Nce = gpu ? 2048 : 128;
        float *logits = dev_random(k, (size_t)Nce * V);
        int *tg = k->alloc(Nce * sizeof(int));
        args y = {k, logits, NULL, x.c, NULL, NULL, tg, Nce, 0, 0, 0, 0, 0, V, KPREC_FP32};
        t = time_median(&B, run_ce, &y);
        printf("%-22s N=%-5d V=%-14d %10.3f %8.1f GB/s\n", "cross_entropy fwd", Nce, V, t * 1e3,
               (double)Nce * V * 4 / t / 1e9);
        k->free(logits);
        k->free(tg);
        float *bufs[] = {x.a, x.b, x.c, x.d, x.e};
        for (int i = 0; i < 5; i++)
            k->free(bufs[i]);
    }
    k->event_destroy(B.a);
    k->event_destroy(B.b);
    return 0;
}
