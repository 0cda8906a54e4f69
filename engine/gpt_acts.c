/* Activation buffers of the model and the recompute plan that decides which of them each
 * micro-batch keeps (gpt.h, gpt_internal.h).
 *
 * Without recomputation every slot (a micro-batch in flight) keeps every intermediate of every
 * layer it runs. Under full recomputation (Megatron-LM's --recompute-granularity full) a
 * recomputed layer keeps only its output (the next layer's input, which is what Megatron keeps
 * at each group boundary; the outputs inside a group are one hidden-size tensor a layer more),
 * and its intermediates live in buffers shared by every slot: the backward reruns the group's
 * forward into them before it needs them. Groups follow Megatron's --recompute-method within each
 * chunk of consecutive layers a rank runs: uniform cuts the chunk into groups of
 * --recompute-num-layers from its first layer (the last one shorter); block recomputes the first
 * --recompute-num-layers layers of the chunk one by one and keeps the others. Under selective
 * recomputation the attention core is rerun in the backward: its log-sum-exp rows are shared
 * (its output stays, as Megatron's projection keeps its input). */
#include <stdlib.h>
#include "gpt.h"
#include "gpt_internal.h"

static float *act(gpt_model *m, size_t n)
{
    m->act_floats += n;
    return m->k->alloc(n * sizeof(float));
}

/* Context parallelism's all-to-all form (gpt_cp_a2a.c): a layer's whole sequence of its 1/cp of
 * the heads, the qkv, attention output and log-sum-exp rows the backward reads. */
static void alloc_a2a(gpt_model *m, gpt_layer_acts *x)
{
    size_t whole = (size_t)m->B * m->cfg.seq_len, Cc = (size_t)m->cfg.hidden / m->shard.tp / m->shard.cp;
    x->a2a_qkv = act(m, whole * 3 * Cc);
    x->a2a_atty = act(m, whole * Cc);
    x->a2a_lse = act(m, whole * ((size_t)m->cfg.heads / m->shard.tp / m->shard.cp));
}

/* The first layer of the chunk of consecutive layers this rank runs that holds l, and one past
 * its last. */
static void chunk_of(const gpt_model *m, int l, int *first, int *end)
{
    int a = l, b = l + 1;
    while (a > 0 && m->runs_layer[a - 1])
        a--;
    while (b < m->cfg.num_layers && m->runs_layer[b])
        b++;
    *first = a;
    *end = b;
}

int gpt_recompute_group_end(const gpt_model *m, int l)
{
    if (!m->recompute_group || m->recompute_group[l] < 0)
        return -1;
    int first, end, n = m->shard.recompute_block ? 1 : m->shard.recompute_layers;
    chunk_of(m, l, &first, &end);
    int last = m->recompute_group[l] + n - 1;
    return last < end - 1 ? last : end - 1;
}

/* One layer's intermediates (all but the input and the output); its attention rows (lse) too
 * unless they are shared. The residual stream's tensors (norms, projections, res2) hold Ns
 * tokens (fewer under sequence parallelism), the TP-split ones (qkv, attention, MLP) all N. */
static void alloc_intermediates(gpt_model *m, gpt_layer_acts *x, int own_lse)
{
    const gpt_config *cfg = &m->cfg;
    size_t C = (size_t)cfg->hidden, N = (size_t)m->B * cfg->seq_len, Ns = (size_t)gpt_stream_tokens(m);
    size_t Cl = C / m->shard.tp, NHl = (size_t)cfg->heads / m->shard.tp;
    x->ln1 = act(m, Ns * C);
    x->ln1_mean = act(m, Ns);
    x->ln1_rstd = act(m, Ns);
    x->qkv = act(m, N * (size_t)gpt_qkv_width(m));
    x->atty = act(m, N * Cl);
    x->lse = own_lse ? act(m, N * NHl) : m->scratch->lse;
    x->proj = act(m, Ns * C);
    x->res2 = act(m, Ns * C);
    x->ln2 = act(m, Ns * C);
    x->ln2_mean = act(m, Ns);
    x->ln2_rstd = act(m, Ns);
    /* with experts: the rows this rank's experts run, every token's K choices (from every EP
     * rank's tokens under expert parallelism, the most that may arrive) */
    size_t F = (size_t)gpt_mlp_width(m), rows = m->cfg.num_experts ? gpt_moe_ep_rows(m) : N;
    x->fch = act(m, rows * (m->cfg.swiglu ? 2 * F : F));
    x->fch_gelu = act(m, rows * F);
    if (m->cfg.num_experts) {
        x->moe_in = act(m, rows * C);
        x->moe_out = act(m, N * (size_t)m->cfg.moe_topk * C); /* this rank's own rows */
        x->route = gpt_moe_route_alloc(m);
    }
    x->fcproj = act(m, Ns * C);
    if (gpt_cp_a2a(m)) { /* the head-sharded tensors kept for the backward (shared as lse is) */
        if (own_lse) {
            alloc_a2a(m, x);
        } else {
            x->a2a_qkv = m->scratch->a2a_qkv;
            x->a2a_atty = m->scratch->a2a_atty;
            x->a2a_lse = m->scratch->a2a_lse;
        }
    }
}

void gpt_plan_recompute(gpt_model *m)
{
    const gpt_shard *sh = &m->shard;
    int L = m->cfg.num_layers, n = sh->recompute_layers > 0 ? sh->recompute_layers : 1;
    if (sh->recompute == GPT_RECOMPUTE_SELECTIVE) {
        size_t N = (size_t)m->B * m->cfg.seq_len, Cl = (size_t)m->cfg.hidden / sh->tp;
        m->scratch = calloc(1, sizeof *m->scratch);
        m->scratch_layers = 1;
        m->scratch->atty = act(m, N * Cl);
        m->scratch->lse = act(m, N * ((size_t)m->cfg.heads / sh->tp));
        if (gpt_cp_a2a(m))
            alloc_a2a(m, m->scratch);
        return;
    }
    if (sh->recompute != GPT_RECOMPUTE_FULL)
        return;
    m->recompute_group = malloc((size_t)L * sizeof *m->recompute_group);
    int longest = 0;
    for (int l = 0; l < L; l++) {
        m->recompute_group[l] = -1;
        if (!m->runs_layer[l])
            continue;
        int first, end;
        chunk_of(m, l, &first, &end);
        if (end - first > longest)
            longest = end - first;
        if (sh->recompute_block)
            m->recompute_group[l] = l - first < n ? l : -1;
        else
            m->recompute_group[l] = first + (l - first) / n * n;
    }
    m->scratch_layers = sh->recompute_block ? 1 : n < longest ? n : longest;
    m->scratch = calloc((size_t)(m->scratch_layers > 0 ? m->scratch_layers : 1), sizeof *m->scratch);
    for (int i = 0; i < m->scratch_layers; i++)
        alloc_intermediates(m, &m->scratch[i], 1);
}

void gpt_alloc_acts(gpt_model *m, gpt_acts *a)
{
    const gpt_config *cfg = &m->cfg;
    const gpt_shard *sh = &m->shard;
    size_t C = (size_t)cfg->hidden, N = (size_t)m->B * cfg->seq_len, V = (size_t)cfg->vocab;
    size_t Ns = (size_t)gpt_stream_tokens(m);
    if (sh->embedding)
        a->encoded = act(m, Ns * C);
    a->layers = calloc((size_t)cfg->num_layers, sizeof *a->layers);
    for (int l = 0; l < cfg->num_layers; l++) {
        gpt_layer_acts *x = &a->layers[l];
        if (!m->runs_layer[l])
            continue;
        int group = m->recompute_group ? m->recompute_group[l] : -1;
        if (group >= 0) /* the shared intermediates of its place in the group */
            *x = m->scratch[sh->recompute_block ? 0 : l - group];
        else /* its own (under selective recomputation, the attention rows shared) */
            alloc_intermediates(m, x, sh->recompute != GPT_RECOMPUTE_SELECTIVE);
        /* the input (where the previous layer runs elsewhere) and output are the slot's own */
        if (l > 0 && !m->runs_layer[l - 1])
            x->input = act(m, Ns * C);
        x->res3 = act(m, Ns * C);
    }
    if (sh->head) {
        a->lnf = act(m, Ns * C);
        a->lnf_mean = act(m, Ns);
        a->lnf_rstd = act(m, Ns);
        a->logits = act(m, N * V / sh->tp);
        a->losses = act(m, N);
    }
    a->tokens = m->k->alloc(N * sizeof(int));
    a->targets = m->k->alloc(N * sizeof(int));
    if (sh->tp > 1) {
        a->in_vocab = calloc(N, 1);
        a->host_targets = calloc(N, sizeof(int));
        a->ce_max = calloc(N, sizeof(float));
        a->ce_sum = calloc(N, sizeof(float));
    }
}

static void free_intermediates(const kernels_backend *k, gpt_layer_acts *x, int shared_lse)
{
    float *p[] = {x->ln1,  x->ln1_mean, x->ln1_rstd, x->qkv, x->atty,     x->proj,   x->res2,
                  x->ln2,  x->ln2_mean, x->ln2_rstd, x->fch, x->fch_gelu, x->fcproj, shared_lse ? NULL : x->lse,
                  x->moe_in, x->moe_out};
    gpt_moe_route_free(x->route);
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i])
            k->free(p[i]);
    if (!shared_lse)
        gpt_cp_a2a_free_acts(k, x);
}

void gpt_free_acts(gpt_model *m, gpt_acts *a)
{
    const kernels_backend *k = m->k;
    float *top[] = {a->encoded, a->lnf, a->lnf_mean, a->lnf_rstd, a->logits, a->losses};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (top[i])
            k->free(top[i]);
    for (int l = 0; a->layers && l < m->cfg.num_layers; l++) {
        gpt_layer_acts *x = &a->layers[l];
        if (x->input)
            k->free(x->input);
        if (x->res3)
            k->free(x->res3);
        if (!(m->recompute_group && m->recompute_group[l] >= 0)) /* not the shared ones */
            free_intermediates(k, x, m->shard.recompute == GPT_RECOMPUTE_SELECTIVE);
    }
    if (a->tokens)
        k->free(a->tokens);
    if (a->targets)
        k->free(a->targets);
    free(a->layers);
    free(a->in_vocab);
    free(a->host_targets);
    free(a->ce_max);
    free(a->ce_sum);
}

void gpt_free_recompute(gpt_model *m)
{
    if (m->scratch && m->shard.recompute == GPT_RECOMPUTE_SELECTIVE) {
        m->k->free(m->scratch->atty);
        m->k->free(m->scratch->lse);
        gpt_cp_a2a_free_acts(m->k, m->scratch);
    } else {
        for (int i = 0; m->scratch && i < m->scratch_layers; i++)
            free_intermediates(m->k, &m->scratch[i], 0);
    }
    free(m->scratch);
    free(m->recompute_group);
    m->scratch = NULL;
    m->recompute_group = NULL;
}
