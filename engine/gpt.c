/* The decoder's forward and backward through the kernel table; see gpt.h. The block's choices
 * (norm, positions, grouped-query attention, MLP activation) live in gpt_block.c. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpt.h"
#include "gpt_internal.h"
#include "oplist.h"

static float *dev(const gpt_model *m, size_t n)
{
    return m->k->alloc(n * sizeof(float));
}

/* The model state (parameters, gradients, moments) grows by `added` floats and then shrinks by
 * `freed`: the peak sees both buffers of a replacement. */
static void state_change(gpt_model *m, size_t added, size_t freed)
{
    m->state_floats += added;
    if (m->state_floats > m->state_floats_peak)
        m->state_floats_peak = m->state_floats;
    m->state_floats -= freed;
}

/* The FLOPs the profiler reports, from the op list (one formula with the simulator's): this
 * rank's layer for one micro-batch of dtrain's model (its query groups, MLP width and
 * activation, Megatron's TP split), and the LM head over this rank's vocabulary rows. */
static void op_flops_from_oplist(gpt_model *m)
{
    const gpt_config *c = &m->cfg;
    int tp = m->shard.tp;
    layer_shape sh;
    gpt_layer_shape(c, m->B, tp, &sh);
    static const char *const names[] = {"qkv", "attn_score", "attn_value", "attn_proj", "fc1", "fc2"};
    layer_op ops[LAYER_OPS_MAX];
    for (int bwd = 0; bwd < 2; bwd++) {
        gpt_op_flops *f = bwd ? &m->flops_bwd : &m->flops_fwd;
        double *slot[] = {&f->qkv, &f->attention, &f->attention, &f->attn_proj, &f->fc1, &f->fc2};
        memset(f, 0, sizeof *f);
        int n = bwd ? layer_ops_backward(&sh, ops) : layer_ops_forward(&sh, ops);
        for (int i = 0; i < n; i++) /* backward names: <forward name>_dgrad, _wgrad */
            for (size_t j = 0; j < sizeof names / sizeof names[0]; j++) {
                size_t len = strlen(names[j]);
                if (!strncmp(ops[i].name, names[j], len) && (!ops[i].name[len] || ops[i].name[len] == '_'))
                    *slot[j] += ops[i].flops;
            }
    }
    m->flops_fwd.lm_head = m->B * lm_head_forward_flops_per_sequence(c->seq_len, c->hidden, c->vocab / tp);
    m->flops_bwd.lm_head = 2.0 * m->flops_fwd.lm_head;
}

void gpt_layer_shape(const gpt_config *c, int micro_batch, int tp, layer_shape *out)
{
    /* dtrain's attention is counted unfused, its activations in fp32 */
    *out = (layer_shape){.micro_batch = micro_batch, .seq_length = c->seq_len, .hidden = c->hidden,
                                        .heads = c->heads, .kv_groups = c->kv_groups, .ffn_hidden = c->ffn_hidden,
                                        .swiglu = c->swiglu, .tp = tp, .cp = 1, .ep = 1,
                                        .num_experts = c->num_experts, .moe_topk = c->moe_topk,
                                        .attention = ATTENTION_UNFUSED, .act_bytes = 4};
}

int gpt_init_shard(gpt_model *m, const gpt_config *cfg, const kernels_backend *k, kernels_precision prec, int B,
                   uint64_t seed, const gpt_shard *shard, char *err, size_t errlen)
{
    if (gpt_layout_view(m, cfg, shard, err, errlen) != 0)
        return -1;
    int cp = shard->cp > 1 ? shard->cp : 1;
    if (cfg->seq_len % (2 * cp) && cp > 1) {
        snprintf(err, errlen, "context parallelism splits each sequence of %d positions into 2 x %d chunks: they must "
                              "divide it", cfg->seq_len, cp);
        gpt_layout_view_free(m);
        return -1;
    }
    int tpn = shard->tp > 1 ? shard->tp : 1;
    if (cp > 1 && shard->cp_a2a && ((cfg->heads / tpn) % cp || (cfg->kv_groups / tpn) % cp)) {
        int groups = (cfg->heads / tpn) % cp == 0;
        snprintf(err, errlen, "context parallelism's all-to-all form splits each TP rank's %d %s over the %d CP "
                              "ranks: they must divide them", groups ? cfg->kv_groups / tpn : cfg->heads / tpn,
                 groups ? "query groups" : "heads", cp);
        gpt_layout_view_free(m);
        return -1;
    }
    if (cfg->num_experts > 0 && cp > 1 && !shard->cp_allreduce_host) {
        snprintf(err, errlen, "mixture of experts with context parallelism needs the CP group's host all-reduce "
                              "(the load-balancing loss counts the whole sequence's tokens)");
        gpt_layout_view_free(m);
        return -1;
    }
    long long tokens = (long long)B * (cfg->seq_len / cp); /* this rank's tokens of a micro-batch */
    if (shard->sequence_parallel && shard->tp > 1 && tokens % shard->tp) {
        snprintf(err, errlen, "sequence parallelism splits a micro-batch's %lld tokens over the %d TP ranks: they must "
                              "divide it", tokens, shard->tp);
        gpt_layout_view_free(m);
        return -1;
    }
    m->k = k;
    m->prec = prec;
    m->B = B;
    m->T = cfg->seq_len / cp; /* the positions of each sequence this rank holds */
    op_flops_from_oplist(m);
    size_t P = m->num_params, C = (size_t)cfg->hidden, N = (size_t)tokens, V = (size_t)cfg->vocab;
    /* ZeRO: the moments, gradients and parameters the rank keeps are its DP shard alone */
    size_t slo = 0, shi = P;
    int dp = shard->dp > 1 ? shard->dp : 1;
    if (dp > 1)
        gpt_dp_shard_range(P, dp, shard->dp_rank, &slo, &shi);
    gpt_range whole = {.lo = 0, .n = P}, mine = {.lo = slo, .n = shi - slo};
    m->param_range = dp > 1 && shard->zero >= 3 ? mine : whole;
    m->grad_range = dp > 1 && shard->zero >= 2 ? mine : whole;
    gpt_range moments = dp > 1 && shard->zero >= 1 ? mine : whole;
    int ep = shard->ep > 1 ? shard->ep : 1;
    gpt_ep_shards ep_shards = {0};
    if (dp > 1 && shard->zero >= 1 && ep > 1) { /* a dense shard and an expert shard, packed */
        gpt_ep_shards eps;
        gpt_ep_shards_of(m, dp, shard->dp_rank, ep, &eps);
        ep_shards = eps;
        moments = (gpt_range){.lo = 0, .n = gpt_ep_shards_floats(&eps)};
        /* ZeRO-2: the gradient shards, packed likewise, in a range past the flat buffer (no
         * tensor resolves into it: every backward pass maps a window; data_parallel_ep.c); ZeRO-3
         * the parameter shards too (every pass gathers a window) */
        if (shard->zero >= 2)
            m->grad_range = (gpt_range){.lo = P, .n = moments.n};
        if (shard->zero >= 3)
            m->param_range = (gpt_range){.lo = P, .n = moments.n};
    }
    m->params = dev(m, m->param_range.n ? m->param_range.n : 1);
    m->grads = dev(m, m->grad_range.n ? m->grad_range.n : 1);
    m->m = dev(m, moments.n ? moments.n : 1);
    m->v = dev(m, moments.n ? moments.n : 1);
    m->moments_lo = moments.lo;
    m->moments_n = moments.n;
    state_change(m, m->param_range.n + m->grad_range.n + 2 * moments.n, 0);

    /* The single-rank model's initial values, cut to this rank's part: every layout starts
     * from the same weights. */
    float *global = gpt_init_global(m, seed), *local = calloc(P ? P : 1, sizeof(float));
    gpt_read_global(m, global, local);
    if (m->param_range.lo == P && m->param_range.n) /* ZeRO-3 under EP: the two shards, packed */
        gpt_ep_pack_shards(m, &ep_shards, local);
    k->copy_to_device(m->params, local + (m->param_range.lo == P ? 0 : m->param_range.lo),
                      m->param_range.n * sizeof(float));
    free(global);
    free(local);

    if (gpt_sp(m)) { /* the stream splits into equal blocks of tokens */
        m->sp_full = dev(m, N * C);
        m->sp_norm_grad = dev(m, 2 * C);
        if (shard->tp_comm_overlap) {
            m->sp_ring[0] = dev(m, N / shard->tp * C);
            m->sp_ring[1] = dev(m, N / shard->tp * C);
            m->sp_recv = dev(m, N / shard->tp * C);
        }
    }
    gpt_cp_alloc(m);
    gpt_block_alloc(m);
    gpt_moe_alloc(m);
    gpt_plan_recompute(m);
    m->acts = calloc((size_t)m->shard.slots, sizeof *m->acts);
    for (int i = 0; i < m->shard.slots; i++)
        gpt_alloc_acts(m, &m->acts[i]);
    m->d_res = dev(m, N * C);
    m->d_a = dev(m, N * C);
    m->d_b = dev(m, N * C);
    size_t F = (size_t)gpt_mlp_width(m), F1 = cfg->swiglu ? 2 * F : F;
    m->d_big = dev(m, N * F);
    m->d_big2 = dev(m, N * F1);
    m->d_qkv = dev(m, N * (size_t)gpt_qkv_width(m));
    m->d_logits = shard->head ? dev(m, N * V / shard->tp) : NULL;
    if (shard->tp > 1) {
        m->vp_zeros = dev(m, N * C);
        m->vp_tmp = dev(m, N * C);
        m->vp_sink = dev(m, (size_t)cfg->seq_len * C);
        m->vp_zero_tokens = k->alloc(N * sizeof(int));
        k->memset_zero(m->vp_zero_tokens, N * sizeof(int));
        if (shard->head)
            m->vp_host_logits = malloc(N * V / shard->tp * sizeof(float));
    }
    return 0;
}

void gpt_init(gpt_model *m, const gpt_config *cfg, const kernels_backend *k, kernels_precision prec, int B,
              uint64_t seed)
{
    gpt_shard whole = {.tp = 1, .embedding = 1, .head = 1, .slots = 1};
    char err[256];
    if (gpt_init_shard(m, cfg, k, prec, B, seed, &whole, err, sizeof err) != 0) {
        fprintf(stderr, "gpt_init: %s\n", err); /* cannot happen with tp = 1 */
        abort();
    }
}

void gpt_dp_shard_range(size_t n, int dp, int rank, size_t *lo, size_t *hi)
{
    size_t padded = (n + dp - 1) / dp * dp, part = padded / dp;
    *lo = part * rank;
    *hi = part * (rank + 1) < n ? part * (rank + 1) : n;
    if (*lo > n)
        *lo = n;
}

void gpt_keep_moments(gpt_model *m, size_t lo, size_t hi)
{
    size_t n = hi > lo ? hi - lo : 0;
    if (m->moments_lo == lo && m->moments_n == n)
        return; /* allocated as the shard already (gpt_shard.zero) */
    float **moments[2] = {&m->m, &m->v};
    for (int i = 0; i < 2; i++) {
        float *kept = m->k->alloc((n ? n : 1) * sizeof(float));
        if (n)
            m->k->copy(kept, *moments[i] + (lo - m->moments_lo), n * sizeof(float));
        state_change(m, n, m->moments_n);
        m->k->free(*moments[i]);
        *moments[i] = kept;
    }
    m->moments_lo = lo;
    m->moments_n = n;
}

/* Replaces *buf, which holds r's range, by a buffer holding [lo, hi) (moving the values over
 * when keep_values, else zeroed). */
static void keep_range(gpt_model *m, float **buf, gpt_range *r, size_t lo, size_t hi, int keep_values)
{
    size_t n = hi > lo ? hi - lo : 0;
    if (r->lo == lo && r->n == n)
        return; /* allocated as the shard already (gpt_shard.zero) */
    float *kept = m->k->alloc((n ? n : 1) * sizeof(float));
    if (n && keep_values)
        m->k->copy(kept, *buf + (lo - r->lo), n * sizeof(float));
    else
        m->k->memset_zero(kept, (n ? n : 1) * sizeof(float));
    state_change(m, n, r->n);
    m->k->free(*buf);
    *buf = kept;
    r->lo = lo;
    r->n = n;
}

void gpt_keep_params(gpt_model *m, size_t lo, size_t hi)
{
    keep_range(m, &m->params, &m->param_range, lo, hi, 1);
}

void gpt_keep_grads(gpt_model *m, size_t lo, size_t hi)
{
    keep_range(m, &m->grads, &m->grad_range, lo, hi, 0);
}

void gpt_free(gpt_model *m)
{
    const kernels_backend *k = m->k;
    float *bufs[] = {m->params, m->grads, m->m, m->v, m->d_res, m->d_a, m->d_b, m->d_big, m->d_big2, m->d_qkv,
                     m->d_logits, m->vp_zeros, m->vp_tmp, m->vp_sink, m->sp_full, m->sp_norm_grad,
                     m->sp_ring[0], m->sp_ring[1], m->sp_recv};
    if (m->vp_zero_tokens)
        k->free(m->vp_zero_tokens);
    free(m->vp_host_logits);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            k->free(bufs[i]);
    for (int i = 0; m->acts && i < m->shard.slots; i++)
        gpt_free_acts(m, &m->acts[i]);
    free(m->acts);
    gpt_free_recompute(m);
    gpt_cp_free(m);
    gpt_block_free(m);
    gpt_moe_free(m);
    free(m->tensors);
    free(m->runs_layer);
    memset(m, 0, sizeof *m);
}

/* ---- forward / backward ---------------------------------------------------------------- */
/* Bytes a GEMM of (m x k) by (k x n) reads and writes in fp32 (its backward moves about twice). */
static double gemm_bytes(double mm, double n, double k)
{
    return 4.0 * (mm * k + n * k + mm * n);
}

static void hook(gpt_model *m, int first, int count, int before, int backward)
{
    if (m->pass_hook)
        m->pass_hook(m, first, count, before, backward, m->pass_hook_ctx);
}

/* The sum over the TP group that follows a row-parallel GEMM (forward) or a column-parallel
 * GEMM's input gradient (backward). */
static float *layer_input(const gpt_model *m, const gpt_acts *a, int l)
{
    if (l == 0)
        return a->encoded;
    return m->runs_layer[l - 1] ? a->layers[l - 1].res3 : a->layers[l].input;
}

static void check_layers(const gpt_model *m, int slot, int l0, int l1)
{
    int ok = slot >= 0 && slot < m->shard.slots && l0 >= 0 && l1 <= m->cfg.num_layers && l0 < l1 &&
             (l0 > 0 || m->shard.embedding) && (l1 < m->cfg.num_layers || m->shard.head);
    for (int l = l0; ok && l < l1; l++)
        ok = m->runs_layer[l];
    if (!ok) {
        fprintf(stderr, "gpt: slot %d, layers [%d, %d) are not this rank's part of the model\n", slot, l0, l1);
        abort();
    }
}

/* Layer l's forward: the first pass, or its rerun in the backward (recompute_group). */
static void block_forward(gpt_model *m, gpt_acts *act, int l)
{
    const kernels_backend *k = m->k;
    int B = m->B, T = m->T, C = m->cfg.hidden, tp = m->shard.tp, NH = m->cfg.heads / tp, Cl = C / tp;
    int N = B * T, lead = m->shard.tp_rank == 0, Ns = gpt_stream_tokens(m); /* Ns: the stream's tokens here */
    int W = gpt_qkv_width(m), F = gpt_mlp_width(m), F1 = m->cfg.swiglu ? 2 * F : F;
    size_t NsC = (size_t)Ns * C;
    double f = 4.0 * (double)sizeof(float);
    gpt_layer_acts *a = &act->layers[l];
    float *x = layer_input(m, act, l);
    float *w[LAYER_TENSORS];
    hook(m, gpt_layer_tensor(m, l, 0), LAYER_TENSORS, 1, 0); /* before the pointers: ZeRO maps windows here */
    for (int j = 0; j < LAYER_TENSORS; j++)
        w[j] = gpt_param(m, gpt_layer_tensor(m, l, j));
    PROF_BEGIN();
    gpt_norm_forward(m, a->ln1, a->ln1_mean, a->ln1_rstd, x, w[J_LN1_W], w[J_LN1_B]);
    gpt_round_act(m, a->ln1, NsC);
    PROF_END("ln1", l, 0, 2.0 * Ns * C * f / 4, "N=%d C=%d", Ns, C);
    PROF_BEGIN();
    gpt_sp_column_forward(m, a->ln1, w[J_QKV_W], w[J_QKV_B], a->qkv, C, W);
    PROF_END("qkv", l, m->flops_fwd.qkv, gemm_bytes(N, W, C), "m=%d n=%d k=%d", N, W, C);
    if (m->cfg.rope) { /* q and k turned in place: the attention, and its backward, read them so */
        PROF_BEGIN();
        gpt_rope_forward(m, a->qkv);
        gpt_round_act(m, a->qkv, (size_t)N * W);
        PROF_END("rope", l, 0, 2.0 * N * (NH + m->cfg.kv_groups / tp) * (C / m->cfg.heads) * 4, "N=%d n=%d", N, W);
    }
    if (gpt_cp_a2a(m)) { /* the whole sequence of 1/cp of the heads, and back */
        gpt_attention_a2a_forward(m, a, a->qkv, a->atty, 1, l);
    } else {
        PROF_BEGIN();
        gpt_attention_core_forward(m, a->atty, a->lse, a->qkv);
        PROF_END("attention", l, m->flops_fwd.attention, 4.0 * N * (4.0 * Cl + NH),
                 "B=%d T=%d heads=%d head_dim=%d", B, T, NH, Cl / NH);
    }
    PROF_BEGIN();
    /* Row-parallel: each rank's partial product; the bias is added once (by TP rank 0). */
    gpt_sp_row_forward(m, a->atty, w[J_PROJ_W], lead ? w[J_PROJ_B] : NULL, a->proj, Cl, C);
    PROF_END("attn_proj", l, m->flops_fwd.attn_proj, gemm_bytes(N, C, Cl), "m=%d n=%d k=%d", N, C, Cl);
    PROF_BEGIN();
    k->residual_forward(a->res2, x, a->proj, NsC, m->prec);
    PROF_END("residual1", l, 0, 3.0 * Ns * C * f / 4, "N=%d C=%d", Ns, C);
    PROF_BEGIN();
    gpt_norm_forward(m, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w[J_LN2_W], w[J_LN2_B]);
    gpt_round_act(m, a->ln2, NsC);
    PROF_END("ln2", l, 0, 2.0 * Ns * C * f / 4, "N=%d C=%d", Ns, C);
    if (m->cfg.num_experts) { /* the experts in place of the MLP */
        gpt_moe_forward(m, a, w, l); /* profiled op by op inside */
        goto residual2;
    }
    PROF_BEGIN();
    gpt_sp_column_forward(m, a->ln2, w[J_FC_W], w[J_FC_B], a->fch, C, F1);
    PROF_END("fc1", l, m->flops_fwd.fc1, gemm_bytes(N, F1, C), "m=%d n=%d k=%d", N, F1, C);
    PROF_BEGIN();
    gpt_mlp_act_forward(m, a->fch_gelu, a->fch);
    PROF_END(m->cfg.swiglu ? "swiglu" : "gelu", l, 0, (double)N * (F1 + F) * f / 4, "n=%d", N * F);
    PROF_BEGIN();
    gpt_sp_row_forward(m, a->fch_gelu, w[J_FCPROJ_W], lead ? w[J_FCPROJ_B] : NULL, a->fcproj, F, C);
    PROF_END("fc2", l, m->flops_fwd.fc2, gemm_bytes(N, C, F), "m=%d n=%d k=%d", N, C, F);
residual2:
    PROF_BEGIN();
    k->residual_forward(a->res3, a->res2, a->fcproj, NsC, m->prec);
    PROF_END("residual2", l, 0, 3.0 * Ns * C * f / 4, "N=%d C=%d", Ns, C);
    hook(m, gpt_layer_tensor(m, l, 0), LAYER_TENSORS, 0, 0);
}

/* Full recomputation: when the backward reaches the last layer of a recomputed group, the
 * group's forward runs again from the group's kept input, each layer with its own forward hooks
 * (under ZeRO-3 its parameters gathered for the rerun and kept for its backward, as PyTorch FSDP
 * and Megatron-FSDP do under activation checkpointing: data_parallel.c, zero_pass_hook). */
static void recompute_group(gpt_model *m, gpt_acts *act, int l)
{
    if (gpt_recompute_group_end(m, l) != l)
        return;
    m->recomputing = 1;
    for (int j = m->recompute_group[l]; j <= l; j++)
        block_forward(m, act, j);
    m->recomputing = 0;
}

/* Vocabulary-parallel cross-entropy (Megatron): each TP rank holds V/tp columns of the logits;
 * the row maximum, the sum of exponentials and the target's logit are reduced over the TP
 * group, so no rank ever holds a full row. Runs on host copies of the logits: exact, and the
 * place for a fused device kernel later. Returns the mean loss; keeps the row statistics for
 * the backward. */
static float vocab_parallel_loss(gpt_model *m, gpt_acts *a)
{
    int N = m->B * m->T, tp = m->shard.tp, Vl = m->cfg.vocab / tp, lo = m->shard.tp_rank * Vl;
    float *lg = m->vp_host_logits;
    PROF_BEGIN();
    m->k->copy_to_host(lg, a->logits, (size_t)N * Vl * sizeof(float));
    for (int i = 0; i < N; i++) {
        float mx = -INFINITY;
        for (int j = 0; j < Vl; j++)
            mx = fmaxf(mx, lg[(size_t)i * Vl + j]);
        a->ce_max[i] = mx;
    }
    m->shard.tp_allreduce_host(a->ce_max, (size_t)N, 1, m->shard.tp_ctx);
    float *sum_and_target = calloc(2 * (size_t)N, sizeof(float));
    for (int i = 0; i < N; i++) {
        double se = 0;
        for (int j = 0; j < Vl; j++)
            se += exp((double)lg[(size_t)i * Vl + j] - a->ce_max[i]);
        sum_and_target[i] = (float)se;
        int t = a->host_targets[i] - lo;
        sum_and_target[N + i] = t >= 0 && t < Vl ? lg[(size_t)i * Vl + t] : 0.0f;
    }
    m->shard.tp_allreduce_host(sum_and_target, 2 * (size_t)N, 0, m->shard.tp_ctx);
    double total = 0;
    for (int i = 0; i < N; i++) {
        a->ce_sum[i] = sum_and_target[i];
        total += log((double)sum_and_target[i]) + a->ce_max[i] - sum_and_target[N + i];
    }
    free(sum_and_target);
    PROF_END("cross_entropy", -1, 0, (double)N * Vl * 4, "N=%d V=%d", N, Vl);
    return (float)(total / N);
}

/* d_logits = dloss (softmax - onehot) on this rank's vocabulary columns. */
static void vocab_parallel_loss_backward(gpt_model *m, gpt_acts *a, float dloss)
{
    int N = m->B * m->T, Vl = m->cfg.vocab / m->shard.tp, lo = m->shard.tp_rank * Vl;
    float *lg = m->vp_host_logits;
    m->k->copy_to_host(lg, a->logits, (size_t)N * Vl * sizeof(float));
    for (int i = 0; i < N; i++) {
        float *row = lg + (size_t)i * Vl;
        for (int j = 0; j < Vl; j++)
            row[j] = (float)(exp((double)row[j] - a->ce_max[i]) / a->ce_sum[i]) * dloss;
        int t = a->host_targets[i] - lo;
        if (t >= 0 && t < Vl)
            row[t] -= dloss;
    }
    m->k->copy_to_device(m->d_logits, lg, (size_t)N * Vl * sizeof(float));
}

/* The vocabulary-parallel embedding: each rank looks up the tokens in its rows (zero for the
 * others), the TP sum assembles every row, then the position embedding is added. */
static void vocab_parallel_embedding(gpt_model *m, gpt_acts *a, const int *tokens)
{
    const kernels_backend *k = m->k;
    int B = m->B, T = m->T, C = m->cfg.hidden, N = B * T, Vl = m->cfg.vocab / m->shard.tp;
    int lo = m->shard.tp_rank * Vl;
    int *local = malloc((size_t)N * sizeof(int));
    for (int i = 0; i < N; i++) {
        int t = tokens[i] - lo;
        a->in_vocab[i] = t >= 0 && t < Vl;
        local[i] = a->in_vocab[i] ? t : 0;
    }
    k->copy_to_device(a->tokens, local, (size_t)N * sizeof(int));
    free(local);
    float *e = gpt_sp(m) ? m->sp_full : a->encoded; /* under SP, the TP sum is reduce-scattered */
    k->encoder_forward(e, a->tokens, gpt_param(m, GPT_WTE), m->vp_zeros, B, T, C);
    for (int i = 0; i < N; i++)
        if (!a->in_vocab[i])
            k->memset_zero(e + (size_t)i * C, (size_t)C * sizeof(float));
    gpt_sp_reduce(m, e, a->encoded);
    /* positions: a lookup of token 0 in an all-zero one-row table, plus wpe (none under rope) */
    if (m->cfg.rope)
        return;
    if (gpt_cp(m)) /* the rank's global positions, wpe read as a token table */
        k->encoder_forward(m->vp_tmp, m->cp_positions, gpt_param(m, GPT_WPE), m->cp_zeros, B, T, C);
    else
        k->encoder_forward(m->vp_tmp, m->vp_zero_tokens, m->vp_zeros, gpt_param(m, GPT_WPE), B, T, C);
    k->residual_forward(a->encoded, a->encoded, gpt_sp_own(m, m->vp_tmp), gpt_stream_floats(m), KPREC_FP32);
}

static void vocab_parallel_embedding_backward(gpt_model *m, gpt_acts *a)
{
    const kernels_backend *k = m->k;
    int B = m->B, T = m->T, C = m->cfg.hidden, N = B * T;
    const float *d = gpt_sp_gather(m, m->d_res); /* the whole sequence's gradient */
    /* this rank's rows get the gradient of the tokens it looked up; the others are masked */
    k->copy(m->vp_tmp, d, (size_t)N * C * sizeof(float));
    for (int i = 0; i < N; i++)
        if (!a->in_vocab[i])
            k->memset_zero(m->vp_tmp + (size_t)i * C, (size_t)C * sizeof(float));
    k->encoder_backward(gpt_grad(m, GPT_WTE), m->vp_sink, m->vp_tmp, a->tokens, B, T, C);
    /* wpe gets every position's gradient, replicated on each TP rank like wpe itself */
    if (m->cfg.rope)
        return;
    if (gpt_cp(m))
        gpt_cp_positions_backward(m, d);
    else
        k->encoder_backward(m->vp_sink, gpt_grad(m, GPT_WPE), d, m->vp_zero_tokens, B, T, C);
}

/* The final norm, LM head and loss on the last layer's output; returns the mean loss. */
static float head_forward(gpt_model *m, gpt_acts *a)
{
    const kernels_backend *k = m->k;
    int C = m->cfg.hidden, V = m->cfg.vocab, L = m->cfg.num_layers, N = m->B * m->T;
    double f = 4.0 * (double)sizeof(float);
    float *x = a->layers[L - 1].res3;
    int lnf = gpt_lnf_w(m), tied = !m->cfg.untied;
    if (tied)
        hook(m, GPT_WTE, 1, 1, 0);
    hook(m, lnf, GPT_HEAD_TENSORS, 1, 0);
    int Ns = gpt_stream_tokens(m);
    PROF_BEGIN();
    gpt_norm_forward(m, a->lnf, a->lnf_mean, a->lnf_rstd, x, gpt_param(m, lnf), gpt_param(m, lnf + 1));
    gpt_round_act(m, a->lnf, (size_t)Ns * C);
    PROF_END("lnf", -1, 0, 2.0 * Ns * C * f / 4, "N=%d C=%d", Ns, C);
    int Vl = V / m->shard.tp;
    const float *lnf_all = gpt_sp_gather(m, a->lnf);
    PROF_BEGIN();
    k->matmul_forward(a->logits, lnf_all, gpt_param(m, gpt_head_weight(m)), NULL, N, C, Vl, m->prec);
    PROF_END("lm_head", -1, m->flops_fwd.lm_head, gemm_bytes(N, Vl, C), "m=%d n=%d k=%d", N, Vl, C);
    hook(m, lnf, GPT_HEAD_TENSORS, 0, 0);
    if (tied)
        hook(m, GPT_WTE, 1, 0, 0);
    if (m->shard.tp > 1)
        return vocab_parallel_loss(m, a);
    PROF_BEGIN();
    k->cross_entropy_forward(a->losses, a->logits, a->targets, N, V);
    PROF_END("cross_entropy", -1, 0, (double)N * V * 4, "N=%d V=%d", N, V);

    float *host = malloc((size_t)N * sizeof(float));
    k->copy_to_host(host, a->losses, (size_t)N * sizeof(float));
    double sum = 0;
    for (int i = 0; i < N; i++)
        sum += host[i];
    free(host);
    return (float)(sum / N);
}

const float *gpt_forward_layers(gpt_model *m, int slot, int l0, int l1, const int *tokens, const int *targets,
                                const float *in, float *loss)
{
    check_layers(m, slot, l0, l1);
    const kernels_backend *k = m->k;
    int B = m->B, T = m->T, C = m->cfg.hidden, L = m->cfg.num_layers, N = B * T;
    double f = 4.0 * (double)sizeof(float);
    gpt_acts *a = &m->acts[slot];
    m->moe_aux_loss = 0;
    if (gpt_cp(m) && tokens) { /* whole sequences in, this rank's positions of them used */
        gpt_cp_local_tokens(m, tokens, m->cp_tokens);
        tokens = m->cp_tokens;
    }
    if (gpt_cp(m) && targets) {
        gpt_cp_local_tokens(m, targets, m->cp_targets);
        targets = m->cp_targets;
    }
    if (l0 == 0) {
        hook(m, GPT_WTE, 2, 1, 0);
        PROF_BEGIN();
        if (m->shard.tp > 1) {
            vocab_parallel_embedding(m, a, tokens);
        } else {
            k->copy_to_device(a->tokens, tokens, (size_t)N * sizeof(int));
            if (m->cfg.rope) { /* no position table: the attention turns q and k instead */
                k->encoder_forward(a->encoded, a->tokens, gpt_param(m, GPT_WTE), NULL, B, T, C);
            } else if (gpt_cp(m)) { /* tokens, then the global positions */
                k->encoder_forward(a->encoded, a->tokens, gpt_param(m, GPT_WTE), m->cp_zeros, B, T, C);
                gpt_cp_add_positions(m, a->encoded);
            } else {
                k->encoder_forward(a->encoded, a->tokens, gpt_param(m, GPT_WTE), gpt_param(m, GPT_WPE), B, T, C);
            }
        }
        gpt_round_act(m, a->encoded, gpt_stream_floats(m));
        PROF_END("embedding", -1, 0, 3.0 * N * C * f / 4, "B=%d T=%d C=%d", B, T, C);
        hook(m, GPT_WTE, 2, 0, 0);
    } else {
        k->copy_to_device(layer_input(m, a, l0), in, gpt_stream_floats(m) * sizeof(float));
    }
    for (int l = l0; l < l1; l++)
        block_forward(m, a, l);
    if (l1 == L) {
        k->copy_to_device(a->targets, targets, (size_t)N * sizeof(int));
        if (a->host_targets)
            memcpy(a->host_targets, targets, (size_t)N * sizeof(int));
        *loss = head_forward(m, a);
    }
    return a->layers[l1 - 1].res3;
}

float gpt_forward(gpt_model *m, const int *tokens, const int *targets)
{
    float loss = 0;
    gpt_forward_layers(m, 0, 0, m->cfg.num_layers, tokens, targets, NULL, &loss);
    return loss;
}

/* dL/d(last layer's output) into m->d_res, from the loss scaled by dloss. */
static void head_backward(gpt_model *m, gpt_acts *a, float dloss)
{
    const kernels_backend *k = m->k;
    int C = m->cfg.hidden, V = m->cfg.vocab, L = m->cfg.num_layers, N = m->B * m->T;
    size_t NC = (size_t)N * C;
    int lnf = gpt_lnf_w(m), tied = !m->cfg.untied, head_w = gpt_head_weight(m);
    if (tied)
        hook(m, GPT_WTE, 1, 1, 1);
    hook(m, lnf, GPT_HEAD_TENSORS, 1, 1);
    int Vl = V / m->shard.tp;
    PROF_BEGIN();
    if (m->shard.tp > 1) {
        vocab_parallel_loss_backward(m, a, dloss);
    } else {
        k->memset_zero(m->d_logits, (size_t)N * V * sizeof(float));
        k->cross_entropy_backward(m->d_logits, a->logits, a->targets, dloss, N, V);
    }
    gpt_round_act(m, m->d_logits, (size_t)N * Vl);
    PROF_END("cross_entropy_bwd", -1, 0, (double)N * Vl * 8, "N=%d V=%d", N, Vl);
    const float *lnf_all = gpt_sp_gather(m, a->lnf);
    PROF_BEGIN();
    k->memset_zero(m->d_a, NC * sizeof(float));
    k->matmul_backward(m->d_a, gpt_grad(m, head_w), NULL, m->d_logits, lnf_all, gpt_param(m, head_w), N, C, Vl,
                       m->prec);
    PROF_END("lm_head_bwd", -1, m->flops_bwd.lm_head, 2 * gemm_bytes(N, Vl, C), "m=%d n=%d k=%d", N, Vl, C);
    /* each rank's vocabulary columns contribute to every row: summed (under SP into this rank's rows) */
    int Ns = gpt_stream_tokens(m);
    size_t NsC = (size_t)Ns * C;
    float *dnorm = gpt_sp(m) ? m->d_b : m->d_a;
    gpt_sp_reduce(m, m->d_a, dnorm);
    gpt_round_act(m, dnorm, NsC);
    PROF_BEGIN();
    k->memset_zero(m->d_res, NsC * sizeof(float));
    gpt_sp_norm_backward(m, m->d_res, gpt_grad(m, lnf), gpt_grad(m, lnf + 1), dnorm, a->layers[L - 1].res3,
                         gpt_param(m, lnf), a->lnf_mean, a->lnf_rstd);
    gpt_round_act(m, m->d_res, NsC);
    PROF_END("lnf_bwd", -1, 0, 4.0 * NsC * 4, "N=%d C=%d", Ns, C);
    hook(m, lnf, GPT_HEAD_TENSORS, 0, 1);
    if (tied)
        hook(m, GPT_WTE, 1, 0, 1);
}

/* The attention core's backward into m->d_qkv from m->d_a (the projection's input gradient),
 * rerun first under selective recomputation; one profiled op, as the forward's. */
static void attention_core_backward(gpt_model *m, const gpt_layer_acts *a, int l)
{
    int B = m->B, T = m->T, tp = m->shard.tp, NH = m->cfg.heads / tp, Cl = m->cfg.hidden / tp, N = B * T;
    const float *atty = a->atty, *lse = a->lse;
    if (m->shard.recompute == GPT_RECOMPUTE_SELECTIVE) { /* the attention core again, for its rows */
        PROF_BEGIN();
        gpt_attention_core_forward(m, m->scratch->atty, m->scratch->lse, a->qkv);
        PROF_END("attention", l, m->flops_fwd.attention, 4.0 * N * (4.0 * Cl + NH),
                 "B=%d T=%d heads=%d head_dim=%d", B, T, NH, Cl / NH);
        atty = m->scratch->atty;
        lse = m->scratch->lse;
    }
    PROF_BEGIN();
    m->k->memset_zero(m->d_qkv, (size_t)N * gpt_qkv_width(m) * sizeof(float));
    gpt_attention_core_backward(m, m->d_qkv, m->d_a, a->qkv, atty, lse);
    PROF_END("attention_bwd", l, m->flops_bwd.attention, 4.0 * N * (8.0 * Cl + NH),
             "B=%d T=%d heads=%d head_dim=%d", B, T, NH, Cl / NH);
}

/* m->d_res holds dL/d(res3) of layer l on entry and dL/d(input of l) on return; dloss is the
 * backward's per-token loss scale (the experts' load-balancing loss takes its share of it). */
static void block_backward(gpt_model *m, gpt_acts *act, int l, float dloss)
{
    const kernels_backend *k = m->k;
    int B = m->B, T = m->T, C = m->cfg.hidden, tp = m->shard.tp, NH = m->cfg.heads / tp, Cl = C / tp;
    int N = B * T, W = gpt_qkv_width(m), F = gpt_mlp_width(m), F1 = m->cfg.swiglu ? 2 * F : F;
    size_t NCl = (size_t)N * Cl;
    gpt_layer_acts *a = &act->layers[l];
    float *x = layer_input(m, act, l);
    float *w[LAYER_TENSORS], *g[LAYER_TENSORS];
    recompute_group(m, act, l);
    hook(m, gpt_layer_tensor(m, l, 0), LAYER_TENSORS, 1, 1); /* before the pointers: ZeRO maps windows here */
    for (int j = 0; j < LAYER_TENSORS; j++) {
        w[j] = gpt_param(m, gpt_layer_tensor(m, l, j));
        g[j] = gpt_grad(m, gpt_layer_tensor(m, l, j));
    }
    /* MLP: res3 = res2 + fc2(gelu(fc1(ln2(res2)))). The replicated biases' gradients come out
     * equal on every TP rank, since d_res is (under SP once all-gathered). d_res and the norms'
     * gradients hold the stream's Ns tokens; a row-parallel GEMM's input gradient is reduced
     * into dnorm (d_a's or, under SP, d_b's first Ns rows: the other is free by then). */
    int Ns = gpt_stream_tokens(m);
    size_t NsC = (size_t)Ns * C;
    float *dnorm = gpt_sp(m) ? m->d_b : m->d_a;
    if (m->cfg.num_experts) { /* the experts in place of the MLP */
        gpt_moe_backward(m, a, w, g, dnorm, dloss, l); /* profiled op by op inside */
    } else {
        PROF_BEGIN();
        gpt_sp_row_backward(m, m->d_big, g[J_FCPROJ_W], g[J_FCPROJ_B], m->d_res, a->fch_gelu, w[J_FCPROJ_W], F, C);
        gpt_round_act(m, m->d_big, (size_t)N * F);
        PROF_END("fc2_bwd", l, m->flops_bwd.fc2, 2 * gemm_bytes(N, C, F), "m=%d n=%d k=%d", N, C, F);
        PROF_BEGIN();
        k->memset_zero(m->d_big2, (size_t)N * F1 * sizeof(float));
        gpt_mlp_act_backward(m, m->d_big2, a->fch, m->d_big);
        PROF_END(m->cfg.swiglu ? "swiglu_bwd" : "gelu_bwd", l, 0, 4.0 * N * (2.0 * F1 + F), "n=%d", N * F);
        PROF_BEGIN();
        gpt_sp_column_backward(m, dnorm, g[J_FC_W], g[J_FC_B], m->d_big2, a->ln2, w[J_FC_W], C, F1, m->d_a);
        PROF_END("fc1_bwd", l, m->flops_bwd.fc1, 2 * gemm_bytes(N, F1, C), "m=%d n=%d k=%d", N, F1, C);
    }
    gpt_round_act(m, dnorm, NsC);
    PROF_BEGIN();
    gpt_sp_norm_backward(m, m->d_res, g[J_LN2_W], g[J_LN2_B], dnorm, a->res2, w[J_LN2_W], a->ln2_mean, a->ln2_rstd);
    gpt_round_act(m, m->d_res, NsC); /* now dL/d(res2) */
    PROF_END("ln2_bwd", l, 0, 4.0 * NsC * 4, "N=%d C=%d", Ns, C);
    /* Attention: res2 = x + proj(attn(qkv(ln1(x)))). */
    PROF_BEGIN();
    gpt_sp_row_backward(m, m->d_a, g[J_PROJ_W], g[J_PROJ_B], m->d_res, a->atty, w[J_PROJ_W], Cl, C);
    gpt_round_act(m, m->d_a, NCl);
    PROF_END("attn_proj_bwd", l, m->flops_bwd.attn_proj, 2 * gemm_bytes(N, C, Cl), "m=%d n=%d k=%d", N, C, Cl);
    if (gpt_cp_a2a(m)) {
        const gpt_layer_acts *kept = a;
        if (m->shard.recompute == GPT_RECOMPUTE_SELECTIVE) { /* the core again, its output not sent back */
            gpt_attention_a2a_forward(m, m->scratch, a->qkv, NULL, 0, l);
            kept = m->scratch;
        }
        gpt_attention_a2a_backward(m, kept, m->d_qkv, m->d_a, l);
    } else {
        attention_core_backward(m, a, l);
    }
    gpt_round_act(m, m->d_qkv, (size_t)N * W);
    if (m->cfg.rope) {
        PROF_BEGIN();
        gpt_rope_backward(m, m->d_qkv);
        gpt_round_act(m, m->d_qkv, (size_t)N * W);
        PROF_END("rope_bwd", l, 0, 2.0 * N * (NH + m->cfg.kv_groups / tp) * (C / m->cfg.heads) * 4, "N=%d n=%d", N, W);
    }
    dnorm = gpt_sp(m) ? m->d_a : m->d_b; /* d_a's attention gradient is spent */
    PROF_BEGIN();
    gpt_sp_column_backward(m, dnorm, g[J_QKV_W], g[J_QKV_B], m->d_qkv, a->ln1, w[J_QKV_W], C, W, m->d_b);
    PROF_END("qkv_bwd", l, m->flops_bwd.qkv, 2 * gemm_bytes(N, W, C), "m=%d n=%d k=%d", N, W, C);
    gpt_round_act(m, dnorm, NsC);
    PROF_BEGIN();
    gpt_sp_norm_backward(m, m->d_res, g[J_LN1_W], g[J_LN1_B], dnorm, x, w[J_LN1_W], a->ln1_mean, a->ln1_rstd);
    gpt_round_act(m, m->d_res, NsC); /* now dL/dx */
    PROF_END("ln1_bwd", l, 0, 4.0 * NsC * 4, "N=%d C=%d", Ns, C);
    hook(m, gpt_layer_tensor(m, l, 0), LAYER_TENSORS, 0, 1);
}

const float *gpt_backward_layers(gpt_model *m, int slot, int l0, int l1, float dloss, const float *dout)
{
    check_layers(m, slot, l0, l1);
    const kernels_backend *k = m->k;
    int B = m->B, T = m->T, C = m->cfg.hidden, N = B * T;
    size_t NC = (size_t)N * C;
    gpt_acts *a = &m->acts[slot];
    if (l1 == m->cfg.num_layers)
        head_backward(m, a, dloss);
    else
        k->copy_to_device(m->d_res, dout, gpt_stream_floats(m) * sizeof(float));
    for (int l = l1 - 1; l >= l0; l--)
        block_backward(m, a, l, dloss);
    if (l0 > 0)
        return m->d_res;
    hook(m, GPT_WTE, 2, 1, 1);
    PROF_BEGIN();
    if (m->shard.tp > 1)
        vocab_parallel_embedding_backward(m, a);
    else
        if (m->cfg.rope) {
            k->encoder_backward(gpt_grad(m, GPT_WTE), NULL, m->d_res, a->tokens, B, T, C);
        } else if (gpt_cp(m)) {
            k->encoder_backward(gpt_grad(m, GPT_WTE), m->cp_sink, m->d_res, a->tokens, B, T, C);
            gpt_cp_positions_backward(m, m->d_res);
        } else {
            k->encoder_backward(gpt_grad(m, GPT_WTE), gpt_grad(m, GPT_WPE), m->d_res, a->tokens, B, T, C);
        }
    PROF_END("embedding_bwd", -1, 0, 3.0 * NC * 4, "B=%d T=%d C=%d", B, T, C);
    hook(m, GPT_WTE, 2, 0, 1);
    return NULL;
}

void gpt_backward(gpt_model *m, float dloss)
{
    gpt_backward_layers(m, 0, 0, m->cfg.num_layers, dloss, NULL);
}
