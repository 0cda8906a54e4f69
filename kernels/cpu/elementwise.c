/* GELU (tanh approximation, as GPT-2), residual add, row softmax. */
#include <math.h>
#include "cpu_internal.h"

#define GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */

void cpu_gelu_forward(float *out, const float *inp, size_t N)
{
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + 0.044715f * x * x * x)));
    }
}

void cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += grad * dout[i];
    }
}

void cpu_residual_forward(float *out, const float *a, const float *b, size_t N)
{
    for (size_t i = 0; i < N; i++)
        out[i] = a[i] + b[i];
}

void cpu_softmax_forward(float *out, const float *inp, int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        const float *x = inp + (size_t)r * cols;
        float *y = out + (size_t)r * cols;
        float m = -INFINITY;
        for (int c = 0; c < cols; c++)
            m = fmaxf(m, x[c]);
        double s = 0;
        for (int c = 0; c < cols; c++) {
            y[c] = expf(x[c] - m);
            s += y[c];
        }
        for (int c = 0; c < cols; c++)
            y[c] = (float)(y[c] / s);
    }
}
