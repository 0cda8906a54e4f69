/* CPU offload of the optimizer; see offload.h. */
#include <stdlib.h>
#include <string.h>
#include "offload.h"

void offload_init(offload_state *o, size_t lo, size_t hi)
{
    memset(o, 0, sizeof *o);
    o->lo = lo;
    o->hi = hi > lo ? hi : lo;
    size_t n = o->hi - o->lo + 1;
    o->master = malloc(n * sizeof(float));
    o->grads = malloc(n * sizeof(float));
    o->m = malloc(n * sizeof(float));
    o->v = malloc(n * sizeof(float));
}

void offload_free(offload_state *o)
{
    free(o->master);
    free(o->grads);
    free(o->m);
    free(o->v);
    memset(o, 0, sizeof *o);
}

void offload_step(offload_state *o, gpt_model *m, float lr, float weight_decay, int t, float grad_scale)
{
    size_t n = o->hi - o->lo;
    if (n == 0)
        return;
    const kernels_backend *k = m->k;
    if (!o->loaded) {
        /* The model's state is the truth until the first offloaded step: fresh (zero moments)
         * or just loaded from a checkpoint. From here on the host copies are. */
        k->copy_to_host(o->master, m->params + (o->lo - m->param_range.lo), n * sizeof(float));
        k->copy_to_host(o->m, m->m + (o->lo - m->moments_lo), n * sizeof(float));
        k->copy_to_host(o->v, m->v + (o->lo - m->moments_lo), n * sizeof(float));
        o->loaded = 1;
    }
    k->copy_to_host(o->grads, m->grads + (o->lo - m->grad_range.lo), n * sizeof(float));
    const kernels_backend *cpu = kernels_cpu();
    for (int i = 0; i < m->num_tensors; i++) {
        size_t a = m->tensors[i].offset, b = a + m->tensors[i].count;
        if (a < o->lo)
            a = o->lo;
        if (b > o->hi)
            b = o->hi;
        if (b <= a)
            continue;
        size_t h = a - o->lo;
        cpu->adamw_update(o->master + h, o->grads + h, o->m + h, o->v + h, b - a, lr, 0.9f, 0.95f, 1e-8f,
                          m->tensors[i].decay ? weight_decay : 0.0f, t, grad_scale);
    }
    k->copy_to_device(m->params + (o->lo - m->param_range.lo), o->master, n * sizeof(float));
}

void offload_sync_moments(const offload_state *o, gpt_model *m)
{
    size_t n = o->hi - o->lo;
    if (!o->loaded || n == 0)
        return;
    m->k->copy_to_device(m->m + (o->lo - m->moments_lo), o->m, n * sizeof(float));
    m->k->copy_to_device(m->v + (o->lo - m->moments_lo), o->v, n * sizeof(float));
}
