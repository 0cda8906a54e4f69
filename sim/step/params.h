/* Parameter counts of the model, whole and per GPU under the TP/EP split. One place for the
 * workload (gradient bytes, ZeRO gathers, optimizer work) and the memory model. */
#ifndef DTSIM_SIM_PARAMS_H
#define DTSIM_SIM_PARAMS_H

#include "config.h"

typedef struct {
    double dense;   /* parameters every DP rank holds a replica of (attention, norms, dense MLP) */
    double expert;  /* MoE expert parameters (reduced over the expert-data-parallel group) */
} layer_params;

/* One transformer layer's parameters on one GPU (TP-split matrices, replicated norms,
 * experts divided by EP). With tp = ep = 1 this is the whole layer. */
layer_params params_layer_per_gpu(const scenario_config *s);
/* Of those, the elements in tensors smaller than `threshold` elements (ZeRO-3 keeps them whole:
 * stage3_param_persistence_threshold). */
double params_layer_small_per_gpu(const scenario_config *s, double threshold);
/* How many of a layer's tensors on one GPU have `threshold` elements or more (DeepSpeed's stage 3
 * gathers each such tensor with its own all-gather: zero3.h). */
double params_layer_tensors_from(const scenario_config *s, double threshold);
/* DeepSpeed's stage3_max_reuse_distance (zero3.h): of a layer its engine re-runs under full
 * recomputation, the elements (and, in *kept_tensors, the tensors) at or above `threshold` that
 * stay gathered from the re-run to the layer's backward: those of the modules the trace uses again
 * within max_reuse elements, `ahead` of them used between the layer's re-run and its backward (the
 * later layers of a recomputed group). */
double params_layer_rerun_kept(const scenario_config *s, double threshold, double max_reuse, double ahead,
                               double *kept_tensors);
/* The elements of a layer's largest tensor on one GPU (DeepSpeed's stage 3 gathers and counts
 * live parameters tensor by tensor). */
double params_layer_largest_tensor_per_gpu(const scenario_config *s);
/* Embedding (vocab-parallel token table, plus learned positions for GPT-style models without
 * SwiGLU; Llama-style models use rotary positions, which have no parameters) per GPU. */
double params_embedding_per_gpu(const scenario_config *s);
/* The final norm's parameters (replicated across TP): its weight, and its bias under LayerNorm;
 * each layer has two norms of the same size. */
double params_final_norm(const scenario_config *s);
/* How many tensors at or above `threshold` elements the embedding (head 0: the token table and
 * learned positions) or the model's end (head 1: the final norm and the LM head's table) has on one
 * GPU (DeepSpeed's stage 3 gathers each with its own all-gather: zero3.h). */
double params_ends_tensors_from(const scenario_config *s, int head, double threshold);
/* DeepSpeed's stage 3 up to v0.5.4 gathers its persistent tensors (those below `threshold`
 * elements, kept whole) through its synchronous path, _allgather_params: one all-gather of a piece
 * of ceil(n / ranks) elements a tensor a rank, then a copy a tensor and rank whose piece starts
 * inside the tensor. For `layers` layers (and the final norm when final_norm) on one GPU: the
 * tensors, the copies and the elements the all-gather moves (pieces included; a tensor gathered on
 * its own moves as many, its size rounded up to a multiple of the ranks). */
void params_persistent_gather(const scenario_config *s, double layers, int final_norm, double threshold, double ranks,
                              double *tensors, double *copies, double *gathered);
/* Parameters on one GPU of pipeline stage `stage` (all its chunks): its layers, the embedding
 * on the first stage, the final norm and the LM head (tied copy of the embedding) on the last. */
double params_stage_per_gpu(const scenario_config *s, int stage);
/* The part of that outside the transformer layers: the embedding on the first stage, the final
 * norm and the LM head on the last (tied: a copy with PP > 1, none with PP 1; untied: its own). */
double params_stage_outside_layers_per_gpu(const scenario_config *s, int stage);
/* Bytes per gradient element in the data-parallel reduction: parallel.grad_reduce_dtype, or
 * with "auto" the framework's own choice (fp32 under bf16 and fp8 as Megatron-LM does, the
 * model's dtype under ZeRO-3 as DeepSpeed and FSDP do, fp16 under fp16). */
/* Whether DeepSpeed trains the run through its BF16_Optimizer (fp32 gradients kept and
 * accumulated after every backward, the whole gradient all-reduced, optimizer states sharded by
 * itself): bf16 on DeepSpeed's engine, ZeRO-1 at most with a pipeline (the pipeline engine takes
 * bf16 only through it), ZeRO stage 0 without one (ZeRO-1 and up are then its ZeRO optimizers). */
int params_deepspeed_bf16_optimizer(const scenario_config *s);
/* Whether every pipeline transfer synchronises the whole device: Megatron-LM's batched send/recv
 * pairs (batch_p2p_comm, which is `not overlap_p2p_comm`) call torch.cuda.synchronize() after
 * batch_isend_irecv while batch_p2p_sync holds, its default (megatron/core/pipeline_parallel/
 * p2p_communication.py, "To protect against race condition when using batch_isend_irecv()"; the
 * same call in Megatron-LM's _communicate since 2021, read at core_r0.8.0 and at d98e8a64 of
 * 2026-08). The host waits there for every stream: the pass after an exchange starts on an idle
 * GPU, its ZeRO-3 gathers issued only then, and nothing issued before it (a gather prefetched, a
 * gradient reduction) runs on beside it. Megatron-LM's pipeline engine only (framework unset or
 * megatron): PyTorch's pipelining and nanotron wait on the transfers alone, DeepSpeed's engine
 * runs its own blocking sends (workload.c, deepspeed_schedule). */
int params_p2p_drains_device(const scenario_config *s);
/* The data-parallel ranks (x CP) the optimizer's states and step are split over: dp x cp under
 * ZeRO-1 and up and under the BF16_Optimizer (deepspeed/runtime/bf16_optimizer.py: each rank keeps
 * the fp32 master copy and Adam's moments of its 1/dp partition, steps it, then all-gathers the
 * bf16 parameters), else 1. */
int params_optimizer_shards(const scenario_config *s);
double params_grad_reduce_bytes(const scenario_config *s);
/* Bytes of gradients (as they travel, params_grad_reduce_bytes) per data-parallel bucket, one
 * collective call each: parallel.bucket_size_mb, or where the scenario leaves it out the
 * framework's default: Megatron-LM max(4e7, 1e6 x DP x CP) parameters when it overlaps the
 * reduction, the whole of a chunk's gradients when not; DeepSpeed reduce_bucket_size elements
 * (ZeRO-1/2; 5e8 otherwise); PyTorch DDP 25 MiB (fsdp), torchtitan's DDP 100 MiB. */
double params_dp_bucket_bytes(const scenario_config *s);
#define PARAMS_BUCKET_WHOLE_MB 1e6 /* bucket_size_mb's largest: one bucket holds all (Megatron's None) */
/* Whether that bucket is reduced in place, no buffer of its own: Megatron-LM's one bucket of all
 * (its default without overlap, or bucket_size_mb 1e6) is its gradient buffer
 * (param_and_grad_buffer.py: a bucket's grad_data is a view of the buffer); DeepSpeed's reduce
 * buckets and PyTorch DDP's are copies. */
int params_dp_bucket_in_place(const scenario_config *s);
/* Whether the gradient reduction goes out as buckets fill in the last micro-batch's backward:
 * parallel.overlap_grad_reduce, which under framework nanotron is its DDP's (ZeRO 0); its ZeRO 1
 * reduces after the backward whatever the key says (config.h). */
int params_grad_reduce_overlapped(const scenario_config *s);
/* Whether SwiGLU runs as two eager kernels, SiLU then a multiply, which keeps SiLU's output for the
 * multiply's backward (nanotron's GLUActivation); else one fused kernel (engine/oplist.h). */
int params_swiglu_unfused(const scenario_config *s);
/* Bytes per element of the gradient buffer a GPU accumulates micro-batches into: the wider of
 * the compute dtype and the reduction dtype (Megatron's fp32 main_grad under bf16). */
double params_grad_buffer_bytes(const scenario_config *s);
/* The whole model's parameter count (no parallel split). */
double params_total(const scenario_config *s);

#endif
