/* Context parallelism's all-to-all form (Megatron-Core's cp_comm_type a2a, DeepSpeed-Ulysses;
 * Transformer Engine's AttnFuncWithCPAndQKVOA2A): a CP rank holds T/cp positions of every head
 * (gpt_cp.c's two load-balanced chunks); one all-to-all over the CP group gives it the whole
 * sequence of cp_rank's 1/cp of the heads, where plain causal attention runs; a second one sends
 * each rank's positions of the output back. The backward mirrors them: the output gradient to
 * the heads' ranks, the attention's backward on the head-sharded tensors the forward kept (as
 * Transformer Engine keeps them), the qkv gradient back to the positions' owners.
 *
 * Row layouts (floats): a rank's tensor of `parts` parts (qkv: 3, the output: 1) is B x T rows
 * of parts x Cl, part p at p Cl, head j of a part at j hs (Cl = NH hs, the rank's TP heads); the
 * head-sharded one is B x cp T rows of parts x Cl/cp, the heads [cp_rank NH/cp, +NH/cp) of each
 * part, at global positions. The exchanges run on host copies (exact), as EP's do. */
#include <stdlib.h>
#include <string.h>
#include "gpt.h"
#include "gpt_internal.h"

struct gpt_cp_a2a {
    float *local, *send, *recv, *whole; /* host: B T x parts Cl each (parts 3 at most) */
    float *dout, *dqkv;                 /* device: the output's and qkv's gradients, head-sharded */
};

int gpt_cp_a2a(const gpt_model *m)
{
    return gpt_cp(m) && m->shard.cp_a2a;
}

/* local (device, B x T x parts Cl) to the head-sharded whole (device, B x cp T x parts Cl/cp). */
static void to_heads(gpt_model *m, const float *local, float *whole, int parts)
{
    struct gpt_cp_a2a *s = m->cp_a2a;
    int B = m->B, T = m->T, cp = m->shard.cp, Tf = T * cp;
    size_t Cl = (size_t)m->cfg.hidden / m->shard.tp, Cc = Cl / cp, W = parts * Cl, Wc = parts * Cc;
    size_t block = (size_t)B * T * Wc; /* what each rank gets of this one */
    m->k->copy_to_host(s->local, local, (size_t)B * T * W * sizeof(float));
    for (int d = 0; d < cp; d++) /* to rank d: its heads of every part, at this rank's positions */
        for (size_t row = 0; row < (size_t)B * T; row++)
            for (int p = 0; p < parts; p++)
                memcpy(s->send + d * block + row * Wc + p * Cc, s->local + row * W + p * Cl + d * Cc,
                       Cc * sizeof(float));
    m->shard.cp_alltoall(s->send, s->recv, (size_t)cp * block, m->shard.cp_ctx);
    for (int r = 0; r < cp; r++) /* from rank r: this rank's heads at r's positions */
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                memcpy(s->whole + ((size_t)b * Tf + gpt_cp_position_of(m, r, t)) * Wc,
                       s->recv + r * block + ((size_t)b * T + t) * Wc, Wc * sizeof(float));
    m->k->copy_to_device(whole, s->whole, (size_t)B * Tf * Wc * sizeof(float));
}

/* The reverse: the head-sharded whole (device) to local (device), added to it where add. */
static void to_positions(gpt_model *m, const float *whole, float *local, int parts, int add)
{
    struct gpt_cp_a2a *s = m->cp_a2a;
    int B = m->B, T = m->T, cp = m->shard.cp, Tf = T * cp;
    size_t Cl = (size_t)m->cfg.hidden / m->shard.tp, Cc = Cl / cp, W = parts * Cl, Wc = parts * Cc;
    size_t block = (size_t)B * T * Wc;
    m->k->copy_to_host(s->whole, whole, (size_t)B * Tf * Wc * sizeof(float));
    for (int d = 0; d < cp; d++) /* to rank d: this rank's heads at d's positions */
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                memcpy(s->send + d * block + ((size_t)b * T + t) * Wc,
                       s->whole + ((size_t)b * Tf + gpt_cp_position_of(m, d, t)) * Wc, Wc * sizeof(float));
    m->shard.cp_alltoall(s->send, s->recv, (size_t)cp * block, m->shard.cp_ctx);
    if (add)
        m->k->copy_to_host(s->local, local, (size_t)B * T * W * sizeof(float));
    for (int r = 0; r < cp; r++) /* from rank r: its heads at this rank's positions */
        for (size_t row = 0; row < (size_t)B * T; row++)
            for (int p = 0; p < parts; p++) {
                float *dst = s->local + row * W + p * Cl + r * Cc;
                const float *src = s->recv + r * block + row * Wc + p * Cc;
                if (add)
                    for (size_t i = 0; i < Cc; i++)
                        dst[i] += src[i];
                else
                    memcpy(dst, src, Cc * sizeof(float));
            }
    m->k->copy_to_device(local, s->local, (size_t)B * T * W * sizeof(float));
}

void gpt_cp_a2a_qkv(gpt_model *m, gpt_layer_acts *x, const float *qkv)
{
    to_heads(m, qkv, x->a2a_qkv, 3);
}

void gpt_cp_a2a_attention(gpt_model *m, gpt_layer_acts *x)
{
    int cp = m->shard.cp, NH = m->cfg.heads / m->shard.tp / cp, Cc = m->cfg.hidden / m->shard.tp / cp;
    m->k->attention_forward(x->a2a_atty, x->a2a_lse, x->a2a_qkv, m->B, m->T * cp, Cc, NH, m->prec);
}

void gpt_cp_a2a_out(gpt_model *m, gpt_layer_acts *x, float *atty)
{
    to_positions(m, x->a2a_atty, atty, 1, 0);
}

void gpt_cp_a2a_dout(gpt_model *m, const float *dout)
{
    to_heads(m, dout, m->cp_a2a->dout, 1);
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
    to_positions(m, m->cp_a2a->dqkv, dqkv, 3, 1);
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
    free(s);
    m->cp_a2a = NULL;
}
