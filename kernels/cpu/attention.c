/* Causal multi-head self-attention, one query row at a time with an online softmax, so no
 * (T, T) matrix is ever held: O(T) scratch per row. The backward recomputes each row's
 * probabilities from the saved log-sum-exp, as FlashAttention does. */
#include <math.h>
#include <stdlib.h>
#include "cpu_internal.h"

/* Pointers into qkv (B, T, 3C): q, k, v of token t, head h. */
#define QPTR(base, b, t, h) ((base) + ((size_t)(b) * T + (t)) * 3 * C + (size_t)(h) * hs)
#define KPTR(base, b, t, h) (QPTR(base, b, t, h) + C)
#define VPTR(base, b, t, h) (QPTR(base, b, t, h) + 2 * C)

void cpu_attention_forward(float *out, float *lse, const float *qkv_in, int B, int T, int C, int NH,
                           kernels_precision prec)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    float *rounded = cpu_rounded_copy(qkv_in, (size_t)B * T * 3 * C, prec);
    const float *qkv = rounded ? rounded : qkv_in;
    float *scores = cpu_alloc((size_t)T * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = QPTR(qkv, b, t, h);
                float m = -INFINITY;
                for (int j = 0; j <= t; j++) {
                    const float *k = KPTR(qkv, b, j, h);
                    float s = 0;
                    for (int c = 0; c < hs; c++)
                        s += q[c] * k[c];
                    scores[j] = s * scale;
                    if (scores[j] > m)
                        m = scores[j];
                }
                double l = 0;
                float *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
                for (int c = 0; c < hs; c++)
                    o[c] = 0;
                for (int j = 0; j <= t; j++) {
                    float p = expf(scores[j] - m);
                    l += p;
                    const float *v = VPTR(qkv, b, j, h);
                    for (int c = 0; c < hs; c++)
                        o[c] += p * v[c];
                }
                for (int c = 0; c < hs; c++)
                    o[c] = (float)(o[c] / l);
                lse[((size_t)b * NH + h) * T + t] = m + (float)log(l);
            }
    cpu_round_to_precision(out, (size_t)B * T * C, prec);
    free(scores);
    free(rounded);
}

void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv_in, const float *out, const float *lse,
                            int B, int T, int C, int NH, kernels_precision prec)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    float *rounded = cpu_rounded_copy(qkv_in, (size_t)B * T * 3 * C, prec);
    const float *qkv = rounded ? rounded : qkv_in;
    float *p = cpu_alloc((size_t)T * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = QPTR(qkv, b, t, h);
                const float *dO = dout + ((size_t)b * T + t) * C + (size_t)h * hs;
                const float *O = out + ((size_t)b * T + t) * C + (size_t)h * hs;
                float L = lse[((size_t)b * NH + h) * T + t];
                /* D = sum_j p_j (dO . v_j) = dO . O */
                float D = 0;
                for (int c = 0; c < hs; c++)
                    D += dO[c] * O[c];
                float *dq = dqkv + ((size_t)b * T + t) * 3 * C + (size_t)h * hs;
                for (int j = 0; j <= t; j++) {
                    const float *k = KPTR(qkv, b, j, h), *v = VPTR(qkv, b, j, h);
                    float s = 0, dp = 0;
                    for (int c = 0; c < hs; c++) {
                        s += q[c] * k[c];
                        dp += dO[c] * v[c];
                    }
                    p[j] = expf(s * scale - L);
                    float ds = p[j] * (dp - D) * scale;
                    float *dk = dqkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * hs;
                    float *dv = dk + C;
                    for (int c = 0; c < hs; c++) {
                        dq[c] += ds * k[c];
                        dk[c] += ds * q[c];
                        dv[c] += p[j] * dO[c];
                    }
                }
            }
    free(p);
    free(rounded);
}
