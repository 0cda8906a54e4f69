/* PowerSGD for the DP reduction; see powersgd.h. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpt_internal.h"
#include "powersgd.h"
#include "rng.h"

int powersgd_parse(const char *spec, int *rank, char *err, size_t errlen)
{
    if (!strcmp(spec, "none")) {
        *rank = 0;
        return 0;
    }
    const char *prefix = "powersgd:";
    if (strncmp(spec, prefix, strlen(prefix)) == 0) {
        const char *v = spec + strlen(prefix);
        char *end;
        long r = strtol(v, &end, 10);
        if (*v && !*end && r >= 1 && r <= 65536) {
            *rank = (int)r;
            return 0;
        }
    }
    snprintf(err, errlen, "'%s' is not none or powersgd:R with R a whole number in 1..65536", spec);
    return -1;
}

/* Columns of the local n x m view of tensor t, or 0 for a 1-D tensor. Tensors are stored
 * (out, in) row-major; under TP the column-split ones (proj, fcproj) hold C/tp or F/tp columns. */
static size_t matrix_cols(const gpt_model *m, int t)
{
    size_t C = (size_t)m->cfg.hidden, tp = (size_t)m->shard.tp;
    if (t == GPT_WTE || t == GPT_WPE || t == gpt_lnf_w(m) + 2) /* the embeddings and an untied LM head */
        return C;
    int L = m->cfg.num_layers;
    if (t < 2 || t >= 2 + LAYER_TENSORS * L)
        return 0; /* final norm */
    switch ((t - 2) % LAYER_TENSORS) {
    case J_QKV_W:
    case J_FC_W: return C;
    case J_PROJ_W: return C / tp;
    case J_FCPROJ_W: return (size_t)m->cfg.ffn_hidden / tp;
    default: return 0;
    }
}

void powersgd_init(powersgd_state *s, const gpt_model *m, int rank, int dp, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->rank = rank;
    s->dp = dp;
    s->mats = calloc((size_t)m->num_tensors, sizeof *s->mats);
    s->vec_offset = calloc((size_t)m->num_tensors, sizeof(size_t));
    s->vec_count = calloc((size_t)m->num_tensors, sizeof(size_t));
    for (int t = 0; t < m->num_tensors; t++) {
        const gpt_tensor *g = &m->tensors[t];
        if (g->count == 0)
            continue;
        size_t cols = matrix_cols(m, t), rows = cols ? g->count / cols : 0;
        /* A matrix whose factors would not be smaller than itself goes uncompressed (PyTorch's
         * hook and the simulator's model, sim/step/compression.c, do the same). */
        if (!cols || rows * cols <= (rows + cols) * (size_t)rank) {
            s->vec_offset[s->num_vecs] = g->offset;
            s->vec_count[s->num_vecs++] = g->count;
            s->vec_floats += g->count;
            continue;
        }
        powersgd_matrix *x = &s->mats[s->num_mats++];
        x->offset = g->offset;
        x->cols = cols;
        x->rows = g->count / cols;
        size_t r = (size_t)rank;
        if (r > x->rows)
            r = x->rows;
        if (r > x->cols)
            r = x->cols;
        x->r = (int)r;
        x->residual = calloc(g->count, sizeof(float));
        x->q = malloc(x->cols * r * sizeof(float));
        /* Q from the run seed and the tensor's index only: identical on every DP rank. */
        rng_t g_rng;
        rng_seed(&g_rng, seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(t + 1)));
        for (size_t i = 0; i < x->cols * r; i++)
            x->q[i] = (float)rng_normal(&g_rng);
        s->p_floats += x->rows * r;
        s->q_floats += x->cols * r;
    }
    s->wire_p = malloc((s->vec_floats + s->p_floats + 1) * sizeof(float));
    s->wire_q = malloc((s->q_floats + 1) * sizeof(float));
}

void powersgd_free(powersgd_state *s)
{
    for (int i = 0; i < s->num_mats; i++) {
        free(s->mats[i].q);
        free(s->mats[i].residual);
    }
    free(s->mats);
    free(s->vec_offset);
    free(s->vec_count);
    free(s->wire_p);
    free(s->wire_q);
    memset(s, 0, sizeof *s);
}

void powersgd_orthonormalise(float *p, size_t n, int r)
{
    double *col = malloc(n * (size_t)r * sizeof(double)); /* column-major copy */
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < r; j++)
            col[(size_t)j * n + i] = p[i * r + j];
    for (int j = 0; j < r; j++) {
        double *c = col + (size_t)j * n;
        for (int k = 0; k < j; k++) { /* modified Gram-Schmidt: against the finished columns */
            const double *b = col + (size_t)k * n;
            double dot = 0;
            for (size_t i = 0; i < n; i++)
                dot += c[i] * b[i];
            for (size_t i = 0; i < n; i++)
                c[i] -= dot * b[i];
        }
        double norm = 0;
        for (size_t i = 0; i < n; i++)
            norm += c[i] * c[i];
        norm = sqrt(norm);
        double inv = norm > 1e-30 ? 1.0 / norm : 0.0;
        for (size_t i = 0; i < n; i++)
            c[i] *= inv;
    }
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < r; j++)
            p[i * r + j] = (float)col[(size_t)j * n + i];
    free(col);
}

/* The three stages of a round on one matrix; the all-reduces go between them. */

/* residual <- M = dp * grad + residual; p <- M q. */
static void stage_p(const float *grad, float *residual, const float *q, float *p, size_t n, size_t m, int r, int dp)
{
    for (size_t i = 0; i < n * m; i++)
        residual[i] += (float)dp * grad[i];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, r, (int)m, 1.0f, residual, (int)m, q, r, 0.0f, p, r);
}

/* p (summed over the group) <- orthonormal(p / dp); q <- M^T p. */
static void stage_q(const float *residual, float *p, float *q, size_t n, size_t m, int r, int dp)
{
    for (size_t i = 0; i < n * (size_t)r; i++)
        p[i] /= (float)dp;
    powersgd_orthonormalise(p, n, r);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, r, (int)n, 1.0f, residual, (int)m, p, r, 0.0f, q, r);
}

/* q (summed) <- q / dp; grad <- p q^T; residual <- M - grad. */
static void stage_finish(float *grad, float *residual, const float *p, float *q, size_t n, size_t m, int r, int dp)
{
    for (size_t i = 0; i < m * (size_t)r; i++)
        q[i] /= (float)dp;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)m, r, 1.0f, p, r, q, r, 0.0f, grad, (int)m);
    for (size_t i = 0; i < n * m; i++)
        residual[i] -= grad[i];
}

void powersgd_round(float *grad, float *residual, float *q, float *p, size_t n, size_t m, int r, int dp,
                    powersgd_allreduce_fn allreduce, void *ctx)
{
    stage_p(grad, residual, q, p, n, m, r, dp);
    if (allreduce)
        allreduce(p, n * (size_t)r, ctx);
    stage_q(residual, p, q, n, m, r, dp);
    if (allreduce)
        allreduce(q, m * (size_t)r, ctx);
    stage_finish(grad, residual, p, q, n, m, r, dp);
}

void powersgd_reduce(powersgd_state *s, float *grads, powersgd_allreduce_fn allreduce, void *ctx)
{
    /* One all-reduce carries the 1-D gradients and every P, one every Q: two collectives per
     * step however many tensors, as PyTorch's hook batches them. */
    float *vec = s->wire_p, *ps = s->wire_p + s->vec_floats, *qs = s->wire_q;
    size_t at = 0;
    for (int i = 0; i < s->num_vecs; i++) {
        memcpy(vec + at, grads + s->vec_offset[i], s->vec_count[i] * sizeof(float));
        at += s->vec_count[i];
    }
    size_t po = 0, qo = 0;
    for (int i = 0; i < s->num_mats; i++) {
        powersgd_matrix *x = &s->mats[i];
        stage_p(grads + x->offset, x->residual, x->q, ps + po, x->rows, x->cols, x->r, s->dp);
        po += x->rows * x->r;
    }
    allreduce(s->wire_p, s->vec_floats + s->p_floats, ctx);
    at = 0;
    for (int i = 0; i < s->num_vecs; i++) { /* summed, the engine's DP convention */
        memcpy(grads + s->vec_offset[i], vec + at, s->vec_count[i] * sizeof(float));
        at += s->vec_count[i];
    }
    po = 0;
    for (int i = 0; i < s->num_mats; i++) {
        powersgd_matrix *x = &s->mats[i];
        stage_q(x->residual, ps + po, qs + qo, x->rows, x->cols, x->r, s->dp);
        po += x->rows * x->r;
        qo += x->cols * x->r;
    }
    allreduce(s->wire_q, s->q_floats, ctx);
    po = qo = 0;
    for (int i = 0; i < s->num_mats; i++) {
        powersgd_matrix *x = &s->mats[i];
        stage_finish(grads + x->offset, x->residual, ps + po, qs + qo, x->rows, x->cols, x->r, s->dp);
        memcpy(x->q, qs + qo, x->cols * x->r * sizeof(float)); /* warm start */
        po += x->rows * x->r;
        qo += x->cols * x->r;
    }
}
