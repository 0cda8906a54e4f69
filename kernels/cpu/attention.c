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

/* Row pointers into qkv (B, T, 3C): q, k and v of token t, head h sit C apart. */
typedef struct {
    const float *qkv;
    int T, C, hs;
} qkv_view;

static const float *q_of(const qkv_view *v, int b, int t, int h)
{
    return v->qkv + ((size_t)b * v->T + t) * 3 * v->C + (size_t)h * v->hs;
}
static const float *k_of(const qkv_view *v, int b, int t, int h) { return q_of(v, b, t, h) + v->C; }
static const float *v_of(const qkv_view *v, int b, int t, int h) { return q_of(v, b, t, h) + 2 * v->C; }

static float dot(const float *a, const float *b, int n)
{
    float s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* Queries (rows of qkv_q, B x Tq, at sequence positions pos[0..Tq)) against the keys and values of
 * qkv_kv (B x Tk): the causal mask keeps keys j <= pos[t]. The plain kernel is the case
 * qkv_q == qkv_kv, pos[t] = t; context parallelism's rank asks for its positions of the whole
 * sequence it gathered. */
void cpu_attention_forward_at(float *out, float *lse, const float *qkv_q, const float *qkv_kv, const int *pos, int B,
                              int Tq, int Tk, int C, int NH, kernels_precision prec)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    float *rkv = cpu_rounded_copy(qkv_kv, (size_t)B * Tk * 3 * C, prec);
    float *rq = qkv_q == qkv_kv ? NULL : cpu_rounded_copy(qkv_q, (size_t)B * Tq * 3 * C, prec);
    qkv_view kv = {rkv ? rkv : qkv_kv, Tk, C, hs};
    qkv_view qv = {qkv_q == qkv_kv ? kv.qkv : rq ? rq : qkv_q, Tq, C, hs};
    float *row = cpu_alloc((size_t)Tk * sizeof(float)); /* one query row's scores, then weights */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < Tq; t++) {
                const float *q = q_of(&qv, b, t, h);
                int last = pos ? pos[t] : t;
                float m = -INFINITY;
                for (int j = 0; j <= last; j++) { /* causal: keys up to and including the query's */
                    row[j] = dot(q, k_of(&kv, b, j, h), hs) * scale;
                    m = fmaxf(m, row[j]);
                }
                double l = 0;
                for (int j = 0; j <= last; j++) {
                    row[j] = expf(row[j] - m);
                    l += row[j];
                }
                float inv = (float)(1.0 / l);
                float *o = out + ((size_t)b * Tq + t) * C + (size_t)h * hs;
                for (int c = 0; c < hs; c++)
                    o[c] = 0;
                for (int j = 0; j <= last; j++) {
                    const float *v = v_of(&kv, b, j, h);
                    float p = row[j] * inv;
                    for (int c = 0; c < hs; c++)
                        o[c] += p * v[c];
                }
                lse[((size_t)b * NH + h) * Tq + t] = m + (float)log(l);
            }
    cpu_round_to_precision(out, (size_t)B * Tq * C, prec);
    free(row);
    free(rkv);
    free(rq);
}

void cpu_attention_forward(float *out, float *lse, const float *qkv_in, int B, int T, int C, int NH,
                           kernels_precision prec)
{
    cpu_attention_forward_at(out, lse, qkv_in, qkv_in, NULL, B, T, T, C, NH, prec);
}

/* With p_j = exp(s_j - lse), o = sum_j p_j v_j and dO = dL/do:
 *   dv_j += p_j dO,   dp_j = dO . v_j,   ds_j = p_j (dp_j - D) with D = sum_j p_j dp_j = dO . o,
 *   dq += scale sum_j ds_j k_j,   dk_j += scale ds_j q.
 * D from the saved output saves a pass over the row. */
/* The backward of cpu_attention_forward_at: dq into dqkv_q's rows (its q part), dk and dv into
 * dqkv_kv's (their k and v parts); one buffer for the plain kernel. */
void cpu_attention_backward_at(float *dqkv_q, float *dqkv_kv, const float *dout, const float *qkv_q,
                               const float *qkv_kv, const float *out, const float *lse, const int *pos, int B, int Tq,
                               int Tk, int C, int NH, kernels_precision prec)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    float *rkv = cpu_rounded_copy(qkv_kv, (size_t)B * Tk * 3 * C, prec);
    float *rq = qkv_q == qkv_kv ? NULL : cpu_rounded_copy(qkv_q, (size_t)B * Tq * 3 * C, prec);
    qkv_view kv = {rkv ? rkv : qkv_kv, Tk, C, hs};
    qkv_view qv = {qkv_q == qkv_kv ? kv.qkv : rq ? rq : qkv_q, Tq, C, hs};
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < Tq; t++) {
                const float *q = q_of(&qv, b, t, h);
                const float *dO = dout + ((size_t)b * Tq + t) * C + (size_t)h * hs;
                const float *o = out + ((size_t)b * Tq + t) * C + (size_t)h * hs;
                float L = lse[((size_t)b * NH + h) * Tq + t];
                float D = dot(dO, o, hs);
                float *dq = dqkv_q + ((size_t)b * Tq + t) * 3 * C + (size_t)h * hs;
                int last = pos ? pos[t] : t;
                for (int j = 0; j <= last; j++) {
                    const float *k = k_of(&kv, b, j, h), *v = v_of(&kv, b, j, h);
                    float p = expf(dot(q, k, hs) * scale - L);
                    float ds = p * (dot(dO, v, hs) - D) * scale;
                    float *dk = dqkv_kv + ((size_t)b * Tk + j) * 3 * C + C + (size_t)h * hs;
                    float *dv = dk + C;
                    for (int c = 0; c < hs; c++) {
                        dq[c] += ds * k[c];
                        dk[c] += ds * q[c];
                        dv[c] += p * dO[c];
                    }
                }
            }
    free(rkv);
    free(rq);
}

void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv_in, const float *out, const float *lse,
                            int B, int T, int C, int NH, kernels_precision prec)
{
    cpu_attention_backward_at(dqkv, dqkv, dout, qkv_in, qkv_in, out, lse, NULL, B, T, T, C, NH, prec);
}
