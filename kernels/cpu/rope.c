/* Rotary position embeddings, rotate-half form (kernels.h). The backward turns by the negative
 * angle: the rotation is orthogonal, so its transpose is its inverse. */
#include <math.h>
#include "cpu_internal.h"

static void rope_turn(float *x, const int *pos, int B, int T, int row, int nheads, int hd, float base, float sign)
{
    int half = hd / 2;
    for (int t = 0; t < T; t++) {
        float p = (float)(pos ? pos[t] : t);
        for (int i = 0; i < half; i++) {
            /* fp32 throughout, as Megatron-Core builds inv_freq and the angle table */
            float theta = 1.0f / powf(base, (float)(2 * i) / (float)hd);
            float angle = p * theta, c = cosf(angle), s = sign * sinf(angle);
            for (int b = 0; b < B; b++) {
                float *r = x + ((size_t)b * T + t) * (size_t)row;
                for (int h = 0; h < nheads; h++) {
                    float *a = r + (size_t)h * hd + i, *z = a + half;
                    float x0 = *a, x1 = *z;
                    *a = x0 * c - x1 * s;
                    *z = x1 * c + x0 * s;
                }
            }
        }
    }
}

void cpu_rope_forward(float *x, const int *pos, int B, int T, int row, int nheads, int hd, float base)
{
    rope_turn(x, pos, B, T, row, nheads, hd, base, 1.0f);
}

void cpu_rope_backward(float *dx, const int *pos, int B, int T, int row, int nheads, int hd, float base)
{
    rope_turn(dx, pos, B, T, row, nheads, hd, base, -1.0f);
}
