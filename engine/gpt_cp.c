/* Context parallelism (gpt.h: gpt_shard.cp), as Megatron-Core splits a sequence: each of the cp
 * ranks holds T/cp positions of every sequence, in two chunks of T/(2cp) with causal load
 * balancing (rank r the r-th and the (2cp-1-r)-th), so every rank has the same share of the
 * causal attention's work. Everything but attention is per token and runs on the rank's own
 * positions (m->T is T/cp). Attention runs in one of Megatron-Core's two forms (cp_comm_type):
 * p2p, ring attention (gpt_cp_ring.c; the default), all-to-all (gpt_cp_a2a.c, DeepSpeed-Ulysses:
 * the whole sequence of 1/cp of the heads), or all_gather, here: K and V gathered over
 * the CP group, the rank's queries attending the whole sequence rebuilt from the gathered blocks,
 * each up to its own global position (kernels' attention_forward_at), and the backward
 * reduce-scattering the K/V gradients its queries produced back to the positions' owners. A
 * backend without the positional kernels (CUDA, for now) runs the plain kernel over the whole
 * sequence and keeps the rank's rows: the same numbers at cp times the attention work; its
 * backward reruns it, with the rank's output gradient at its rows and zero elsewhere (so other
 * rows add nothing). Ring attention on such a backend brings the whole sequence's K and V by the
 * ring and takes the same whole-sequence path. Position embeddings look up the global positions. */
#include <stdlib.h>
#include "gpt.h"
#include "gpt_internal.h"

int gpt_cp(const gpt_model *m)
{
    return m->shard.cp > 1;
}

const kernels_backend *gpt_cp_plain_backend(const kernels_backend *k)
{
    static kernels_backend plain;
    plain = *k;
    plain.attention_forward_at = NULL;
    plain.attention_backward_at = NULL;
    plain.attention_block_forward = NULL;
    plain.attention_block_backward = NULL;
    plain.attention_merge = NULL;
    return &plain;
}

int gpt_cp_chunk(const gpt_model *m, int r, int c)
{
    return c == 0 ? r : 2 * m->shard.cp - 1 - r;
}

/* The first global position of chunk c (0 or 1) of CP rank r. */
static int chunk_start(const gpt_model *m, int r, int c)
{
    return gpt_cp_chunk(m, r, c) * (m->T / 2);
}

int gpt_cp_position_of(const gpt_model *m, int r, int t)
{
    int half = m->T / 2;
    return chunk_start(m, r, t / half) + t % half;
}

int gpt_cp_position(const gpt_model *m, int t)
{
    return gpt_cp(m) ? gpt_cp_position_of(m, m->shard.cp_rank, t) : t;
}

/* The whole sequences (B x cp T x w) from CP rank r's rows (B x T x w, T the local positions), or
 * back. */
void gpt_cp_rows(const gpt_model *m, float *whole, float *local, int r, int w, int to_whole)
{
    int B = m->B, T = m->T, Tf = T * m->shard.cp, half = T / 2;
    for (int b = 0; b < B; b++)
        for (int c = 0; c < 2; c++) {
            float *wp = whole + ((size_t)b * Tf + chunk_start(m, r, c)) * w;
            float *lp = local + ((size_t)b * T + (size_t)c * half) * w;
            if (to_whole)
                m->k->copy(wp, lp, (size_t)half * w * sizeof(float));
            else
                m->k->copy(lp, wp, (size_t)half * w * sizeof(float));
        }
}

/* m->cp_qkv: every position's qkv, gathered over the CP group from each rank's qkv rows. */
static void gather_qkv(gpt_model *m, const float *qkv)
{
    int w = 3 * m->cfg.hidden / m->shard.tp, cp = m->shard.cp, r = m->shard.cp_rank;
    size_t blk = (size_t)m->B * m->T * w;
    m->k->copy(m->cp_blocks + r * blk, qkv, blk * sizeof(float));
    m->shard.cp_allgather(m->cp_blocks, cp * blk, m->shard.cp_ctx);
    for (int q = 0; q < cp; q++)
        gpt_cp_rows(m, m->cp_qkv, m->cp_blocks + q * blk, q, w, 1);
}

void gpt_cp_attention_forward(gpt_model *m, float *atty, float *lse, const float *qkv)
{
    int B = m->B, T = m->T, tp = m->shard.tp, NH = m->cfg.heads / tp, Cl = m->cfg.hidden / tp;
    if (!gpt_cp(m)) {
        m->k->attention_forward(atty, lse, qkv, B, T, Cl, NH, m->prec);
        return;
    }
    int Tf = T * m->shard.cp, half = T / 2, r = m->shard.cp_rank, ring = m->shard.cp_ring_p2p;
    if (ring && m->k->attention_block_forward) {
        gpt_cp_ring_forward(m, atty, lse, qkv);
        return;
    }
    if (ring)
        gpt_cp_ring_gather(m, qkv);
    else
        gather_qkv(m, qkv);
    if (m->k->attention_forward_at && !ring) { /* the rank's queries only (cp_positions' first row: its T positions) */
        m->k->attention_forward_at(atty, lse, qkv, m->cp_qkv, m->cp_positions, B, T, Tf, Cl, NH, m->prec);
        return;
    }
    m->k->attention_forward(m->cp_atty, m->cp_lse, m->cp_qkv, B, Tf, Cl, NH, m->prec);
    gpt_cp_rows(m, m->cp_atty, atty, r, Cl, 0);
    for (int b = 0; b < B; b++) /* the log-sum-exp rows, [b][head][position] */
        for (int h = 0; h < NH; h++)
            for (int c = 0; c < 2; c++)
                m->k->copy(lse + ((size_t)b * NH + h) * T + (size_t)c * half,
                           m->cp_lse + ((size_t)b * NH + h) * Tf + chunk_start(m, r, c), (size_t)half * sizeof(float));
}

void gpt_cp_attention_backward(gpt_model *m, float *dqkv, const float *dout, const float *qkv, const float *atty,
                               const float *lse)
{
    int B = m->B, T = m->T, tp = m->shard.tp, NH = m->cfg.heads / tp, Cl = m->cfg.hidden / tp;
    if (!gpt_cp(m)) {
        m->k->attention_backward(dqkv, dout, qkv, atty, lse, B, T, Cl, NH, m->prec);
        return;
    }
    int Tf = T * m->shard.cp, cp = m->shard.cp, r = m->shard.cp_rank, w = 3 * Cl, ring = m->shard.cp_ring_p2p;
    size_t blk = (size_t)B * T * w;
    if (ring && m->k->attention_block_backward) {
        gpt_cp_ring_backward(m, dqkv, dout, qkv, atty, lse);
        return;
    }
    if (ring)
        gpt_cp_ring_gather(m, qkv);
    else
        gather_qkv(m, qkv);
    m->k->memset_zero(m->cp_dqkv, (size_t)B * Tf * w * sizeof(float));
    if (m->k->attention_backward_at && !ring) {
        /* dq straight into the rank's rows; dk, dv of every position into the whole sequence */
        m->k->attention_backward_at(dqkv, m->cp_dqkv, dout, qkv, m->cp_qkv, atty, lse, m->cp_positions, B, T, Tf, Cl,
                                    NH, m->prec);
    } else {
        m->k->attention_forward(m->cp_atty, m->cp_lse, m->cp_qkv, B, Tf, Cl, NH, m->prec);
        m->k->memset_zero(m->cp_dout, (size_t)B * Tf * Cl * sizeof(float));
        gpt_cp_rows(m, m->cp_dout, (float *)dout, r, Cl, 1);
        m->k->attention_backward(m->cp_dqkv, m->cp_dout, m->cp_qkv, m->cp_atty, m->cp_lse, B, Tf, Cl, NH, m->prec);
    }
    if (ring) {
        gpt_cp_ring_reduce(m, dqkv);
        return;
    }
    /* each rank's queries' share of every position's gradient, summed at the position's owner */
    for (int q = 0; q < cp; q++)
        gpt_cp_rows(m, m->cp_dqkv, m->cp_blocks + q * blk, q, w, 0);
    m->shard.cp_reduce_scatter(m->cp_blocks, cp * blk, m->shard.cp_ctx);
    m->k->residual_forward(dqkv, dqkv, m->cp_blocks + r * blk, blk, KPREC_FP32);
}

void gpt_cp_add_positions(gpt_model *m, float *x)
{
    int C = m->cfg.hidden;
    size_t n = (size_t)m->B * m->T * C;
    /* wpe read as a token table at the global positions, beside an all-zero position table */
    m->k->encoder_forward(m->cp_pos_rows, m->cp_positions, gpt_param(m, GPT_WPE), m->cp_zeros, m->B, m->T, C);
    m->k->residual_forward(x, x, m->cp_pos_rows, n, KPREC_FP32);
}

void gpt_cp_positions_backward(gpt_model *m, const float *dx)
{
    m->k->encoder_backward(gpt_grad(m, GPT_WPE), m->cp_sink, dx, m->cp_positions, m->B, m->T, m->cfg.hidden);
}

void gpt_cp_local_tokens(const gpt_model *m, const int *whole, int *local)
{
    int T = m->T, Tf = T * m->shard.cp;
    for (int b = 0; b < m->B; b++)
        for (int t = 0; t < T; t++)
            local[(size_t)b * T + t] = whole[(size_t)b * Tf + gpt_cp_position(m, t)];
}

void gpt_cp_alloc(gpt_model *m)
{
    if (!gpt_cp(m))
        return;
    const kernels_backend *k = m->k;
    int B = m->B, T = m->T, Tf = T * m->shard.cp, C = m->cfg.hidden, tp = m->shard.tp;
    size_t Cl = (size_t)C / tp, NH = (size_t)m->cfg.heads / tp, whole = (size_t)B * Tf;
    int ring = m->shard.cp_ring_p2p && !m->shard.cp_a2a;
    if (m->shard.cp_a2a)
        gpt_cp_a2a_alloc(m);
    else if (ring)
        gpt_cp_ring_alloc(m);
    if (!m->shard.cp_a2a && (!ring || !k->attention_block_forward)) { /* the whole sequence's buffers:
                                                                           all-gather, or the fallback */
        if (!ring)
            m->cp_blocks = k->alloc(whole * 3 * Cl * sizeof(float));
        m->cp_qkv = k->alloc(whole * 3 * Cl * sizeof(float));
        m->cp_dqkv = k->alloc(whole * 3 * Cl * sizeof(float));
        m->cp_atty = k->alloc(whole * Cl * sizeof(float));
        m->cp_dout = k->alloc(whole * Cl * sizeof(float));
        m->cp_lse = k->alloc(whole * NH * sizeof(float));
    }
    m->cp_zeros = k->alloc((size_t)T * C * sizeof(float));
    k->memset_zero(m->cp_zeros, (size_t)T * C * sizeof(float));
    m->cp_sink = k->alloc((size_t)T * C * sizeof(float));
    m->cp_pos_rows = k->alloc((size_t)B * T * C * sizeof(float));
    int *pos = malloc((size_t)B * T * sizeof(int));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            pos[(size_t)b * T + t] = gpt_cp_position(m, t);
    m->cp_positions = k->alloc((size_t)B * T * sizeof(int));
    k->copy_to_device(m->cp_positions, pos, (size_t)B * T * sizeof(int));
    free(pos);
    m->cp_tokens = malloc((size_t)B * T * sizeof(int));
    m->cp_targets = malloc((size_t)B * T * sizeof(int));
}

void gpt_cp_free(gpt_model *m)
{
    float *bufs[] = {m->cp_blocks, m->cp_qkv, m->cp_dqkv, m->cp_atty, m->cp_dout, m->cp_lse, m->cp_zeros,
                     m->cp_sink, m->cp_pos_rows};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            m->k->free(bufs[i]);
    if (m->cp_positions)
        m->k->free(m->cp_positions);
    gpt_cp_ring_free(m);
    gpt_cp_a2a_free(m);
    free(m->cp_tokens);
    free(m->cp_targets);
}
