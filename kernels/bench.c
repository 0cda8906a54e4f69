/* kernels_bench: times every kernel of a backend at GPT-2-like sizes and prints one line per
 * (op, shape): the median of the repeats after a warm-up, measured with the backend's own
 * events (CUDA events on the GPU, the monotonic clock on the CPU), and the rate it implies,
 * in GFLOP/s for GEMM and attention, GB/s (bytes a kernel must move at least) for the rest.
 *
 *   kernels_bench [--backend cpu|cuda] [--quick] [--repeats R]
 *
 * Exit 0; 2 on a bad argument; 77 (CTest's "skipped") when the backend asked for is not
 * available, with the reason. The same program serves both backends, so their figures are
 * directly comparable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.h"

enum { MAX_REPEATS = 101 };

/* One timing session: the backend, its two timer marks, how many timed repeats per case. */
typedef struct {
    const kernels_backend *k;
    kernels_event *start, *end;
    int repeats;
} bench;

/* The sizes and buffers one case runs on. Buffers live in the backend's memory. */
typedef struct {
    const kernels_backend *k;
    kernels_precision prec;
    int B, T, C, NH, N, OC, V;
    size_t n;
    float *f[6];
    int *tok;
    uint16_t *h;
} args;

typedef void (*op_fn)(const args *a);

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Median seconds of one call, after a warm-up call (first-touch page faults, cuBLAS heuristics
 * and lazy module loading all land in the warm-up, not in the figures). */
static double time_median(const bench *b, op_fn fn, const args *a)
{
    double t[MAX_REPEATS];
    fn(a);
    b->k->synchronize();
    for (int r = 0; r < b->repeats; r++) {
        b->k->event_record(b->start);
        fn(a);
        b->k->event_record(b->end);
        t[r] = b->k->event_elapsed_s(b->start, b->end);
    }
    qsort(t, (size_t)b->repeats, sizeof t[0], cmp_double);
    return t[b->repeats / 2];
}

static const char *prec_name(kernels_precision p)
{
    return p == KPREC_BF16 ? "bf16" : p == KPREC_FP16 ? "fp16" : "fp32";
}

/* work: FLOPs when flops is set, else bytes moved. */
static void run_case(const bench *b, const char *op, const args *a, const char *shape, op_fn fn, double work, int flops)
{
    double s = time_median(b, fn, a);
    char name[64];
    snprintf(name, sizeof name, "%s %s", op, prec_name(a->prec));
    printf("%-28s %-26s %11.4f %10.1f %s\n", name, shape, s * 1e3, work / s / 1e9, flops ? "GFLOP/s" : "GB/s");
    fflush(stdout);
}

/* Deterministic values in [-scale, scale) copied into the backend's memory. */
static float *dev_values(const kernels_backend *k, size_t n, float scale, unsigned seed)
{
    float *h = malloc(n * sizeof(float));
    if (!h) {
        fprintf(stderr, "kernels_bench: out of host memory\n");
        exit(1);
    }
    unsigned long long s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        h[i] = scale * ((float)(s >> 40) / 8388608.0f - 1.0f);
    }
    float *d = k->alloc(n * sizeof(float));
    k->copy_to_device(d, h, n * sizeof(float));
    free(h);
    return d;
}

static int *dev_tokens(const kernels_backend *k, size_t n, int V)
{
    int *h = malloc(n * sizeof(int));
    for (size_t i = 0; i < n; i++)
        h[i] = (int)((i * 2654435761u) % (unsigned)V);
    int *d = k->alloc(n * sizeof(int));
    k->copy_to_device(d, h, n * sizeof(int));
    free(h);
    return d;
}

static void free_args(args *a)
{
    for (int i = 0; i < 6; i++)
        if (a->f[i])
            a->k->free(a->f[i]);
    if (a->tok)
        a->k->free(a->tok);
    if (a->h)
        a->k->free(a->h);
    memset(a->f, 0, sizeof a->f);
    a->tok = NULL;
    a->h = NULL;
}

/* ---- the ops, each one call through the table ---------------------------------------- */
static void op_matmul_fwd(const args *a)
{
    a->k->matmul_forward(a->f[2], a->f[0], a->f[1], a->f[3], a->N, a->C, a->OC, a->prec);
}
static void op_matmul_bwd(const args *a)
{
    a->k->matmul_backward(a->f[4], a->f[5], a->f[3], a->f[2], a->f[0], a->f[1], a->N, a->C, a->OC, a->prec);
}
static void op_attention_fwd(const args *a)
{
    a->k->attention_forward(a->f[1], a->f[2], a->f[0], a->B, a->T, a->C, a->NH, a->prec);
}
static void op_attention_bwd(const args *a)
{
    a->k->attention_backward(a->f[4], a->f[3], a->f[0], a->f[1], a->f[2], a->B, a->T, a->C, a->NH, a->prec);
}
static void op_layernorm_fwd(const args *a)
{
    a->k->layernorm_forward(a->f[1], a->f[2], a->f[3], a->f[0], a->f[4], a->f[5], a->N, a->C);
}
static void op_layernorm_bwd(const args *a)
{
    /* dinp into f[1] (the forward's output, reused); dweight, dbias into f[5]'s two halves */
    a->k->layernorm_backward(a->f[1], a->f[5], a->f[5] + a->C, a->f[1], a->f[0], a->f[4], a->f[2], a->f[3], a->N,
                             a->C);
}
static void op_gelu_fwd(const args *a) { a->k->gelu_forward(a->f[1], a->f[0], a->n, KPREC_FP32); }
static void op_gelu_bwd(const args *a) { a->k->gelu_backward(a->f[2], a->f[0], a->f[1], a->n, KPREC_FP32); }
static void op_residual(const args *a) { a->k->residual_forward(a->f[2], a->f[0], a->f[1], a->n, KPREC_FP32); }
static void op_softmax(const args *a) { a->k->softmax_forward(a->f[1], a->f[0], a->N, a->V); }
static void op_ce_fwd(const args *a) { a->k->cross_entropy_forward(a->f[1], a->f[0], a->tok, a->N, a->V); }
static void op_ce_bwd(const args *a)
{
    a->k->cross_entropy_backward(a->f[2], a->f[0], a->tok, 1.0f / a->N, a->N, a->V);
}
static void op_encoder_fwd(const args *a)
{
    a->k->encoder_forward(a->f[2], a->tok, a->f[0], a->f[1], a->B, a->T, a->C);
}
static void op_encoder_bwd(const args *a)
{
    a->k->encoder_backward(a->f[3], a->f[4], a->f[2], a->tok, a->B, a->T, a->C);
}
static void op_adamw(const args *a)
{
    a->k->adamw_update(a->f[0], a->f[1], a->f[2], a->f[3], a->n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f);
}
static void op_round(const args *a) { a->k->round_to_precision(a->f[1], a->n, a->prec); }
static void op_cast_to(const args *a) { a->k->cast_to_half(a->h, a->f[0], a->n, a->prec); }
static void op_cast_from(const args *a) { a->k->cast_from_half(a->f[1], a->h, a->n, a->prec); }
static void op_sum_squares(const args *a)
{
    const float *x = a->f[0];
    double s;
    a->k->sum_squares(&x, &a->n, 1, &s);
}
static void op_has_inf(const args *a) { (void)a->k->has_inf_or_nan(a->f[0], a->n); }

/* ---- the families, each at the given sizes ------------------------------------------- */

/* The four GEMMs of a GPT-2 layer (QKV, attention projection, MLP up and down) at N tokens. */
static void bench_matmul(const bench *b, int N, int C, kernels_precision prec)
{
    const int shapes[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};
    for (int s = 0; s < 4; s++) {
        int ic = shapes[s][0], oc = shapes[s][1];
        args a = {.k = b->k, .prec = prec, .N = N, .C = ic, .OC = oc};
        a.f[0] = dev_values(b->k, (size_t)N * ic, 1, 1);
        a.f[1] = dev_values(b->k, (size_t)oc * ic, 0.05f, 2);
        a.f[2] = dev_values(b->k, (size_t)N * oc, 1, 3);
        a.f[3] = dev_values(b->k, (size_t)oc, 0.1f, 4);
        a.f[4] = b->k->alloc((size_t)N * ic * sizeof(float));
        a.f[5] = b->k->alloc((size_t)oc * ic * sizeof(float));
        char shape[64];
        snprintf(shape, sizeof shape, "N=%d C=%d OC=%d", N, ic, oc);
        double flops = 2.0 * N * ic * oc;
        run_case(b, "matmul_forward", &a, shape, op_matmul_fwd, flops, 1);
        run_case(b, "matmul_backward", &a, shape, op_matmul_bwd, 2 * flops, 1);
        free_args(&a);
    }
}

/* Causal attention FLOPs: QK^T and PV over the T(T+1)/2 visible pairs, 2 FLOPs a product;
 * the backward recomputes QK^T and adds dV, dP, dQ, dK: 5 products to the forward's 2. */
static void bench_attention(const bench *b, int B, int T, int C, int NH, kernels_precision prec)
{
    args a = {.k = b->k, .prec = prec, .B = B, .T = T, .C = C, .NH = NH};
    size_t bt = (size_t)B * T;
    a.f[0] = dev_values(b->k, bt * 3 * C, 1, 5);
    a.f[1] = b->k->alloc(bt * C * sizeof(float));
    a.f[2] = b->k->alloc((size_t)B * NH * T * sizeof(float));
    a.f[3] = dev_values(b->k, bt * C, 1, 6);
    a.f[4] = b->k->alloc(bt * 3 * C * sizeof(float));
    char shape[64];
    snprintf(shape, sizeof shape, "B=%d T=%d C=%d NH=%d", B, T, C, NH);
    double pair_flops = 2.0 * B * C * (double)T * (T + 1) / 2; /* one product over all visible pairs */
    run_case(b, "attention_forward", &a, shape, op_attention_fwd, 2 * pair_flops, 1);
    run_case(b, "attention_backward", &a, shape, op_attention_bwd, 5 * pair_flops, 1);
    free_args(&a);
}

/* LayerNorm, GELU, residual at N tokens of width C (GELU at the MLP's 4C). */
static void bench_pointwise(const bench *b, int N, int C)
{
    args a = {.k = b->k, .prec = KPREC_FP32, .N = N, .C = C};
    a.f[0] = dev_values(b->k, (size_t)N * C, 2, 7);
    a.f[1] = b->k->alloc((size_t)N * C * sizeof(float));
    a.f[2] = b->k->alloc((size_t)N * sizeof(float));
    a.f[3] = b->k->alloc((size_t)N * sizeof(float));
    a.f[4] = dev_values(b->k, (size_t)C, 1, 8);
    a.f[5] = dev_values(b->k, (size_t)2 * C, 0.1f, 9);
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d C=%d", N, C);
    double nc = (double)N * C * sizeof(float);
    run_case(b, "layernorm_forward", &a, shape, op_layernorm_fwd, 2 * nc, 0);
    run_case(b, "layernorm_backward", &a, shape, op_layernorm_bwd, 4 * nc, 0); /* inp, dout, dinp r+w */
    free_args(&a);

    a.n = (size_t)N * 4 * C;
    for (int i = 0; i < 3; i++)
        a.f[i] = dev_values(b->k, a.n, 2, 10 + i);
    snprintf(shape, sizeof shape, "n=%zu", a.n);
    double n4 = (double)a.n * sizeof(float);
    run_case(b, "gelu_forward", &a, shape, op_gelu_fwd, 2 * n4, 0);
    run_case(b, "gelu_backward", &a, shape, op_gelu_bwd, 4 * n4, 0); /* inp, dout, dinp r+w */
    run_case(b, "residual_forward", &a, shape, op_residual, 3 * n4, 0);
    free_args(&a);
}

/* The LM head's loss over a vocabulary V, and a plain row softmax of the same shape. */
static void bench_loss(const bench *b, int N, int V)
{
    args a = {.k = b->k, .prec = KPREC_FP32, .N = N, .V = V};
    a.f[0] = dev_values(b->k, (size_t)N * V, 4, 13);
    a.f[1] = b->k->alloc((size_t)N * V * sizeof(float));
    a.f[2] = b->k->alloc((size_t)N * V * sizeof(float));
    a.tok = dev_tokens(b->k, (size_t)N, V);
    char shape[64];
    snprintf(shape, sizeof shape, "N=%d V=%d", N, V);
    double nv = (double)N * V * sizeof(float);
    run_case(b, "cross_entropy_forward", &a, shape, op_ce_fwd, nv, 0);
    run_case(b, "cross_entropy_backward", &a, shape, op_ce_bwd, 3 * nv, 0);
    run_case(b, "softmax_forward", &a, shape, op_softmax, 2 * nv, 0);
    free_args(&a);
}

static void bench_encoder(const bench *b, int B, int T, int C, int V)
{
    args a = {.k = b->k, .prec = KPREC_FP32, .B = B, .T = T, .C = C, .V = V};
    a.f[0] = dev_values(b->k, (size_t)V * C, 1, 14);
    a.f[1] = dev_values(b->k, (size_t)T * C, 1, 15);
    a.f[2] = b->k->alloc((size_t)B * T * C * sizeof(float));
    a.f[3] = b->k->alloc((size_t)V * C * sizeof(float));
    a.f[4] = b->k->alloc((size_t)T * C * sizeof(float));
    a.tok = dev_tokens(b->k, (size_t)B * T, V);
    char shape[64];
    snprintf(shape, sizeof shape, "B=%d T=%d C=%d", B, T, C);
    double btc = (double)B * T * C * sizeof(float);
    run_case(b, "encoder_forward", &a, shape, op_encoder_fwd, 3 * btc, 0);
    run_case(b, "encoder_backward", &a, shape, op_encoder_bwd, 5 * btc, 0); /* dout, dwte r+w, dwpe r+w */
    free_args(&a);
}

/* Optimizer-sized vectors: AdamW, the gradient-norm and overflow reductions, precision casts. */
static void bench_vector(const bench *b, size_t n)
{
    args a = {.k = b->k, .prec = KPREC_FP32, .n = n};
    a.f[0] = dev_values(b->k, n, 1, 16);
    a.f[1] = dev_values(b->k, n, 1e-3f, 17);
    a.f[2] = b->k->alloc(n * sizeof(float));
    a.f[3] = b->k->alloc(n * sizeof(float));
    a.h = b->k->alloc(n * sizeof(uint16_t));
    char shape[64];
    snprintf(shape, sizeof shape, "n=%zu", n);
    double v = (double)n * sizeof(float);
    run_case(b, "adamw_update", &a, shape, op_adamw, 7 * v, 0); /* read p g m v, write p m v */
    run_case(b, "sum_squares", &a, shape, op_sum_squares, v, 0);
    run_case(b, "has_inf_or_nan", &a, shape, op_has_inf, v, 0);
    for (int p = KPREC_BF16; p <= KPREC_FP16; p++) {
        a.prec = (kernels_precision)p;
        run_case(b, "round_to_precision", &a, shape, op_round, 2 * v, 0);
        run_case(b, "cast_to_half", &a, shape, op_cast_to, 1.5 * v, 0);
        run_case(b, "cast_from_half", &a, shape, op_cast_from, 1.5 * v, 0);
    }
    free_args(&a);
}

static int usage(FILE *f, int rc)
{
    fprintf(f, "usage: kernels_bench [--backend cpu|cuda] [--quick] [--repeats R]\n"
               "  Times every kernel of the backend (median of R repeats after a warm-up) and prints\n"
               "  op, shape, milliseconds and GFLOP/s or GB/s. --quick: fewer, smaller sizes.\n"
               "  Exits 77 when the backend is not available here.\n");
    return rc;
}

int main(int argc, char **argv)
{
    const char *backend = "cpu";
    int quick = 0, repeats = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) {
            repeats = atoi(argv[++i]);
            if (repeats < 1 || repeats > MAX_REPEATS) {
                fprintf(stderr, "kernels_bench: --repeats must be in 1..%d\n", MAX_REPEATS);
                return 2;
            }
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return usage(stdout, 0);
        else {
            fprintf(stderr, "kernels_bench: unknown argument %s\n", argv[i]);
            return usage(stderr, 2);
        }
    }
    const kernels_backend *k;
    char why[256] = "";
    if (!strcmp(backend, "cpu"))
        k = kernels_cpu();
    else if (!strcmp(backend, "cuda"))
        k = kernels_cuda(why, sizeof why);
    else {
        fprintf(stderr, "kernels_bench: --backend must be cpu or cuda, not %s\n", backend);
        return 2;
    }
    if (!k) {
        printf("kernels_bench: no %s backend here: %s\n", backend, why[0] ? why : "unavailable");
        return 77;
    }
    int gpu = strcmp(k->name, "cpu") != 0;
    bench b = {k, k->event_create(), k->event_create(), repeats ? repeats : quick ? 3 : 9};

    /* GPT-2 124M widths (C 768, 12 heads, vocabulary 50304). The token counts are what a
     * micro-batch holds; the CPU gets fewer so that a run takes seconds, not hours. */
    const int C = 768, NH = 12;
    int tokens_gpu[] = {2048, 8192}, tokens_cpu[] = {128, 512};
    const int *tokens = gpu ? tokens_gpu : tokens_cpu;
    int ntok = quick ? 1 : 2;
    int V = gpu ? 50304 : 8192;

    printf("kernels_bench: backend %s, median of %d repeats after a warm-up%s\n", k->name, b.repeats,
           quick ? ", quick" : "");
    printf("%-28s %-26s %11s %10s\n", "op", "shape", "ms", "rate");
    for (int i = 0; i < ntok; i++) {
        int N = tokens[i];
        bench_matmul(&b, N, C, KPREC_FP32);
        bench_matmul(&b, N, C, KPREC_BF16);
        bench_pointwise(&b, N, C);
        bench_loss(&b, gpu ? N / 4 : N / 8, V);
    }
    /* Attention grows as T^2: the CPU's scalar reference stops at T = 256. */
    int Ts_gpu[] = {1024, 2048}, Ts_cpu[] = {128, 256};
    for (int i = 0; i < ntok; i++) {
        int T = gpu ? Ts_gpu[i] : Ts_cpu[i], B = gpu ? 8192 / T : 1;
        bench_attention(&b, B, T, C, NH, KPREC_FP32);
        bench_attention(&b, B, T, C, NH, KPREC_BF16);
    }
    bench_encoder(&b, gpu ? 8 : 1, gpu ? 1024 : 256, C, V);
    bench_vector(&b, gpu ? (size_t)124 << 20 : (quick ? (size_t)1 << 20 : (size_t)8 << 20));
    k->event_destroy(b.start);
    k->event_destroy(b.end);
    return 0;
}
