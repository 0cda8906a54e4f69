/* dtcal kernels; see kernels_cal.h. Each measurement: warm-up, then the median of repeats
 * timed with the backend's events; inputs rotate over several buffers so caches do not flatter
 * the memory-bound ops. Progress goes to stderr. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels_cal.h"

#define ROTATE 4

typedef struct {
    const kernels_backend *k;
    kernels_event *a, *b;
    int repeats;
    float *scratch;     /* CPU: a buffer a single-threaded kernel works on between repeats */
    size_t scratch_n;
    const kernels_gemm_beside *beside; /* around every timed call, or NULL */
} timer;

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

typedef void (*op_fn)(void *ctx, int which);

static double median_time(timer *t, op_fn fn, void *ctx)
{
    double *v = malloc((size_t)t->repeats * sizeof *v);
    if (!v)
        return -1;
    fn(ctx, 0);
    t->k->synchronize();
    for (int r = 0; r < t->repeats; r++) {
        /* On the CPU, as in training, each kernel follows other (single-threaded) work: BLAS
         * worker threads are idle again and caches hold other data. Not timed. */
        if (t->scratch)
            t->k->gelu_forward(t->scratch, t->scratch + t->scratch_n / 2, t->scratch_n / 2, KPREC_FP32);
        if (t->beside)
            t->beside->before(t->beside->ctx);
        t->k->event_record(t->a);
        fn(ctx, r % ROTATE);
        t->k->event_record(t->b);
        v[r] = t->k->event_elapsed_s(t->a, t->b);
        if (t->beside)
            t->beside->after(t->beside->ctx);
    }
    qsort(v, (size_t)t->repeats, sizeof v[0], cmp_double);
    double median = v[t->repeats / 2];
    free(v);
    return median;
}

static float *dev_fill(const kernels_backend *k, size_t n)
{
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        h[i] = (float)((i * 2654435761u) % 2000) / 1000.0f - 1.0f;
    float *d = k->alloc(n * sizeof(float));
    k->copy_to_device(d, h, n * sizeof(float));
    free(h);
    return d;
}

/* GEMM inputs up to this many elements rotate over the ROTATE buffers; a larger operand is far
 * bigger than any cache, so one buffer serves (rotating 17 GB operands would not fit a GPU). */
#define ROTATE_MAX_GEMM_ELEMS ((size_t)64 << 20)

typedef struct {
    const kernels_backend *k;
    float *in[ROTATE], *w, *out;
    float *in_big; /* GEMM inputs of more than ROTATE_MAX_GEMM_ELEMS (NULL when none) */
    int m, n, kk, B, T, C, NH;
    int hd; /* rope's head size */
    kernels_precision prec;
    int *tok;
} bufs;

static void gemm_op(void *p, int i)
{
    bufs *b = p;
    /* with a bias, as the engine runs its linear layers */
    const float *in = (size_t)b->m * b->kk > ROTATE_MAX_GEMM_ELEMS ? b->in_big : b->in[i];
    b->k->matmul_forward(b->out, in, b->w, b->w, b->m, b->kk, b->n, b->prec);
}

static void layernorm_op(void *p, int i)
{
    bufs *b = p;
    b->k->layernorm_forward(b->out, b->w, b->w + b->m, b->in[i], b->w, b->w, b->m, b->C);
}

/* Backward kernels: gradients into out (dinp) and w (dweight, dbias), inputs rotated. */
static void layernorm_bwd_op(void *p, int i)
{
    bufs *b = p;
    b->k->layernorm_backward(b->out, b->w, b->w + b->C, b->in[i], b->in[(i + 1) % ROTATE], b->w + 2 * b->C,
                             b->w + 3 * b->C, b->w + 3 * b->C + b->m, b->m, b->C);
}

static void gelu_bwd_op(void *p, int i)
{
    bufs *b = p;
    b->k->gelu_backward(b->out, b->in[i], b->in[(i + 1) % ROTATE], (size_t)b->m * b->C, KPREC_FP32);
}

static void gelu_op(void *p, int i)
{
    bufs *b = p;
    b->k->gelu_forward(b->out, b->in[i], (size_t)b->m * b->C, KPREC_FP32);
}

/* RMSNorm as the LayerNorm above: rstd into w, the weight from w. */
static void rmsnorm_op(void *p, int i)
{
    bufs *b = p;
    b->k->rmsnorm_forward(b->out, b->w, b->in[i], b->w, b->m, b->C);
}

static void rmsnorm_bwd_op(void *p, int i)
{
    bufs *b = p;
    b->k->rmsnorm_backward(b->out, b->w, b->in[i], b->in[(i + 1) % ROTATE], b->w + 2 * b->C, b->w + 3 * b->C, b->m,
                           b->C);
}

/* SwiGLU over rows of C = gate and up halves of C/2 each. */
static void swiglu_op(void *p, int i)
{
    bufs *b = p;
    b->k->swiglu_forward(b->out, b->in[i], b->m, b->C / 2, KPREC_FP32);
}

static void swiglu_bwd_op(void *p, int i)
{
    bufs *b = p;
    b->k->swiglu_backward(b->out, b->in[i], b->in[(i + 1) % ROTATE], b->m, b->C / 2, KPREC_FP32);
}

/* Rotary embeddings over every head of rows of C (in place: the rotation keeps values bounded). */
static void rope_op(void *p, int i)
{
    bufs *b = p;
    b->k->rope_forward(b->in[i], NULL, 1, b->m, b->C, b->C / b->hd, b->hd, 10000.0f);
}

static void rope_bwd_op(void *p, int i)
{
    bufs *b = p;
    b->k->rope_backward(b->in[i], NULL, 1, b->m, b->C, b->C / b->hd, b->hd, 10000.0f);
}

static void residual_op(void *p, int i)
{
    bufs *b = p;
    b->k->residual_forward(b->out, b->in[i], b->in[(i + 1) % ROTATE], (size_t)b->m * b->C, KPREC_FP32);
}

static void softmax_op(void *p, int i)
{
    bufs *b = p;
    b->k->softmax_forward(b->out, b->in[i], b->m, b->C);
}

static void ce_op(void *p, int i)
{
    bufs *b = p;
    b->k->cross_entropy_forward(b->out, b->in[i], b->tok, b->m, b->C);
}

static void adamw_op(void *p, int i)
{
    bufs *b = p;
    size_t n = (size_t)b->m * b->C / 4;
    b->k->adamw_update(b->in[i], b->in[(i + 1) % ROTATE], b->in[(i + 2) % ROTATE], b->in[(i + 3) % ROTATE], n, 1e-4f,
                       0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f);
}

static void embedding_op(void *p, int i)
{
    bufs *b = p;
    b->k->encoder_forward(b->out, b->tok, b->in[i], b->w, b->B, b->T, b->C);
}

static void attention_op(void *p, int i)
{
    bufs *b = p;
    b->k->attention_forward(b->out, b->w, b->in[i], b->B, b->T, b->C, b->NH, b->prec);
}

/* The backward of the forward above, on stand-in inputs of the same sizes: dqkv into out,
 * dout, the forward's out and lse from the other rotating buffers and w (values in [-1, 1), so
 * every exp stays finite). */
static void attention_bwd_op(void *p, int i)
{
    bufs *b = p;
    b->k->attention_backward(b->out, b->in[(i + 1) % ROTATE], b->in[i], b->in[(i + 2) % ROTATE], b->w, b->B, b->T,
                             b->C, b->NH, b->prec);
}

static void tiny_op(void *p, int i)
{
    bufs *b = p;
    b->k->residual_forward(b->out, b->in[i], b->in[i], 1, KPREC_FP32);
}

static timer timer_open(const kernels_backend *k, int repeats)
{
    timer t = {k, k->event_create(), k->event_create(), repeats, NULL, 0, NULL};
    if (strcmp(k->name, "cuda")) {
        t.scratch_n = (size_t)1 << 20; /* ~2 ms of GELU: longer than BLAS threads spin */
        t.scratch = dev_fill(k, t.scratch_n);
    }
    return t;
}

static void timer_close(timer *t)
{
    if (t->scratch)
        t->k->free(t->scratch);
    t->k->event_destroy(t->a);
    t->k->event_destroy(t->b);
}

double kernels_gemm_tflops(const kernels_backend *k, kernels_precision prec, int m, int n, int kk, int repeats)
{
    double s = kernels_gemm_seconds(k, prec, m, n, kk, repeats, NULL);
    return s > 0 ? 2.0 * m * (double)n * kk / s / 1e12 : -1;
}

double kernels_gemm_seconds(const kernels_backend *k, kernels_precision prec, int m, int n, int kk, int repeats,
                            const kernels_gemm_beside *beside)
{
    timer t = timer_open(k, repeats);
    t.beside = beside;
    bufs b;
    memset(&b, 0, sizeof b);
    b.k = k;
    b.prec = prec;
    b.m = m;
    b.n = n;
    b.kk = kk;
    size_t in = (size_t)m * kk;
    if (in > ROTATE_MAX_GEMM_ELEMS)
        b.in_big = dev_fill(k, in);
    else
        for (int r = 0; r < ROTATE; r++)
            b.in[r] = dev_fill(k, in);
    b.w = dev_fill(k, (size_t)n * kk); /* its first n elements are the bias */
    b.out = dev_fill(k, (size_t)m * n);
    double s = median_time(&t, gemm_op, &b);
    for (int r = 0; r < ROTATE; r++)
        if (b.in[r])
            k->free(b.in[r]);
    if (b.in_big)
        k->free(b.in_big);
    k->free(b.w);
    k->free(b.out);
    timer_close(&t);
    return s > 0 ? s : -1;
}

/* The grid's largest GEMMs are left out: past about 1e12 FLOPs (8192^3 is 1.1e12) a GEMM runs
 * for milliseconds at a rate that no longer grows with its size, so the simulator's table
 * lookup gives larger shapes the best measured rate (sim/step/cost.c), while the grid's corner,
 * 65536 tokens by a 16384 x 65536 weight, is 1.4e17 FLOPs: an hour in fp32 on an H200
 * (measured 2026-11-26: dtcal kernels ran past 170 s inside the fp32 grid). 4e12 FLOPs is
 * 0.1 s at the engine's fp32 rate there (kernels_bench: 44 TFLOP/s). */
#define GEMM_MAX_FLOP 4e12

#define ATT_TOKENS_GPU 8192 /* tokens of one attention call (a micro-batch's worth) */
#define ATT_TOKENS_CPU 512

/* Attention rows of the calibration's table, appended to `rows`, each with the precision it
 * ran in; returns the rate of the last (largest) shape. FLOPs in the DESIGN convention (4 B T^2 C
 * forward, twice that backward). Every octave of sequence on a GPU: the simulator takes the
 * nearest measured sequence, and the rate changes fast with it (H100, 2026-11-26: 15.9 TFLOP/s
 * at 512, 26.2 at 2048). Each shape at a micro-batch's worth of tokens (B = tokens / T, at least
 * 1), as a training step calls it (at batch 1 each call's fixed costs weighed more than in the
 * run: on an H200 the batch-1 table put GPT-2 124M's attention, batch 8, 27% slow), and at
 * several head counts: how many (sequence, head) pairs a call has sets how much of the device
 * it fills (H100: T 1,024, B 8, 12 heads 18.7 TFLOP/s, 16 heads 21.1). 12 heads is measured, not
 * interpolated: GPT-2 124M (the closed loop's model) has 12, and on an H200 its attention ran
 * below the log-interpolation of 8 and 16 heads (2026-11-27, bf16 backward 16.5 TFLOP/s in the
 * step; 8 heads 16.8, 16 heads 19.5). */
static const int att_seqs_cpu[] = {64, 256}, att_seqs_gpu[] = {512, 1024, 2048, 4096, 8192};
static const int att_hds_cpu[] = {32, 64}, att_hds_gpu[] = {64, 128}; /* ascending: the last is the largest */
static const int att_heads_cpu[] = {4}, att_heads_gpu[] = {8, 12, 16, 32}; /* ascending */
#define ATT_HEADS_GPU ((int)(sizeof att_heads_gpu / sizeof att_heads_gpu[0]))

/* Floats of the largest q, k, v attention_rows times: tokens x 3 x most heads x widest head. */
static size_t attention_largest_qkv(int gpu)
{
    return gpu ? (size_t)ATT_TOKENS_GPU * 3 * att_heads_gpu[ATT_HEADS_GPU - 1] * att_hds_gpu[1]
               : (size_t)ATT_TOKENS_CPU * 3 * att_heads_cpu[0] * att_hds_cpu[1];
}

static double attention_rows(timer *t, bufs *b, int gpu, int quick, const char *prec_name, json_t *rows)
{
    const int *seqs = gpu ? att_seqs_gpu : att_seqs_cpu, *hds = gpu ? att_hds_gpu : att_hds_cpu;
    const int *heads = gpu ? (quick ? att_heads_gpu + 2 /* 16 */ : att_heads_gpu) : att_heads_cpu;
    int nseq = gpu ? (quick ? 2 : 5) : 2, nhd = 2, nheads = gpu ? (quick ? 1 : ATT_HEADS_GPU) : 1;
    int att_tokens = gpu ? ATT_TOKENS_GPU : ATT_TOKENS_CPU;
    double tf = 0;
    for (int si = 0; si < nseq; si++)
        for (int hi = 0; hi < nhd; hi++)
            for (int ni = 0; ni < nheads; ni++) {
                b->B = seqs[si] < att_tokens ? att_tokens / seqs[si] : 1;
                b->T = seqs[si];
                b->NH = heads[ni];
                b->C = b->NH * hds[hi];
                double s = median_time(t, attention_op, b);
                tf = 4.0 * b->B * (double)b->T * b->T * b->C / s / 1e12;
                double sb = median_time(t, attention_bwd_op, b);
                double bwd_tf = 8.0 * b->B * (double)b->T * b->T * b->C / sb / 1e12;
                json_array_append_new(rows, json_pack("{s:i,s:i,s:i,s:s,s:f,s:f}", "seq", b->T, "head_dim", hds[hi],
                                                      "batch", b->B * b->NH, "precision", prec_name, "tflops", tf,
                                                      "tflops_backward", bwd_tf));
                fprintf(stderr, "  attention    %s T=%-5d head dim %-4d B %-3d heads %-3d %.4f TFLOP/s, backward %.4f\n",
                        prec_name, b->T, hds[hi], b->B, b->NH, tf, bwd_tf);
            }
    return tf;
}

int kernels_calibrate(const kernels_backend *k, kernels_precision prec, int quick, double peak_tflops, int gemm_only,
                      json_t *doc)
{
    timer t = timer_open(k, quick ? 5 : 11);
    int gpu = !strcmp(k->name, "cuda");
    const char *prec_name = prec == KPREC_BF16 ? "bf16" : prec == KPREC_FP16 ? "fp16" : "fp32";

    /* GEMMs: token counts x (hidden split by TP) shapes transformer layers produce. */
    int tokens_cpu[] = {256, 1024}, tokens_gpu[] = {1024, 4096, 16384, 65536};
    int hidden_cpu[] = {128, 512, 1024}, hidden_gpu[] = {512, 1024, 2048, 4096, 8192, 16384};
    int *tok = gpu ? tokens_gpu : tokens_cpu, *hid = gpu ? hidden_gpu : hidden_cpu;
    int ntok = gpu ? (quick ? 2 : 4) : (quick ? 1 : 2), nhid = gpu ? (quick ? 3 : 6) : (quick ? 2 : 3);
    json_t *table = json_array();
    double best_gemm = 0;
    int best_shape[3] = {0, 0, 0};
    /* Sizes, in floats: the largest GEMM input (m x k), output (m x n) and weight (k x n) of
     * the grid (on a GPU also the square 8192^3 GEMM the datasheets' peaks are usually quoted
     * at), and what the rotating buffers must hold. */
    size_t max_in = 0, max_out = 0, wmax = 0, rot_elems = 0;
    for (int a = 0; a < ntok; a++)
        for (int h = 0; h < nhid; h++)
            for (int shape = 0; shape < 3; shape++) {
                size_t m = (size_t)tok[a], n = (size_t)(shape == 0 ? 3 : shape == 1 ? 4 : 1) * hid[h],
                       kk = (size_t)(shape == 2 ? 4 : 1) * hid[h];
                if (2.0 * m * n * kk > GEMM_MAX_FLOP)
                    continue;
                max_in = m * kk > max_in ? m * kk : max_in;
                max_out = m * n > max_out ? m * n : max_out;
                wmax = kk * n > wmax ? kk * n : wmax;
                if (m * kk <= ROTATE_MAX_GEMM_ELEMS && m * kk > rot_elems)
                    rot_elems = m * kk;
            }
    const int square = 8192;
    if (gpu) {
        size_t sq = (size_t)square * square;
        max_in = sq > max_in ? sq : max_in;
        max_out = sq > max_out ? sq : max_out;
        wmax = sq > wmax ? sq : wmax;
    }
    /* Room for the memory-bound ops and the loss below too. */
    int rows = gpu ? 16384 : 2048, C = gpu ? 4096 : 1024, V = gpu ? 32768 : 4096, N = gpu ? 4096 : 256;
    if ((size_t)rows * C > rot_elems)
        rot_elems = (size_t)rows * C;
    if ((size_t)N * V > rot_elems)
        rot_elems = (size_t)N * V;
    if (attention_largest_qkv(gpu) > rot_elems) /* and attention_rows' largest q, k, v */
        rot_elems = attention_largest_qkv(gpu);
    if (rot_elems > max_out)
        max_out = rot_elems;
    bufs b;
    memset(&b, 0, sizeof b);
    b.k = k;
    b.prec = prec;
    for (int r = 0; r < ROTATE; r++)
        b.in[r] = dev_fill(k, rot_elems);
    if (max_in > ROTATE_MAX_GEMM_ELEMS)
        b.in_big = dev_fill(k, max_in);
    b.w = dev_fill(k, wmax);
    b.out = dev_fill(k, max_out);
    int done = 0, total = ntok * nhid * 3;
    for (int a = 0; a < ntok; a++)
        for (int h = 0; h < nhid; h++)
            for (int shape = 0; shape < 3; shape++) {
                /* (tokens x h) by (h x 3h): QKV; (tokens x h)(h x 4h): FC1; (tokens x 4h)(4h x h): FC2 */
                int n = shape == 0 ? 3 * hid[h] : shape == 1 ? 4 * hid[h] : hid[h];
                int kk = shape == 2 ? 4 * hid[h] : hid[h];
                if (2.0 * tok[a] * n * kk > GEMM_MAX_FLOP) {
                    total--;
                    continue;
                }
                b.m = tok[a];
                b.n = n;
                b.kk = kk;
                double s = median_time(&t, gemm_op, &b);
                double tf = 2.0 * b.m * (double)n * kk / s / 1e12;
                if (tf > best_gemm) {
                    best_gemm = tf;
                    best_shape[0] = b.m, best_shape[1] = n, best_shape[2] = kk;
                }
                json_array_append_new(table, json_pack("{s:i,s:i,s:i,s:f}", "m", b.m, "n", n, "k", kk, "tflops", tf));
                fprintf(stderr, "\r  gemm %d/%d  (%d x %d x %d: %.3f TFLOP/s)      ", ++done, total, b.m, n, kk, tf);
            }
    fprintf(stderr, "\n");
    if (gpu) {
        b.m = b.n = b.kk = square;
        double s = median_time(&t, gemm_op, &b);
        double tf = 2.0 * square * (double)square * square / s / 1e12;
        json_array_append_new(table, json_pack("{s:i,s:i,s:i,s:f}", "m", square, "n", square, "k", square, "tflops", tf));
        fprintf(stderr, "  gemm %d^3 (%s, the engine's matmul: casts included): %.1f TFLOP/s\n", square, prec_name, tf);
        if (tf > best_gemm) {
            best_gemm = tf;
            best_shape[0] = best_shape[1] = best_shape[2] = square;
        }
    }
    fprintf(stderr, "  best gemm: %.4g TFLOP/s at %d x %d x %d\n", best_gemm, best_shape[0], best_shape[1], best_shape[2]);
    json_t *gemm = json_object_get(doc, "gemm");
    if (!json_is_object(gemm)) {
        gemm = json_object();
        json_object_set_new(doc, "gemm", gemm);
    }
    json_object_set_new(gemm, prec_name, table);
    if (gemm_only) {
        /* the engine's attention runs differently in each precision (rounding passes around
         * fp32 products): its rows in this one too, beside the first precision's */
        json_t *att_table = json_object_get(json_object_get(json_object_get(doc, "ops"), "attention"), "table");
        if (json_is_array(att_table))
            attention_rows(&t, &b, gpu, quick, prec_name, att_table);
        goto done;
    }

    /* Memory-bound ops at a large size: bytes moved / time. */
    json_t *ops = json_object();
    b.m = rows;
    b.C = C;
    b.B = 1;
    b.T = rows;
    b.hd = gpu ? 128 : 64; /* Llama's head size; GPT-2 124M's on the CPU */
    double el = (double)rows * C;
    /* bwd: the class's backward kernel where the engine has one, written as a rate in the op
     * list's byte count for a backward op (twice the forward's bytes), so the simulator charges
     * the measured backward time whatever the kernel really moves. */
    struct { const char *name; op_fn fn, bwd; double bytes; } mem[] = {
        {"layernorm", layernorm_op, layernorm_bwd_op, 2 * el * 4}, {"gelu", gelu_op, gelu_bwd_op, 2 * el * 4},
        {"elementwise", residual_op, NULL, 3 * el * 4},            {"softmax", softmax_op, NULL, 2 * el * 4},
        {"adamw", adamw_op, NULL, 7 * el}, /* 28 bytes per parameter, n = el/4 */
        /* Llama's ops, each in the op list's byte count: RMSNorm as LayerNorm (read and write
         * the rows), SwiGLU reads 2F and writes F per row (F = C/2 here), rope reads and writes
         * the heads it turns */
        {"rmsnorm", rmsnorm_op, rmsnorm_bwd_op, 2 * el * 4}, {"swiglu", swiglu_op, swiglu_bwd_op, 1.5 * el * 4},
        {"rope", rope_op, rope_bwd_op, 2 * el * 4},
    };
    for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++) {
        double s = median_time(&t, mem[i].fn, &b);
        json_t *op = json_pack("{s:f}", "gbs", mem[i].bytes / s / 1e9);
        fprintf(stderr, "  %-12s %.1f GB/s\n", mem[i].name, mem[i].bytes / s / 1e9);
        if (mem[i].bwd) {
            double sb = median_time(&t, mem[i].bwd, &b);
            json_object_set_new(op, "gbs_backward", json_real(2 * mem[i].bytes / sb / 1e9));
            fprintf(stderr, "  %-12s backward in %.3f ms, %.2fx its forward\n", mem[i].name, sb * 1e3, sb / s);
        }
        json_object_set_new(ops, mem[i].name, op);
    }
    /* Cross-entropy over a vocabulary and embedding lookups need token ids. */
    int *host_tok = calloc((size_t)(rows > N ? rows : N), sizeof(int));
    for (int i = 0; i < (rows > N ? rows : N); i++)
        host_tok[i] = (int)((i * 2654435761u) % (unsigned)(V < C ? V : C));
    b.tok = k->alloc((size_t)(rows > N ? rows : N) * sizeof(int));
    k->copy_to_device(b.tok, host_tok, (size_t)(rows > N ? rows : N) * sizeof(int));
    free(host_tok);
    b.m = N;
    b.C = V;
    double s = median_time(&t, ce_op, &b);
    json_object_set_new(ops, "cross_entropy", json_pack("{s:f}", "gbs", (double)N * V * 4 / s / 1e9));
    fprintf(stderr, "  %-12s %.1f GB/s\n", "cross_entropy", (double)N * V * 4 / s / 1e9);
    b.B = 1;
    b.T = N < 1024 ? N : 1024;
    b.C = 1024 < C ? 1024 : C;
    s = median_time(&t, embedding_op, &b);
    json_object_set_new(ops, "embedding", json_pack("{s:f}", "gbs", 3.0 * b.T * b.C * 4 / s / 1e9));

    /* Attention: the engine's fused kernel; the table the simulator looks up, plus the
     * efficiency of the largest shape against the platform's peak (the best GEMM when no
     * platform is given). Later precisions add their own rows (above, before `done`). */
    json_t *att_table = json_array();
    double att_tf = attention_rows(&t, &b, gpu, quick, prec_name, att_table);
    double peak = peak_tflops > 0 ? peak_tflops : best_gemm;
    json_object_set_new(ops, "attention", json_pack("{s:f,s:o}", "efficiency", fmin(1.0, att_tf / peak), "table", att_table));
    json_object_set_new(doc, "ops", ops);

    /* Launch overhead: the time of a kernel that does (almost) nothing. */
    b.m = 1;
    double launch = median_time(&t, tiny_op, &b);
    json_object_set_new(doc, "launch_overhead_us", json_real(launch * 1e6));
    k->free(b.tok);
done:
    for (int r = 0; r < ROTATE; r++)
        k->free(b.in[r]);
    if (b.in_big)
        k->free(b.in_big);
    k->free(b.w);
    k->free(b.out);
    timer_close(&t);
    return 0;
}
