/* RMSNorm over the last dimension (Llama; Megatron-LM's --normalization RMSNorm), eps 1e-5 as the
 * LayerNorm beside it. */
#include <math.h>
#include "cpu_internal.h"

#define RMSNORM_EPS 1e-5f

void cpu_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C)
{
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        double ss = 0;
        for (int c = 0; c < C; c++)
            ss += (double)x[c] * x[c];
        float s = (float)(1.0 / sqrt(ss / C + RMSNORM_EPS));
        for (int c = 0; c < C; c++)
            out[(size_t)i * C + c] = x[c] * s * weight[c];
        rstd[i] = s;
    }
}

void cpu_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                          const float *rstd, int N, int C)
{
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
        float *dx = dinp + (size_t)i * C;
        /* With n = x * rstd and g = dy * weight: dx = rstd * (g - n * mean(g * n)). */
        double gnsum = 0;
        for (int c = 0; c < C; c++)
            gnsum += (double)(dy[c] * weight[c]) * (x[c] * rstd[i]);
        float gnmean = (float)(gnsum / C);
        for (int c = 0; c < C; c++) {
            float n = x[c] * rstd[i];
            dweight[c] += dy[c] * n;
            dx[c] += rstd[i] * (dy[c] * weight[c] - n * gnmean);
        }
    }
}
