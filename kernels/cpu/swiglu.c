/* SwiGLU: silu(gate) * up over rows of [gate | up] (kernels.h). */
#include <math.h>
#include "cpu_internal.h"
#include "half_bits.h"

void cpu_swiglu_forward(float *out, const float *inp, int N, int F, kernels_precision prec)
{
    for (size_t r = 0; r < (size_t)N; r++) {
        const float *g = inp + r * 2 * F, *u = g + F;
        for (int i = 0; i < F; i++) {
            float sig = 1.0f / (1.0f + expf(-g[i]));
            out[r * F + i] = half_round_to(g[i] * sig * u[i], prec);
        }
    }
}

void cpu_swiglu_backward(float *dinp, const float *inp, const float *dout, int N, int F, kernels_precision prec)
{
    for (size_t r = 0; r < (size_t)N; r++) {
        const float *g = inp + r * 2 * F, *u = g + F, *d = dout + r * F;
        float *dg = dinp + r * 2 * F, *du = dg + F;
        for (int i = 0; i < F; i++) {
            float sig = 1.0f / (1.0f + expf(-g[i]));
            /* d silu(x)/dx = sig (1 + x (1 - sig)) */
            dg[i] = half_round_to(dg[i] + d[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig)), prec);
            du[i] = half_round_to(du[i] + d[i] * g[i] * sig, prec);
        }
    }
}
