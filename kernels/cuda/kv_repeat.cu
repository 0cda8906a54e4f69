/* Grouped-query attention's keys and values repeated to every query head (kernels.h): rows of
 * (NH + 2G) hd floats [q heads | G key heads | G value heads] become rows of 3 NH hd floats
 * [q | NH key heads | NH value heads], head h taken from group h / (NH / G).
 *
 * The backward has one thread per element of dinp: a key or value element adds the gradients
 * of its group's NH / G repeated heads in increasing head order (the CPU's order), so the sum
 * is the same bits on every run and needs no atomics. */
#include "cuda_common.cuh"

/* One thread per element of out. */
__global__ static void kv_repeat_forward_kernel(float *out, const float *inp, int NH, int G, int hd, size_t n)
{
    size_t qn = (size_t)NH * hd, out_row = 3 * qn, in_row = (size_t)(NH + 2 * G) * hd;
    int per = NH / G;
    GRID_STRIDE(i, n) {
        size_t r = i / out_row, j = i % out_row, src = j;
        if (j >= qn) {
            size_t kv = (j - qn) / qn, e = (j - qn) % qn; /* kv 0: keys, 1: values */
            size_t h = e / hd, d = e % hd;
            src = qn + (kv * G + h / per) * hd + d;
        }
        out[i] = inp[r * in_row + src];
    }
}

/* One thread per element of dinp. */
__global__ static void kv_repeat_backward_kernel(float *dinp, const float *dout, int NH, int G, int hd, size_t n)
{
    size_t qn = (size_t)NH * hd, out_row = 3 * qn, in_row = (size_t)(NH + 2 * G) * hd, gn = (size_t)G * hd;
    int per = NH / G;
    GRID_STRIDE(i, n) {
        size_t r = i / in_row, j = i % in_row;
        const float *d = dout + r * out_row;
        float acc = dinp[i];
        if (j < qn) {
            acc += d[j];
        } else {
            size_t kv = (j - qn) / gn, e = (j - qn) % gn;
            size_t g = e / hd, c = e % hd;
            const float *s = d + qn * (1 + kv) + g * per * hd + c;
            for (int h = 0; h < per; h++)
                acc += s[(size_t)h * hd];
        }
        dinp[i] = acc;
    }
}

static void check_groups(int NH, int G)
{
    if (G <= 0 || NH % G) {
        fprintf(stderr, "kernels(cuda): kv_repeat: %d groups must divide %d heads\n", G, NH);
        abort();
    }
}

void cuda_kv_repeat_forward(float *out, const float *inp, int B, int T, int NH, int G, int hd)
{
    if (B <= 0 || T <= 0 || NH <= 0 || hd <= 0)
        return;
    check_groups(NH, G);
    size_t n = (size_t)B * T * 3 * NH * hd;
    kv_repeat_forward_kernel<<<blocks_for(n, THREADS), THREADS>>>(out, inp, NH, G, hd, n);
    LAUNCH_CHECK();
}

void cuda_kv_repeat_backward(float *dinp, const float *dout, int B, int T, int NH, int G, int hd)
{
    if (B <= 0 || T <= 0 || NH <= 0 || hd <= 0)
        return;
    check_groups(NH, G);
    size_t n = (size_t)B * T * (NH + 2 * G) * hd;
    kv_repeat_backward_kernel<<<blocks_for(n, THREADS), THREADS>>>(dinp, dout, NH, G, hd, n);
    LAUNCH_CHECK();
}
