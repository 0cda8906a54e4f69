/* The ZeRO-3 plan of a scenario; see zero3.h. */
#include <math.h>
#include <string.h>
#include "params.h"
#include "zero3.h"

/* Layers ahead counted at most: further ahead than this changes nothing a layer's compute can hide */
#define ZERO3_MAX_AHEAD 16

/* The fewest layers a model chunk holds (a stage's over its virtual chunks). */
static int fewest_chunk_layers(const scenario_config *s)
{
    int pp = s->parallel.pp > 0 ? s->parallel.pp : 1, vpp = s->parallel.vpp > 0 ? s->parallel.vpp : 1;
    long long fewest = s->model.num_layers / pp;
    for (int i = 0; s->parallel.pipeline_layers && i < s->parallel.pipeline_layers_count; i++)
        if (s->parallel.pipeline_layers[i] < fewest)
            fewest = s->parallel.pipeline_layers[i];
    fewest /= vpp;
    return fewest > 0 ? (int)fewest : 1;
}

void zero3_plan_of(const scenario_config *s, zero3_plan *z)
{
    memset(z, 0, sizeof *z);
    int shards = s->parallel.dp * (s->parallel.cp > 0 ? s->parallel.cp : 1);
    z->active = s->parallel.zero_stage >= 3 && (shards > 1 || s->parallel.offload_parameters != OFFLOAD_NONE);
    layer_params lp = params_layer_per_gpu(s);
    double whole = lp.dense + lp.expert;
    int fsdp2 = s->parallel.fsdp_reshard_after_forward != FSDP_RESHARD_UNSET;
    z->persistence_threshold = fsdp2 ? 0 : s->parallel.stage3_param_persistence_threshold; /* FSDP2 shards all */
    z->layer_persistent = params_layer_small_per_gpu(s, z->persistence_threshold);
    if (z->layer_persistent > whole)
        z->layer_persistent = whole;
    z->layer_params = whole - z->layer_persistent;
    /* Layers fetched ahead: as many as the prefetch bucket holds, at least the next one when it
     * holds any part of it (the coordinator fetches whole parameters in trace order), none when
     * it is 0; bounded by max_live_parameters as below. */
    double prefetch = s->parallel.stage3_prefetch_bucket_size, max_live = s->parallel.stage3_max_live_parameters;
    int ahead = prefetch <= 0 || z->layer_params <= 0 ? 0 : (int)ceil(prefetch / z->layer_params);
    /* The live set counts tensors, not layers (deepspeed/runtime/zero/partitioned_param_coordinator.py,
     * fetch_sub_module: after the running module's tensors arrive it prefetches tensors in trace
     * order while what it adds is below min(max_live - live, bucket), so at least the next tensor
     * whenever anything is left): the next layer is in flight while this one runs as long as the
     * largest tensor leaves room, and further layers only within that room. Counting whole layers
     * stopped every prefetch of a layer over half of max_live (GPT-3 175B at TP 1: 1.8e9 elements). */
    double largest = params_layer_largest_tensor_per_gpu(s);
    if (z->layer_params > 0 && max_live > 0) {
        double room = max_live - largest;
        int fit = room <= 0 ? 0 : (int)fmax(1, floor(room / z->layer_params));
        if (fit < ahead)
            ahead = fit;
    }
    if (ahead > ZERO3_MAX_AHEAD)
        ahead = ZERO3_MAX_AHEAD;
    /* up to v0.5.4 every fetch waits for all the gathers in flight (zero3.h): nothing is gathered
     * further ahead than the unit after the running one */
    if (s->parallel.stage3_list_collectives && ahead > 1)
        ahead = 1;
    z->prefetch_layers = ahead;
    z->live_params = (1 + ahead) * z->layer_params;
    /* it holds what it counts, and the tensor that crossed the limit; at least the running layer,
     * which dtsim gathers in one piece */
    if (max_live > 0 && ahead > 0)
        z->live_params = fmin(z->live_params, fmax(max_live, z->layer_params) + largest);
    z->regather_rerun = s->training.recompute == RECOMPUTE_FULL &&
                        s->parallel.pipeline_engine == PIPELINE_ENGINE_DEEPSPEED;
    if (z->regather_rerun && !fsdp2) {
        /* a recomputed group of n layers re-runs them all, then runs their backwards last first:
         * the j-th from the group's end has 2 j layers between its re-run and its backward. The
         * workload takes the group's mean a layer (uniform groups of recompute_num_layers; the
         * block method re-runs one at a time) */
        long long n = s->training.recompute_block ? 1
                      : s->training.recompute_num_layers > 0 ? s->training.recompute_num_layers : 1;
        if (n > fewest_chunk_layers(s))
            n = fewest_chunk_layers(s);
        for (long long j = 0; j < n; j++) {
            double calls;
            z->rerun_kept_params += params_layer_rerun_kept(s, fmax(z->persistence_threshold, 1),
                                                            s->parallel.stage3_max_reuse_distance, 2.0 * j * whole,
                                                            &calls) / (double)n;
            z->rerun_kept_calls += calls / (double)n;
        }
    }
    z->reduce_bucket_params = s->parallel.reduce_bucket_size > 0 ? s->parallel.reduce_bucket_size : 5e8;
    /* DeepSpeed gathers tensor by tensor, each fetch its own call. Through v0.5 (tags read
     * 2026-11-29) one all-gather a parameter (partition_parameters.py, _all_gather ->
     * _allgather_param: torch.distributed.all_gather into a list until v0.5.4, then
     * _all_gather_base where PyTorch has it). From v0.6 the coordinator sends each prefetch batch as one
     * coalesced call (partitioned_param_coordinator.py, in stage3.py until v0.6.1: fetch_sub_module
     * -> __all_gather_params -> all_gather_coalesced), and a batch is what fits in min(max_live - live, prefetch bucket):
     * once the live set is full, what the last module let go, so again about a weight tensor a
     * call. Every tensor it partitions (at or above the persistence threshold) is counted as one
     * call: GPT-3 175B's QKV, projection and two MLP weights, 4 a layer; at least one, as dtsim
     * gathers a layer as its unit. */
    double threshold = fmax(z->persistence_threshold, 1), tensors = params_layer_tensors_from(s, threshold);
    z->gather_calls_per_layer = tensors > 1 ? tensors : 1;
    z->embed_gather_calls = fmax(1, params_ends_tensors_from(s, 0, threshold));
    z->head_gather_calls = fmax(1, params_ends_tensors_from(s, 1, threshold));
    z->list_collectives = s->parallel.stage3_list_collectives;
    if (z->list_collectives && z->active) {
        params_persistent_gather(s, 1, 0, z->persistence_threshold, shards, &z->persistent_tensors,
                                 &z->persistent_copies, &z->persistent_gathered);
        params_persistent_gather(s, 0, 1, z->persistence_threshold, shards, &z->head_persistent_tensors,
                                 &z->head_persistent_copies, &z->head_persistent_gathered);
    }
    fsdp_reshard_kind r = s->parallel.fsdp_reshard_after_forward;
    int pipelined = s->parallel.pp > 1;
    z->reshard_after_forward = r == FSDP_RESHARD_UNSET || r == FSDP_RESHARD_ALWAYS ||
                               (r == FSDP_RESHARD_DEFAULT && !pipelined);
    z->reshard_after_backward = z->reduce_every_backward = !(fsdp2 && pipelined);
    if (s->parallel.framework == FRAMEWORK_MEGATRON && !fsdp2) {
        /* Megatron-FSDP as Megatron-LM runs it (megatron/core/distributed/fsdp/src/megatron_fsdp): it
         * shards every tensor; a gather prefetches the next layers' buckets until they hold
         * suggested_AG_prefetch_size elements, half of suggested_communication_unit_size, which
         * defaults to max(1e9, twice a unit's parameters) (megatron_fsdp.py; the loop in
         * param_and_grad_buffer.py all_gather_params adds a layer while it holds less): at least one
         * layer, ceil(max(5e8, P) / P) of P elements, and no further than its model chunk's last
         * bucket (next_bucket_id: a chunk is a module of its own); a layer's gradients go out as its
         * bucket */
        z->persistence_threshold = 0;
        z->layer_persistent = 0;
        z->layer_params = whole;
        int megatron_ahead = whole > 0 ? (int)ceil(fmax(5e8, whole) / whole) : 0;
        int in_chunk = fewest_chunk_layers(s) - 1;
        if (megatron_ahead > in_chunk)
            megatron_ahead = in_chunk;
        z->prefetch_layers = megatron_ahead > ZERO3_MAX_AHEAD ? ZERO3_MAX_AHEAD : megatron_ahead;
        z->live_params = (1 + z->prefetch_layers) * z->layer_params;
        z->reduce_bucket_params = whole > 0 ? whole : 1;
        z->gather_calls_per_layer = z->embed_gather_calls = z->head_gather_calls = 1; /* a bucket, a call */
    }
    if (fsdp2) {
        /* FSDP2 has none of DeepSpeed's knobs: it shards every tensor, and each unit (a layer)
         * gathers one ahead (the next layer's all-gather issued as the current one runs, forward
         * and backward prefetch alike) and reduce-scatters its gradients in one call
         * (foreach_reduce) */
        z->prefetch_layers = z->layer_params > 0 ? 1 : 0;
        z->live_params = (1 + z->prefetch_layers) * z->layer_params;
        z->reduce_bucket_params = whole > 0 ? whole : 1;
        z->gather_calls_per_layer = z->embed_gather_calls = z->head_gather_calls = 1; /* a unit's flat
                                                                                   all-gather */
    }
}

double zero3_live_params(const scenario_config *s, const zero3_plan *z, int chunk_layers)
{
    if (!z->reshard_after_forward)
        return fmax(z->live_params, (double)chunk_layers * z->layer_params);
    if (s->training.recompute != RECOMPUTE_FULL || z->regather_rerun)
        return z->live_params;
    /* a recomputed group's layers stay gathered from their re-run to their backward: a group of
     * recompute_num_layers (uniform, within the chunk), one layer at a time (block) */
    long long n = s->training.recompute_block ? 1
                  : s->training.recompute_num_layers > 0 ? s->training.recompute_num_layers : 1;
    if (n > chunk_layers)
        n = chunk_layers;
    return fmax(z->live_params, (double)n * z->layer_params);
}
