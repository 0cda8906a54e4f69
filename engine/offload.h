/* CPU offload of the optimizer (ZeRO-Offload style, `dtrain --offload-optimizer`): the fp32
 * master copy of the parameters this rank updates and their AdamW moments live in host memory;
 * each step the gradients of that range go to the host, AdamW runs there (the CPU kernel
 * backend's adamw_update, whatever the model's backend), and the updated parameters go back to
 * the device. On the CPU backend the copies are host-to-host, which still exercises the path.
 *
 * The device moments (m->m, m->v) are not used for the update; they still exist because the
 * checkpoint code reads them, and offload_sync_moments fills them before a checkpoint. */
#ifndef DTSIM_ENGINE_OFFLOAD_H
#define DTSIM_ENGINE_OFFLOAD_H
#include <stddef.h>
#include "gpt.h"

typedef struct {
    size_t lo, hi;                   /* the flat range this rank updates */
    float *master, *grads, *m, *v;   /* host, hi - lo floats each */
    int loaded;                      /* host copies taken from the model (first step, after a resume) */
} offload_state;

void offload_init(offload_state *o, size_t lo, size_t hi);
void offload_free(offload_state *o);
/* AdamW on [lo, hi) on the host, per tensor (weight decay on matrices only), then the updated
 * parameters back to the model's buffer. Same arguments as the backend's adamw_update. */
void offload_step(offload_state *o, gpt_model *m, float lr, float weight_decay, int t, float grad_scale);
/* Writes the host moments into the model's m and v (for a checkpoint). */
void offload_sync_moments(const offload_state *o, gpt_model *m);
#endif
