/* GELU, tanh approximation (as GPT-2 was trained with):
 *   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3). */
#include <math.h>
#include "cpu_internal.h"
#include "half_bits.h"

#define GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_CUBIC 0.044715f

void cpu_gelu_forward(float *out, const float *inp, size_t N, kernels_precision prec)
{
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        out[i] = half_round_to(0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + GELU_CUBIC * x * x * x))), prec);
    }
}

/* d gelu / dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx,  du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
 * Adds into dinp, as every backward does. */
void cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N, kernels_precision prec)
{
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float th = tanhf(GELU_SCALE * (x + GELU_CUBIC * x * x * x));
        float du = GELU_SCALE * (1.0f + 3.0f * GELU_CUBIC * x * x);
        float grad = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
        dinp[i] = half_round_to(dinp[i] + grad * dout[i], prec);
    }
}
