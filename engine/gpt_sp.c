/* Sequence parallelism's moves of the residual stream (gpt.h: gpt_shard.sequence_parallel), as
 * Megatron-LM's --sequence-parallel makes them (megatron/core/tensor_parallel/mappings.py:
 * gather_from_sequence_parallel_region before a column-parallel GEMM, reduce_scatter_to_sequence_
 * parallel_region after a row-parallel one). Rank r of the TP group holds tokens
 * [r N/tp, (r+1) N/tp) of the micro-batch's N = B*T; the whole-sequence tensor of the moment lives
 * in m->sp_full. Without sequence parallelism every function here is the identity, or the TP
 * all-reduce it replaces, so gpt.c calls them on every path. */
#include "gpt.h"
#include "gpt_internal.h"

int gpt_sp(const gpt_model *m)
{
    return m->shard.sequence_parallel && m->shard.tp > 1;
}

int gpt_stream_tokens(const gpt_model *m)
{
    int N = m->B * m->T;
    return gpt_sp(m) ? N / m->shard.tp : N;
}

size_t gpt_stream_floats(const gpt_model *m)
{
    return (size_t)gpt_stream_tokens(m) * m->cfg.hidden;
}

/* Where this rank's tokens start in a whole-sequence buffer, in floats. */
static size_t own_offset(const gpt_model *m)
{
    return gpt_sp(m) ? (size_t)m->shard.tp_rank * gpt_stream_floats(m) : 0;
}

/* dst = src over n floats (the backend has no copy: src plus zeros). */
static void copy(const gpt_model *m, float *dst, const float *src, size_t n)
{
    m->k->residual_forward(dst, src, m->vp_zeros, n);
}

const float *gpt_sp_gather(gpt_model *m, const float *x)
{
    if (!gpt_sp(m))
        return x;
    size_t whole = (size_t)m->B * m->T * m->cfg.hidden;
    copy(m, m->sp_full + own_offset(m), x, gpt_stream_floats(m));
    m->shard.tp_allgather(m->sp_full, whole, m->shard.tp_ctx);
    return m->sp_full;
}

void gpt_sp_reduce(gpt_model *m, float *partial, float *out)
{
    size_t whole = (size_t)m->B * m->T * m->cfg.hidden;
    if (!gpt_sp(m)) {
        if (m->shard.tp > 1)
            m->shard.tp_allreduce(partial, whole, m->shard.tp_ctx);
        if (out != partial)
            copy(m, out, partial, whole);
        return;
    }
    m->shard.tp_reduce_scatter(partial, whole, m->shard.tp_ctx);
    copy(m, out, partial + own_offset(m), gpt_stream_floats(m));
}

float *gpt_sp_own(const gpt_model *m, float *whole)
{
    return whole + own_offset(m);
}

void gpt_sp_norm_backward(gpt_model *m, float *dinp, float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight, const float *mean, const float *rstd)
{
    int Nl = gpt_stream_tokens(m), C = m->cfg.hidden;
    if (!gpt_sp(m)) {
        m->k->layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, Nl, C);
        return;
    }
    /* this micro-batch's own tokens' share of the norm's gradients, summed over the TP group before
     * it joins what earlier micro-batches left (summing the accumulated gradient would count those
     * again) */
    float *g = m->sp_norm_grad;
    m->k->memset_zero(g, 2 * (size_t)C * sizeof(float));
    m->k->layernorm_backward(dinp, g, g + C, dout, inp, weight, mean, rstd, Nl, C);
    m->shard.tp_allreduce(g, 2 * (size_t)C, m->shard.tp_ctx);
    m->k->residual_forward(dweight, dweight, g, (size_t)C);
    m->k->residual_forward(dbias, dbias, g + C, (size_t)C);
}
