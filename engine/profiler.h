/* Per-op timing of training steps: backend events around each op (CUDA events on a GPU, the
 * monotonic clock on the CPU), written as a profile JSON (per op and layer: name, shape,
 * dtype, FLOPs, bytes, mean time after the first step) and a Chrome trace. Op names are the simulator's
 * (engine/oplist.h): ln1, qkv, attention, attn_proj, residual1, ln2, fc1, gelu, fc2,
 * residual2, embedding, lm_head, cross_entropy, optimizer, dp_grad_reduce (the DP gradient
 * reduction, with any compression), and under ZeRO-2/3 per pass dp_grad_reduce_scatter and
 * zero_param_allgather (ZeRO-3), with --overlap-grad-reduce dp_grad_bucket_start (an instant:
 * a bucket's reduction starts; dp_grad_reduce is then what the step still waits for); backward
 * ops end in "_bwd". */
#ifndef DTSIM_ENGINE_PROFILER_H
#define DTSIM_ENGINE_PROFILER_H
#include <stddef.h>
#include "kernels.h"

typedef struct profiler profiler;

profiler *profiler_create(const kernels_backend *k);
void profiler_free(profiler *p);
void profiler_set_step(profiler *p, int step);
/* Brackets one op. begin/end may be called with p == NULL (no profiling). */
void profiler_begin(profiler *p);
void profiler_end(profiler *p, const char *op, int layer, const char *shape, double flops, double bytes);
/* Records an op timed elsewhere (a checkpoint written on a background thread, a ZeRO pass's
 * collective timed by the wall clock), ending now. */
void profiler_record(profiler *p, const char *op, int layer, const char *shape, double dur_s, double bytes);
/* Writes path (profile JSON) and path + ".trace.json" (Chrome trace), each through a
 * temporary file and a rename. */
int profiler_write(profiler *p, const char *path, const char *dtype, const char *device, char *err,
                   size_t errlen);
#endif
