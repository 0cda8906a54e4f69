/* AdamW (Loshchilov & Hutter): decoupled weight decay, bias-corrected moments. The bias
 * corrections are computed on the host exactly as the CPU backend does (powf in float), so
 * both backends divide by the same numbers. */
#include "cuda_common.cuh"

__global__ static void adamw_kernel(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                                    float beta2, float eps, float weight_decay, float c1, float c2, float grad_scale)
{
    GRID_STRIDE(i, n) {
        float gi = g[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / c1, vhat = vi / c2;
        p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * p[i]);
    }
}

void cuda_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr, float beta1,
                       float beta2, float eps, float weight_decay, int t, float grad_scale)
{
    if (!n)
        return;
    float c1 = 1.0f - powf(beta1, (float)t), c2 = 1.0f - powf(beta2, (float)t);
    adamw_kernel<<<blocks_for(n, THREADS), THREADS>>>(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, c1,
                                                      c2, grad_scale);
    LAUNCH_CHECK();
}
