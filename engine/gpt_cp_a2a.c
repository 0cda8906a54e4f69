/* Context parallelism's all-to-all form (Megatron-Core's cp_comm_type a2a, DeepSpeed-Ulysses;
 * Transformer Engine's AttnFuncWithCPAndQKVOA2A): a CP rank holds T/cp positions of every head
 * (gpt_cp.c's two load-balanced chunks); one all-to-all over the CP group gives it the whole
 * sequence of cp_rank's 1/cp of the heads, where plain causal attention runs; a second one sends
 * each rank's positions of the output back. The backward mirrors them: the output gradient to
 * the heads' ranks, the attention's backward on the head-sharded tensors the forward kept (as
 * Transformer Engine keeps them), the qkv gradient back to the positions' owners.
 *
 * Row layouts (floats): a rank's tensor is B x T rows of its parts one after another (qkv: q, k,
 * v; the output: one), each part a run of heads of hs floats; the head-sharded one is B x cp T
 * rows of the same parts, each cut to its 1/cp of the heads (of the query groups, for k and v
 * under grouped-query attention: sent as groups, as Transformer Engine sends them, and repeated
 * to heads on arrival), at global positions. The exchanges run on host copies (exact), as EP's
 * do. */
#include <stdlib.h>
#include <string.h>
#include "gpt.h"
#include "gpt_internal.h"

struct gpt_cp_a2a {
    float *local, *send, *recv, *whole; /* host: B T x 3 Cl floats each, the most a tensor takes */
    float *dout, *dqkv;                 /* device: the output's and qkv's gradients, head-sharded */
    float *grouped, *dgrouped;          /* device, grouped-query attention: the head-sharded qkv as
                                           groups, and its gradient (NULL without groups) */
};

int gpt_cp_a2a(const gpt_model *m)
{
    return gpt_cp(m) && m->shard.cp_a2a;
}

/* The widths of a tensor's parts: qkv (q, and k and v as heads or as groups), or the output. */
static int parts_of(const gpt_model *m, int qkv, int grouped, size_t *part)
{
    size_t Cl = (size_t)m->cfg.hidden / m->shard.tp, hs = (size_t)(m->cfg.hidden / m->cfg.heads);
    size_t kv = grouped ? (size_t)m->cfg.kv_groups / m->shard.tp * hs : Cl;
    part[0] = Cl;
    part[1] = part[2] = kv;
    return qkv ? 3 : 1;
}

/* local (device, B x T rows of the parts) to the head-sharded whole (device, B x cp T rows of
 * each part's 1/cp). */
static void to_heads(gpt_model *m, const float *local, float *whole, const size_t *part, int parts)
{
    struct gpt_cp_a2a *s = m->cp_a2a;
    int B = m->B, T = m->T, cp = m->shard.cp, Tf = T * cp;
    size_t W = 0, rows = (size_t)B * T;
    for (int p = 0; p < parts; p++)
        W += part[p];
    size_t Wc = W / cp, block = rows * Wc; /* what each rank gets of this one */
    m->k->copy_to_host(s->local, local, rows * W * sizeof(float));
    for (int d = 0; d < cp; d++) /* to rank d: its heads of every part, at this rank's positions */
        for (size_t row = 0; row < rows; row++)
            for (size_t p = 0, at = 0, atc = 0; p < (size_t)parts; at += part[p], atc += part[p] / cp, p++)
                memcpy(s->send + d * block + row * Wc + atc, s->local + row * W + at + d * (part[p] / cp),
                       part[p] / cp * sizeof(float));
    m->shard.cp_alltoall(s->send, s->recv, (size_t)cp * block, m->shard.cp_ctx);
    for (int r = 0; r < cp; r++) /* from rank r: this rank's heads at r's positions */
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                memcpy(s->whole + ((size_t)b * Tf + gpt_cp_position_of(m, r, t)) * Wc,
                       s->recv + r * block + ((size_t)b * T + t) * Wc, Wc * sizeof(float));
    m->k->copy_to_device(whole, s->whole, (size_t)B * Tf * Wc * sizeof(float));
}

/* The reverse: the head-sharded whole (device) to local (device), added to it where add. */
static void to_positions(gpt_model *m, const float *whole, float *local, const size_t *part, int parts, int add)
{
    struct gpt_cp_a2a *s = m->cp_a2a;
    int B = m->B, T = m->T, cp = m->shard.cp, Tf = T * cp;
    size_t W = 0, rows = (size_t)B * T;
    for (int p = 0; p < parts; p++)
        W += part[p];
    size_t Wc = W / cp, block = rows * Wc;
    m->k->copy_to_host(s->whole, whole, (size_t)B * Tf * Wc * sizeof(float));
    for (int d = 0; d < cp; d++) /* to rank d: this rank's heads at d's positions */
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                memcpy(s->send + d * block + ((size_t)b * T + t) * Wc,
                       s->whole + ((size_t)b * Tf + gpt_cp_position_of(m, d, t)) * Wc, Wc * sizeof(float));
    m->shard.cp_alltoall(s->send, s->recv, (size_t)cp * block, m->shard.cp_ctx);
    if (add)
        m->k->copy_to_host(s->local, local, rows * W * sizeof(float));
    for (int r = 0; r < cp; r++) /* from rank r: its heads at this rank's positions */
        for (size_t row = 0; row < rows; row++)
            for (size_t p = 0, at = 0, atc = 0; p < (size_t)parts; at += part[p], atc += part[p] / cp, p++) {
                size_t n = part[p] / cp;
                float *dst = s->local + row * W + at + r * n;
                const float *src = s->recv + r * block + row * Wc + atc;
                if (add)
                    for (size_t i = 0; i < n; i++)
                        dst[i] += src[i];
                else
                    memcpy(dst, src, n * sizeof(float));
            }
    m->k->copy_to_device(local, s->local, rows * W * sizeof(float));
}

/* Whether the query groups travel as groups (grouped-query attention). */
static int grouped(const gpt_model *m)
{
    return m->cfg.kv_groups < m->cfg.heads;
}

void gpt_cp_a2a_qkv(gpt_model *m, gpt_layer_acts *x, const float *qkv)
{
    size_t part[3];
    int g = grouped(m), parts = parts_of(m, 1, g, part);
    if (!g) {
        to_heads(m, qkv, x->a2a_qkv, part, parts);
        return;
    }
    int cp = m->shard.cp, tp = m->shard.tp;
    to_heads(m, qkv, m->cp_a2a->grouped, part, parts);
    m->k->kv_repeat_forward(x->a2a_qkv, m->cp_a2a->grouped, m->B, m->T * cp, m->cfg.heads / tp / cp,
                            m->cfg.kv_groups / tp / cp, m->cfg.hidden / m->cfg.heads);
}

void gpt_cp_a2a_attention(gpt_model *m, gpt_layer_acts *x)
{
    int cp = m->shard.cp, NH = m->cfg.heads / m->shard.tp / cp, Cc = m->cfg.hidden / m->shard.tp / cp;
    m->k->attention_forward(x->a2a_atty, x->a2a_lse, x->a2a_qkv, m->B, m->T * cp, Cc, NH, m->prec);
}

void gpt_cp_a2a_out(gpt_model *m, gpt_layer_acts *x, float *atty)
{
    size_t part[3];
    to_positions(m, x->a2a_atty, atty, part, parts_of(m, 0, 0, part), 0);
}

void gpt_cp_a2a_dout(gpt_model *m, const float *dout)
{
    size_t part[3];
    to_heads(m, dout, m->cp_a2a->dout, part, parts_of(m, 0, 0, part));
}

void gpt_cp_a2a_attention_backward(gpt_model *m, const gpt_layer_acts *x)
{
    int cp = m->shard.cp, NH = m->cfg.heads / m->shard.tp / cp, Cc = m->cfg.hidden / m->shard.tp / cp;
    size_t whole = (size_t)m->B * m->T * cp;
    m->k->memset_zero(m->cp_a2a->dqkv, whole * 3 * Cc * sizeof(float));
    m->k->attention_backward(m->cp_a2a->dqkv, m->cp_a2a->dout, x->a2a_qkv, x->a2a_atty, x->a2a_lse, m->B,
                             m->T * cp, Cc, NH, m->prec);
}

void gpt_cp_a2a_dqkv(gpt_model *m, float *dqkv)
{
    size_t part[3];
    int g = grouped(m), parts = parts_of(m, 1, g, part);
    if (!g) {
        to_positions(m, m->cp_a2a->dqkv, dqkv, part, parts, 1);
        return;
    }
    /* the repeated groups' gradients summed back into each group, then the groups home */
    int cp = m->shard.cp, tp = m->shard.tp, G = m->cfg.kv_groups / tp / cp, hs = m->cfg.hidden / m->cfg.heads;
    size_t whole = (size_t)m->B * m->T * cp, W = part[0] + 2 * part[1];
    m->k->memset_zero(m->cp_a2a->dgrouped, whole * W / cp * sizeof(float));
    m->k->kv_repeat_backward(m->cp_a2a->dgrouped, m->cp_a2a->dqkv, m->B, m->T * cp, m->cfg.heads / tp / cp, G, hs);
    to_positions(m, m->cp_a2a->dgrouped, dqkv, part, parts, 1);
}

void gpt_cp_a2a_free_acts(const kernels_backend *k, gpt_layer_acts *x)
{
    float *p[] = {x->a2a_qkv, x->a2a_atty, x->a2a_lse};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i])
            k->free(p[i]);
    x->a2a_qkv = x->a2a_atty = x->a2a_lse = NULL;
}

void gpt_cp_a2a_alloc(gpt_model *m)
{
    struct gpt_cp_a2a *s = calloc(1, sizeof *s);
    size_t n = (size_t)m->B * m->cfg.seq_len / m->shard.cp * 3 * ((size_t)m->cfg.hidden / m->shard.tp);
    s->local = malloc(n * sizeof(float));
    s->send = malloc(n * sizeof(float));
    s->recv = malloc(n * sizeof(float));
    s->whole = malloc(n * sizeof(float)); /* B cp T x 3 Cl/cp: as many */
    size_t whole = (size_t)m->B * m->cfg.seq_len, Cc = (size_t)m->cfg.hidden / m->shard.tp / m->shard.cp;
    s->dout = m->k->alloc(whole * Cc * sizeof(float));
    s->dqkv = m->k->alloc(whole * 3 * Cc * sizeof(float));
    if (grouped(m)) {
        size_t Wc = (size_t)gpt_qkv_width(m) / m->shard.cp;
        s->grouped = m->k->alloc(whole * Wc * sizeof(float));
        s->dgrouped = m->k->alloc(whole * Wc * sizeof(float));
    }
    m->cp_a2a = s;
}

void gpt_cp_a2a_free(gpt_model *m)
{
    struct gpt_cp_a2a *s = m->cp_a2a;
    if (!s)
        return;
    free(s->local);
    free(s->send);
    free(s->recv);
    free(s->whole);
    m->k->free(s->dout);
    m->k->free(s->dqkv);
    if (s->grouped) {
        m->k->free(s->grouped);
        m->k->free(s->dgrouped);
    }
    free(s);
    m->cp_a2a = NULL;
}
