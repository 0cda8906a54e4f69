/* Data parallelism with ZeRO stages 0-3 over the communicator (DESIGN.md, Engine):
 *   ZeRO-0: gradients all-reduced; every rank updates all parameters.
 *   ZeRO-1: gradients reduce-scattered; each rank updates its 1/DP shard (its moments are the
 *           only ones it touches), then the parameters are all-gathered.
 *   ZeRO-2: as ZeRO-1, and the device keeps only the gradients of its shard: each backward pass
 *           (a layer, the head, the embedding) accumulates into a zeroed window, which is
 *           reduce-scattered over the group into the shards that own it right after the pass
 *           (per micro-batch, as DeepSpeed's ZeRO-2 reduces its buckets) and given back.
 *   ZeRO-3: as ZeRO-2, and the device keeps only the parameters of its shard: each pass gathers
 *           the tensors it is about to use into a window, maps it for the model (gpt_map_range)
 *           and gives the window back after.
 * The flat parameter buffer is split into DP equal contiguous shards (padded). Collectives run
 * on host copies (MPI), so device buffers are staged through the host; with --comm nccl they run
 * on the device (a padded device copy), and the gradient and parameters never visit the host. */
#ifndef DTSIM_ENGINE_DATA_PARALLEL_H
#define DTSIM_ENGINE_DATA_PARALLEL_H
#include "grad_ranges.h"
#include "comm.h"
#include "gpt.h"
#include "offload.h"
#include "comm_nccl.h"
#include "powersgd.h"

/* Windows a pool holds at most: a pass uses two ranges at once (the head: wte and the final
 * norm), and under ZeRO-3 with full recomputation a recomputed group keeps its layers' gathered
 * parameters from their re-run to their backward (zero_pass_hook): one window a layer of the
 * group, so --recompute-num-layers is at most DP_WINDOWS with --zero 3. Allocated on first use. */
enum { DP_WINDOWS = GPT_WINDOWS };

typedef struct {
    float *buf[DP_WINDOWS];
    size_t lo[DP_WINDOWS]; /* the range each busy window holds starts here */
    int busy[DP_WINDOWS];
} dp_window_pool;

typedef struct {
    comm_ctx *comm;
    int zero, dp, rank;
    int ep;                                /* expert parallelism (comm_layout_ep; ZeRO-0-2;
                                              data_parallel_ep.c): the expert tensors reduce (and
                                              shard) over the expert-data-parallel group, their norm
                                              over the EP group */
    gpt_ep_shards eps;                     /* EP with ZeRO-1/2: this rank's dense and expert shards */
    float *packed;                         /* EP with ZeRO-1/2: one kind's packed floats (host) */
    float *bucket_packed[2];               /* EP with --overlap-grad-reduce: each kind's buckets */
    size_t n, padded, shard_lo, shard_hi;  /* in floats */
    float *host;                           /* staging, padded floats */
    int bf16;                              /* reduce gradients in bf16 (half the bytes) */
    uint16_t *host16;                      /* staging for bf16 reductions, padded */
    powersgd_state *powersgd;              /* NULL, or PowerSGD compression (ZeRO-0; powersgd.h) */
    offload_state *offload;                /* NULL, or AdamW on the host (offload.h) */
    comm_nccl *nccl;                       /* NULL, or the DP collectives with NCCL on the device */
    comm_nccl *edp_nccl;                   /* with nccl under EP: the expert-DP group's */
    float *dev;                            /* with nccl: device staging, padded floats (EP with
                                              ZeRO-3: window_floats, a pass's packed kind) */
    const kernels_backend *k;              /* the model's backend (owns dev and window) */
    /* ZeRO-2/3's windows for the passes (backend memory, window_floats each, on first use) */
    size_t window_floats;
    dp_window_pool param_windows, grad_windows;
    size_t *part_counts; /* dp of them: each shard's part of a range (ZeRO-2/3 passes, buckets) */
    /* --overlap-grad-reduce (ZeRO-0/1, MPI): buckets of final gradients started as passes end */
    int overlap, accum;             /* on; backward passes a tensor's gradient takes per step */
    size_t bucket_floats;           /* a bucket is started once it holds this many */
    size_t open_lo, open_hi;        /* the bucket being filled (empty: open_lo == open_hi) */
    int *passes_done;               /* per tensor: backward passes that began at it this step */
    unsigned char *started;         /* per tensor: its gradient is in a started bucket */
    float *host_recv;               /* ZeRO-1: where the buckets' reduce-scatters put the shard */
    /* --overlap-param-gather (ZeRO-1, MPI): the updated parameters' all-gather in buckets of
     * whole tensors, started after the optimizer step and each waited for by the next forward
     * pass that reads it */
    int overlap_params;
    int n_param_buckets;
    size_t *param_bucket_lo, *param_bucket_hi;
    size_t *param_bucket_counts;    /* dp per bucket (and kind, under EP): each shard's part of it */
    comm_request **param_requests;  /* per bucket (and kind, under EP): its all-gather, NULL once
                                       landed */
    float *host_params;             /* the gathered parameters, padded floats */
    /* under EP (data_parallel_ep.c) each bucket gathers its dense tensors over the DP group and
     * its expert tensors over the expert-DP group, each in its kind's packed order */
    float *param_packed[2];         /* each kind's packed parameters (host) */
    size_t *param_span;             /* per bucket and kind: where its tensors start in that order */
} dp_state;

/* The shards are gpt_dp_shard_range's (gpt.h); a model built with gpt_shard's dp, dp_rank and
 * zero holds them from the start, and dp_init keeps what it holds. */
void dp_init(dp_state *d, comm_ctx *c, int zero, gpt_model *m);
void dp_free(dp_state *d);
/* Options, after dp_init: PowerSGD of rank R (ZeRO-0, dp > 1), and the optimizer on the host. */
void dp_enable_powersgd(dp_state *d, const gpt_model *m, int rank, uint64_t seed);
void dp_enable_offload(dp_state *d);
/* --overlap-grad-reduce: as the last micro-batch's backward pass over a layer (or the final norm)
 * ends, its gradients join a bucket; a bucket of bucket_mb MiB (fp32 gradients) is started as a
 * non-blocking all-reduce (ZeRO-0) or reduce-scatter (ZeRO-1) and runs while the backward goes
 * on, as Megatron-LM's overlap_grad_reduce does; dp_reduce_gradients then reduces what no
 * bucket took (the tied embedding, whose two ends are summed first) and waits for the rest.
 * ZeRO-0/1 over MPI with fp32 gradients (the NCCL path runs its collectives on the kernels'
 * stream, bf16 and PowerSGD reductions run whole on the host); ZeRO-2/3 reduce each pass's
 * window as it ends anyway. accum: micro-batches per step. 0, or -1 with err. */
int dp_enable_overlap(dp_state *d, gpt_model *m, int accum, double bucket_mb, char *err, size_t errlen);
/* --overlap-param-gather (with --overlap-grad-reduce, ZeRO-1 over MPI, as Megatron-LM's
 * overlap_param_gather with the distributed optimizer): after the optimizer step each bucket of
 * whole tensors (bucket_mb MiB) starts its all-gather of the updated shards, and the next step's
 * forward waits for a bucket only when a pass first reads a tensor in it. 0, or -1 with err. */
int dp_enable_overlap_param_gather(dp_state *d, gpt_model *m, double bucket_mb, char *err, size_t errlen);
/* Whether --overlap-param-gather applies to these options: 0, or -1 with err naming the one that
 * rules it out. dtrain checks it before training; dp_enable_overlap_param_gather again. */
int dp_param_gather_overlap_applies(int zero, int overlap_grad_reduce, int nccl, int offload, char *err,
                                    size_t errlen);
/* Lands every parameter bucket still in flight (before anything reads the parameters whole:
 * the optimizer step, checkpoints, the CRC). */
void dp_finish_param_gather(dp_state *d, const gpt_model *m);
/* Whether --overlap-grad-reduce applies to these options (compress: a PowerSGD rank, 0 none):
 * 0, or -1 with err naming the option that rules it out. dtrain checks it before training. */
int dp_overlap_applies(int zero, int bf16, int compress, int nccl, char *err, size_t errlen);
/* The DP collectives (every ZeRO stage) by NCCL in device memory, no host staging (--comm nccl).
 * Also with one rank (copies), so a one-GPU machine runs the path. Not with bf16 or PowerSGD
 * reductions (host code). 0, or -1 with err (every rank). */
int dp_enable_nccl(dp_state *d, const gpt_model *m, char *err, size_t errlen);
/* Before a checkpoint: makes the model's own buffers hold the optimizer state (offload). */
void dp_sync_optimizer_state(dp_state *d, gpt_model *m);
/* Sums the gradients over the DP group (all-reduce, or reduce-scatter into the shard); nothing
 * under ZeRO-2/3, whose passes reduced their windows already. */
void dp_reduce_gradients(dp_state *d, gpt_model *m);
/* ZeRO-2/3 over more than one rank: the gradients live as shards, reduced pass by pass (each
 * pass's reduce-scatter, and ZeRO-3's gathers, show in the profile as dp_grad_reduce_scatter and
 * zero_param_allgather). */
int dp_grads_sharded(const dp_state *d);
/* ZeRO-2/3: tensor t's gradient, reduced over the group, gathered whole from the shards into a
 * window that gpt_grad then finds; dp_grad_scatter keeps this rank's part of it (changes made
 * to the window included) and gives the window back. Collective over the DP group. Without
 * sharded gradients: gpt_grad(m, t), and nothing to scatter. (The tied embedding's ends sum
 * their copies this way.) */
float *dp_grad_gather(dp_state *d, gpt_model *m, int t);
void dp_grad_scatter(dp_state *d, gpt_model *m, int t);
/* The global gradient norm (over every GPU, each gradient counted once, divided by the loss
 * scale) and whether the step overflowed, the same on every rank. Megatron-LM's order: with fp16
 * the loss scaler's overflow check (found_inf) first, then the norm; with bf16 and fp32 only the
 * norm, a non-finite one skipping the step (--check-for-nan-in-loss-and-grad) as an overflow
 * does. One pass over the gradients each. Collective over the world; the norm is INFINITY when
 * the step overflowed. */
double dp_grad_norm(dp_state *d, const gpt_model *m, int fp16, double scale, int *overflow);
/* AdamW on the parameters this rank owns, then (ZeRO 1-2) the all-gather of the result. */
void dp_optimizer_step(dp_state *d, gpt_model *m, float lr, float weight_decay, int t, float grad_scale);
/* This rank's whole flat parameter buffer (num_params floats) on the host, e.g. for the CRC.
 * Collective over the DP group under ZeRO-3 (which gathers the shards), local otherwise. */
void dp_params_to_host(dp_state *d, const gpt_model *m, float *host);
#endif
