/* LayerNorm over the last dimension, eps 1e-5 (GPT-2). */
#include <math.h>
#include "cpu_internal.h"

#define LAYERNORM_EPS 1e-5f

void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                           const float *bias, int N, int C)
{
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        double m = 0, v = 0;
        for (int c = 0; c < C; c++)
            m += x[c];
        m /= C;
        for (int c = 0; c < C; c++)
            v += (x[c] - m) * (x[c] - m);
        v /= C;
        float s = (float)(1.0 / sqrt(v + LAYERNORM_EPS));
        for (int c = 0; c < C; c++)
            out[(size_t)i * C + c] = (float)(x[c] - m) * s * weight[c] + bias[c];
        mean[i] = (float)m;
        rstd[i] = s;
    }
}

void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, const float *mean, const float *rstd, int N, int C)
{
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
        float *dx = dinp + (size_t)i * C;
        /* With n = normalised input and g = dy * weight:
         * dx = rstd * (g - mean(g) - n * mean(g * n)). */
        double gsum = 0, gnsum = 0;
        for (int c = 0; c < C; c++) {
            float n = (x[c] - mean[i]) * rstd[i];
            float g = dy[c] * weight[c];
            gsum += g;
            gnsum += g * n;
        }
        float gmean = (float)(gsum / C), gnmean = (float)(gnsum / C);
        for (int c = 0; c < C; c++) {
            float n = (x[c] - mean[i]) * rstd[i];
            float g = dy[c] * weight[c];
            dbias[c] += dy[c];
            dweight[c] += dy[c] * n;
            dx[c] += rstd[i] * (g - gmean - n * gnmean);
        }
    }
}
