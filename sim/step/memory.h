/* Memory per GPU: model states (weights, gradients, optimizer states under ZeRO 0-3),
 * activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
 * Transformer Models", generalised to any FFN width and GQA), and communication buffers.
 *
 * Accounting (all figures in bytes):
 *  - Model states follow the ZeRO paper (Rajbhandari et al. 2020): mixed precision keeps
 *    2-byte weights, 2-byte gradients and K = 12 bytes of optimizer state per parameter
 *    (fp32 master copy 4 + Adam m 4 + v 4): 16 bytes per parameter. fp32/tf32 training:
 *    4 + 4 + 8. SGD (momentum) keeps one fp32 buffer instead of Adam's two.
 *  - ZeRO shards over the data-parallel group including context parallelism (dp x cp), as
 *    Megatron-LM's distributed optimizer does; expert parameters shard over the expert data
 *    parallel group (dp x cp / ep).
 *  - No fixed CUDA-context / framework allowance is added (it is 0.5-1 GiB in practice and
 *    depends on the framework and NCCL settings); buffers hold only what the layout implies. */
#ifndef DTSIM_SIM_MEMORY_H
#define DTSIM_SIM_MEMORY_H

#include "config.h"

typedef struct {
    double weights, gradients, optimizer, activations, buffers; /* bytes */
    double total, capacity;                                      /* bytes */
    int oom;                                                     /* total > capacity (capacity > 0) */
    /* ZeRO-Offload / ZeRO-Infinity: what this GPU's rank keeps off the GPU (bytes, not in total) */
    double host, nvme;
} memory_breakdown;

/* Bytes -> GiB (2^30 bytes), the unit of "memory_gib" in the JSON output. */
double memory_bytes_to_gib(double bytes);

/* Model states of `params` parameters held by one GPU, sharded over `shards` data-parallel
 * ranks as ZeRO stage `zero_stage` says (0: DDP, 1: optimizer, 2: + gradients, 3: + weights).
 * Fills weights, gradients, optimizer and total (activations, buffers, capacity are 0). */
void memory_model_states(double params, int shards, int zero_stage, precision_kind prec,
                         optimizer_kind opt, memory_breakdown *out);

/* The same under ZeRO-Offload / ZeRO-Infinity (Ren et al. 2021, arXiv:2101.06840; Rajbhandari
 * et al. 2021, arXiv:2104.07857): with offload_optimizer the optimizer states (K bytes/param:
 * fp32 master + Adam m, v = 12 under mixed precision) leave the GPU for host memory (cpu) or
 * NVMe (nvme), and the gradients go to host memory as they are reduced (the GPU keeps only the
 * reduction buckets, counted in buffers); with offload_parameters the 2-byte parameters leave
 * too (host or NVMe), the GPU keeping only ZeRO-3's gathered working set (buffers). Everything
 * offloaded is sharded as on the GPU. Fills host and nvme; OFFLOAD_NONE twice is
 * memory_model_states. ZeRO-Offload's closed form (mixed precision Adam, N shards, ZeRO-2):
 * GPU 2M, host (2 + 12)M/N. */
void memory_model_states_offload(double params, int shards, int zero_stage, precision_kind prec,
                                 optimizer_kind opt, offload_device offload_optimizer,
                                 offload_device offload_parameters, memory_breakdown *out);

/* The host memory and NVMe bytes one node needs for what its GPUs offload: the largest per-GPU
 * figure over the pipeline stages times the job's GPUs on a node (min(node.gpus, GPUs)). */
void memory_offload_per_node(const scenario_config *s, double *host_bytes, double *nvme_bytes);

/* Activation bytes one layer keeps for one micro-batch on one GPU under the scenario's
 * TP/SP/CP split and recomputation, between its forward and its backward:
 *   none, TP t with SP:   s*b*h/t * (34 + 5*a*s/h)       (MHA, f = 4h, 16-bit activations)
 *   none, TP t, no SP:    s*b*h * (10 + 24/t + 5*a*s/(h*t))
 *   selective or flash:   the 5*a*s/h term (attention scores) dropped
 *   full:                 2*s*b*h (the layer input), divided by t with SP
 * fp32/tf32 activations double these figures. */
double memory_layer_activations(const scenario_config *s);

/* What one in-flight micro-batch keeps of a chunk of chunk_layers layers: each layer's figure
 * above, except under full recomputation with Megatron-LM's method: uniform keeps the input of
 * each group of recompute_num_layers layers (ceil(layers / n) inputs), block keeps the inputs of
 * the first n layers and everything of the others. */
double memory_chunk_activations(const scenario_config *s, double chunk_layers);

/* The extra activation bytes while the backward reruns a recomputed part: one layer's
 * recomputed activations (Korthikanti et al. 2022, Sec. 4), or under full, uniform recomputation
 * a whole group's (n layers, less the input it kept) on top of what memory_chunk_activations
 * keeps. 0 without recomputation. */
double memory_recompute_working_set(const scenario_config *s, double chunk_layers);

/* One pipeline stage, holding `in_flight` (chunk, micro-batch) activations at its peak
 * (for interleaving, each pair holds one chunk's layers: the stage's layers / v).
 * Stage 0 adds the embedding output of the in-flight micro-batches, the last stage the fp32
 * logits of one micro-batch; buffers are two DP gradient buckets (when dp x cp > 1, or with
 * offload_optimizer: staged for the copy to the host), four pipeline send/receive activation
 * buffers (when pp > 1) and, under ZeRO-3, the gathered weights of two layers (current +
 * prefetched; with offload_parameters even unsharded). host / nvme: what the GPU's rank keeps
 * off the GPU (memory_model_states_offload). Returns 0, -1 for an impossible layout. */
int memory_model_stage(const scenario_config *s, int stage, int in_flight, memory_breakdown *out);

/* The stage with the largest total under the schedule (in-flight counts from
 * pipeline_schedule_peak_in_flight). Returns 0, -1 if a stage cannot be modelled. */
int memory_model_worst_stage(const scenario_config *s, const pipeline_schedule *sched,
                             memory_breakdown *out, int *worst_stage);
/* The same with each stage's peak in flight given (peak[0 .. stages)). */
int memory_model_worst_stage_at(const scenario_config *s, int stages, const int *peak, memory_breakdown *out,
                                int *worst_stage);

#endif
