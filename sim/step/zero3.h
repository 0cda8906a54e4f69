/* ZeRO-3 / FSDP as DeepSpeed's stage 3 runs it: the unit of gathering, how far ahead it
 * prefetches, what stays whole on every rank, and the gradient buckets. One plan, read by the
 * workload (what each pass gathers and reduce-scatters, and when) and by the memory model (what
 * is live at once), so that time and memory come from the same unit sizes.
 *
 * Per micro-batch (DeepSpeed stage 3, deepspeed/runtime/zero/stage3.py and
 * partitioned_param_coordinator.py; PyTorch FSDP with reshard_after_forward, the default, alike):
 *  - forward: each unit (a transformer layer, as FSDP's auto-wrap policy and DeepSpeed's module
 *    hooks give) all-gathers its partitioned parameters before it runs and frees them after;
 *  - backward: it all-gathers them again; with full recomputation DeepSpeed's re-run forward
 *    gathers them once more (its pre-forward hook fires again inside the checkpointed region and
 *    its post-forward hook lets them go), where PyTorch FSDP and Megatron-FSDP gather once for
 *    the re-run and the backward (torch/distributed/fsdp/_runtime_utils.py, _pre_forward: "For
 *    fully_shard + checkpoint, skip pre-forward logic in the recomputed forward"; FSDP2 alike;
 *    megatron/core/distributed/custom_fsdp/fully_sharded_data_parallel.py: "gather parameters
 *    once for both the recomputation and backward computation", its post-forward hook keeping
 *    them in the pre-backward state) and hold a recomputed group's layers until their backward;
 *  - every backward reduce-scatters the unit's gradients, in buckets of reduce_bucket_size
 *    elements (DeepSpeed reduces at every micro-batch; there is no unsharded accumulation);
 *  - parameters of fewer than stage3_param_persistence_threshold elements are not partitioned:
 *    kept whole on every rank, never gathered, and their gradients all-reduced instead;
 *  - up to stage3_prefetch_bucket_size elements are fetched ahead of use, bounded by
 *    stage3_max_live_parameters gathered at once, counted tensor by tensor (zero3.c);
 *  - a layer's gather is one all-gather call per partitioned tensor, not one per layer
 *    (gather_calls_per_layer, zero3.c);
 *  - a module's tensors are not released when the trace uses them again within
 *    stage3_max_reuse_distance elements (v0.3.13 _keep_for_later; later __params_to_release):
 *    modelled where DeepSpeed's engine re-runs a layer, whose last tensors stay gathered for its
 *    backward (rerun_kept_params); not at a forward's end, whose last layers it keeps too.
 * DeepSpeed up to v0.5.4 (parallel.stage3_list_collectives) called torch.distributed.all_gather
 * once per parameter with a list of one view per rank (partition_parameters.py, _allgather_param),
 * and PyTorch's ProcessGroupNCCL copies its flat buffer out to that list one rank at a time
 * (allgather's post-hook, torch/lib/c10d/ProcessGroupNCCL.cpp): a gather call costs the host one
 * launch per rank of the group (or the copies' device traffic where pieces of a few MB make that
 * longer), issued before the module's compute (the fetch synchronizes the device first), and a
 * memset of the whole flat tensor before the call (torch.zeros, then torch.cuda.synchronize()), so
 * the workload puts that time in the compute pass that uses the gather (list_copies). Its
 * gradients went out in flat buckets without such copies, each an all-reduce under that release's
 * default contiguous_gradients false (stage3.py, reduce_ipg_grads -> buffered_reduce_fallback):
 * the workload all-reduces them too (workload_emit.c). With contiguous_gradients true that release
 * reduce-scattered each parameter from a list, which is not modelled. Those releases also drain the
 * device at every fetch: a module's pre-forward and pre-backward hooks wait for its parameters
 * with torch.cuda.synchronize() (stage3.py, fetch_sub_module -> _synchronize_communication, read
 * at v0.3.13, v0.4.0, v0.5.0 and v0.5.4), which waits for every stream, the reduction stream's
 * gradient all-reduces and the gather prefetched for it included. So a layer's compute starts only
 * once every reduction issued before it is through, where later releases let the reductions run
 * beside the next layers' backward; only the gather prefetched during the module before (the one
 * the fetch then finds in flight) still hides behind compute, and nothing is prefetched past the
 * next unit (zero3.c). The workload makes each layer's compute wait for the stage's last
 * reduction (workload.c, emit_pass). They let every parameter go when a backward ends, the
 * persistent ones too, so a forward after one of its stage's backwards gathers those again, a
 * call each, and so does the optimizer's step at its end (workload_step.c, persistent_gather).
 * Modelled at the layer, the unit dtsim gathers: a gather overlaps the layer before as a whole,
 * where DeepSpeed prefetches a tensor ahead and overlaps module by module (a little less hidden).
 * Defaults are DeepSpeed's (deepspeed/runtime/zero/config.py: prefetch_bucket_size 5e7,
 * param_persistence_threshold 1e5, max_live_parameters 1e9, reduce_bucket_size 5e8).
 *
 * parallel.framework megatron asks for Megatron-FSDP's own unit instead (zero3.c): every tensor
 * sharded, the prefetch by its suggested_AG_prefetch_size, a layer's gradients one bucket.
 *
 * parallel.fsdp_reshard_after_forward asks for PyTorch FSDP2 as torchtitan runs it instead:
 *  - a forward lets its layers go unless the key (or torchtitan's policy "default", which says
 *    never under pipeline parallelism, always without) says never; a layer still gathered when
 *    its next pass comes is not gathered again;
 *  - without pipeline parallelism a backward lets them go and reduce-scatters every micro-batch;
 *  - under it, PyTorch's pipeline stage turns off the resharding after backward and the gradient
 *    sync of every backward but a chunk's last, then runs FSDP's post-backward by hand after that
 *    whole backward (torch/distributed/pipelining/stage.py, backward_maybe_with_nosync): the
 *    layers stay gathered after every backward (never: from the chunk's first forward on; always:
 *    until the next forward ends, so a backward gathers and the forward after it does not), each
 *    backward adds its gradients into unsharded ones in the reduction dtype (FSDP2's
 *    unsharded_accumulated_grad, to_accumulated_grad_if_needed / accumulate_unsharded_grad_if_needed:
 *    a pass on the compute stream), and the chunk reduce-scatters them once, after its last
 *    backward, unoverlapped with it. */
#ifndef DTSIM_SIM_ZERO3_H
#define DTSIM_SIM_ZERO3_H

#include "config.h"

typedef struct {
    int active;                 /* zero_stage 3 with more than one shard, or parameters offloaded */
    int reshard_after_forward;  /* a forward lets its layers go (else they stay for the backward) */
    int reshard_after_backward; /* a backward lets them go (else they stay until a forward ends) */
    int reduce_every_backward;  /* gradients reduce-scattered in every backward (else accumulated
                                   unsharded and reduced once, after the chunk's last backward) */
    double layer_params;        /* one layer's partitioned parameters on one GPU (TP/EP split) */
    double layer_persistent;    /* one layer's parameters kept whole (below the threshold) */
    double persistence_threshold; /* elements below which a tensor is kept whole: DeepSpeed's
                                     stage3_param_persistence_threshold; 0 under FSDP2 and
                                     Megatron-FSDP */
    int prefetch_layers;        /* layers gathered ahead of the one running */
    double live_params;         /* gathered parameters held at once: the running layer and the
                                   prefetched ones (zero3_live_params: with recomputation) */
    int regather_rerun;         /* full recomputation's re-run gathers its layers again (DeepSpeed,
                                   parallel.pipeline_engine deepspeed); else they stay gathered
                                   for the backward */
    double rerun_kept_params, rerun_kept_calls; /* of such a layer, what stays gathered from its
                                   re-run to its backward (stage3_max_reuse_distance), and the
                                   calls the backward's gather saves */
    double reduce_bucket_params;/* gradient elements per reduction call (reduce-scatter; all-reduce
                                   under list_collectives) */
    double gather_calls_per_layer; /* all-gather calls one layer's gather takes: DeepSpeed's stage 3
                                      one a tensor it partitions (zero3.c), FSDP and Megatron-FSDP
                                      one a layer; each call pays the collective's latency */
    double embed_gather_calls, head_gather_calls; /* the same for the embedding and the model's
                                                     end (final norm and LM head) */
    int list_collectives;       /* parallel.stage3_list_collectives: every gather hands PyTorch a
                                   list of one tensor a rank, which it copies rank by rank */
    double persistent_tensors, persistent_gathered, persistent_copies; /* under it, one layer's
                                   tensors below the threshold, the elements their gathers move and
                                   the copies the step's end makes of them (params_persistent_gather):
                                   let go at every backward's end, gathered again by each forward
                                   after one of its stage's backwards, a call each, and at the step's
                                   end (workload_step.c) */
    double head_persistent_tensors, head_persistent_gathered, head_persistent_copies; /* the same
                                   for the final norm */
} zero3_plan;

void zero3_plan_of(const scenario_config *s, zero3_plan *z);
/* The gathered parameters a GPU holds at once on a chunk of chunk_layers layers: live_params, or
 * under full recomputation without DeepSpeed's re-gather a recomputed group's layers, kept from
 * their re-run to their backward (recompute_num_layers of them, at most the chunk's; one under
 * the block method), whichever is more; every layer of the chunk when a forward keeps them for
 * the backward. What the memory model holds where a backward lets them go (where it does not,
 * memory.c holds the stage whole). */
double zero3_live_params(const scenario_config *s, const zero3_plan *z, int chunk_layers);

#endif
