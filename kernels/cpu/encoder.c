/* Token + position embeddings (no position table under rotary embeddings: wpe NULL). */
#include "cpu_internal.h"

void cpu_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *te = wte + (size_t)tokens[b * T + t] * C;
            float *o = out + ((size_t)b * T + t) * C;
            if (!wpe) { /* rotary embeddings: no position table */
                for (int c = 0; c < C; c++)
                    o[c] = te[c];
                continue;
            }
            const float *pe = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++)
                o[c] = te[c] + pe[c];
        }
}

void cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            float *te = dwte + (size_t)tokens[b * T + t] * C;
            for (int c = 0; c < C; c++)
                te[c] += d[c];
            if (dwpe) {
                float *pe = dwpe + (size_t)t * C;
                for (int c = 0; c < C; c++)
                    pe[c] += d[c];
            }
        }
}
