/* Mixture of experts in place of the MLP (gpt.h), as Megatron-Core's MoE layer with its default
 * router and the all-gather token dispatcher:
 *  - router: logits = x W_r^T over the E experts; each token takes the K largest logits and
 *    weighs them by a softmax over those K (moe_router_pre_softmax off);
 *  - capacity (moe_expert_capacity_factor > 0): an expert takes at most ceil(cf N K / E) of the
 *    N tokens' K choices and drops the rest, lowest weight first (drop policy "probs");
 *  - experts: each runs its MLP (GELU or SwiGLU, split over TP like the dense one) on its rows;
 *    a token's output is the weighted sum of its kept choices, then summed over TP (or reduce-
 *    scattered under SP) as the dense MLP's output is;
 *  - load balancing (--moe-aux-loss-coeff, Megatron's switch loss): coeff E sum_e f_e P_e, f_e
 *    the share of the N K choices routed to e before any drop, P_e the mean over tokens of the
 *    softmax of all logits; its gradient joins the router's in the backward (the logged loss is
 *    the language-model loss alone, as Megatron logs it).
 * Routing, gathers and the weighted sums run on host copies (exact, and deterministic: rows in
 * token order within each expert, sums in choice order); the expert GEMMs and activations run
 * on the backend. Under expert parallelism (shard.ep > 1) a rank holds E/ep experts and the rows
 * travel to their experts' ranks and back between the gathers and the sums (gpt_moe_ep.c); the
 * "expert rows" below are then those this rank's experts run, from every EP rank. */
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
    float *dev_act, *dev_fch;               /* backend: X F, X F1 (the backward's) */
};

static size_t tokens_of(const gpt_model *m)
{
    return (size_t)m->B * m->T;
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
    if (m->shard.ep > 1) {
        s->xrows = malloc(X * C * sizeof(float));
        s->xscratch = malloc(X * C * sizeof(float));
    }
    s->dev_logits = m->k->alloc(N * E * sizeof(float));
    s->dev_nc = m->k->alloc(N * C * sizeof(float));
    s->dev_rows = m->k->alloc(X * C * sizeof(float));
    s->dev_router_dx = m->k->alloc(N * C * sizeof(float));
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
    int N = (int)tokens_of(m), K = m->cfg.moe_topk, E = m->cfg.num_experts;
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

void gpt_moe_forward(gpt_model *m, gpt_layer_acts *a, float *const *w, int layer)
{
    const kernels_backend *k = m->k;
    struct gpt_moe_scratch *s = m->moe;
    int N = (int)tokens_of(m), K = m->cfg.moe_topk, E = m->cfg.num_experts, C = m->cfg.hidden;
    int F = gpt_mlp_width(m), F1 = m->cfg.swiglu ? 2 * F : F, lead = m->shard.tp_rank == 0;
    int ep = m->shard.ep > 1 ? m->shard.ep : 1;
    const float *x = gpt_sp_gather(m, a->ln2); /* every token of the micro-batch */
    PROF_BEGIN();
    k->matmul_forward(s->dev_logits, x, w[J_ROUTER_W], NULL, N, C, E, m->prec);
    k->copy_to_host(s->logits, s->dev_logits, (size_t)N * E * sizeof(float));
    int rows = gpt_moe_route_tokens(m, s->logits, a->route);
    PROF_END("router", layer, 2.0 * N * C * E, 0, "m=%d n=%d k=%d", N, E, C);
    if (m->shard.moe_aux_loss_coeff > 0) { /* the load-balancing loss, for the record */
        double aux = 0;
        for (int e = 0; e < E; e++) {
            double P = 0;
            for (int t = 0; t < N; t++)
                P += a->route->scores[(size_t)t * E + e];
            aux += (double)a->route->counts[e] / ((double)N * K) * (P / N);
        }
        m->moe_aux_loss += m->shard.moe_aux_loss_coeff * E * aux;
    }
    /* each expert's input rows, gathered */
    PROF_BEGIN();
    k->copy_to_host(s->x, x, (size_t)N * C * sizeof(float));
    for (int i = 0; i < rows; i++)
        memcpy(s->rows + (size_t)i * C, s->x + (size_t)a->route->token[i] * C, (size_t)C * sizeof(float));
    if (ep == 1)
        k->copy_to_device(a->moe_in, s->rows, (size_t)rows * C * sizeof(float));
    PROF_END("moe_permute", layer, 0, 2.0 * rows * C * 4, "rows=%d C=%d", rows, C);
    int xrows = rows, El = E; /* the rows this rank's experts run, and its experts */
    const int *xoff = a->route->offset;
    float *xout = a->moe_out;
    if (ep > 1) { /* the rows to their experts' ranks */
        PROF_BEGIN();
        xrows = gpt_moe_ep_plan(m, a->route);
        gpt_moe_ep_dispatch(m, a->route, s->rows, s->xrows, s->xscratch);
        k->copy_to_device(a->moe_in, s->xrows, (size_t)xrows * C * sizeof(float));
        PROF_END("ep_alltoall_dispatch", layer, 0, 4.0 * rows * C, "rows=%d C=%d", rows, C);
        El = E / ep;
        xoff = a->route->xoffset;
        xout = s->dev_rows; /* scratch until the combine (the backward's otherwise) */
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
    if (ep > 1) { /* the output rows back to the ranks of their tokens */
        PROF_BEGIN();
        k->copy_to_host(s->xrows, xout, (size_t)xrows * C * sizeof(float));
        gpt_moe_ep_combine(m, a->route, s->xrows, s->rows, s->xscratch);
        k->copy_to_device(a->moe_out, s->rows, (size_t)rows * C * sizeof(float)); /* for the backward */
        PROF_END("ep_alltoall_combine", layer, 0, 4.0 * rows * C, "rows=%d C=%d", rows, C);
    }
    /* each token's weighted sum of its kept choices, in choice order */
    PROF_BEGIN();
    if (ep == 1)
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
    k->copy_to_device(s->dev_nc, s->y, (size_t)N * C * sizeof(float));
    PROF_END("moe_unpermute", layer, 0, 2.0 * rows * C * 4, "rows=%d C=%d", rows, C);
    gpt_sp_reduce(m, s->dev_nc, a->fcproj); /* the TP sum, as after the dense MLP's fc2 */
}

void gpt_moe_backward(gpt_model *m, gpt_layer_acts *a, float *const *w, float *const *g, float *dnorm, float dloss,
                      int layer)
{
    const kernels_backend *k = m->k;
    struct gpt_moe_scratch *s = m->moe;
    gpt_moe_route *rt = a->route;
    int N = (int)tokens_of(m), K = m->cfg.moe_topk, E = m->cfg.num_experts, C = m->cfg.hidden;
    int F = gpt_mlp_width(m), F1 = m->cfg.swiglu ? 2 * F : F, rows = rt->offset[E];
    int ep = m->shard.ep > 1 ? m->shard.ep : 1, El = E / ep; /* this rank's experts */
    const int *xoff = ep > 1 ? rt->xoffset : rt->offset;      /* and their rows */
    int xrows = xoff[El];
    /* the output's gradient for every token, on the host */
    PROF_BEGIN();
    const float *dy = gpt_sp_gather(m, m->d_res);
    k->copy_to_host(s->y, dy, (size_t)N * C * sizeof(float));
    /* d(weight) = dy . (the expert's output; a partial sum under TP, so summed over TP), and each
     * row's output gradient weight x dy */
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
    if (m->shard.tp > 1)
        m->shard.tp_allreduce_host(dprob, (size_t)N * K, 0, m->shard.tp_ctx);
    for (int r = 0; r < rows; r++) {
        int t = rt->token[r], j = 0;
        while (rt->row[(size_t)t * K + j] != r)
            j++;
        float p = rt->prob[(size_t)t * K + j];
        for (int c = 0; c < C; c++)
            s->rows[(size_t)r * C + c] = p * s->y[(size_t)t * C + c];
    }
    if (ep == 1) {
        k->copy_to_device(s->dev_rows, s->rows, (size_t)rows * C * sizeof(float));
        gpt_round_act(m, s->dev_rows, (size_t)rows * C);
    }
    PROF_END("moe_unpermute_bwd", layer, 0, 4.0 * rows * C * 4, "rows=%d C=%d", rows, C);
    if (ep > 1) { /* the output rows' gradients to their experts' ranks (the combine's backward) */
        PROF_BEGIN();
        gpt_moe_ep_dispatch(m, rt, s->rows, s->xrows, s->xscratch);
        k->copy_to_device(s->dev_rows, s->xrows, (size_t)xrows * C * sizeof(float));
        gpt_round_act(m, s->dev_rows, (size_t)xrows * C);
        PROF_END("ep_alltoall_combine_bwd", layer, 0, 4.0 * rows * C, "rows=%d C=%d", rows, C);
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
    if (ep > 1) { /* the input rows' gradients back to the ranks of their tokens (the dispatch's backward) */
        PROF_BEGIN();
        k->copy_to_host(s->xrows, drows, (size_t)xrows * C * sizeof(float));
        gpt_moe_ep_combine(m, rt, s->xrows, s->rows, s->xscratch);
        PROF_END("ep_alltoall_dispatch_bwd", layer, 0, 4.0 * rows * C, "rows=%d C=%d", rows, C);
    }
    /* scatter the rows' input gradients back to their tokens, in row order */
    PROF_BEGIN();
    if (ep == 1)
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
            double unit = dloss * coeff * E / ((double)N * K); /* d loss / d scores = unit x counts */
            for (int e = 0; e < E; e++)
                dz[e] += (float)(unit * sc[e] * (rt->counts[e] - gs));
        }
    }
    free(dprob);
    k->copy_to_device(s->dev_logits, s->dlogits, (size_t)N * E * sizeof(float));
    const float *x = gpt_sp_gather(m, a->ln2);
    k->memset_zero(s->dev_router_dx, (size_t)N * C * sizeof(float));
    k->matmul_backward(s->dev_router_dx, g[J_ROUTER_W], NULL, s->dev_logits, x, w[J_ROUTER_W], N, C, E, m->prec);
    /* every TP rank routes the same tokens with the same router: its input gradient counts once */
    k->copy_to_device(s->dev_nc, s->x, (size_t)N * C * sizeof(float));
    if (m->shard.tp_rank == 0)
        k->residual_forward(s->dev_nc, s->dev_nc, s->dev_router_dx, (size_t)N * C, KPREC_FP32);
    PROF_END("router_bwd", layer, 4.0 * N * C * E, 0, "m=%d n=%d k=%d", N, E, C);
    gpt_sp_reduce(m, s->dev_nc, dnorm);
}
