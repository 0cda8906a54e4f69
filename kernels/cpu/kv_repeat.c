/* Grouped-query attention's K/V repeated to every query head (kernels.h). */
#include <string.h>
#include "cpu_internal.h"

void cpu_kv_repeat_forward(float *out, const float *inp, int B, int T, int NH, int G, int hd)
{
    size_t in_row = (size_t)(NH + 2 * G) * hd, out_row = (size_t)3 * NH * hd, qn = (size_t)NH * hd;
    int per = NH / G;
    for (size_t r = 0; r < (size_t)B * T; r++) {
        const float *x = inp + r * in_row;
        float *o = out + r * out_row;
        memcpy(o, x, qn * sizeof(float));
        for (int kv = 0; kv < 2; kv++)
            for (int h = 0; h < NH; h++)
                memcpy(o + qn * (1 + kv) + (size_t)h * hd, x + qn + ((size_t)kv * G + h / per) * hd,
                       (size_t)hd * sizeof(float));
    }
}

void cpu_kv_repeat_backward(float *dinp, const float *dout, int B, int T, int NH, int G, int hd)
{
    size_t in_row = (size_t)(NH + 2 * G) * hd, out_row = (size_t)3 * NH * hd, qn = (size_t)NH * hd;
    int per = NH / G;
    for (size_t r = 0; r < (size_t)B * T; r++) {
        float *dx = dinp + r * in_row;
        const float *d = dout + r * out_row;
        for (size_t i = 0; i < qn; i++)
            dx[i] += d[i];
        /* query heads in order, so each group's gradient is summed in the same order everywhere */
        for (int kv = 0; kv < 2; kv++)
            for (int h = 0; h < NH; h++) {
                float *g = dx + qn + ((size_t)kv * G + h / per) * hd;
                const float *s = d + qn * (1 + kv) + (size_t)h * hd;
                for (int i = 0; i < hd; i++)
                    g[i] += s[i];
            }
    }
}
