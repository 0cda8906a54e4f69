/* The step's start and end for the workload (see workload.h): the distributed optimizer's
 * parameter all-gather (at the step's start when it overlaps the forward), the gradients still
 * to reduce after a stage's last pass, the reductions every stage waits for (the tied
 * embedding's gradient sum, the gradient norm), the optimizer, the zeroed gradient buffer and the
 * parameter all-gather after it. */
#include <math.h>
#include <stdlib.h>
#include "host_offload.h"
#include "params.h"
#include "workload_internal.h"

/* The distributed optimizer's all-gather of updated parameters (ZeRO-1/2), bucket by bucket as
 * Megatron-LM's buckets hold them (the gradient buckets' parameters, in the compute dtype): the
 * first and last task. */
static void param_gather_buckets(step_workload *w, const builder *b, int stage, double bytes, int dep, int *first,
                                 int *last)
{
    /* the flow replay's coarser buckets stand for several calls each, as the gradients' do;
     * the rest are one task where the gradients' are (workload_bucket_group, workload_emit.c),
     * but the first stays one bucket: a chunk's first forward waits for it */
    double call = b->call_bytes / b->grad_elem * b->cm.act_bytes;
    double bucket = b->bucket_bytes / b->grad_elem * b->cm.act_bytes;
    double group = workload_bucket_group(floor(bytes / bucket), 0, b->s->run.fidelity_flow);
    while (bytes > 0) {
        double n = fmin(*first < 0 ? 1 : group, floor(bytes / bucket)); /* full buckets; 0: the last, partial */
        double one = n >= 1 ? bucket : bytes, repeat = n >= 1 ? n : 1;
        int id = workload_add_buckets(w, b, stage, "zero_param_allgather", COMM_ZERO, COLL_ALL_GATHER, one, repeat,
                                      call, dep);
        if (*first < 0)
            *first = id;
        *last = id;
        bytes -= repeat * one;
    }
}

/* parallel.overlap_param_gather (Megatron-LM's --overlap-param-gather with the distributed
 * optimizer): the all-gather of the parameters the last optimizer step updated runs beside this
 * step's forward, bucket by bucket in the order the forward needs them. It is emitted at the
 * step's start (the steady state: each step gathers what the one before it updated) on the comm
 * stream, chunk by chunk: a chunk's first forward waits for its first bucket, its second forward
 * for all of them, so what the first forward does not cover is exposed. Megatron-LM issues them
 * from the forward's own pre-hooks, a bucket ahead, so a device synchronisation at a pipeline
 * exchange before the first forward (params_p2p_drains_device) does not wait for them: they are
 * not the stage's last_comm_lane. */
void workload_emit_param_gathers(step_workload *w, const builder *b, stage_state *st, int stage)
{
    const scenario_config *s = b->s;
    int shards = s->parallel.dp * s->parallel.cp;
    if (!s->parallel.overlap_param_gather || s->parallel.zero_stage < 1 || s->parallel.zero_stage > 2 || shards <= 1)
        return;
    layer_params lp = params_layer_per_gpu(s);
    for (int c = 0; c < b->V; c++) {
        int vs = pipeline_virtual_stage(b->P, stage, c);
        double bytes = b->layers[vs] * (lp.dense + lp.expert) * b->cm.act_bytes;
        if (vs == 0)
            bytes += params_stage_outside_layers_per_gpu(s, 0) * b->cm.act_bytes;
        if (vs == b->P * b->V - 1 && b->P * b->V > 1)
            bytes += params_stage_outside_layers_per_gpu(s, b->P - 1) * b->cm.act_bytes;
        param_gather_buckets(w, b, stage, bytes, -1, &st->gather_first[c], &st->gather_last[c]);
    }
}

/* After a stage's last pass: the remaining buckets and the gradients outside the layers. */
void workload_emit_grad_flush(step_workload *w, const builder *b, stage_state *st, int stage)
{
    const scenario_config *s = b->s;
    if (b->z3.active && b->z3.reduce_every_backward) /* ZeRO-3 reduced every micro-batch's gradients
                                                        in its backward */
        return;
    /* the gradients outside the layers: the embedding, the final norm, the LM-head copy */
    double outside = params_stage_outside_layers_per_gpu(s, stage);
    if (outside > 0 && b->comp.active && b->comp.method == GRAD_COMPRESSION_POWERSGD) {
        /* the layers' rest first; the final norm is a vector, all-reduced as it is (PowerSGD
         * compresses matrices only); then the embedding-shaped matrices in buckets of their own */
        workload_flush_and_offload(w, b, st, stage, st->last_compute, 1);
        double norm = stage == s->parallel.pp - 1 ? 2.0 * (double)s->model.hidden_size : 0;
        if (norm > 0 && b->dp.ranks > 1)
            st->last_comm = workload_add_comm(w, b, stage, LANE_COMM, "dp_grad_allreduce", COMM_DP,
                                              COLL_ALL_REDUCE, norm * b->grad_elem, b->dp, st->last_compute);
        outside -= norm;
        st->pending_embedding = 1;
    }
    st->pending_grad += outside * b->grad_elem;
    workload_flush_and_offload(w, b, st, stage, st->last_compute, 1);
}

/* A small blocking collective on the compute stream (Megatron runs these in
 * finalize_model_grads and the optimizer's step, on the default stream): a compute task whose
 * whole time is communication of kind cls, so both replays charge the same closed form. */
static int blocking_collective(step_workload *w, const builder *b, int stage, const char *name, comm_class cls,
                               coll_kind coll, double bytes, coll_group g, double extra_s)
{
    sim_task t = workload_task(TASK_COMPUTE, LANE_COMPUTE, stage, name);
    double comm = workload_collective_s(b, coll, bytes, g);
    t.duration_s = comm + extra_s;
    t.comm_inside_s = comm;
    task_comm_parts parts = {0};
    parts.inside[cls] = comm;
    return workload_add_task_parts(w, &t, &parts);
}

/* What every stage waits for once all stages' gradients are reduced (Megatron-LM's
 * finalize_model_grads, then the optimizer's gradient norm):
 *  - tied embeddings with PP > 1: the word-embedding gradient is summed between the first and
 *    last stage, which each hold a copy (_allreduce_embedding_grads), in the reduction dtype;
 *  - the gradient norm for clipping: each rank reads its (shard of the) gradients and one float
 *    is all-reduced over every GPU (get_grad_norm_fp32; with fp16, the overflow check first).
 * Both are per-step costs that grow with scale (latency over every node) and with the
 * vocabulary, which a per-micro-batch model misses. */
void workload_emit_step_sync(step_workload *w, const builder *b, stage_state *st)
{
    const scenario_config *s = b->s;
    int P = b->P;
    int *ready = malloc((size_t)P * sizeof *ready);
    if (!ready)
        return;
    for (int p = 0; p < P; p++)
        ready[p] = st[p].last_comm >= 0 ? st[p].last_comm : st[p].last_compute;
    if (P > 1 && !s->model.untie_embeddings) {
        double bytes = (double)s->model.vocab_size * (double)s->model.hidden_size / s->parallel.tp * b->grad_elem;
        coll_group ends = workload_pp_pair(b, 0, P - 1);
        int ids[2];
        for (int e = 0; e < 2; e++) {
            int p = e ? P - 1 : 0;
            ids[e] = blocking_collective(w, b, p, "embedding_grad_allreduce", COMM_DP, COLL_ALL_REDUCE, bytes, ends, 0);
            workload_add_dep(w, ids[e], ready[0]);
            workload_add_dep(w, ids[e], ready[P - 1]);
        }
        ready[0] = ids[0];
        ready[P - 1] = ids[1];
    }
    int gpus = scenario_gpus(s);
    coll_group world = coll_group_of(gpus, 1, b->gpn);
    /* the norm reads a rank's share of the gradients: its ZeRO partition; the BF16_Optimizer's
     * get_grads_for_norm reads its whole fp32 gradients, and so does nanotron's clip_grad_norm (every
     * parameter's fp32 gradient buffer, optim/clip_grads.py) */
    int shards = s->parallel.zero_stage >= 1 && !b->bf16_optimizer && s->parallel.framework != FRAMEWORK_NANOTRON
                     ? s->parallel.dp * s->parallel.cp
                     : 1;
    int scalars = s->training.precision == PREC_FP16 ? 2 : 1; /* found_inf, then the norm */
    int *norm = malloc((size_t)P * sizeof *norm);
    for (int p = 0; norm && p < P; p++) {
        double read = cost_memory_s(&b->cm, OPCLASS_ADAMW, params_stage_per_gpu(s, p) / shards *
                                                               params_grad_buffer_bytes(s) * scalars);
        norm[p] = gpus > 1 ? blocking_collective(w, b, p, "grad_norm", COMM_DP, COLL_ALL_REDUCE, 4.0 * scalars,
                                                 world, read)
                           : -1;
        if (norm[p] < 0) {
            sim_task t = workload_task(TASK_COMPUTE, LANE_COMPUTE, p, "grad_norm");
            t.duration_s = read;
            norm[p] = workload_add_task(w, &t);
        }
        /* an all-reduce over every GPU: each stage's waits for every stage's gradients */
        for (int q = 0; q < P; q++)
            if (ready[q] >= 0 && (gpus > 1 || q == p))
                workload_add_dep(w, norm[p], ready[q]);
        st[p].last_compute = norm[p];
    }
    free(norm);
    free(ready);
}

/* DeepSpeed's stage 3 up to v0.5.4 (parallel.stage3_list_collectives) lets every parameter go at
 * the end of each backward, the persistent ones (below stage3_param_persistence_threshold) too
 * (stage3.py: backward -> _partition_all_parameters -> release_and_reset_parameter, which does not
 * look at ds_persist), and gathers those again when the optimizer's step ends (_post_step:
 * persistent_parameters[0].all_gather, the synchronous _allgather_params): one list all-gather of
 * their pieces, then a Python loop that copies each tensor's piece out of each rank's partition, a
 * copy_ a tensor and rank (partition_parameters.py; read at v0.3.13, v0.4.0, v0.5.0 and v0.5.4).
 * The host issues those copies, and PyTorch's rank by rank copies of the list all-gather, before
 * the step is done: launches at the calibration's launch_overhead_us, booked as exposed ZeRO time.
 * The loop's own Python (two narrows and a view a copy) is host time too, not counted. */
static void persistent_gather(step_workload *w, const builder *b, stage_state *st, int stage, int opt)
{
    const scenario_config *s = b->s;
    const zero3_plan *z = &b->z3;
    if (!z->active || !z->list_collectives || b->dp.ranks <= 1)
        return;
    /* the stage's layers' and, on the last stage, the final norm's (the plan's counts, per layer) */
    double L = scenario_stage_layers(s, stage), head = stage == b->P - 1;
    double tensors = L * z->persistent_tensors + head * z->head_persistent_tensors;
    double copies = L * z->persistent_copies + head * z->head_persistent_copies;
    double gathered = L * z->persistent_gathered + head * z->head_persistent_gathered;
    if (tensors <= 0)
        return;
    int g = workload_add_comm(w, b, stage, LANE_COMM, "zero3_persistent_allgather", COMM_ZERO, COLL_ALL_GATHER,
                              gathered * b->cm.act_bytes, b->dp, st->last_compute);
    if (opt >= 0 && opt != st->last_compute) /* after the optimizer's step, wherever that ran */
        workload_add_dep(w, g, opt);
    /* the copies: each tensor's piece into this rank's partition first, then PyTorch's out of the
     * flat buffer a rank at a time, then the loop's, a tensor and rank at a time */
    sim_task t = workload_task(TASK_COMPUTE, LANE_COMPUTE, stage, "zero3_persistent_copies");
    task_comm_parts parts = {0};
    t.duration_s = t.comm_inside_s = parts.inside[COMM_ZERO] =
        (tensors + b->dp.ranks + copies) * s->calibration.launch_overhead_us * 1e-6;
    st->last_compute = workload_add_task_parts(w, &t, &parts);
    workload_add_dep(w, st->last_compute, g);
}

/* The optimizer step, then (ZeRO-1/2, the BF16_Optimizer) the all-gather of updated parameters. */
void workload_emit_optimizer(step_workload *w, const builder *b, stage_state *st, int stage)
{
    const scenario_config *s = b->s;
    double params = params_stage_per_gpu(s, stage);
    int shards = params_optimizer_shards(s);
    int gathers = shards > 1 && (b->bf16_optimizer || (s->parallel.zero_stage >= 1 && s->parallel.zero_stage <= 2));
    /* AdamW reads fp32 master weights, both moments and the gradient, writes them back and
     * (mixed precision) writes the half-precision copy: ~30 bytes per parameter; SGD ~12. */
    double bytes_per_param = s->training.optimizer == OPTIMIZER_SGD ? 12 : (b->cm.act_bytes == 2 ? 30 : 28);
    int opt, offload = s->parallel.offload_optimizer != OFFLOAD_NONE;
    if (offload) { /* ZeRO-Offload: on the CPU, between the host transfers (host_offload.h) */
        opt = offload_optimizer_step(w, s, stage, st->last_comm, st->last_compute);
    } else {
        sim_task t = workload_task(TASK_COMPUTE, LANE_COMPUTE, stage, "optimizer");
        t.duration_s = cost_memory_s(&b->cm, OPCLASS_ADAMW, params / shards * bytes_per_param);
        opt = workload_add_task(w, &t);
        if (st->last_comm >= 0)
            workload_add_dep(w, opt, st->last_comm);
        st->last_compute = opt;
    }
    /* The next step accumulates into a zeroed gradient buffer: a write of the whole buffer
     * (sharded only from ZeRO-2 on), as Megatron's zero_grad_buffer does at each step's start. */
    if (!offload) {
        int gshards = s->parallel.zero_stage >= 2 ? s->parallel.dp * s->parallel.cp : 1;
        sim_task z = workload_task(TASK_COMPUTE, LANE_COMPUTE, stage, "zero_grad_buffer");
        z.duration_s = cost_memory_s(&b->cm, OPCLASS_ELEMENTWISE, params / gshards * params_grad_buffer_bytes(s));
        st->last_compute = workload_add_task(w, &z);
    }
    persistent_gather(w, b, st, stage, opt);

    if (offload && !gathers) {
        sim_task end = workload_task(TASK_COMPUTE, LANE_COMPUTE, stage, "step_end"); /* the GPU waits for the host */
        st->last_compute = workload_add_task(w, &end);
        workload_add_dep(w, st->last_compute, opt);
    } else if (gathers && !s->parallel.overlap_param_gather) { /* (with it: at the next step's start) */
        int first = -1, last = -1;
        param_gather_buckets(w, b, stage, params * b->cm.act_bytes, opt, &first, &last);
        sim_task end = workload_task(TASK_COMPUTE, LANE_COMPUTE, stage, "step_end");
        int e = workload_add_task(w, &end);
        workload_add_dep(w, e, last);
    }
}
