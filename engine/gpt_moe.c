/* Mixture of experts in place of the MLP (gpt.h), as Megatron-Core's MoE layer with its default
 * router and the alltoall token dispatcher:
 *  - router: logits = x W_r^T over the E experts; each token takes the K largest logits and
 *    weighs them by a softmax over those K (moe_router_pre_softmax off);
 *  - capacity (moe_expert_capacity_factor > 0): an expert takes at most ceil(cf N K / E) of the
 *    N tokens' K choices and drops the rest, lowest weight first (drop policy "probs");
 *  - experts: each runs its MLP (GELU or SwiGLU, split over TP like the dense one) on its rows;
 *    a token's output is the weighted sum of its kept choices, then summed over TP as the dense
 *    MLP's output is (under SP, below, the experts' outputs are reduce-scattered before the sum);
 *  - load balancing (--moe-aux-loss-coeff, Megatron's switch loss): coeff E sum_e f_e P_e, f_e
 *    the share of the N K choices routed to e before any drop, P_e the mean over tokens of the
 *    softmax of all logits; its gradient joins the router's in the backward (the logged loss is
 *    the language-model loss alone, as Megatron logs it).
 * Routing, gathers and the weighted sums run on host copies (exact, and deterministic: rows in
 * token order within each expert, sums in choice order); the expert GEMMs and activations run
 * on the backend. Under expert parallelism (shard.ep > 1) a rank holds E/ep experts and the rows
 * travel to their experts' ranks and back between the gathers and the sums (gpt_moe_ep.c); the
 * "expert rows" below are then those this rank's experts run, from every EP rank.
 * Under sequence parallelism (TP > 1), as Megatron-Core's alltoall dispatcher runs experts split
 * over TP (MoEAlltoAllTokenDispatcher, dispatch_postprocess and combine_preprocess; read at
 * core_v0.10.0 and d98e8a64): each TP rank routes only its own tokens and sends them to the
 * experts' EP ranks; the rows that arrive are all-gathered over the TP group, each TP rank runs
 * its 1/TP of every local expert on all of them, and the outputs are reduce-scattered back to the
 * TP rank whose rows they are before the combine; the weighted sums are then this rank's tokens'
 * whole output, with no reduce-scatter after. The load-balancing loss sums its counts and
 * probabilities over the TP group (the whole micro-batch's, as Megatron's sequence-partition
 * group does), and the router's gradient, each TP rank's from its own tokens, is summed over the
 * group. Without sequence parallelism every TP rank routes every token (its experts' 1/TP of
 * them), and the output is summed over TP as the dense MLP's is. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gpt.h"
#include "gpt_internal.h"

/* Host and backend scratch shared by every layer: one layer's routing and sums at a time. */
struct gpt_moe_scratch {
    float *logits, *x, *y, *rows, *dlogits; /* host: N E, N C, N C, N K C, N E */
    float *xrows, *xscratch;                /* host, EP only: X C each (X: gpt_moe_ep_rows) */
    float *dev_logits, *dev_nc, *dev_rows;  /* backend: N E, N C, X C (expert rows) */
    float *dev_router_dx;                   /* backend: N C */
    float *dev_router_dw;                   /* backend, sharded: E C (a micro-batch's router gradient) */
    float *xall;                            /* host, sharded: X C (the TP group's rows) */
    float *dev_act, *dev_fch;               /* backend: X F, X F1 (the backward's) */
};

static size_t tokens_of(const gpt_model *m)
{
    return (size_t)m->B * m->T;
}

/* The tokens the load-balancing loss is over: the micro-batch's, whole sequences under context
 * parallelism, whose ranks each route their positions of them (Megatron-Core's router sums its
 * counts over the TP x CP group: TopKRouter._apply_aux_loss, reduce_group tp_cp_group). */
static size_t loss_tokens(const gpt_model *m)
{
    return tokens_of(m) * (size_t)(m->shard.cp > 1 ? m->shard.cp : 1);
}

/* Whether this rank routes only its own tokens and its experts' rows go through the TP group
 * (above): sequence parallelism with TP > 1. */
static int sharded(const gpt_model *m)
{
    return gpt_sp(m);
}

/* The tokens this rank routes: its own under sequence parallelism, else the micro-batch's. */
static size_t routed_of(const gpt_model *m)
{
    return sharded(m) ? (size_t)gpt_stream_tokens(m) : tokens_of(m);
}

gpt_moe_route *gpt_moe_route_alloc(const gpt_model *m)
{
    size_t N = tokens_of(m), K = (size_t)m->cfg.moe_topk, E = (size_t)m->cfg.num_experts;
    gpt_moe_route *r = calloc(1, sizeof *r);
    r->expert = malloc(N * K * sizeof(int));
    r->prob = malloc(N * K * sizeof(float));
    r->row = malloc(N * K * sizeof(int));
    r->token = malloc(N * K * sizeof(int));
    r->offset = malloc((E + 1) * sizeof(int));
    r->scores = malloc(N * E * sizeof(float));
    r->counts = malloc(E * sizeof(int));
    r->recv = calloc(E, sizeof(int));
    r->sent_all = calloc((size_t)(m->shard.ep > 1 ? m->shard.ep : 1) * E, sizeof(int));
    r->balance = 1;
    r->xoffset = calloc(E + 1, sizeof(int));
    r->tp_counts = calloc((size_t)(m->shard.tp > 1 ? m->shard.tp : 1) * E, sizeof(int));
    r->aoffset = calloc(E + 1, sizeof(int));
    return r;
}

void gpt_moe_route_free(gpt_moe_route *r)
{
    if (!r)
        return;
    free(r->expert);
    free(r->prob);
    free(r->row);
    free(r->token);
    free(r->offset);
    free(r->scores);
    free(r->counts);
    free(r->recv);
    free(r->sent_all);
    free(r->xoffset);
    free(r->tp_counts);
    free(r->aoffset);
    free(r);
}

void gpt_moe_alloc(gpt_model *m)
{
    if (m->cfg.num_experts == 0)
        return;
    size_t N = tokens_of(m), K = (size_t)m->cfg.moe_topk, E = (size_t)m->cfg.num_experts, C = (size_t)m->cfg.hidden;
    struct gpt_moe_scratch *s = calloc(1, sizeof *s);
    s->logits = malloc(N * E * sizeof(float));
    s->dlogits = malloc(N * E * sizeof(float));
    s->x = malloc(N * C * sizeof(float));
    s->y = malloc(N * C * sizeof(float));
    s->rows = malloc(N * K * C * sizeof(float));
    size_t X = gpt_moe_ep_rows(m); /* N K without expert parallelism */
    if (m->shard.ep > 1) { /* the exchanges' rows; under SP alone the TP gather works on rows */
        s->xrows = malloc(X * C * sizeof(float));
        s->xscratch = malloc(X * C * sizeof(float));
    }
    s->dev_logits = m->k->alloc(N * E * sizeof(float));
    s->dev_nc = m->k->alloc(N * C * sizeof(float));
    s->dev_rows = m->k->alloc(X * C * sizeof(float));
    s->dev_router_dx = m->k->alloc(N * C * sizeof(float));
    if (sharded(m)) {
        s->dev_router_dw = m->k->alloc(E * C * sizeof(float));
        s->xall = malloc(X * C * sizeof(float));
    }
    size_t F = (size_t)gpt_mlp_width(m), F1 = m->cfg.swiglu ? 2 * F : F;
    s->dev_act = m->k->alloc(X * F * sizeof(float));
    s->dev_fch = m->k->alloc(X * F1 * sizeof(float));
    m->moe = s;
}

void gpt_moe_free(gpt_model *m)
{
    struct gpt_moe_scratch *s = m->moe;
    if (!s)
        return;
    free(s->logits);
    free(s->dlogits);
    free(s->x);
    free(s->y);
    free(s->rows);
    free(s->xrows);
    free(s->xscratch);
    m->k->free(s->dev_logits);
    m->k->free(s->dev_nc);
    m->k->free(s->dev_rows);
    m->k->free(s->dev_router_dx);
    if (s->dev_router_dw)
        m->k->free(s->dev_router_dw);
    free(s->xall);
    m->k->free(s->dev_act);
    m->k->free(s->dev_fch);
    free(s);
    m->moe = NULL;
}

/* Kept choices of expert e, best weight first (ties: the earlier token). */
typedef struct {
    float prob;
    int at; /* t K + k */
} choice;

static int by_weight(const void *a, const void *b)
{
    const choice *x = a, *y = b;
    if (x->prob != y->prob)
        return x->prob < y->prob ? 1 : -1;
    return (x->at > y->at) - (x->at < y->at);
}

static int by_token(const void *a, const void *b)
{
    const choice *x = a, *y = b;
    return (x->at > y->at) - (x->at < y->at);
}

int gpt_moe_route_tokens(const gpt_model *m, const float *logits, gpt_moe_route *r)
{
    int N = (int)routed_of(m), K = m->cfg.moe_topk, E = m->cfg.num_experts;
    memset(r->counts, 0, (size_t)E * sizeof(int));
    for (int t = 0; t < N; t++) {
        const float *z = logits + (size_t)t * E;
        float mx = -INFINITY;
        for (int e = 0; e < E; e++)
            mx = fmaxf(mx, z[e]);
        double sum = 0;
        for (int e = 0; e < E; e++)
            sum += exp((double)z[e] - mx);
        for (int e = 0; e < E; e++)
            r->scores[(size_t)t * E + e] = (float)(exp((double)z[e] - mx) / sum);
        /* the K largest logits, the lower index first among equals */
        int *pick = r->expert + (size_t)t * K;
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int j = 0; j < k; j++)
                    taken |= pick[j] == e;
                if (!taken && (best < 0 || z[e] > z[best]))
                    best = e;
            }
            pick[k] = best;
            r->counts[best]++;
        }
        double s = 0;
        for (int k = 0; k < K; k++)
            s += exp((double)z[pick[k]] - z[pick[0]]);
        for (int k = 0; k < K; k++)
            r->prob[(size_t)t * K + k] = (float)(exp((double)z[pick[k]] - z[pick[0]]) / s);
    }
    int cap = m->cfg.moe_capacity_factor > 0
                  ? (int)ceil(m->cfg.moe_capacity_factor * (double)N * K / E) : N * K;
    choice *c = malloc((size_t)N * K * sizeof *c);
    int rows = 0;
    for (int e = 0; e < E; e++) {
        int n = 0;
        for (int i = 0; i < N * K; i++)
            if (r->expert[i] == e)
                c[n++] = (choice){r->prob[i], i};
        if (n > cap) { /* drop the lowest weights */
            qsort(c, (size_t)n, sizeof *c, by_weight);
            for (int i = cap; i < n; i++)
                r->row[c[i].at] = -1;
            n = cap;
            qsort(c, (size_t)n, sizeof *c, by_token);
        }
        r->offset[e] = rows;
        for (int i = 0; i < n; i++) {
            r->row[c[i].at] = rows;
            r->token[rows++] = c[i].at / K;
        }
    }
    r->offset[E] = rows;
    free(c);
    return rows;
}

double gpt_moe_load_take(gpt_model *m)
{
    double mean = m->moe_load_n > 0 ? m->moe_load_sum / m->moe_load_n : 0;
    m->moe_load_sum = 0;
    m->moe_load_n = 0;
    return mean;
}

/* Weights of expert e (its slice of each of the layer's MLP tensors): w1 (F1 x C), b1, w2 (C x F),
 * b2 (C). */
static void expert_slices(const gpt_model *m, float *const *t, int e, float **w1, float **b1, float **w2, float **b2)
{
    size_t C = (size_t)m->cfg.hidden, F = (size_t)gpt_mlp_width(m), F1 = m->cfg.swiglu ? 2 * F : F;
    *w1 = t[J_FC_W] + (size_t)e * F1 * C;
    *b1 = t[J_FC_B] + (size_t)e * F1;
    *w2 = t[J_FCPROJ_W] + (size_t)e * C * F;
    *b2 = t[J_FCPROJ_B] + (size_t)e * C;
}

/* Row counts summed over the TP group in place: through the host all-reduce as floats, exact
 * below 2^24 rows. */
static void tp_sum_counts(gpt_model *m, int *counts, size_t n)
{
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        f[i] = (float)counts[i];
    m->shard.tp_allreduce_host(f, n, 0, m->shard.tp_ctx);
    for (size_t i = 0; i < n; i++)
        counts[i] = (int)f[i];
    free(f);
}

/* Sequence parallelism: the TP group's rows of this rank's El local experts in xall, by expert,
 * then TP rank; this rank's own (`mine`, by expert at offsets off) placed in its slots, the rest
 * zeros, and the whole summed over the group, which is a gather (x + 0 is exact). With exchange,
 * the ranks first tell each other their counts into r->tp_counts and r->aoffset; without, the
 * forward's are used (the backward moves the same rows). Returns the group's row count. */
static int tp_gather_rows(gpt_model *m, gpt_moe_route *r, const float *mine, const int *off, int El, float *xall,
                          int exchange)
{
    int tp = m->shard.tp, me = m->shard.tp_rank;
    size_t C = (size_t)m->cfg.hidden;
    if (exchange) {
        memset(r->tp_counts, 0, (size_t)tp * El * sizeof(int));
        for (int e = 0; e < El; e++)
            r->tp_counts[me * El + e] = off[e + 1] - off[e];
        tp_sum_counts(m, r->tp_counts, (size_t)tp * El);
        gpt_moe_expert_offsets(r->tp_counts, tp, El, r->aoffset);
    }
    int total = r->aoffset[El];
    memset(xall, 0, (size_t)total * C * sizeof(float));
    for (int e = 0; e < El; e++) {
        int at = r->aoffset[e];
        for (int q = 0; q < me; q++)
            at += r->tp_counts[q * El + e];
        memcpy(xall + (size_t)at * C, mine + (size_t)off[e] * C, (size_t)(off[e + 1] - off[e]) * C * sizeof(float));
    }
    m->shard.tp_allreduce_host(xall, (size_t)total * C, 0, m->shard.tp_ctx);
    return total;
}

/* The reverse: xall's rows, each TP rank's partial sums over its share of the experts, summed
 * over the group, and this rank's own copied back into `mine` (by expert at offsets off). */
static void tp_scatter_rows(gpt_model *m, const gpt_moe_route *r, float *xall, float *mine, const int *off, int El)
{
    int me = m->shard.tp_rank;
    size_t C = (size_t)m->cfg.hidden;
    m->shard.tp_allreduce_host(xall, (size_t)r->aoffset[El] * C, 0, m->shard.tp_ctx);
    for (int e = 0; e < El; e++) {
        int at = r->aoffset[e];
        for (int q = 0; q < me; q++)
            at += r->tp_counts[q * El + e];
        memcpy(mine + (size_t)off[e] * C, xall + (size_t)at * C, (size_t)(off[e + 1] - off[e]) * C * sizeof(float));
    }
}

void gpt_moe_forward(gpt_model *m, gpt_layer_acts *a, float *const *w, int layer)
{
    const kernels_backend *k = m->k;
    struct gpt_moe_scratch *s = m->moe;
    int N = (int)routed_of(m), K = m->cfg.moe_topk, E = m->cfg.num_experts, C = m->cfg.hidden;
    int F = gpt_mlp_width(m), F1 = m->cfg.swiglu ? 2 * F : F, lead = m->shard.tp_rank == 0;
    int ep = m->shard.ep > 1 ? m->shard.ep : 1, shard = sharded(m);
    /* the tokens this rank routes: its own, or every token of the micro-batch */
    const float *x = shard ? a->ln2 : gpt_sp_gather(m, a->ln2);
    PROF_BEGIN();
    k->matmul_forward(s->dev_logits, x, w[J_ROUTER_W], NULL, N, C, E, m->prec);
    k->copy_to_host(s->logits, s->dev_logits, (size_t)N * E * sizeof(float));
    int rows = gpt_moe_route_tokens(m, s->logits, a->route);
    PROF_END("router", layer, 2.0 * N * C * E, 0, "m=%d n=%d k=%d", N, E, C);
    if (m->shard.moe_aux_loss_coeff > 0) { /* the load-balancing loss, for the record */
        /* over the micro-batch's tokens: the counts and probability sums of the TP group under
         * sequence parallelism, and of the CP group under context parallelism (the counts stay
         * for the backward) */
        int Nall = (int)loss_tokens(m), cp = m->shard.cp > 1;
        float *sums = malloc(2 * (size_t)E * sizeof(float));
        for (int e = 0; e < E; e++) {
            double P = 0;
            for (int t = 0; t < N; t++)
                P += a->route->scores[(size_t)t * E + e];
            sums[e] = (float)a->route->counts[e];
            sums[E + e] = (float)P;
        }
        if (shard)
            m->shard.tp_allreduce_host(sums, 2 * (size_t)E, 0, m->shard.tp_ctx);
        if (cp)
            m->shard.cp_allreduce_host(sums, 2 * (size_t)E, 0, m->shard.cp_ctx);
        if (shard || cp) /* exact as floats below 2^24 */
            for (int e = 0; e < E; e++)
                a->route->counts[e] = (int)sums[e];
        double aux = 0;
        for (int e = 0; e < E; e++)
            aux += (double)sums[e] / ((double)Nall * K) * ((double)sums[E + e] / Nall);
        free(sums);
        m->moe_aux_loss += m->shard.moe_aux_loss_coeff * E * aux;
    }
    /* each expert's input rows, gathered */
    PROF_BEGIN();
    k->copy_to_host(s->x, x, (size_t)N * C * sizeof(float));
    for (int i = 0; i < rows; i++)
        memcpy(s->rows + (size_t)i * C, s->x + (size_t)a->route->token[i] * C, (size_t)C * sizeof(float));
    if (ep == 1 && !shard)
        k->copy_to_device(a->moe_in, s->rows, (size_t)rows * C * sizeof(float));
    PROF_END("moe_permute", layer, 0, 2.0 * rows * C * 4, "rows=%d C=%d", rows, C);
    int xrows = rows, El = E; /* the rows this rank's experts run, and its experts */
    const int *xoff = a->route->offset;
    float *xout = a->moe_out;
    if (ep > 1) { /* the rows to their experts' ranks */
        PROF_BEGIN();
        xrows = gpt_moe_ep_plan(m, a->route);
        if (shard) { /* the balance of what the experts run: the TP group's rows, every TP rank's routing */
            size_t n = (size_t)ep * E;
            int *sum = malloc(n * sizeof(int));
            memcpy(sum, a->route->sent_all, n * sizeof(int));
            tp_sum_counts(m, sum, n);
            a->route->balance = gpt_moe_ep_balance(sum, ep, E);
            free(sum);
        }
        gpt_moe_ep_dispatch(m, a->route, s->rows, s->xrows, s->xscratch);
        if (!shard)
            k->copy_to_device(a->moe_in, s->xrows, (size_t)xrows * C * sizeof(float));
        PROF_END("ep_alltoall_dispatch", layer, 0, 4.0 * rows * C, "rows=%d C=%d", rows, C);
        El = E / ep;
        xoff = a->route->xoffset;
        xout = s->dev_rows; /* scratch until the combine (the backward's otherwise) */
    }
    if (shard) { /* the rows that arrived, the TP group's, each TP rank running its share of them all */
        PROF_BEGIN();
        xrows = tp_gather_rows(m, a->route, ep > 1 ? s->xrows : s->rows, xoff, El, s->xall, 1);
        k->copy_to_device(a->moe_in, s->xall, (size_t)xrows * C * sizeof(float));
        PROF_END("moe_tp_allgather", layer, 0, 4.0 * xrows * C, "rows=%d C=%d", xrows, C);
        xoff = a->route->aoffset;
        xout = s->dev_rows;
    }
    if (!m->recomputing) { /* each layer and micro-batch once (gpt_moe_load_take) */
        m->moe_load_sum += ep > 1 ? a->route->balance : 1; /* without EP the one rank is the busiest */
        m->moe_load_n++;
    }
    /* the experts' GEMMs and activations, one op over every expert at a time (the op list's) */
    float *w1, *b1, *w2, *b2;
    PROF_BEGIN();
    for (int e = 0; e < El; e++) {
        int r0 = xoff[e], n = xoff[e + 1] - r0;
        expert_slices(m, w, e, &w1, &b1, &w2, &b2);
        if (n)
            k->matmul_forward(a->fch + (size_t)r0 * F1, a->moe_in + (size_t)r0 * C, w1, b1, n, C, F1, m->prec);
    }
    PROF_END("fc1", layer, 2.0 * xrows * C * F1, 0, "m=%d n=%d k=%d", xrows, F1, C);
    PROF_BEGIN();
    gpt_mlp_act_forward_rows(m, a->fch_gelu, a->fch, xrows);
    PROF_END(m->cfg.swiglu ? "swiglu" : "gelu", layer, 0, 4.0 * xrows * (F1 + F), "n=%d", xrows * F);
    PROF_BEGIN();
    for (int e = 0; e < El; e++) {
        int r0 = xoff[e], n = xoff[e + 1] - r0;
        expert_slices(m, w, e, &w1, &b1, &w2, &b2);
        if (n) /* a row-parallel GEMM: TP rank 0 adds the bias */
            k->matmul_forward(xout + (size_t)r0 * C, a->fch_gelu + (size_t)r0 * F, w2, lead ? b2 : NULL, n, F, C,
                              m->prec);
    }
    PROF_END("fc2", layer, 2.0 * xrows * F * C, 0, "m=%d n=%d k=%d", xrows, C, F);
    if (shard) { /* each TP rank's rows back to it, summed over the experts' shares */
        PROF_BEGIN();
        k->copy_to_host(s->xall, xout, (size_t)xrows * C * sizeof(float));
        tp_scatter_rows(m, a->route, s->xall, ep > 1 ? s->xrows : s->rows, ep > 1 ? a->route->xoffset : a->route->offset,
                        El);
        PROF_END("moe_tp_reducescatter", layer, 0, 4.0 * xrows * C, "rows=%d C=%d", xrows, C);
    }
    if (ep > 1) { /* the output rows back to the ranks of their tokens */
        PROF_BEGIN();
        if (!shard)
            k->copy_to_host(s->xrows, xout, (size_t)xrows * C * sizeof(float));
        gpt_moe_ep_combine(m, a->route, s->xrows, s->rows, s->xscratch);
        PROF_END("ep_alltoall_combine", layer, 0, 4.0 * rows * C, "rows=%d C=%d", rows, C);
    }
    if (ep > 1 || shard) /* for the backward */
        k->copy_to_device(a->moe_out, s->rows, (size_t)rows * C * sizeof(float));
    /* each token's weighted sum of its kept choices, in choice order */
    PROF_BEGIN();
    if (ep == 1 && !shard)
        k->copy_to_host(s->rows, a->moe_out, (size_t)rows * C * sizeof(float));
    memset(s->y, 0, (size_t)N * C * sizeof(float));
    for (int t = 0; t < N; t++)
        for (int j = 0; j < K; j++) {
            int r = a->route->row[(size_t)t * K + j];
            float p = a->route->prob[(size_t)t * K + j];
            if (r < 0)
                continue;
            for (int c = 0; c < C; c++)
                s->y[(size_t)t * C + c] += p * s->rows[(size_t)r * C + c];
        }
    /* sharded: this rank's tokens' whole output; else each TP rank's share, summed over TP as
     * after the dense MLP's fc2 */
    k->copy_to_device(shard ? a->fcproj : s->dev_nc, s->y, (size_t)N * C * sizeof(float));
    PROF_END("moe_unpermute", layer, 0, 2.0 * rows * C * 4, "rows=%d C=%d", rows, C);
    if (!shard)
        gpt_sp_reduce(m, s->dev_nc, a->fcproj);
}

void gpt_moe_backward(gpt_model *m, gpt_layer_acts *a, float *const *w, float *const *g, float *dnorm, float dloss,
                      int layer)
{
    const kernels_backend *k = m->k;
    struct gpt_moe_scratch *s = m->moe;
    gpt_moe_route *rt = a->route;
    int N = (int)routed_of(m), K = m->cfg.moe_topk, E = m->cfg.num_experts, C = m->cfg.hidden;
    int F = gpt_mlp_width(m), F1 = m->cfg.swiglu ? 2 * F : F, rows = rt->offset[E];
    int ep = m->shard.ep > 1 ? m->shard.ep : 1, El = E / ep, shard = sharded(m); /* this rank's experts */
    const int *own_off = ep > 1 ? rt->xoffset : rt->offset; /* the rows that came to this rank */
    const int *xoff = shard ? rt->aoffset : own_off;         /* and those its experts run */
    int xrows = xoff[El];
    /* the output's gradient for every token this rank routed, on the host */
    PROF_BEGIN();
    const float *dy = shard ? m->d_res : gpt_sp_gather(m, m->d_res);
    k->copy_to_host(s->y, dy, (size_t)N * C * sizeof(float));
    /* d(weight) = dy . (the expert's output; a partial sum under TP without sequence parallelism,
     * so summed over TP), and each row's output gradient weight x dy */
    k->copy_to_host(s->rows, a->moe_out, (size_t)rows * C * sizeof(float));
    float *dprob = calloc((size_t)N * K, sizeof(float));
    for (int t = 0; t < N; t++)
        for (int j = 0; j < K; j++) {
            int r = rt->row[(size_t)t * K + j];
            if (r < 0)
                continue;
            double d = 0;
            for (int c = 0; c < C; c++)
                d += (double)s->y[(size_t)t * C + c] * s->rows[(size_t)r * C + c];
            dprob[(size_t)t * K + j] = (float)d;
        }
    if (m->shard.tp > 1 && !shard)
        m->shard.tp_allreduce_host(dprob, (size_t)N * K, 0, m->shard.tp_ctx);
    for (int r = 0; r < rows; r++) {
        int t = rt->token[r], j = 0;
        while (rt->row[(size_t)t * K + j] != r)
            j++;
        float p = rt->prob[(size_t)t * K + j];
        for (int c = 0; c < C; c++)
            s->rows[(size_t)r * C + c] = p * s->y[(size_t)t * C + c];
    }
    if (ep == 1 && !shard) {
        k->copy_to_device(s->dev_rows, s->rows, (size_t)rows * C * sizeof(float));
        gpt_round_act(m, s->dev_rows, (size_t)rows * C);
    }
    PROF_END("moe_unpermute_bwd", layer, 0, 4.0 * rows * C * 4, "rows=%d C=%d", rows, C);
    if (ep > 1) { /* the output rows' gradients to their experts' ranks (the combine's backward) */
        PROF_BEGIN();
        gpt_moe_ep_dispatch(m, rt, s->rows, s->xrows, s->xscratch);
        if (!shard) {
            k->copy_to_device(s->dev_rows, s->xrows, (size_t)xrows * C * sizeof(float));
            gpt_round_act(m, s->dev_rows, (size_t)xrows * C);
        }
        PROF_END("ep_alltoall_combine_bwd", layer, 0, 4.0 * rows * C, "rows=%d C=%d", rows, C);
    }
    if (shard) { /* the TP group's rows' gradients (the reduce-scatter's backward) */
        PROF_BEGIN();
        tp_gather_rows(m, rt, ep > 1 ? s->xrows : s->rows, own_off, El, s->xall, 0);
        k->copy_to_device(s->dev_rows, s->xall, (size_t)xrows * C * sizeof(float));
        gpt_round_act(m, s->dev_rows, (size_t)xrows * C);
        PROF_END("moe_tp_reducescatter_bwd", layer, 0, 4.0 * xrows * C, "rows=%d C=%d", xrows, C);
    }
    /* the experts' backward, one op over every expert at a time; the rows' input gradients replace
     * their output gradients, spent by then */
    float *dact = s->dev_act, *dfch = s->dev_fch, *drows = s->dev_rows;
    float *w1, *b1, *w2, *b2, *gw1, *gb1, *gw2, *gb2;
    PROF_BEGIN();
    k->memset_zero(dact, (size_t)xrows * F * sizeof(float));
    for (int e = 0; e < El; e++) {
        int r0 = xoff[e], n = xoff[e + 1] - r0;
        expert_slices(m, w, e, &w1, &b1, &w2, &b2);
        expert_slices(m, g, e, &gw1, &gb1, &gw2, &gb2);
        if (n)
            k->matmul_backward(dact + (size_t)r0 * F, gw2, gb2, drows + (size_t)r0 * C, a->fch_gelu + (size_t)r0 * F,
                               w2, n, F, C, m->prec);
    }
    gpt_round_act(m, dact, (size_t)xrows * F);
    PROF_END("fc2_bwd", layer, 4.0 * xrows * F * C, 0, "m=%d n=%d k=%d", xrows, C, F);
    PROF_BEGIN();
    k->memset_zero(dfch, (size_t)xrows * F1 * sizeof(float));
    gpt_mlp_act_backward_rows(m, dfch, a->fch, dact, xrows);
    PROF_END(m->cfg.swiglu ? "swiglu_bwd" : "gelu_bwd", layer, 0, 4.0 * xrows * (2.0 * F1 + F), "n=%d", xrows * F);
    PROF_BEGIN();
    k->memset_zero(drows, (size_t)xrows * C * sizeof(float));
    for (int e = 0; e < El; e++) {
        int r0 = xoff[e], n = xoff[e + 1] - r0;
        expert_slices(m, w, e, &w1, &b1, &w2, &b2);
        expert_slices(m, g, e, &gw1, &gb1, &gw2, &gb2);
        if (n)
            k->matmul_backward(drows + (size_t)r0 * C, gw1, gb1, dfch + (size_t)r0 * F1, a->moe_in + (size_t)r0 * C,
                               w1, n, C, F1, m->prec);
    }
    PROF_END("fc1_bwd", layer, 4.0 * xrows * C * F1, 0, "m=%d n=%d k=%d", xrows, F1, C);
    if (shard) { /* each TP rank's rows' input gradients back to it, summed over the experts' shares */
        PROF_BEGIN();
        k->copy_to_host(s->xall, drows, (size_t)xrows * C * sizeof(float));
        tp_scatter_rows(m, rt, s->xall, ep > 1 ? s->xrows : s->rows, own_off, El);
        PROF_END("moe_tp_allgather_bwd", layer, 0, 4.0 * xrows * C, "rows=%d C=%d", xrows, C);
    }
    if (ep > 1) { /* the input rows' gradients back to the ranks of their tokens (the dispatch's backward) */
        PROF_BEGIN();
        if (!shard)
            k->copy_to_host(s->xrows, drows, (size_t)xrows * C * sizeof(float));
        gpt_moe_ep_combine(m, rt, s->xrows, s->rows, s->xscratch);
        PROF_END("ep_alltoall_dispatch_bwd", layer, 0, 4.0 * rows * C, "rows=%d C=%d", rows, C);
    }
    /* scatter the rows' input gradients back to their tokens, in row order */
    PROF_BEGIN();
    if (ep == 1 && !shard)
        k->copy_to_host(s->rows, drows, (size_t)rows * C * sizeof(float));
    memset(s->x, 0, (size_t)N * C * sizeof(float));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < C; c++)
            s->x[(size_t)rt->token[r] * C + c] += s->rows[(size_t)r * C + c];
    PROF_END("moe_permute_bwd", layer, 0, 2.0 * rows * C * 4, "rows=%d C=%d", rows, C);
    /* the router: the weights' softmax over the K chosen logits, and the load-balancing loss's
     * gradient through the softmax of all logits */
    PROF_BEGIN();
    double coeff = m->shard.moe_aux_loss_coeff;
    memset(s->dlogits, 0, (size_t)N * E * sizeof(float));
    for (int t = 0; t < N; t++) {
        float *dz = s->dlogits + (size_t)t * E;
        const float *p = rt->prob + (size_t)t * K, *dp = dprob + (size_t)t * K;
        double dot = 0;
        for (int j = 0; j < K; j++)
            dot += (double)p[j] * dp[j];
        for (int j = 0; j < K; j++)
            dz[rt->expert[(size_t)t * K + j]] += (float)(p[j] * (dp[j] - dot));
        if (coeff > 0) {
            const float *sc = rt->scores + (size_t)t * E;
            double gs = 0;
            for (int e = 0; e < E; e++)
                gs += (double)sc[e] * rt->counts[e];
            /* d loss / d scores = unit x counts, over the micro-batch's tokens (the TP group's
             * counts under sequence parallelism, the CP group's under context parallelism, left
             * in rt->counts by the forward) */
            double unit = dloss * coeff * E / ((double)loss_tokens(m) * K);
            for (int e = 0; e < E; e++)
                dz[e] += (float)(unit * sc[e] * (rt->counts[e] - gs));
        }
    }
    free(dprob);
    k->copy_to_device(s->dev_logits, s->dlogits, (size_t)N * E * sizeof(float));
    k->memset_zero(s->dev_router_dx, (size_t)N * C * sizeof(float));
    k->copy_to_device(s->dev_nc, s->x, (size_t)N * C * sizeof(float));
    if (shard) {
        /* each TP rank's router gradient is its own tokens': summed over the group (the router
         * is replicated), this micro-batch's before it joins what earlier ones left; the input
         * gradient is this rank's tokens' whole */
        k->memset_zero(s->dev_router_dw, (size_t)E * C * sizeof(float));
        k->matmul_backward(s->dev_router_dx, s->dev_router_dw, NULL, s->dev_logits, a->ln2, w[J_ROUTER_W], N, C, E,
                           m->prec);
        m->shard.tp_allreduce(s->dev_router_dw, (size_t)E * C, m->shard.tp_ctx);
        k->residual_forward(g[J_ROUTER_W], g[J_ROUTER_W], s->dev_router_dw, (size_t)E * C, KPREC_FP32);
        k->residual_forward(dnorm, s->dev_nc, s->dev_router_dx, (size_t)N * C, KPREC_FP32);
        PROF_END("router_bwd", layer, 4.0 * N * C * E, 0, "m=%d n=%d k=%d", N, E, C);
        return;
    }
    const float *x = gpt_sp_gather(m, a->ln2);
    k->matmul_backward(s->dev_router_dx, g[J_ROUTER_W], NULL, s->dev_logits, x, w[J_ROUTER_W], N, C, E, m->prec);
    /* every TP rank routes the same tokens with the same router: its input gradient counts once */
    if (m->shard.tp_rank == 0)
        k->residual_forward(s->dev_nc, s->dev_nc, s->dev_router_dx, (size_t)N * C, KPREC_FP32);
    PROF_END("router_bwd", layer, 4.0 * N * C * E, 0, "m=%d n=%d k=%d", N, E, C);
    gpt_sp_reduce(m, s->dev_nc, dnorm);
}
