/* GPT-2 forward and backward through the kernel table; see gpt.h. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "gpt.h"
#include "rng.h"

#define MAX_LAYERS 1024
#define MAX_HIDDEN 65536

int gpt_config_validate(const gpt_config *c, char *err, size_t errlen)
{
    if (c->num_layers < 1 || c->num_layers > MAX_LAYERS || c->hidden < 1 || c->hidden > MAX_HIDDEN || c->heads < 1 ||
        c->seq_len < 1 || c->seq_len > 1048576 || c->vocab < 2 || c->vocab > 10000000) {
        snprintf(err, errlen, "model sizes out of range: layers %d (1..%d), hidden %d (1..%d), heads %d, seq_len %d, "
                              "vocab %d", c->num_layers, MAX_LAYERS, c->hidden, MAX_HIDDEN, c->heads, c->seq_len, c->vocab);
        return -1;
    }
    if (c->hidden % c->heads) {
        snprintf(err, errlen, "hidden %d is not a multiple of heads %d", c->hidden, c->heads);
        return -1;
    }
    return 0;
}

int gpt_config_from_name(const char *name, int tokenizer_vocab, gpt_config *cfg, char *err, size_t errlen)
{
    if (!strcmp(name, "tiny")) {
        *cfg = (gpt_config){4, 128, 4, 64, tokenizer_vocab};
    } else if (!strcmp(name, "small")) {
        /* GPT-2 124M; its 50257-token vocabulary padded to 50304 (a multiple of 128, as
         * llm.c does). The byte tokenizer uses ids 0..255 of it. */
        *cfg = (gpt_config){12, 768, 12, 1024, 50304};
    } else {
        memset(cfg, 0, sizeof *cfg);
        json_error_t je;
        json_t *root = json_load_file(name, JSON_REJECT_DUPLICATES, &je);
        if (!root) {
            snprintf(err, errlen, "--model %s: not tiny, small, or a readable JSON file (%s at line %d)", name, je.text,
                     je.line);
            return -1;
        }
        static const char *const keys[] = {"num_layers", "hidden", "heads", "seq_len", "vocab"};
        int *dst[] = {&cfg->num_layers, &cfg->hidden, &cfg->heads, &cfg->seq_len, &cfg->vocab};
        cfg->vocab = tokenizer_vocab;
        const char *key;
        json_t *val;
        json_object_foreach(root, key, val) {
            int found = -1;
            for (int i = 0; i < 5; i++)
                if (!strcmp(key, keys[i]))
                    found = i;
            if (found < 0 || !json_is_integer(val) || json_integer_value(val) > 100000000 || json_integer_value(val) < 0) {
                snprintf(err, errlen, "%s: key '%s': %s", name, key,
                         found < 0 ? "unknown (expected num_layers, hidden, heads, seq_len, vocab)" : "must be an integer");
                json_decref(root);
                return -1;
            }
            *dst[found] = (int)json_integer_value(val);
        }
        for (int i = 0; i < 4; i++)
            if (!json_object_get(root, keys[i])) {
                snprintf(err, errlen, "%s: '%s' is required", name, keys[i]);
                json_decref(root);
                return -1;
            }
        json_decref(root);
    }
    if (cfg->vocab < tokenizer_vocab) {
        snprintf(err, errlen, "model vocab %d is smaller than the tokenizer's %d", cfg->vocab, tokenizer_vocab);
        return -1;
    }
    return gpt_config_validate(cfg, err, errlen);
}

/* ---- parameters ------------------------------------------------------------------------ */
static size_t layer_tensor_count(const gpt_config *c, int j)
{
    size_t C = (size_t)c->hidden;
    static const int mult_rows[LAYER_TENSORS] = {1, 1, 3, 3, 1, 1, 1, 1, 4, 4, 1, 1};
    static const int is_matrix[LAYER_TENSORS] = {0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 0};
    size_t rows = mult_rows[j] * C;
    if (is_matrix[j] == 4)
        return C * 4 * C; /* fcproj_w (C, 4C) */
    return is_matrix[j] ? rows * C : rows;
}

int gpt_layer_tensor(const gpt_model *m, int layer, int j)
{
    return 2 + layer * LAYER_TENSORS + j;
}

int gpt_lnf_w(const gpt_model *m)
{
    return 2 + m->cfg.num_layers * LAYER_TENSORS;
}

float *gpt_param(const gpt_model *m, int t)
{
    return m->params + m->tensors[t].offset;
}

float *gpt_grad(const gpt_model *m, int t)
{
    return m->grads + m->tensors[t].offset;
}

static void layout(gpt_model *m)
{
    const gpt_config *c = &m->cfg;
    m->num_tensors = 2 + LAYER_TENSORS * c->num_layers + 2;
    m->tensors = calloc((size_t)m->num_tensors, sizeof *m->tensors);
    size_t off = 0;
    int t = 0;
    size_t counts[2] = {(size_t)c->vocab * c->hidden, (size_t)c->seq_len * c->hidden};
    for (int i = 0; i < 2; i++, t++) {
        m->tensors[t] = (gpt_tensor){off, counts[i], 1};
        off += counts[i];
    }
    for (int l = 0; l < c->num_layers; l++)
        for (int j = 0; j < LAYER_TENSORS; j++, t++) {
            size_t n = layer_tensor_count(c, j);
            int decay = j == 2 || j == 4 || j == 8 || j == 10; /* the four weight matrices */
            m->tensors[t] = (gpt_tensor){off, n, decay};
            off += n;
        }
    for (int i = 0; i < 2; i++, t++) {
        m->tensors[t] = (gpt_tensor){off, (size_t)c->hidden, 0};
        off += (size_t)c->hidden;
    }
    m->num_params = off;
}

static float *dev(const gpt_model *m, size_t n)
{
    return m->k->alloc(n * sizeof(float));
}

void gpt_init(gpt_model *m, const gpt_config *cfg, const kernels_backend *k, kernels_precision prec, int B,
              uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->k = k;
    m->prec = prec;
    m->B = B;
    m->T = cfg->seq_len;
    layout(m);
    size_t P = m->num_params, C = (size_t)cfg->hidden, N = (size_t)B * cfg->seq_len, V = (size_t)cfg->vocab;
    m->params = dev(m, P);
    m->grads = dev(m, P);
    m->m = dev(m, P);
    m->v = dev(m, P);

    /* GPT-2 initialisation on the host, then one copy to the backend. */
    float *host = calloc(P, sizeof(float));
    rng_t r;
    rng_seed(&r, seed);
    double resid_std = 0.02 / sqrt(2.0 * cfg->num_layers);
    for (int t = 0; t < m->num_tensors; t++) {
        gpt_tensor *tt = &m->tensors[t];
        int j = t >= 2 && t < 2 + LAYER_TENSORS * cfg->num_layers ? (t - 2) % LAYER_TENSORS : -1;
        int is_norm_w = j == 0 || j == 6 || t == gpt_lnf_w(m);
        int is_bias = j == 1 || j == 3 || j == 5 || j == 7 || j == 9 || j == 11 || t == gpt_lnf_w(m) + 1;
        double std = (j == 4 || j == 10) ? resid_std : 0.02;
        for (size_t i = 0; i < tt->count; i++)
            host[tt->offset + i] = is_norm_w ? 1.0f : is_bias ? 0.0f : (float)(rng_normal(&r) * std);
    }
    k->copy_to_device(m->params, host, P * sizeof(float));
    free(host);

    m->encoded = dev(m, N * C);
    m->layers = calloc((size_t)cfg->num_layers, sizeof *m->layers);
    for (int l = 0; l < cfg->num_layers; l++) {
        gpt_layer_acts *a = &m->layers[l];
        a->ln1 = dev(m, N * C);
        a->ln1_mean = dev(m, N);
        a->ln1_rstd = dev(m, N);
        a->qkv = dev(m, N * 3 * C);
        a->atty = dev(m, N * C);
        a->lse = dev(m, N * (size_t)cfg->heads);
        a->proj = dev(m, N * C);
        a->res2 = dev(m, N * C);
        a->ln2 = dev(m, N * C);
        a->ln2_mean = dev(m, N);
        a->ln2_rstd = dev(m, N);
        a->fch = dev(m, N * 4 * C);
        a->fch_gelu = dev(m, N * 4 * C);
        a->fcproj = dev(m, N * C);
        a->res3 = dev(m, N * C);
    }
    m->lnf = dev(m, N * C);
    m->lnf_mean = dev(m, N);
    m->lnf_rstd = dev(m, N);
    m->logits = dev(m, N * V);
    m->losses = dev(m, N);
    m->tokens = k->alloc(N * sizeof(int));
    m->targets = k->alloc(N * sizeof(int));
    m->d_res = dev(m, N * C);
    m->d_a = dev(m, N * C);
    m->d_b = dev(m, N * C);
    m->d_big = dev(m, N * 4 * C);
    m->d_big2 = dev(m, N * 4 * C);
    m->d_qkv = dev(m, N * 3 * C);
    m->d_logits = dev(m, N * V);
}

void gpt_free(gpt_model *m)
{
    const kernels_backend *k = m->k;
    float **bufs[] = {&m->params, &m->grads, &m->m, &m->v, &m->encoded, &m->lnf, &m->lnf_mean, &m->lnf_rstd,
                      &m->logits, &m->losses, &m->d_res, &m->d_a, &m->d_b, &m->d_big, &m->d_big2, &m->d_qkv,
                      &m->d_logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        k->free(*bufs[i]);
    for (int l = 0; l < m->cfg.num_layers; l++) {
        gpt_layer_acts *a = &m->layers[l];
        float *p[] = {a->ln1, a->ln1_mean, a->ln1_rstd, a->qkv, a->atty, a->lse, a->proj, a->res2,
                      a->ln2, a->ln2_mean, a->ln2_rstd, a->fch, a->fch_gelu, a->fcproj, a->res3};
        for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
            k->free(p[i]);
    }
    k->free(m->tokens);
    k->free(m->targets);
    free(m->layers);
    free(m->tensors);
    memset(m, 0, sizeof *m);
}

/* ---- forward / backward ---------------------------------------------------------------- */
#define PROF_BEGIN() profiler_begin(m->prof)
/* PROF_END(name, layer, flops, bytes, shape format, ...): the shape is written only when
 * profiling, so an unprofiled run pays one branch per op. GEMM shapes use the simulator's
 * (m, n, k) of engine/oplist.h: out (m x n) = inp (m x k) @ weight^T. */
#define PROF_END(name, layer, flops, bytes, ...)                                                         \
    do {                                                                                                \
        if (m->prof) {                                                                                  \
            char shape_[48];                                                                            \
            snprintf(shape_, sizeof shape_, __VA_ARGS__);                                               \
            profiler_end(m->prof, name, layer, shape_, flops, bytes);                                   \
        }                                                                                               \
    } while (0)

/* Bytes a GEMM of (m x k) by (k x n) reads and writes in fp32 (its backward moves about twice). */
static double gemm_bytes(double mm, double n, double k)
{
    return 4.0 * (mm * k + n * k + mm * n);
}

static void hook(gpt_model *m, int first, int count, int before)
{
    if (m->param_hook)
        m->param_hook(m, first, count, before, m->param_hook_ctx);
}

static void round_act(const gpt_model *m, float *x, size_t n)
{
    if (m->prec != KPREC_FP32)
        m->k->round_to_precision(x, n, m->prec);
}

float gpt_forward(gpt_model *m, const int *tokens, const int *targets)
{
    const kernels_backend *k = m->k;
    int B = m->B, T = m->T, C = m->cfg.hidden, NH = m->cfg.heads, V = m->cfg.vocab, L = m->cfg.num_layers;
    int N = B * T;
    double f = 4.0 * (double)sizeof(float);
    k->copy_to_device(m->tokens, tokens, (size_t)N * sizeof(int));
    k->copy_to_device(m->targets, targets, (size_t)N * sizeof(int));

    hook(m, GPT_WTE, 2, 1);
    PROF_BEGIN();
    k->encoder_forward(m->encoded, m->tokens, gpt_param(m, GPT_WTE), gpt_param(m, GPT_WPE), B, T, C);
    round_act(m, m->encoded, (size_t)N * C);
    PROF_END("embedding", -1, 0, 3.0 * N * C * f / 4, "B=%d T=%d C=%d", B, T, C);

    float *x = m->encoded;
    for (int l = 0; l < L; l++) {
        gpt_layer_acts *a = &m->layers[l];
        float *w[LAYER_TENSORS];
        for (int j = 0; j < LAYER_TENSORS; j++)
            w[j] = gpt_param(m, gpt_layer_tensor(m, l, j));
        hook(m, gpt_layer_tensor(m, l, 0), LAYER_TENSORS, 1);
        PROF_BEGIN();
        k->layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, w[0], w[1], N, C);
        round_act(m, a->ln1, (size_t)N * C);
        PROF_END("ln1", l, 0, 2.0 * N * C * f / 4, "N=%d C=%d", N, C);
        PROF_BEGIN();
        k->matmul_forward(a->qkv, a->ln1, w[2], w[3], N, C, 3 * C, m->prec);
        PROF_END("qkv", l, 2.0 * N * C * 3 * C, gemm_bytes(N, 3 * C, C), "m=%d n=%d k=%d", N, 3 * C, C);
        PROF_BEGIN();
        k->attention_forward(a->atty, a->lse, a->qkv, B, T, C, NH, m->prec);
        PROF_END("attention", l, 4.0 * B * (double)T * T * C, 4.0 * N * (4.0 * C + NH),
                 "B=%d T=%d heads=%d head_dim=%d", B, T, NH, C / NH);
        PROF_BEGIN();
        k->matmul_forward(a->proj, a->atty, w[4], w[5], N, C, C, m->prec);
        PROF_END("attn_proj", l, 2.0 * N * C * C, gemm_bytes(N, C, C), "m=%d n=%d k=%d", N, C, C);
        PROF_BEGIN();
        k->residual_forward(a->res2, x, a->proj, (size_t)N * C);
        round_act(m, a->res2, (size_t)N * C);
        PROF_END("residual1", l, 0, 3.0 * N * C * f / 4, "N=%d C=%d", N, C);
        PROF_BEGIN();
        k->layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w[6], w[7], N, C);
        round_act(m, a->ln2, (size_t)N * C);
        PROF_END("ln2", l, 0, 2.0 * N * C * f / 4, "N=%d C=%d", N, C);
        PROF_BEGIN();
        k->matmul_forward(a->fch, a->ln2, w[8], w[9], N, C, 4 * C, m->prec);
        PROF_END("fc1", l, 2.0 * N * C * 4 * C, gemm_bytes(N, 4 * C, C), "m=%d n=%d k=%d", N, 4 * C, C);
        PROF_BEGIN();
        k->gelu_forward(a->fch_gelu, a->fch, (size_t)N * 4 * C);
        round_act(m, a->fch_gelu, (size_t)N * 4 * C);
        PROF_END("gelu", l, 0, 8.0 * N * C * f / 4, "n=%d", 4 * N * C);
        PROF_BEGIN();
        k->matmul_forward(a->fcproj, a->fch_gelu, w[10], w[11], N, 4 * C, C, m->prec);
        PROF_END("fc2", l, 2.0 * N * C * 4 * C, gemm_bytes(N, C, 4 * C), "m=%d n=%d k=%d", N, C, 4 * C);
        PROF_BEGIN();
        k->residual_forward(a->res3, a->res2, a->fcproj, (size_t)N * C);
        round_act(m, a->res3, (size_t)N * C);
        PROF_END("residual2", l, 0, 3.0 * N * C * f / 4, "N=%d C=%d", N, C);
        hook(m, gpt_layer_tensor(m, l, 0), LAYER_TENSORS, 0);
        x = a->res3;
    }
    int lnf = gpt_lnf_w(m);
    hook(m, lnf, 2, 1);
    PROF_BEGIN();
    k->layernorm_forward(m->lnf, m->lnf_mean, m->lnf_rstd, x, gpt_param(m, lnf), gpt_param(m, lnf + 1), N, C);
    round_act(m, m->lnf, (size_t)N * C);
    PROF_END("lnf", -1, 0, 2.0 * N * C * f / 4, "N=%d C=%d", N, C);
    PROF_BEGIN();
    k->matmul_forward(m->logits, m->lnf, gpt_param(m, GPT_WTE), NULL, N, C, V, m->prec);
    PROF_END("lm_head", -1, 2.0 * N * C * V, gemm_bytes(N, V, C), "m=%d n=%d k=%d", N, V, C);
    PROF_BEGIN();
    k->cross_entropy_forward(m->losses, m->logits, m->targets, N, V);
    PROF_END("cross_entropy", -1, 0, (double)N * V * 4, "N=%d V=%d", N, V);
    hook(m, lnf, 2, 0);
    hook(m, GPT_WTE, 2, 0);

    float *host = malloc((size_t)N * sizeof(float));
    k->copy_to_host(host, m->losses, (size_t)N * sizeof(float));
    double sum = 0;
    for (int i = 0; i < N; i++)
        sum += host[i];
    free(host);
    return (float)(sum / N);
}

void gpt_backward(gpt_model *m, float dloss)
{
    const kernels_backend *k = m->k;
    int B = m->B, T = m->T, C = m->cfg.hidden, NH = m->cfg.heads, V = m->cfg.vocab, L = m->cfg.num_layers;
    int N = B * T;
    size_t NC = (size_t)N * C;

    int lnf = gpt_lnf_w(m);
    hook(m, GPT_WTE, 2, 1);
    hook(m, lnf, 2, 1);
    PROF_BEGIN();
    k->memset_zero(m->d_logits, (size_t)N * V * sizeof(float));
    k->cross_entropy_backward(m->d_logits, m->logits, m->targets, dloss, N, V);
    round_act(m, m->d_logits, (size_t)N * V);
    PROF_END("cross_entropy_bwd", -1, 0, (double)N * V * 8, "N=%d V=%d", N, V);
    PROF_BEGIN();
    k->memset_zero(m->d_a, NC * sizeof(float));
    k->matmul_backward(m->d_a, gpt_grad(m, GPT_WTE), NULL, m->d_logits, m->lnf, gpt_param(m, GPT_WTE), N, C, V, m->prec);
    round_act(m, m->d_a, NC);
    PROF_END("lm_head_bwd", -1, 4.0 * N * C * V, 2 * gemm_bytes(N, V, C), "m=%d n=%d k=%d", N, V, C);
    float *x_last = L > 0 ? m->layers[L - 1].res3 : m->encoded;
    PROF_BEGIN();
    k->memset_zero(m->d_res, NC * sizeof(float));
    k->layernorm_backward(m->d_res, gpt_grad(m, lnf), gpt_grad(m, lnf + 1), m->d_a, x_last, gpt_param(m, lnf),
                          m->lnf_mean, m->lnf_rstd, N, C);
    round_act(m, m->d_res, NC);
    PROF_END("lnf_bwd", -1, 0, 4.0 * NC * 4, "N=%d C=%d", N, C);
    hook(m, lnf, 2, 0);

    for (int l = L - 1; l >= 0; l--) {
        gpt_layer_acts *a = &m->layers[l];
        float *x = l > 0 ? m->layers[l - 1].res3 : m->encoded;
        float *w[LAYER_TENSORS], *g[LAYER_TENSORS];
        for (int j = 0; j < LAYER_TENSORS; j++) {
            w[j] = gpt_param(m, gpt_layer_tensor(m, l, j));
            g[j] = gpt_grad(m, gpt_layer_tensor(m, l, j));
        }
        hook(m, gpt_layer_tensor(m, l, 0), LAYER_TENSORS, 1);
        /* d_res holds dL/d(res3). MLP: res3 = res2 + fc2(gelu(fc1(ln2(res2)))). */
        PROF_BEGIN();
        k->memset_zero(m->d_big, NC * 4 * sizeof(float));
        k->matmul_backward(m->d_big, g[10], g[11], m->d_res, a->fch_gelu, w[10], N, 4 * C, C, m->prec);
        round_act(m, m->d_big, NC * 4);
        PROF_END("fc2_bwd", l, 4.0 * N * C * 4 * C, 2 * gemm_bytes(N, C, 4 * C), "m=%d n=%d k=%d", N, C, 4 * C);
        PROF_BEGIN();
        k->memset_zero(m->d_big2, NC * 4 * sizeof(float));
        k->gelu_backward(m->d_big2, a->fch, m->d_big, NC * 4);
        round_act(m, m->d_big2, NC * 4);
        PROF_END("gelu_bwd", l, 0, 12.0 * NC * 4, "n=%d", 4 * N * C);
        PROF_BEGIN();
        k->memset_zero(m->d_a, NC * sizeof(float));
        k->matmul_backward(m->d_a, g[8], g[9], m->d_big2, a->ln2, w[8], N, C, 4 * C, m->prec);
        round_act(m, m->d_a, NC);
        PROF_END("fc1_bwd", l, 4.0 * N * C * 4 * C, 2 * gemm_bytes(N, 4 * C, C), "m=%d n=%d k=%d", N, 4 * C, C);
        PROF_BEGIN();
        k->layernorm_backward(m->d_res, g[6], g[7], m->d_a, a->res2, w[6], a->ln2_mean, a->ln2_rstd, N, C);
        round_act(m, m->d_res, NC); /* now dL/d(res2) */
        PROF_END("ln2_bwd", l, 0, 4.0 * NC * 4, "N=%d C=%d", N, C);
        /* Attention: res2 = x + proj(attn(qkv(ln1(x)))). */
        PROF_BEGIN();
        k->memset_zero(m->d_a, NC * sizeof(float));
        k->matmul_backward(m->d_a, g[4], g[5], m->d_res, a->atty, w[4], N, C, C, m->prec);
        round_act(m, m->d_a, NC);
        PROF_END("attn_proj_bwd", l, 4.0 * N * C * C, 2 * gemm_bytes(N, C, C), "m=%d n=%d k=%d", N, C, C);
        PROF_BEGIN();
        k->memset_zero(m->d_qkv, NC * 3 * sizeof(float));
        k->attention_backward(m->d_qkv, m->d_a, a->qkv, a->atty, a->lse, B, T, C, NH, m->prec);
        round_act(m, m->d_qkv, NC * 3);
        PROF_END("attention_bwd", l, 8.0 * B * (double)T * T * C, 4.0 * N * (8.0 * C + NH),
                 "B=%d T=%d heads=%d head_dim=%d", B, T, NH, C / NH);
        PROF_BEGIN();
        k->memset_zero(m->d_b, NC * sizeof(float));
        k->matmul_backward(m->d_b, g[2], g[3], m->d_qkv, a->ln1, w[2], N, C, 3 * C, m->prec);
        round_act(m, m->d_b, NC);
        PROF_END("qkv_bwd", l, 4.0 * N * C * 3 * C, 2 * gemm_bytes(N, 3 * C, C), "m=%d n=%d k=%d", N, 3 * C, C);
        PROF_BEGIN();
        k->layernorm_backward(m->d_res, g[0], g[1], m->d_b, x, w[0], a->ln1_mean, a->ln1_rstd, N, C);
        round_act(m, m->d_res, NC); /* now dL/dx */
        PROF_END("ln1_bwd", l, 0, 4.0 * NC * 4, "N=%d C=%d", N, C);
        hook(m, gpt_layer_tensor(m, l, 0), LAYER_TENSORS, 0);
    }
    PROF_BEGIN();
    k->encoder_backward(gpt_grad(m, GPT_WTE), gpt_grad(m, GPT_WPE), m->d_res, m->tokens, B, T, C);
    PROF_END("embedding_bwd", -1, 0, 3.0 * NC * 4, "B=%d T=%d C=%d", B, T, C);
    hook(m, GPT_WTE, 2, 0);
}

uint32_t gpt_params_crc32(const gpt_model *m)
{
    float *host = malloc(m->num_params * sizeof(float));
    m->k->copy_to_host(host, m->params, m->num_params * sizeof(float));
    uLong crc = crc32(0L, Z_NULL, 0);
    /* fp32 little-endian bytes; zlib's crc32 takes at most UINT_MAX bytes per call. */
    const unsigned char *p = (const unsigned char *)host;
    size_t left = m->num_params * sizeof(float);
    while (left > 0) {
        uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
        crc = crc32(crc, p, chunk);
        p += chunk;
        left -= chunk;
    }
    free(host);
    return (uint32_t)crc;
}

double gpt_forward_flops(const gpt_config *c, int B)
{
    double N = (double)B * c->seq_len, C = c->hidden, T = c->seq_len;
    double layer = 2.0 * N * (3 * C * C + C * C + 8 * C * C) + 4.0 * B * T * T * C;
    return c->num_layers * layer + 2.0 * N * C * c->vocab;
}
