/* Data parallelism with expert parallelism (data_parallel_ep.c): the expert tensors differ
 * between the ranks of an EP group, so they reduce, shard and gather over the expert-data-
 * parallel group while the dense tensors use the whole DP group (Megatron-Core's split of the
 * gradient buffers and of the distributed optimizer into dense and expert parts). */
#ifndef DTSIM_ENGINE_DATA_PARALLEL_EP_H
#define DTSIM_ENGINE_DATA_PARALLEL_EP_H
#include "data_parallel.h"

/* ZeRO-1/2 with EP over more than one DP rank: the rank owns a shard of each kind (d->eps). */
int dp_ep_sharded(const dp_state *d);
/* Sets up d->eps and the packing buffer (EP > 1, after dp_init's common part); under ZeRO >= 1
 * the model was built with these shards' moments. */
void dp_ep_init(dp_state *d, const gpt_model *m);
/* Dense gradients summed over the DP group, expert gradients over the expert-DP group, each whole
 * on every rank (ZeRO-0 and ZeRO-1 alike). */
void dp_ep_reduce_gradients(dp_state *d, gpt_model *m);
/* ZeRO-1/2: AdamW on this rank's dense shard and expert shard, then each shard all-gathered over
 * its own group. */
/* ZeRO-2 with EP: the device keeps the gradient shards only, packed as the moments. Each backward
 * pass's window [lo, hi) is reduce-scattered per kind over its group into them (win is free
 * after); a tensor's reduced gradient is gathered whole into win, and this rank's part of win
 * kept back (the tied embedding's two ends); the gradients' global sum of squares. */
int dp_ep_grads_packed(const dp_state *d);
void dp_ep_reduce_window(dp_state *d, gpt_model *m, size_t lo, size_t hi, float *win);
void dp_ep_gather_grad(dp_state *d, gpt_model *m, int t, float *win);
void dp_ep_keep_grad(dp_state *d, gpt_model *m, int t, const float *win);
double dp_ep_grad_sum_squares(dp_state *d, const gpt_model *m);
/* --overlap-grad-reduce (ZeRO-0/1): bucket [lo, hi), on the host at its offsets, starts its
 * per-kind all-reduces; at the step's end, once the DP group's are waited for, the expert-DP
 * group's are too and the sums go to the device. */
void dp_ep_start_bucket(dp_state *d, gpt_model *m, size_t lo, size_t hi);
void dp_ep_land_buckets(dp_state *d, gpt_model *m);
/* Under --overlap-param-gather the all-gathers start per bucket and kind instead, each landed by
 * dp_ep_land_param_bucket (its two waited for, its tensors on the device) when the next forward
 * reads the bucket; dp_ep_param_buckets sets them up over dp_enable_overlap_param_gather's
 * buckets. */
void dp_ep_optimizer_step(dp_state *d, gpt_model *m, float lr, float weight_decay, int t, float grad_scale);
void dp_ep_param_buckets(dp_state *d, const gpt_model *m);
/* ZeRO-3 under EP: the model keeps its dense and expert parameter shards packed (gpt.c); a pass's
 * window [lo, hi) is gathered from them per kind over its group, and the whole flat buffer for
 * whoever reads all of it (the CRC, --dump-params). */
void dp_ep_gather_window(dp_state *d, const gpt_model *m, size_t lo, size_t hi, float *win);
void dp_ep_params_to_host(dp_state *d, const gpt_model *m, float *host);
void dp_ep_land_param_bucket(dp_state *d, const gpt_model *m, int b);
#endif
