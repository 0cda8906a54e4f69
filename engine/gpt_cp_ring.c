/* Ring attention: context parallelism's cp_comm_type p2p, Megatron-Core's default. Each CP rank
 * holds two chunks of every sequence (causal load balancing, gpt_cp.c: rank r the r-th and the
 * (2cp-1-r)-th of 2cp). The forward runs cp steps; at step s the rank holds the K/V block of rank
 * src = r - s (mod cp), sends it on to rank r + 1 and receives rank r - s - 1's from r - 1 while
 * it computes, so after cp - 1 transfers it has attended every block without ever holding the
 * whole sequence. Each of its two query chunks attends each chunk of the block held unless that
 * chunk comes later in the sequence (the mask would hide all of it; Megatron-Core skips those
 * too): at step 0 its own chunks (the diagonal ones causally), then for src < r only src's first
 * chunk (by both query chunks), for src > r only the second query chunk (by src's both). Each
 * block's partial output and log-sum-exp merge into the row's by the online-softmax rule
 * (kernels' attention_merge). The backward passes the blocks around again, each with the
 * gradient of its K and V accumulated so far: every rank adds its queries' share of the block it
 * holds and sends both on, and a last transfer brings each block's gradient home to its owner; dq
 * stays on the rank. Bytes on the wire: cp - 1 K/V blocks forward, cp - 1 K/V blocks and cp K/V
 * gradient blocks backward (the all-gather form moves the same K/V, but the whole sequence's
 * qkv sits on every rank).
 *
 * The ring keeps its blocks chunk-major (2 chunks x B sequences x T/2 rows), so a chunk of all
 * sequences is one contiguous B x T/2 buffer for the kernels; a K/V row is 2C/tp floats (k then
 * v), as Megatron-Core passes them. A backend without the block kernels (CUDA, for now) still
 * passes the blocks around the ring, builds the whole sequence's K and V from them (other ranks'
 * queries zero: their rows are computed and dropped) and runs gpt_cp.c's whole-sequence path,
 * then sends the K/V gradients around the ring to their owners: the same numbers at cp times the
 * attention work. */
#include <stdlib.h>
#include "gpt.h"
#include "gpt_internal.h"

struct gpt_cp_ring {
    int *pos;              /* host: pos[i T/2 + t], the global position of chunk i's t-th row (2cp chunks) */
    float *q;              /* the rank's qkv rows, chunk-major (2 x B x T/2 x 3C/tp) */
    float *kv[2], *dkv[2]; /* the K/V block held and the one arriving; their K/V gradients */
    float *dq;             /* dq by chunk (3C/tp rows, q part), then the K/V gradient beside it */
    float *out, *lse;      /* the rows' merged output and log-sum-exp, chunk-major */
    float *part_out, *part_lse; /* one block's, for one query chunk (B x T/2 rows) */
    float *dout;           /* the output gradient, chunk-major */
};

typedef struct gpt_cp_ring gpt_cp_ring;

/* The rank's layout: C and heads per TP rank, the half-chunk length, the sizes of one chunk's
 * buffers (B x T/2 rows) and of a K/V block. */
typedef struct {
    int B, T, half, Cl, NH, cp, r;
    size_t qn, on, ln, kvh, kvn;
} ring_dims;

static ring_dims dims(const gpt_model *m)
{
    ring_dims d = {m->B, m->T, m->T / 2, m->cfg.hidden / m->shard.tp, m->cfg.heads / m->shard.tp, m->shard.cp,
                   m->shard.cp_rank, 0, 0, 0, 0, 0};
    size_t rows = (size_t)d.B * d.half;
    d.qn = rows * 3 * d.Cl;
    d.on = rows * d.Cl;
    d.ln = (size_t)d.B * d.NH * d.half;
    d.kvh = rows * 2 * d.Cl;
    d.kvn = 2 * d.kvh;
    return d;
}

/* Rows of `local` (nseq sequences of T rows of w floats, the rank's layout: chunk c's rows at
 * c T/2) to chunk-major `chunks` (2 x nseq x T/2 rows), or back. The log-sum-exp rows (B NH
 * sequences of T, one float each) move the same way. */
static void chunk_rows(const gpt_model *m, float *chunks, float *local, int nseq, int w, int to_chunks)
{
    int T = m->T, half = T / 2;
    for (int b = 0; b < nseq; b++)
        for (int c = 0; c < 2; c++) {
            float *lp = local + ((size_t)b * T + (size_t)c * half) * w;
            float *cp = chunks + ((size_t)c * nseq + b) * half * w;
            if (to_chunks)
                m->k->copy(cp, lp, (size_t)half * w * sizeof(float));
            else
                m->k->copy(lp, cp, (size_t)half * w * sizeof(float));
        }
}

/* A chunk-major K/V block's rows (2C/tp each) and the k and v parts of qkv rows (3C/tp each, k at
 * C/tp): B sequences of Tr rows, chunk c's first row at first[c]. GET: block = rows; PUT: rows =
 * block; ADD: block += rows; ADD_TO_ROWS: rows += block. */
enum { KV_GET, KV_PUT, KV_ADD, KV_ADD_TO_ROWS };
static void kv_rows(const gpt_model *m, float *block, float *rows, int Tr, const int first[2], int how)
{
    int half = m->T / 2, Cl = m->cfg.hidden / m->shard.tp;
    size_t w = 2 * (size_t)Cl;
    for (int c = 0; c < 2; c++)
        for (int b = 0; b < m->B; b++)
            for (int t = 0; t < half; t++) {
                float *bp = block + (((size_t)c * m->B + b) * half + t) * w;
                float *rp = rows + ((size_t)b * Tr + first[c] + t) * 3 * Cl + Cl;
                if (how == KV_GET)
                    m->k->copy(bp, rp, w * sizeof(float));
                else if (how == KV_PUT)
                    m->k->copy(rp, bp, w * sizeof(float));
                else if (how == KV_ADD)
                    m->k->residual_forward(bp, bp, rp, w, KPREC_FP32);
                else
                    m->k->residual_forward(rp, rp, bp, w, KPREC_FP32);
            }
}

/* One ring step: send on to the next CP rank, receive from the previous. */
static void ring_step(gpt_model *m, const float *send, float *recv, size_t n)
{
    m->shard.cp_ring_wait(m->shard.cp_ring_start(send, recv, n, m->shard.cp_ctx), m->shard.cp_ctx);
}

/* The first rows of CP rank r's two chunks in the whole sequence (Tf rows). */
static void whole_firsts(const gpt_model *m, int r, int first[2])
{
    for (int c = 0; c < 2; c++)
        first[c] = gpt_cp_chunk(m, r, c) * (m->T / 2);
}

void gpt_cp_ring_forward(gpt_model *m, float *atty, float *lse, const float *qkv)
{
    gpt_cp_ring *R = m->cp_ring;
    ring_dims d = dims(m);
    const int local_first[2] = {0, d.half};
    chunk_rows(m, R->q, (float *)qkv, d.B, 3 * d.Cl, 1);
    kv_rows(m, R->kv[0], (float *)qkv, d.T, local_first, KV_GET);
    int cur = 0, seen[2] = {0, 0};
    for (int s = 0; s < d.cp; s++) {
        int src = (d.r - s + d.cp) % d.cp;
        /* the next block travels while this one is computed on */
        void *step = s + 1 < d.cp ? m->shard.cp_ring_start(R->kv[cur], R->kv[!cur], d.kvn, m->shard.cp_ctx) : NULL;
        for (int qc = 0; qc < 2; qc++)
            for (int kc = 0; kc < 2; kc++) {
                int qi = gpt_cp_chunk(m, d.r, qc), ki = gpt_cp_chunk(m, src, kc);
                if (ki > qi) /* a later chunk: wholly masked */
                    continue;
                float *o = R->out + qc * d.on, *l = R->lse + qc * d.ln;
                /* a query chunk's first block writes its rows; the others merge into them */
                m->k->attention_block_forward(seen[qc] ? R->part_out : o, seen[qc] ? R->part_lse : l, R->q + qc * d.qn,
                                              R->kv[cur] + kc * d.kvh, R->pos + (size_t)qi * d.half,
                                              R->pos + (size_t)ki * d.half, d.B, d.half, d.half, d.Cl, d.NH, m->prec);
                if (seen[qc])
                    m->k->attention_merge(o, l, R->part_out, R->part_lse, d.B, d.half, d.Cl, d.NH);
                seen[qc] = 1;
            }
        if (step) {
            m->shard.cp_ring_wait(step, m->shard.cp_ctx);
            cur = !cur;
        }
    }
    chunk_rows(m, R->out, atty, d.B, d.Cl, 0);
    m->k->round_to_precision(atty, (size_t)d.B * d.T * d.Cl, m->prec); /* once, as the whole kernel's */
    chunk_rows(m, R->lse, lse, d.B * d.NH, 1, 0);
}

void gpt_cp_ring_backward(gpt_model *m, float *dqkv, const float *dout, const float *qkv, const float *atty,
                          const float *lse)
{
    gpt_cp_ring *R = m->cp_ring;
    ring_dims d = dims(m);
    const int local_first[2] = {0, d.half}, chunk_first[2] = {0, d.B * d.half};
    chunk_rows(m, R->q, (float *)qkv, d.B, 3 * d.Cl, 1);
    kv_rows(m, R->kv[0], (float *)qkv, d.T, local_first, KV_GET);
    chunk_rows(m, R->out, (float *)atty, d.B, d.Cl, 1);
    chunk_rows(m, R->lse, (float *)lse, d.B * d.NH, 1, 1);
    chunk_rows(m, R->dout, (float *)dout, d.B, d.Cl, 1);
    m->k->memset_zero(R->dq, 2 * d.qn * sizeof(float));
    m->k->memset_zero(R->dkv[0], d.kvn * sizeof(float));
    int cur = 0, dc = 0;
    for (int s = 0; s < d.cp; s++) {
        int src = (d.r - s + d.cp) % d.cp;
        void *step = s + 1 < d.cp ? m->shard.cp_ring_start(R->kv[cur], R->kv[!cur], d.kvn, m->shard.cp_ctx) : NULL;
        for (int qc = 0; qc < 2; qc++)
            for (int kc = 0; kc < 2; kc++) {
                int qi = gpt_cp_chunk(m, d.r, qc), ki = gpt_cp_chunk(m, src, kc);
                if (ki > qi)
                    continue;
                m->k->attention_block_backward(R->dq + qc * d.qn, R->dkv[dc] + kc * d.kvh, R->dout + qc * d.on,
                                               R->q + qc * d.qn, R->kv[cur] + kc * d.kvh, R->out + qc * d.on,
                                               R->lse + qc * d.ln, R->pos + (size_t)qi * d.half,
                                               R->pos + (size_t)ki * d.half, d.B, d.half, d.half, d.Cl, d.NH, m->prec);
            }
        if (step) {
            m->shard.cp_ring_wait(step, m->shard.cp_ctx);
            cur = !cur;
        }
        /* the block's K/V gradient goes on with it; the last transfer brings each home */
        ring_step(m, R->dkv[dc], R->dkv[!dc], d.kvn);
        dc = !dc;
    }
    /* dq and the own block's K/V gradient as qkv rows, then back to the rank's layout */
    kv_rows(m, R->dkv[dc], R->dq, d.half, chunk_first, KV_PUT);
    chunk_rows(m, R->dq, R->q, d.B, 3 * d.Cl, 0);
    m->k->residual_forward(dqkv, dqkv, R->q, (size_t)d.B * d.T * 3 * d.Cl, KPREC_FP32);
}

void gpt_cp_ring_gather(gpt_model *m, const float *qkv)
{
    gpt_cp_ring *R = m->cp_ring;
    ring_dims d = dims(m);
    int Tf = d.T * d.cp, first[2];
    const int local_first[2] = {0, d.half};
    m->k->memset_zero(m->cp_qkv, (size_t)d.B * Tf * 3 * d.Cl * sizeof(float));
    gpt_cp_rows(m, m->cp_qkv, (float *)qkv, d.r, 3 * d.Cl, 1);
    kv_rows(m, R->kv[0], (float *)qkv, d.T, local_first, KV_GET);
    for (int s = 1, cur = 0; s < d.cp; s++) {
        ring_step(m, R->kv[cur], R->kv[!cur], d.kvn);
        cur = !cur;
        whole_firsts(m, (d.r - s + d.cp) % d.cp, first);
        kv_rows(m, R->kv[cur], m->cp_qkv, Tf, first, KV_PUT);
    }
}

void gpt_cp_ring_reduce(gpt_model *m, float *dqkv)
{
    gpt_cp_ring *R = m->cp_ring;
    ring_dims d = dims(m);
    int Tf = d.T * d.cp, first[2], dc = 0;
    for (int s = 0; s < d.cp; s++) {
        whole_firsts(m, (d.r - s + d.cp) % d.cp, first);
        if (s == 0)
            kv_rows(m, R->dkv[dc], m->cp_dqkv, Tf, first, KV_GET);
        else
            kv_rows(m, R->dkv[dc], m->cp_dqkv, Tf, first, KV_ADD);
        ring_step(m, R->dkv[dc], R->dkv[!dc], d.kvn);
        dc = !dc;
    }
    /* the rank's rows: its dq, and its K/V gradient summed over every rank's queries */
    whole_firsts(m, d.r, first);
    kv_rows(m, R->dkv[dc], m->cp_dqkv, Tf, first, KV_PUT);
    gpt_cp_rows(m, m->cp_dqkv, R->q, d.r, 3 * d.Cl, 0);
    m->k->residual_forward(dqkv, dqkv, R->q, (size_t)d.B * d.T * 3 * d.Cl, KPREC_FP32);
}

void gpt_cp_ring_alloc(gpt_model *m)
{
    const kernels_backend *k = m->k;
    ring_dims d = dims(m);
    gpt_cp_ring *R = calloc(1, sizeof *R);
    R->pos = malloc((size_t)2 * d.cp * d.half * sizeof(int));
    for (int i = 0; i < 2 * d.cp * d.half; i++)
        R->pos[i] = i; /* chunk i's t-th row: i T/2 + t */
    R->q = k->alloc(2 * d.qn * sizeof(float));
    R->dq = k->alloc(2 * d.qn * sizeof(float));
    for (int i = 0; i < 2; i++) {
        R->kv[i] = k->alloc(d.kvn * sizeof(float));
        R->dkv[i] = k->alloc(d.kvn * sizeof(float));
    }
    R->out = k->alloc(2 * d.on * sizeof(float));
    R->dout = k->alloc(2 * d.on * sizeof(float));
    R->lse = k->alloc(2 * d.ln * sizeof(float));
    R->part_out = k->alloc(d.on * sizeof(float));
    R->part_lse = k->alloc(d.ln * sizeof(float));
    m->cp_ring = R;
}

void gpt_cp_ring_free(gpt_model *m)
{
    gpt_cp_ring *R = m->cp_ring;
    if (!R)
        return;
    float *bufs[] = {R->q, R->dq, R->kv[0], R->kv[1], R->dkv[0], R->dkv[1], R->out, R->dout, R->lse, R->part_out,
                     R->part_lse};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        m->k->free(bufs[i]);
    free(R->pos);
    free(R);
    m->cp_ring = NULL;
}
