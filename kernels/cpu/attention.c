/* Causal multi-head self-attention, one (batch, head, query row) at a time, so no (T, T)
 * matrix is ever held: the forward keeps one row of scores (T floats) and saves the row's
 * log-sum-exp; the backward recomputes each probability from q, k and that log-sum-exp (as
 * FlashAttention does) and needs no scratch at all.
 *
 * Precision emulation (bf16/fp16): q, k, v are rounded (in a copy) before any product and the
 * output is rounded after; scores, softmax and sums stay fp32, as a tensor-core kernel's do. */
#include <math.h>
#include <stdlib.h>
#include "cpu_internal.h"

/* Row pointers into a buffer of B x T rows of `row` floats: head h's q of token t at h * hs, its
 * k at koff further and its v at voff (a qkv buffer: row 3C, k at C, v at 2C; a K/V block of ring
 * attention: row 2C, k at 0, v at C). */
typedef struct {
    const float *base;
    int T, row, hs, koff, voff;
} qkv_view;

static qkv_view view_qkv(const float *qkv, int T, int C, int hs) { return (qkv_view){qkv, T, 3 * C, hs, C, 2 * C}; }
static qkv_view view_kv(const float *kv, int T, int C, int hs) { return (qkv_view){kv, T, 2 * C, hs, 0, C}; }

static const float *q_of(const qkv_view *v, int b, int t, int h)
{
    return v->base + ((size_t)b * v->T + t) * v->row + (size_t)h * v->hs;
}
static const float *k_of(const qkv_view *v, int b, int t, int h) { return q_of(v, b, t, h) + v->koff; }
static const float *v_of(const qkv_view *v, int b, int t, int h) { return q_of(v, b, t, h) + v->voff; }

static float dot(const float *a, const float *b, int n)
{
    float s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* The keys query row t sees: those at positions up to its own (qpos NULL: t; kpos NULL: key j is
 * at j; kpos increasing, so they are a prefix). */
static int keys_seen(const int *qpos, const int *kpos, int t, int Tk)
{
    int p = qpos ? qpos[t] : t, n = 0;
    if (!kpos)
        return p + 1 < Tk ? p + 1 : Tk;
    while (n < Tk && kpos[n] <= p)
        n++;
    return n;
}

/* The forward over views (inputs already rounded): out (B, Tq, C) and lse (B, NH, Tq); a row that
 * sees no key gets out 0 and lse -inf (it adds nothing when merged). */
static void forward_core(float *out, float *lse, const qkv_view *qv, const qkv_view *kv, const int *qpos,
                         const int *kpos, int B, int Tq, int Tk, int C, int NH)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    float *row = cpu_alloc((size_t)(Tk > 0 ? Tk : 1) * sizeof(float)); /* one query row's scores, then weights */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < Tq; t++) {
                const float *q = q_of(qv, b, t, h);
                int n = keys_seen(qpos, kpos, t, Tk);
                float m = -INFINITY;
                for (int j = 0; j < n; j++) {
                    row[j] = dot(q, k_of(kv, b, j, h), hs) * scale;
                    m = fmaxf(m, row[j]);
                }
                double l = 0;
                for (int j = 0; j < n; j++) {
                    row[j] = expf(row[j] - m);
                    l += row[j];
                }
                float inv = n ? (float)(1.0 / l) : 0;
                float *o = out + ((size_t)b * Tq + t) * C + (size_t)h * hs;
                for (int c = 0; c < hs; c++)
                    o[c] = 0;
                for (int j = 0; j < n; j++) {
                    const float *v = v_of(kv, b, j, h);
                    float p = row[j] * inv;
                    for (int c = 0; c < hs; c++)
                        o[c] += p * v[c];
                }
                lse[((size_t)b * NH + h) * Tq + t] = n ? m + (float)log(l) : -INFINITY;
            }
    free(row);
}

/* Queries (rows of qkv_q, B x Tq, at sequence positions pos[0..Tq)) against the keys and values of
 * qkv_kv (B x Tk): the causal mask keeps keys j <= pos[t]. The plain kernel is the case
 * qkv_q == qkv_kv, pos[t] = t; context parallelism's rank asks for its positions of the whole
 * sequence it gathered. */
void cpu_attention_forward_at(float *out, float *lse, const float *qkv_q, const float *qkv_kv, const int *pos, int B,
                              int Tq, int Tk, int C, int NH, kernels_precision prec)
{
    int hs = C / NH;
    float *rkv = cpu_rounded_copy(qkv_kv, (size_t)B * Tk * 3 * C, prec);
    float *rq = qkv_q == qkv_kv ? NULL : cpu_rounded_copy(qkv_q, (size_t)B * Tq * 3 * C, prec);
    qkv_view kv = view_qkv(rkv ? rkv : qkv_kv, Tk, C, hs);
    qkv_view qv = view_qkv(qkv_q == qkv_kv ? kv.base : rq ? rq : qkv_q, Tq, C, hs);
    forward_core(out, lse, &qv, &kv, pos, NULL, B, Tq, Tk, C, NH);
    cpu_round_to_precision(out, (size_t)B * Tq * C, prec);
    free(rkv);
    free(rq);
}

/* Ring attention's block: queries at qpos against a K/V block (rows of 2C: k then v) at kpos. The
 * output stays fp32 (unrounded): the blocks' partial outputs are merged first, and the caller
 * rounds the merged output once, as the whole-sequence kernel rounds its own. */
void cpu_attention_block_forward(float *out, float *lse, const float *qkv_q, const float *kv_in, const int *qpos,
                                 const int *kpos, int B, int Tq, int Tk, int C, int NH, kernels_precision prec)
{
    int hs = C / NH;
    float *rkv = cpu_rounded_copy(kv_in, (size_t)B * Tk * 2 * C, prec);
    float *rq = cpu_rounded_copy(qkv_q, (size_t)B * Tq * 3 * C, prec);
    qkv_view kv = view_kv(rkv ? rkv : kv_in, Tk, C, hs), qv = view_qkv(rq ? rq : qkv_q, Tq, C, hs);
    forward_core(out, lse, &qv, &kv, qpos, kpos, B, Tq, Tk, C, NH);
    free(rkv);
    free(rq);
}

/* The online-softmax merge of two attentions of the same query rows over disjoint keys: with
 * L = log(e^lse + e^blk_lse), out = out e^(lse - L) + blk_out e^(blk_lse - L) and lse = L
 * (FlashAttention's and Megatron-Core's ring attention's rule). -inf: no keys on that side. */
void cpu_attention_merge(float *out, float *lse, const float *blk_out, const float *blk_lse, int B, int T, int C,
                         int NH)
{
    int hs = C / NH;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                float *l = lse + ((size_t)b * NH + h) * T + t, lb = blk_lse[((size_t)b * NH + h) * T + t];
                if (lb == -INFINITY)
                    continue;
                float mx = fmaxf(*l, lb), L = mx + logf(expf(*l - mx) + expf(lb - mx));
                float wa = expf(*l - L), wb = expf(lb - L);
                float *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
                const float *ob = blk_out + ((size_t)b * T + t) * C + (size_t)h * hs;
                for (int c = 0; c < hs; c++)
                    o[c] = o[c] * wa + ob[c] * wb;
                *l = L;
            }
}

void cpu_attention_forward(float *out, float *lse, const float *qkv_in, int B, int T, int C, int NH,
                           kernels_precision prec)
{
    cpu_attention_forward_at(out, lse, qkv_in, qkv_in, NULL, B, T, T, C, NH, prec);
}

/* With p_j = exp(s_j - lse), o = sum_j p_j v_j and dO = dL/do:
 *   dv_j += p_j dO,   dp_j = dO . v_j,   ds_j = p_j (dp_j - D) with D = sum_j p_j dp_j = dO . o,
 *   dq += scale sum_j ds_j k_j,   dk_j += scale ds_j q.
 * D from the saved output saves a pass over the row. With a row's out and lse over all its keys,
 * the same sums over any subset of them (a ring attention block) give that subset's share. dq
 * goes to dqv's q, dk and dv to dkv's k and v (views of the gradient buffers). */
static void backward_core(const qkv_view *dqv, const qkv_view *dkv, const float *dout, const qkv_view *qv,
                          const qkv_view *kv, const float *out, const float *lse, const int *qpos, const int *kpos,
                          int B, int Tq, int Tk, int C, int NH)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < Tq; t++) {
                const float *q = q_of(qv, b, t, h);
                const float *dO = dout + ((size_t)b * Tq + t) * C + (size_t)h * hs;
                const float *o = out + ((size_t)b * Tq + t) * C + (size_t)h * hs;
                float L = lse[((size_t)b * NH + h) * Tq + t];
                if (L == -INFINITY) /* a row that saw no key at all */
                    continue;
                float D = dot(dO, o, hs);
                float *dq = (float *)q_of(dqv, b, t, h);
                int n = keys_seen(qpos, kpos, t, Tk);
                for (int j = 0; j < n; j++) {
                    const float *k = k_of(kv, b, j, h), *v = v_of(kv, b, j, h);
                    float p = expf(dot(q, k, hs) * scale - L);
                    float ds = p * (dot(dO, v, hs) - D) * scale;
                    float *dk = (float *)k_of(dkv, b, j, h), *dv = (float *)v_of(dkv, b, j, h);
                    for (int c = 0; c < hs; c++) {
                        dq[c] += ds * k[c];
                        dk[c] += ds * q[c];
                        dv[c] += p * dO[c];
                    }
                }
            }
}

/* The backward of cpu_attention_forward_at: dq into dqkv_q's rows (its q part), dk and dv into
 * dqkv_kv's (their k and v parts); one buffer for the plain kernel. */
void cpu_attention_backward_at(float *dqkv_q, float *dqkv_kv, const float *dout, const float *qkv_q,
                               const float *qkv_kv, const float *out, const float *lse, const int *pos, int B, int Tq,
                               int Tk, int C, int NH, kernels_precision prec)
{
    int hs = C / NH;
    float *rkv = cpu_rounded_copy(qkv_kv, (size_t)B * Tk * 3 * C, prec);
    float *rq = qkv_q == qkv_kv ? NULL : cpu_rounded_copy(qkv_q, (size_t)B * Tq * 3 * C, prec);
    qkv_view kv = view_qkv(rkv ? rkv : qkv_kv, Tk, C, hs);
    qkv_view qv = view_qkv(qkv_q == qkv_kv ? kv.base : rq ? rq : qkv_q, Tq, C, hs);
    qkv_view dqv = view_qkv(dqkv_q, Tq, C, hs), dkv = view_qkv(dqkv_kv, Tk, C, hs);
    backward_core(&dqv, &dkv, dout, &qv, &kv, out, lse, pos, NULL, B, Tq, Tk, C, NH);
    free(rkv);
    free(rq);
}

/* The backward of a ring attention block, from the row's merged out and lse (over all blocks):
 * dq into dqkv_q's q part, dk and dv into dkv_out (rows of 2C, as the block). */
void cpu_attention_block_backward(float *dqkv_q, float *dkv_out, const float *dout, const float *qkv_q,
                                  const float *kv_in, const float *out, const float *lse, const int *qpos,
                                  const int *kpos, int B, int Tq, int Tk, int C, int NH, kernels_precision prec)
{
    int hs = C / NH;
    float *rkv = cpu_rounded_copy(kv_in, (size_t)B * Tk * 2 * C, prec);
    float *rq = cpu_rounded_copy(qkv_q, (size_t)B * Tq * 3 * C, prec);
    qkv_view kv = view_kv(rkv ? rkv : kv_in, Tk, C, hs), qv = view_qkv(rq ? rq : qkv_q, Tq, C, hs);
    qkv_view dqv = view_qkv(dqkv_q, Tq, C, hs), dkv = view_kv(dkv_out, Tk, C, hs);
    backward_core(&dqv, &dkv, dout, &qv, &kv, out, lse, qpos, kpos, B, Tq, Tk, C, NH);
    free(rkv);
    free(rq);
}

void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv_in, const float *out, const float *lse,
                            int B, int T, int C, int NH, kernels_precision prec)
{
    cpu_attention_backward_at(dqkv, dqkv, dout, qkv_in, qkv_in, out, lse, NULL, B, T, T, C, NH, prec);
}
