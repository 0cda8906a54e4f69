/* The parameter layout of a rank's part of the model and its map to the single-rank layout
 * (gpt.h): tensor counts under a TP split, the tensor table, the runs that carry a local piece
 * to its global place (init, gathers, CRC, resharding), GPT-2 initialisation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "gpt.h"
#include "gpt_internal.h"
#include "rng.h"


/* The widths of one layer on a rank holding 1/tp of the split tensors: query rows (heads x hd),
 * key (and value) rows (groups x hd), the MLP's width and fc_w's rows (2F under SwiGLU). */
typedef struct {
    size_t C, q, kv, f, f1;
} layer_widths;

static layer_widths widths(const gpt_config *c, int tp)
{
    size_t C = (size_t)c->hidden, hd = C / (size_t)c->heads, f = (size_t)c->ffn_hidden / tp;
    return (layer_widths){C, C / tp, (size_t)c->kv_groups * hd / tp, f, c->swiglu ? 2 * f : f};
}

/* Floats of layer tensor j on a rank holding 1/tp of the split ones and 1/ep of the experts. */
static size_t layer_tensor_count(const gpt_config *c, int j, int tp, int ep)
{
    layer_widths w = widths(c, tp);
    size_t C = w.C, qkv = w.q + 2 * w.kv, E = (size_t)c->num_experts, mlps = E ? E / (size_t)ep : 1;
    switch (j) {
    case J_QKV_W: return qkv * C;
    case J_QKV_B: return qkv;
    case J_PROJ_W: return C * w.q;   /* (C, C) split by input columns */
    case J_FC_W: return mlps * w.f1 * C;
    case J_FC_B: return mlps * w.f1;
    case J_FCPROJ_W: return mlps * C * w.f; /* (C, F) split by input columns */
    case J_FCPROJ_B: return mlps * C;
    case J_ROUTER_W: return E * C;   /* replicated */
    case J_LN1_B:
    case J_LN2_B: return c->rmsnorm ? 0 : C;
    default: return C;               /* norms and the row-parallel GEMMs' biases: replicated */
    }
}

static int layer_tensor_is_split(int j)
{
    return j == J_QKV_W || j == J_QKV_B || j == J_PROJ_W || j == J_FC_W || j == J_FC_B || j == J_FCPROJ_W;
}

/* The MLP's tensors, which hold the experts' weights in an MoE layer. */
static int layer_tensor_is_mlp(int j)
{
    return j == J_FC_W || j == J_FC_B || j == J_FCPROJ_W || j == J_FCPROJ_B;
}

/* The expert-parallel degree of a shard (1 when unset). */
static int ep_of(const gpt_shard *sh)
{
    return sh->ep > 1 ? sh->ep : 1;
}

int gpt_layer_tensor(const gpt_model *m, int layer, int j)
{
    (void)m;
    return 2 + layer * LAYER_TENSORS + j;
}

int gpt_lnf_w(const gpt_model *m)
{
    return 2 + m->cfg.num_layers * LAYER_TENSORS;
}

int gpt_head_weight(const gpt_model *m)
{
    return m->cfg.untied ? gpt_lnf_w(m) + 2 : GPT_WTE;
}

/* Tensor t's memory in the resident range r (base) or in one of its windows. */
static float *find_tensor(const gpt_model *m, int t, const gpt_range *r, float *base, const char *what)
{
    size_t lo = m->tensors[t].offset, hi = lo + m->tensors[t].count;
    /* A mapped window first: a backward pass's gradients all go through its window (and its
     * reduction), also those of tensors inside the rank's own shard. */
    for (int i = 0; i < GPT_WINDOWS; i++)
        if (r->windows[i].buf && lo >= r->windows[i].lo && hi <= r->windows[i].hi)
            return r->windows[i].buf + (lo - r->windows[i].lo);
    if (lo >= r->lo && hi <= r->lo + r->n)
        return base + (lo - r->lo);
    if (hi == lo)
        return base; /* a tensor held elsewhere: nothing goes through it */
    fprintf(stderr, "gpt: the %s of tensor %d (flat range [%zu, %zu)) are neither in this rank's range [%zu, %zu) "
                    "nor in a mapped window\n", what, t, lo, hi, r->lo, r->lo + r->n);
    abort();
}

float *gpt_param(const gpt_model *m, int t)
{
    return find_tensor(m, t, &m->param_range, m->params, "parameters");
}

float *gpt_grad(const gpt_model *m, int t)
{
    return find_tensor(m, t, &m->grad_range, m->grads, "gradients");
}

void gpt_map_range(gpt_range *r, float *buf, size_t lo, size_t hi)
{
    for (int i = 0; i < GPT_WINDOWS; i++)
        if (!r->windows[i].buf) {
            r->windows[i].buf = buf;
            r->windows[i].lo = lo;
            r->windows[i].hi = hi;
            return;
        }
    fprintf(stderr, "gpt_map_range: more than %d windows at once\n", GPT_WINDOWS);
    abort();
}

void gpt_unmap_range(gpt_range *r, const float *buf)
{
    for (int i = 0; i < GPT_WINDOWS; i++)
        if (r->windows[i].buf == buf)
            r->windows[i].buf = NULL;
}

/* Tensor table: this rank's counts and offsets, and the single-rank layout's offsets. */
static void layout(gpt_model *m)
{
    const gpt_config *c = &m->cfg;
    const gpt_shard *sh = &m->shard;
    int tp = sh->tp, lead = sh->tp_rank == 0, ep = ep_of(sh);
    m->num_tensors = 2 + LAYER_TENSORS * c->num_layers + GPT_HEAD_TENSORS;
    m->tensors = calloc((size_t)m->num_tensors, sizeof *m->tensors);
    size_t off = 0, goff = 0;
    int t = 0;
    size_t C = (size_t)c->hidden, V = (size_t)c->vocab;
    /* wte: used by the embedding (first stage) and, tied, the LM head (last stage); wpe by the
     * embedding. The first stage's copy of wte is the counted one. */
    size_t wte = V * C, wpe = c->rope ? 0 : (size_t)c->seq_len * C;
    int wte_here = sh->embedding || (sh->head && !c->untied);
    m->tensors[t++] = (gpt_tensor){off, wte_here ? wte / tp : 0, 1, goff, sh->embedding, 0};
    off += m->tensors[0].count;
    goff += wte;
    m->tensors[t++] = (gpt_tensor){off, sh->embedding ? wpe : 0, 1, goff, lead && sh->embedding, 0};
    off += m->tensors[1].count;
    goff += wpe;
    for (int l = 0; l < c->num_layers; l++)
        for (int j = 0; j < LAYER_TENSORS; j++, t++) {
            size_t n = m->runs_layer[l] ? layer_tensor_count(c, j, tp, ep) : 0;
            int decay = j == J_QKV_W || j == J_PROJ_W || j == J_FC_W || j == J_FCPROJ_W || j == J_ROUTER_W; /* matrices */
            int counted = m->runs_layer[l] && (layer_tensor_is_split(j) || lead);
            int expert = m->runs_layer[l] && c->num_experts > 0 && layer_tensor_is_mlp(j);
            m->tensors[t] = (gpt_tensor){off, n, decay, goff, counted, expert};
            off += n;
            goff += layer_tensor_count(c, j, 1, 1);
        }
    /* the final norm's weight and bias (none under RMSNorm), then the untied LM head (vocabulary
     * rows, split as wte) */
    size_t head[GPT_HEAD_TENSORS] = {C, c->rmsnorm ? 0 : C, c->untied ? V * C : 0};
    for (int i = 0; i < GPT_HEAD_TENSORS; i++, t++) {
        size_t n = i == 2 ? head[i] / tp : head[i];
        m->tensors[t] = (gpt_tensor){off, sh->head ? n : 0, i == 2, goff, sh->head && (lead || i == 2), 0};
        off += m->tensors[t].count;
        goff += head[i];
    }
    m->num_params = off;
    m->global_params = goff;
}

/* Calls fn(local offset, global offset, n) for each contiguous run of tensor t: the map between
 * this rank's copy and the single-rank layout. */
typedef void (*run_fn)(size_t local, size_t global, size_t n, void *ctx);

static void tensor_runs(const gpt_model *m, int t, run_fn fn, void *ctx)
{
    const gpt_tensor *g = &m->tensors[t];
    if (g->count == 0)
        return;
    int L = m->cfg.num_layers;
    int j = t >= 2 && t < 2 + LAYER_TENSORS * L ? (t - 2) % LAYER_TENSORS : -1;
    layer_widths w = widths(&m->cfg, m->shard.tp), whole = widths(&m->cfg, 1);
    size_t C = w.C, r = (size_t)m->shard.tp_rank, ep = (size_t)ep_of(&m->shard);
    size_t mlps = m->cfg.num_experts ? (size_t)m->cfg.num_experts / ep : 1;
    /* the first expert held here (expert parallelism: EP rank q holds experts [q E/ep, (q+1) E/ep)) */
    size_t e0 = m->cfg.num_experts && ep > 1 ? (size_t)m->shard.ep_rank * mlps : 0;
    size_t lo = g->offset, go = g->global_offset;
    if (t == GPT_WTE || t == gpt_lnf_w(m) + 2) { /* vocabulary rows [r V/tp, (r+1) V/tp) */
        fn(lo, go + r * g->count, g->count, ctx);
        return;
    }
    /* q, k, v rows: this rank's heads of the query rows, then its groups of the key and value rows */
    size_t part[3] = {w.q, w.kv, w.kv}, start[3] = {0, whole.q, whole.q + whole.kv}, at = 0;
    switch (j) {
    case J_QKV_W:
        for (int q = 0; q < 3; at += part[q], q++)
            fn(lo + at * C, go + (start[q] + r * part[q]) * C, part[q] * C, ctx);
        break;
    case J_QKV_B:
        for (int q = 0; q < 3; at += part[q], q++)
            fn(lo + at, go + start[q] + r * part[q], part[q], ctx);
        break;
    case J_PROJ_W: /* columns [r Cl, (r+1) Cl) of every row */
        for (size_t o = 0; o < C; o++)
            fn(lo + o * w.q, go + o * C + r * w.q, w.q, ctx);
        break;
    case J_FC_W: /* each expert's (or the one MLP's) columns of the gate rows, then of the up rows */
    case J_FC_B: {
        size_t row = j == J_FC_W ? C : 1;
        for (size_t e = 0; e < mlps; e++)
            for (size_t h = 0; h < (m->cfg.swiglu ? 2u : 1u); h++)
                fn(lo + (e * w.f1 + h * w.f) * row, go + ((e0 + e) * whole.f1 + h * whole.f + r * w.f) * row,
                   w.f * row, ctx);
        break;
    }
    case J_FCPROJ_W:
        for (size_t o = 0; o < mlps * C; o++) /* every row of every expert */
            fn(lo + o * w.f, go + (e0 * C + o) * whole.f + r * w.f, w.f, ctx);
        break;
    case J_FCPROJ_B: /* the experts' biases, whole */
        fn(lo, go + e0 * C, g->count, ctx);
        break;
    default:
        fn(lo, go, g->count, ctx);
    }
}

typedef struct {
    const float *from;
    float *to;
    int to_global;
} copy_ctx;

static void copy_run(size_t local, size_t global, size_t n, void *ctx)
{
    copy_ctx *c = ctx;
    if (c->to_global)
        memcpy(c->to + global, c->from + local, n * sizeof(float));
    else
        memcpy(c->to + local, c->from + global, n * sizeof(float));
}

void gpt_write_global(const gpt_model *m, const float *local_host, float *global)
{
    copy_ctx c = {local_host, global, 1};
    for (int t = 0; t < m->num_tensors; t++)
        if (m->tensors[t].counted)
            tensor_runs(m, t, copy_run, &c);
}

void gpt_write_global_experts(const gpt_model *m, const float *local_host, float *global)
{
    copy_ctx c = {local_host, global, 1};
    for (int t = 0; t < m->num_tensors; t++)
        if (m->tensors[t].counted && m->tensors[t].expert)
            tensor_runs(m, t, copy_run, &c);
}

static void add_run(size_t local, size_t global, size_t n, void *ctx)
{
    copy_ctx *c = ctx;
    for (size_t i = 0; i < n; i++)
        c->to[global + i] += c->from[local + i];
}

void gpt_add_global(const gpt_model *m, const float *local_host, float *global)
{
    copy_ctx c = {local_host, global, 1};
    for (int t = 0; t < m->num_tensors; t++)
        if (m->tensors[t].counted)
            tensor_runs(m, t, add_run, &c);
}

int gpt_layout_view(gpt_model *m, const gpt_config *cfg, const gpt_shard *shard, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    gpt_config c = *cfg;
    if (gpt_config_validate(&c, err, errlen) != 0)
        return -1;
    if (shard->tp < 1 || c.heads % shard->tp || c.hidden % shard->tp || c.vocab % shard->tp ||
        c.kv_groups % shard->tp || c.ffn_hidden % shard->tp) {
        snprintf(err, errlen, "tensor parallel %d must divide the heads (%d), the hidden size (%d), the vocabulary "
                 "(%d), the query groups (%d) and the MLP width (%d)", shard->tp, c.heads, c.hidden, c.vocab,
                 c.kv_groups, c.ffn_hidden);
        return -1;
    }
    if (ep_of(shard) > 1 && (c.num_experts == 0 || c.num_experts % shard->ep)) {
        if (c.num_experts == 0)
            snprintf(err, errlen, "expert parallelism spreads a mixture of experts' experts over %d ranks, but the "
                     "model has none (num_experts 0)", shard->ep);
        else
            snprintf(err, errlen, "expert parallelism spreads each MoE layer's experts over its ranks: %d must divide "
                     "num_experts (%d)", shard->ep, c.num_experts);
        return -1;
    }
    if (shard->layers && shard->head && !shard->layers[cfg->num_layers - 1]) {
        snprintf(err, errlen, "the rank with the LM head must also run the last layer");
        return -1;
    }
    m->cfg = c;
    m->shard = *shard;
    if (m->shard.slots < 1)
        m->shard.slots = 1;
    m->runs_layer = malloc((size_t)cfg->num_layers);
    for (int l = 0; l < cfg->num_layers; l++)
        m->runs_layer[l] = shard->layers ? shard->layers[l] != 0 : 1;
    m->shard.layers = m->runs_layer;
    layout(m);
    return 0;
}

void gpt_layout_view_free(gpt_model *m)
{
    free(m->tensors);
    free(m->runs_layer);
    memset(m, 0, sizeof *m);
}

void gpt_read_global(const gpt_model *m, const float *global, float *local_host)
{
    copy_ctx c = {global, local_host, 0};
    for (int t = 0; t < m->num_tensors; t++)
        tensor_runs(m, t, copy_run, &c);
}

/* GPT-2 initialisation of the whole model, in the single-rank layout, on the host. */
float *gpt_init_global(const gpt_model *m, uint64_t seed)
{
    const gpt_config *cfg = &m->cfg;
    float *host = calloc(m->global_params, sizeof(float));
    rng_t r;
    rng_seed(&r, seed);
    double resid_std = 0.02 / sqrt(2.0 * cfg->num_layers);
    int L = cfg->num_layers, lnf = gpt_lnf_w(m);
    for (int t = 0; t < m->num_tensors; t++) {
        /* the whole tensor's floats: its count on a rank that holds all of it */
        size_t n = t + 1 < m->num_tensors ? m->tensors[t + 1].global_offset - m->tensors[t].global_offset
                                          : m->global_params - m->tensors[t].global_offset;
        int j = t >= 2 && t < 2 + LAYER_TENSORS * L ? (t - 2) % LAYER_TENSORS : -1;
        int is_norm_w = j == J_LN1_W || j == J_LN2_W || t == lnf;
        int is_bias = j == J_LN1_B || j == J_QKV_B || j == J_PROJ_B || j == J_LN2_B || j == J_FC_B ||
                      j == J_FCPROJ_B || t == lnf + 1;
        double std = (j == J_PROJ_W || j == J_FCPROJ_W) ? resid_std : 0.02;
        float *x = host + m->tensors[t].global_offset;
        for (size_t i = 0; i < n; i++)
            x[i] = is_norm_w ? 1.0f : is_bias ? 0.0f : (float)(rng_normal(&r) * std);
    }
    return host;
}

uint32_t gpt_crc32_floats(const float *x, size_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    /* fp32 little-endian bytes; zlib's crc32 takes at most UINT_MAX bytes per call. */
    const unsigned char *p = (const unsigned char *)x;
    size_t left = n * sizeof(float);
    while (left > 0) {
        uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
        crc = crc32(crc, p, chunk);
        p += chunk;
        left -= chunk;
    }
    return (uint32_t)crc;
}

uint32_t gpt_params_crc32(const gpt_model *m)
{
    if (m->param_range.lo != 0 || m->param_range.n != m->num_params) {
        fprintf(stderr, "gpt_params_crc32: this rank keeps only a shard of its parameters\n");
        abort();
    }
    float *host = malloc(m->num_params * sizeof(float));
    m->k->copy_to_host(host, m->params, m->num_params * sizeof(float));
    uint32_t crc = gpt_crc32_floats(host, m->num_params);
    free(host);
    return crc;
}
