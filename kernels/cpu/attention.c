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

void cpu_attention_forward(float *out, float *lse, const float *qkv_in, int B, int T, int C, int NH,
                           kernels_precision prec)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    float *rounded = cpu_rounded_copy(qkv_in, (size_t)B * T * 3 * C, prec);
    qkv_view qv = {rounded ? rounded : qkv_in, T, C, hs};
    float *row = cpu_alloc((size_t)T * sizeof(float)); /* one query row's scores, then weights */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = q_of(&qv, b, t, h);
                float m = -INFINITY;
                for (int j = 0; j <= t; j++) { /* causal: keys up to and including t */
                    row[j] = dot(q, k_of(&qv, b, j, h), hs) * scale;
                    m = fmaxf(m, row[j]);
                }
                double l = 0;
                for (int j = 0; j <= t; j++) {
                    row[j] = expf(row[j] - m);
                    l += row[j];
                }
                float inv = (float)(1.0 / l);
                float *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
                for (int c = 0; c < hs; c++)
                    o[c] = 0;
                for (int j = 0; j <= t; j++) {
                    const float *v = v_of(&qv, b, j, h);
                    float p = row[j] * inv;
                    for (int c = 0; c < hs; c++)
                        o[c] += p * v[c];
                }
                lse[((size_t)b * NH + h) * T + t] = m + (float)log(l);
            }
    cpu_round_to_precision(out, (size_t)B * T * C, prec);
    free(row);
    free(rounded);
}

/* With p_j = exp(s_j - lse), o = sum_j p_j v_j and dO = dL/do:
 *   dv_j += p_j dO,   dp_j = dO . v_j,   ds_j = p_j (dp_j - D) with D = sum_j p_j dp_j = dO . o,
 *   dq += scale sum_j ds_j k_j,   dk_j += scale ds_j q.
 * D from the saved output saves a pass over the row. */
void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv_in, const float *out, const float *lse,
                            int B, int T, int C, int NH, kernels_precision prec)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    float *rounded = cpu_rounded_copy(qkv_in, (size_t)B * T * 3 * C, prec);
    qkv_view qv = {rounded ? rounded : qkv_in, T, C, hs};
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = q_of(&qv, b, t, h);
                const float *dO = dout + ((size_t)b * T + t) * C + (size_t)h * hs;
                const float *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
                float L = lse[((size_t)b * NH + h) * T + t];
                float D = dot(dO, o, hs);
                float *dq = dqkv + ((size_t)b * T + t) * 3 * C + (size_t)h * hs;
                for (int j = 0; j <= t; j++) {
                    const float *k = k_of(&qv, b, j, h), *v = v_of(&qv, b, j, h);
                    float p = expf(dot(q, k, hs) * scale - L);
                    float ds = p * (dot(dO, v, hs) - D) * scale;
                    float *dk = dqkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * hs;
                    float *dv = dk + C;
                    for (int c = 0; c < hs; c++) {
                        dq[c] += ds * k[c];
                        dk[c] += ds * q[c];
                        dv[c] += p * dO[c];
                    }
                }
            }
    free(rounded);
}
