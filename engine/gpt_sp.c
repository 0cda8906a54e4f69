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

/* dst = src over n floats of backend memory. */
static void copy(const gpt_model *m, float *dst, const float *src, size_t n)
{
    m->k->copy(dst, src, n * sizeof(float));
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
    int C = m->cfg.hidden;
    if (!gpt_sp(m)) {
        gpt_norm_backward_tokens(m, dinp, dweight, dbias, dout, inp, weight, mean, rstd);
        return;
    }
    /* this micro-batch's own tokens' share of the norm's gradients, summed over the TP group before
     * it joins what earlier micro-batches left (summing the accumulated gradient would count those
     * again) */
    float *g = m->sp_norm_grad;
    m->k->memset_zero(g, 2 * (size_t)C * sizeof(float));
    int with_bias = !m->cfg.rmsnorm;
    gpt_norm_backward_tokens(m, dinp, g, g + C, dout, inp, weight, mean, rstd);
    m->shard.tp_allreduce(g, (1 + with_bias) * (size_t)C, m->shard.tp_ctx);
    m->k->residual_forward(dweight, dweight, g, (size_t)C, KPREC_FP32);
    if (with_bias)
        m->k->residual_forward(dbias, dbias, g + C, (size_t)C, KPREC_FP32);
}

/* ---- the TP GEMMs with their collectives, overlapped in rings under --tp-comm-overlap ---- */

static int overlapped(const gpt_model *m)
{
    return gpt_sp(m) && m->shard.tp_comm_overlap;
}

/* What a ring does with one block of Nl tokens: j is the block (the TP rank that owns those
 * tokens), x its rows. */
typedef void (*block_fn)(gpt_model *m, int j, const float *x, float *out, void *ctx);

/* The all-gather of stream tensor x (this rank's Nl x width) as a ring into m->sp_full, calling
 * fn on each block as it arrives: this rank's first, then one more each step, the next step's
 * transfer running beside it. */
static void ring_gather(gpt_model *m, const float *x, int width, block_fn fn, void *ctx)
{
    int tp = m->shard.tp, r = m->shard.tp_rank;
    size_t blk = (size_t)gpt_stream_tokens(m) * width;
    copy(m, m->sp_full + r * blk, x, blk);
    void *step = m->shard.tp_ring_start(m->sp_full + r * blk, m->sp_full + ((r + tp - 1) % tp) * blk, blk,
                                        m->shard.tp_ctx);
    fn(m, r, m->sp_full + r * blk, NULL, ctx);
    for (int s = 1; s < tp; s++) {
        int j = (r - s + tp) % tp;
        m->shard.tp_ring_wait(step, m->shard.tp_ctx);
        if (s < tp - 1)
            step = m->shard.tp_ring_start(m->sp_full + j * blk, m->sp_full + ((j + tp - 1) % tp) * blk, blk,
                                          m->shard.tp_ctx);
        fn(m, j, m->sp_full + j * blk, NULL, ctx);
    }
}

/* The reduce-scatter as a ring: fn writes this rank's partial of block j (Nl x width) into its
 * out; the partial of the block owned by the next rank goes first, each step adds what came from
 * the previous rank and passes it on, and the last step's sum, this rank's own block, is out. */
static void ring_reduce(gpt_model *m, int width, block_fn fn, float *out, void *ctx)
{
    int tp = m->shard.tp, r = m->shard.tp_rank;
    size_t blk = (size_t)gpt_stream_tokens(m) * width;
    float *a = m->sp_ring[0];
    fn(m, (r + tp - 1) % tp, NULL, a, ctx);
    void *step = m->shard.tp_ring_start(a, m->sp_recv, blk, m->shard.tp_ctx);
    for (int s = 1; s < tp; s++) {
        float *b = m->sp_ring[s % 2]; /* not the block on its way out */
        fn(m, (r - 1 - s + 2 * tp) % tp, NULL, b, ctx);
        m->shard.tp_ring_wait(step, m->shard.tp_ctx);
        m->k->residual_forward(b, b, m->sp_recv, blk, KPREC_FP32);
        if (s < tp - 1)
            step = m->shard.tp_ring_start(b, m->sp_recv, blk, m->shard.tp_ctx);
        else
            copy(m, out, b, blk);
    }
}

typedef struct {
    float *dinp, *dw, *db;
    const float *in, *w, *b, *dout;
    float *out;
    int k, n;
} gemm_args;

static void column_forward_block(gpt_model *m, int j, const float *x, float *out, void *ctx)
{
    (void)out;
    gemm_args *g = ctx;
    int Nl = gpt_stream_tokens(m);
    m->k->matmul_forward(g->out + (size_t)j * Nl * g->n, x, g->w, g->b, Nl, g->k, g->n, m->prec);
}

void gpt_sp_column_forward(gpt_model *m, const float *x, const float *w, const float *b, float *out, int k, int n)
{
    if (!overlapped(m)) {
        m->k->matmul_forward(out, gpt_sp_gather(m, x), w, b, m->B * m->T, k, n, m->prec);
        return;
    }
    gemm_args g = {.w = w, .b = b, .out = out, .k = k, .n = n};
    ring_gather(m, x, k, column_forward_block, &g);
}

static void row_forward_block(gpt_model *m, int j, const float *x, float *out, void *ctx)
{
    (void)x;
    gemm_args *g = ctx;
    int Nl = gpt_stream_tokens(m);
    m->k->matmul_forward(out, g->in + (size_t)j * Nl * g->k, g->w, g->b, Nl, g->k, g->n, m->prec);
}

void gpt_sp_row_forward(gpt_model *m, const float *in, const float *w, const float *b, float *out, int k, int n)
{
    if (!overlapped(m)) {
        float *partial = gpt_sp(m) ? m->sp_full : out;
        m->k->matmul_forward(partial, in, w, b, m->B * m->T, k, n, m->prec);
        gpt_sp_reduce(m, partial, out);
        return;
    }
    gemm_args g = {.in = in, .w = w, .b = b, .k = k, .n = n};
    ring_reduce(m, n, row_forward_block, out, &g);
}

static void row_backward_block(gpt_model *m, int j, const float *x, float *out, void *ctx)
{
    (void)out;
    gemm_args *g = ctx;
    size_t Nl = (size_t)gpt_stream_tokens(m);
    m->k->matmul_backward(g->dinp + j * Nl * g->k, g->dw, g->db, x, g->in + j * Nl * g->k, g->w, (int)Nl, g->k,
                          g->n, m->prec);
}

void gpt_sp_row_backward(gpt_model *m, float *dinp, float *dw, float *db, const float *dout, const float *in,
                         const float *w, int k, int n)
{
    m->k->memset_zero(dinp, (size_t)m->B * m->T * k * sizeof(float));
    if (!overlapped(m)) {
        m->k->matmul_backward(dinp, dw, db, gpt_sp_gather(m, dout), in, w, m->B * m->T, k, n, m->prec);
        return;
    }
    gemm_args g = {.dinp = dinp, .dw = dw, .db = db, .in = in, .w = w, .k = k, .n = n};
    ring_gather(m, dout, n, row_backward_block, &g);
}

static void column_backward_block(gpt_model *m, int j, const float *x, float *out, void *ctx)
{
    (void)x;
    gemm_args *g = ctx;
    size_t Nl = (size_t)gpt_stream_tokens(m);
    m->k->memset_zero(out, Nl * g->k * sizeof(float));
    m->k->matmul_backward(out, g->dw, g->db, g->dout + j * Nl * g->n, g->in + j * Nl * g->k, g->w, (int)Nl, g->k,
                          g->n, m->prec);
}

void gpt_sp_column_backward(gpt_model *m, float *dnorm, float *dw, float *db, const float *dout, const float *in,
                            const float *w, int k, int n, float *scratch)
{
    const float *all = gpt_sp_gather(m, in); /* the weight gradient needs every token's input */
    if (!overlapped(m)) {
        m->k->memset_zero(scratch, (size_t)m->B * m->T * k * sizeof(float));
        m->k->matmul_backward(scratch, dw, db, dout, all, w, m->B * m->T, k, n, m->prec);
        gpt_sp_reduce(m, scratch, dnorm);
        return;
    }
    gemm_args g = {.dw = dw, .db = db, .dout = dout, .in = all, .w = w, .k = k, .n = n};
    ring_reduce(m, k, column_backward_block, dnorm, &g);
}
