/* The choices inside a block (gpt.h): LayerNorm or RMSNorm, learned or rotary positions, multi-head
 * or grouped-query attention, GELU or SwiGLU. gpt.c runs the block's steps in order; each step
 * that has a choice asks here, so the GPT-2 path runs exactly the kernels it always ran. */
#include <stdlib.h>
#include "gpt.h"
#include "gpt_internal.h"

/* Key and value heads below the query heads: the attention kernel gets them repeated. */
static int grouped(const gpt_model *m)
{
    return m->cfg.kv_groups < m->cfg.heads;
}

int gpt_qkv_width(const gpt_model *m)
{
    int hd = m->cfg.hidden / m->cfg.heads;
    return (m->cfg.heads + 2 * m->cfg.kv_groups) * hd / m->shard.tp;
}

int gpt_mlp_width(const gpt_model *m)
{
    return m->cfg.ffn_hidden / m->shard.tp;
}

void gpt_block_alloc(gpt_model *m)
{
    size_t N = (size_t)m->B * m->T, Cl = (size_t)m->cfg.hidden / m->shard.tp;
    if (grouped(m)) { /* one layer at a time: forward, then again in its backward */
        m->gqa_qkv = m->k->alloc(N * 3 * Cl * sizeof(float));
        m->gqa_dqkv = m->k->alloc(N * 3 * Cl * sizeof(float));
    }
    if (m->cfg.rope && gpt_cp(m)) { /* the rank's positions are not 0..T-1 */
        m->rope_pos = malloc((size_t)m->T * sizeof(int));
        for (int t = 0; t < m->T; t++)
            m->rope_pos[t] = gpt_cp_position(m, t);
    }
}

void gpt_block_free(gpt_model *m)
{
    if (m->gqa_qkv)
        m->k->free(m->gqa_qkv);
    if (m->gqa_dqkv)
        m->k->free(m->gqa_dqkv);
    free(m->rope_pos);
}

void gpt_norm_forward(gpt_model *m, float *out, float *mean, float *rstd, const float *inp, const float *w,
                      const float *b)
{
    int N = gpt_stream_tokens(m), C = m->cfg.hidden;
    if (m->cfg.rmsnorm)
        m->k->rmsnorm_forward(out, rstd, inp, w, N, C);
    else
        m->k->layernorm_forward(out, mean, rstd, inp, w, b, N, C);
}

void gpt_norm_backward_tokens(gpt_model *m, float *dinp, float *dweight, float *dbias, const float *dout,
                              const float *inp, const float *weight, const float *mean, const float *rstd)
{
    int N = gpt_stream_tokens(m), C = m->cfg.hidden;
    if (m->cfg.rmsnorm)
        m->k->rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
    else
        m->k->layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

/* q and k heads lead each qkv row (gpt.h), so the rotation covers the first heads + groups heads. */
void gpt_rope_forward(gpt_model *m, float *qkv)
{
    int tp = m->shard.tp, hd = m->cfg.hidden / m->cfg.heads;
    m->k->rope_forward(qkv, m->rope_pos, m->B, m->T, gpt_qkv_width(m), (m->cfg.heads + m->cfg.kv_groups) / tp, hd,
                       GPT_ROPE_BASE);
}

void gpt_rope_backward(gpt_model *m, float *dqkv)
{
    int tp = m->shard.tp, hd = m->cfg.hidden / m->cfg.heads;
    m->k->rope_backward(dqkv, m->rope_pos, m->B, m->T, gpt_qkv_width(m), (m->cfg.heads + m->cfg.kv_groups) / tp, hd,
                        GPT_ROPE_BASE);
}

/* The multi-head kernel's qkv: the layer's own, or its groups repeated into m->gqa_qkv. */
static const float *heads_qkv(gpt_model *m, const float *qkv)
{
    if (!grouped(m))
        return qkv;
    int tp = m->shard.tp;
    m->k->kv_repeat_forward(m->gqa_qkv, qkv, m->B, m->T, m->cfg.heads / tp, m->cfg.kv_groups / tp,
                            m->cfg.hidden / m->cfg.heads);
    return m->gqa_qkv;
}

void gpt_attention_core_forward(gpt_model *m, float *atty, float *lse, const float *qkv)
{
    gpt_cp_attention_forward(m, atty, lse, heads_qkv(m, qkv));
}

void gpt_attention_core_backward(gpt_model *m, float *dqkv, const float *dout, const float *qkv, const float *atty,
                                 const float *lse)
{
    if (!grouped(m)) {
        gpt_cp_attention_backward(m, dqkv, dout, qkv, atty, lse);
        return;
    }
    int tp = m->shard.tp;
    size_t n = (size_t)m->B * m->T * 3 * (m->cfg.hidden / tp);
    const float *whole = heads_qkv(m, qkv); /* repeated again: the forward's copy was not kept */
    m->k->memset_zero(m->gqa_dqkv, n * sizeof(float));
    gpt_cp_attention_backward(m, m->gqa_dqkv, dout, whole, atty, lse);
    m->k->kv_repeat_backward(dqkv, m->gqa_dqkv, m->B, m->T, m->cfg.heads / tp, m->cfg.kv_groups / tp,
                             m->cfg.hidden / m->cfg.heads);
}

void gpt_attention_a2a_forward(gpt_model *m, gpt_layer_acts *x, const float *qkv, float *atty, int out, int l)
{
    int B = m->B, T = m->T, cp = m->shard.cp, tp = m->shard.tp, NH = m->cfg.heads / tp, Cl = m->cfg.hidden / tp;
    double N = (double)B * T;
    PROF_BEGIN();
    gpt_cp_a2a_qkv(m, x, qkv);
    PROF_END("cp_alltoall_qkv", l, 0, 4.0 * N * gpt_qkv_width(m), "rows=%d C=%d", B * T, gpt_qkv_width(m));
    PROF_BEGIN();
    gpt_cp_a2a_attention(m, x);
    PROF_END("attention", l, m->flops_fwd.attention, 4.0 * N * (4.0 * Cl + NH), "B=%d T=%d heads=%d head_dim=%d", B,
             T * cp, NH / cp, Cl / NH);
    if (!out)
        return;
    PROF_BEGIN();
    gpt_cp_a2a_out(m, x, atty);
    PROF_END("cp_alltoall_out", l, 0, 4.0 * N * Cl, "rows=%d C=%d", B * T, Cl);
}

void gpt_attention_a2a_backward(gpt_model *m, const gpt_layer_acts *x, float *dqkv, const float *dout, int l)
{
    int B = m->B, T = m->T, cp = m->shard.cp, tp = m->shard.tp, NH = m->cfg.heads / tp, Cl = m->cfg.hidden / tp;
    double N = (double)B * T;
    PROF_BEGIN();
    gpt_cp_a2a_dout(m, dout);
    PROF_END("cp_alltoall_out_bwd", l, 0, 4.0 * N * Cl, "rows=%d C=%d", B * T, Cl);
    PROF_BEGIN();
    gpt_cp_a2a_attention_backward(m, x);
    PROF_END("attention_bwd", l, m->flops_bwd.attention, 4.0 * N * (8.0 * Cl + NH), "B=%d T=%d heads=%d head_dim=%d",
             B, T * cp, NH / cp, Cl / NH);
    PROF_BEGIN();
    m->k->memset_zero(dqkv, (size_t)N * gpt_qkv_width(m) * sizeof(float));
    gpt_cp_a2a_dqkv(m, dqkv);
    PROF_END("cp_alltoall_qkv_bwd", l, 0, 4.0 * N * gpt_qkv_width(m), "rows=%d C=%d", B * T, gpt_qkv_width(m));
}

void gpt_mlp_act_forward_rows(gpt_model *m, float *out, const float *fch, int rows)
{
    int F = gpt_mlp_width(m);
    if (m->cfg.swiglu)
        m->k->swiglu_forward(out, fch, rows, F, m->prec);
    else
        m->k->gelu_forward(out, fch, (size_t)rows * F, m->prec);
}

void gpt_mlp_act_backward_rows(gpt_model *m, float *dfch, const float *fch, const float *dout, int rows)
{
    int F = gpt_mlp_width(m);
    if (m->cfg.swiglu)
        m->k->swiglu_backward(dfch, fch, dout, rows, F, m->prec);
    else
        m->k->gelu_backward(dfch, fch, dout, (size_t)rows * F, m->prec);
}

void gpt_mlp_act_forward(gpt_model *m, float *out, const float *fch)
{
    gpt_mlp_act_forward_rows(m, out, fch, m->B * m->T);
}

void gpt_mlp_act_backward(gpt_model *m, float *dfch, const float *fch, const float *dout)
{
    gpt_mlp_act_backward_rows(m, dfch, fch, dout, m->B * m->T);
}

void gpt_round_act(const gpt_model *m, float *x, size_t n)
{
    if (m->prec != KPREC_FP32)
        m->k->round_to_precision(x, n, m->prec);
}
