/* Expert parallelism for the MoE layer (gpt_moe.c), as Megatron-Core's all-to-all token
 * dispatcher: the ep ranks of an EP group each hold E/ep of a layer's experts (EP rank q the
 * experts [q E/ep, (q+1) E/ep)), route their own tokens with the replicated router, and send
 * each row to the rank of its expert. A rank's rows are grouped by expert as routed, so the rows
 * for rank q are one block; the receiver keeps them by local expert, then by sending rank, each
 * sender's rows in its own order (so an expert's GEMM runs over one contiguous block). The
 * combine sends the experts' output rows back the same way, and each rank forms its tokens'
 * weighted sums exactly as without EP. The backward mirrors both: output-row gradients go to the
 * experts' ranks (a dispatch), input-row gradients come back (a combine). Host buffers: the CUDA
 * backend routes on host copies too, so one exchange serves both backends. */
#include <stdlib.h>
#include <string.h>
#include "gpt.h"
#include "gpt_internal.h"

size_t gpt_moe_ep_rows(const gpt_model *m)
{
    size_t ep = m->shard.ep > 1 ? (size_t)m->shard.ep : 1;
    return (size_t)m->B * m->T * (size_t)m->cfg.moe_topk * ep;
}

void gpt_moe_expert_offsets(const int *counts, int senders, int El, int *off)
{
    off[0] = 0;
    for (int i = 0; i < El; i++) {
        int n = 0;
        for (int s = 0; s < senders; s++)
            n += counts[s * El + i];
        off[i + 1] = off[i] + n;
    }
}

int gpt_moe_ep_plan(gpt_model *m, gpt_moe_route *r)
{
    int E = m->cfg.num_experts, ep = m->shard.ep, El = E / ep, me = m->shard.ep_rank;
    /* Each rank is sent all E of this rank's counts, not only its own experts' block: one
     * exchange then tells every rank every rank's load (the balance below), where the block alone
     * tells it only its own. */
    int *sent = calloc((size_t)ep * E, sizeof(int));
    for (int q = 0; q < ep; q++)
        for (int e = 0; e < E; e++)
            sent[q * E + e] = r->offset[e + 1] - r->offset[e];
    m->shard.ep_alltoall_int(sent, r->sent_all, (size_t)E, m->shard.ep_ctx);
    free(sent);
    for (int s = 0; s < ep; s++) /* each sender's counts for this rank's experts */
        memcpy(r->recv + s * El, r->sent_all + (size_t)s * E + (size_t)me * El, (size_t)El * sizeof(int));
    gpt_moe_expert_offsets(r->recv, ep, El, r->xoffset);
    r->balance = gpt_moe_ep_balance(r->sent_all, ep, E);
    return r->xoffset[El];
}

double gpt_moe_ep_balance(const int *sent_all, int ep, int E)
{
    int El = E / ep;
    double busiest = 0, total = 0;
    for (int q = 0; q < ep; q++) {
        double n = 0; /* rows EP rank q's experts receive, from every sender */
        for (int s = 0; s < ep; s++)
            for (int i = 0; i < El; i++)
                n += sent_all[(size_t)s * E + (size_t)q * El + i];
        busiest = n > busiest ? n : busiest;
        total += n;
    }
    return total > 0 ? busiest / (total / ep) : 1;
}

/* Floats this rank sends to (own rows) and receives from (its experts' rows) each EP rank. */
static void block_counts(const gpt_model *m, const gpt_moe_route *r, size_t *own, size_t *theirs)
{
    int ep = m->shard.ep, El = m->cfg.num_experts / ep;
    size_t C = (size_t)m->cfg.hidden;
    for (int q = 0; q < ep; q++) {
        own[q] = (size_t)(r->offset[(q + 1) * El] - r->offset[q * El]) * C;
        size_t n = 0;
        for (int i = 0; i < El; i++)
            n += (size_t)r->recv[q * El + i];
        theirs[q] = n * C;
    }
}

/* Between the order rows travel in (by sending rank, then local expert) and the experts' order
 * (by local expert, then sending rank): `from` is in the first and `to` in the second when
 * to_experts, else the other way round. */
static void regroup(const gpt_model *m, const gpt_moe_route *r, const float *from, float *to, int to_experts)
{
    int ep = m->shard.ep, El = m->cfg.num_experts / ep;
    size_t C = (size_t)m->cfg.hidden, at = 0;
    int *placed = calloc((size_t)El, sizeof(int)); /* each expert's rows from earlier ranks */
    for (int s = 0; s < ep; s++)
        for (int i = 0; i < El; i++) {
            size_t n = (size_t)r->recv[s * El + i] * C, x = (size_t)(r->xoffset[i] + placed[i]) * C;
            if (to_experts)
                memcpy(to + x, from + at, n * sizeof(float));
            else
                memcpy(to + at, from + x, n * sizeof(float));
            placed[i] += r->recv[s * El + i];
            at += n;
        }
    free(placed);
}

void gpt_moe_ep_dispatch(gpt_model *m, const gpt_moe_route *r, const float *own, float *x, float *scratch)
{
    size_t *own_n = malloc(2 * (size_t)m->shard.ep * sizeof(size_t)), *theirs = own_n + m->shard.ep;
    block_counts(m, r, own_n, theirs);
    m->shard.ep_alltoallv(own, own_n, scratch, theirs, m->shard.ep_ctx);
    regroup(m, r, scratch, x, 1);
    free(own_n);
}

void gpt_moe_ep_combine(gpt_model *m, const gpt_moe_route *r, const float *x, float *own, float *scratch)
{
    size_t *own_n = malloc(2 * (size_t)m->shard.ep * sizeof(size_t)), *theirs = own_n + m->shard.ep;
    block_counts(m, r, own_n, theirs);
    regroup(m, r, x, scratch, 0);
    m->shard.ep_alltoallv(scratch, theirs, own, own_n, m->shard.ep_ctx);
    free(own_n);
}
