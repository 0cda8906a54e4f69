/* Fused softmax + cross-entropy over the vocabulary, numerically stable (max subtracted). */
#include <math.h>
#include "cpu_internal.h"

static double row_logsumexp(const float *x, int V)
{
    float m = -INFINITY;
    for (int v = 0; v < V; v++)
        m = fmaxf(m, x[v]);
    double s = 0;
    for (int v = 0; v < V; v++)
        s += exp((double)x[v] - m);
    return m + log(s);
}

void cpu_cross_entropy_forward(float *losses, const float *logits, const int *targets, int N, int V)
{
    for (int i = 0; i < N; i++) {
        const float *x = logits + (size_t)i * V;
        losses[i] = (float)(row_logsumexp(x, V) - x[targets[i]]);
    }
}

void cpu_cross_entropy_backward(float *dlogits, const float *logits, const int *targets, float dloss, int N, int V)
{
    for (int i = 0; i < N; i++) {
        const float *x = logits + (size_t)i * V;
        float *d = dlogits + (size_t)i * V;
        double lse = row_logsumexp(x, V);
        for (int v = 0; v < V; v++)
            d[v] += dloss * (float)(exp((double)x[v] - lse) - (v == targets[i] ? 1.0 : 0.0));
    }
}
