/* Builds the task graph of one training step (see workload.h) from the pipeline schedule and
 * the costs the builder computed once (workload_costs.c); tasks shared with the step's start
 * and end come from workload_emit.c, the start and end themselves from workload_step.c.
 *
 * Per pipeline stage the graph holds, in schedule order:
 *  - one compute task per (forward|backward, micro-batch, chunk): its layers' ops, TP
 *    communication folded in (it blocks the compute stream), recomputation added to backward;
 *    the embedding on the first virtual stage, LM head and loss on the last;
 *  - a P2P task after each forward (activations to the next virtual stage) and backward
 *    (gradients to the previous one), on the sender's P2P lane;
 *  - data-parallel gradient buckets on the comm lane, launched as the chunk's last backward
 *    produces them (overlap_grad_reduce) or after the stage's last backward;
 *  - ZeRO-3 (sim/step/zero3.h): per layer and micro-batch, parameter all-gathers (forward, backward,
 *    recomputation) prefetched as deep as the plan says, and gradient reduce-scatters;
 *  - once every stage is done: the tied embedding's gradient sum between the first and last
 *    stage, the gradient norm over every GPU, the optimizer step, zeroing the gradient buffer,
 *    then (ZeRO-1/2) the all-gather of updated parameters.
 * The emission order follows an execution of the schedule, so the array is topological. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "host_offload.h"
#include "moe_overlap.h"
#include "params.h"
#include "workload_internal.h"

/* A pass that starts from what the previous stage sent first gathers its TP slices (folded into
 * the pass like TP communication: it runs on the compute stream, over the TP group's NVLink). */
static void gather_received(sim_task *pass, task_comm_parts *parts, const builder *b)
{
    pass->duration_s += b->p2p_gather_s;
    pass->comm_inside_s += b->p2p_gather_s;
    parts->inside[COMM_TP] += b->p2p_gather_s;
}

/* n times a pass's communication, folded into a compute task by kind (its time is already in
 * the task's duration). */
static void fold_comm(sim_task *t, task_comm_parts *parts, const pass_cost *c, double n)
{
    t->comm_inside_s += n * c->comm_s;
    t->overlap_cost_s += n * c->overlap_cost_s;
    for (int k = 0; k < COMM_CLASS_COUNT; k++) {
        parts->inside[k] += n * c->comm_cls_s[k];
        parts->hidden[k] += n * c->comm_hidden_cls_s[k];
    }
}

/* Without parallel.overlap_p2p_comm a stage's sends block, as Megatron-LM's do by default: its
 * next pass starts once its last send has been delivered, not only once it has what it receives. */
static void wait_for_send(step_workload *w, const builder *b, stage_state *st, int task)
{
    if (st->last_send >= 0 && !b->s->parallel.overlap_p2p_comm)
        workload_add_dep(w, task, st->last_send);
    st->last_send = -1;
}

/* ZeRO-3: the all-gather(s) of one unit's parameters before a pass piece uses them (sim/step/zero3.h):
 * with prefetch depth d, the gather of the stage's u-th unit may start once unit u-d-1 has run
 * (the live set holds the running unit and d prefetched ones). Under full recomputation with
 * DeepSpeed's engine (zero3_plan.regather_rerun) the backward first gathers the recomputed layers'
 * parameters (rerun_params) for their rerun, which lets them go after (its post-forward hook) but
 * for those it will use again soon (zero3_plan.rerun_kept_params); then the unit's for the backward
 * itself, less those (params, which may then be 0). FSDP's one gather serves both (rerun_params 0).
 * The embedding and the head are not recomputed. With ZeRO-Infinity the rank's
 * shard first comes in from the host or NVMe (host_offload.h). -1 when ZeRO-3 is off. *emitted:
 * the all-gather calls the tasks stand for (0 without any), *emitted_bytes the bytes they gather. */
/* Task `task`, the last added, waits for each of the n tasks in deps. */
static void depend_on_all(step_workload *w, int task, const int *deps, int n)
{
    for (int i = 0; i < n; i++)
        workload_add_dep(w, task, deps[i]);
}

/* What a device synchronisation at a pipeline exchange waits for beyond the compute and transfer
 * lanes, which a pass's compute follows in order anyway: the stage's last comm-lane and host-lane
 * tasks. Writes them to out; returns how many. */
static int drained_lanes(const stage_state *st, int out[2])
{
    int n = 0;
    if (st->last_comm_lane >= 0)
        out[n++] = st->last_comm_lane;
    if (st->last_host_lane >= 0)
        out[n++] = st->last_host_lane;
    return n;
}

static int zero3_unit_gather(step_workload *w, const builder *b, stage_state *st, int stage, double rerun_params,
                             double rerun_calls, double params, double calls, const int *drain, int n_drain,
                             double *emitted, double *emitted_bytes)
{
    *emitted = *emitted_bytes = 0;
    if (!b->z3.active || (params <= 0 && rerun_params <= 0))
        return -1;
    int d = b->z3.prefetch_layers, u = st->z3_units;
    int dep = u - d - 1 >= 0 ? st->z3_history[(u - d - 1) % Z3_HISTORY] : -1;
    int id = -1;
    for (int c = rerun_params > 0 ? 0 : 1; c < 2 && (c == 0 || params > 0); c++) {
        double n = c == 0 ? rerun_params : params, k = fmax(1, c == 0 ? rerun_calls : calls);
        int fetch = offload_param_fetch(w, b->s, stage, n, dep);
        if (fetch >= 0 && id < 0) /* the first task issued after a drain */
            depend_on_all(w, fetch, drain, n_drain);
        if (fetch >= 0)
            st->last_host_lane = fetch;
        int g = -1;
        if (b->dp.ranks > 1) { /* k calls of n / k elements each, back to back (zero3.h) */
            double one = n * b->cm.act_bytes / k;
            g = workload_add_buckets(w, b, stage, "zero3_param_allgather", COMM_ZERO, COLL_ALL_GATHER, one, k, one, dep);
            *emitted += k;
            *emitted_bytes += n * b->cm.act_bytes;
            if (fetch >= 0)
                workload_add_dep(w, g, fetch);
            if (fetch < 0 && id < 0)
                depend_on_all(w, g, drain, n_drain);
            st->last_comm_lane = g;
        }
        id = g >= 0 ? g : fetch;
        if (id >= 0)
            dep = id;
    }
    return id;
}

/* FSDP2 without gradient sync (zero3.h): a backward's gradients of `params` parameters added into
 * the unsharded ones, kept in the reduction dtype r (to_accumulated_grad_if_needed casts the
 * chunk's first, accumulate_unsharded_grad_if_needed adds the later ones: read the new gradient
 * in the compute dtype c, read and write the sum); in the compute dtype autograd adds them into
 * the parameter's gradient (read both, write one) and the first costs nothing. */
static double accumulate_unsharded_s(const builder *b, int first, double params)
{
    double c = b->cm.act_bytes, r = params_grad_buffer_bytes(b->s);
    double bytes = r > c ? (first ? c + r : c + 2 * r) : (first ? 0 : 3 * c);
    return bytes > 0 ? cost_memory_s(&b->cm, OPCLASS_ELEMENTWISE, bytes * params) : 0;
}

/* parallel.stage3_list_collectives: each of a pass's gather calls hands PyTorch a list of one
 * tensor a rank of the group, which ProcessGroupNCCL fills from its flat buffer one copy a rank,
 * launched by the host before the pass's compute is (zero3.h): the host's launches, or the
 * copies' own device traffic (each gathered byte read and written once more) where pieces of a
 * few MB make that the longer. Before each call DeepSpeed zeroes the whole flat tensor the list
 * views (_allgather_param: torch.zeros of the aligned size, then torch.cuda.synchronize(); read at
 * v0.3.13, v0.4.0 and v0.5.4): a memset a call over the gathered bytes, which the host waits for.
 * Memory traffic at the memory-bound rate. Both are a part of the pass that no device work hides,
 * booked as the ZeRO gathers'. */
static void list_copies(sim_task *t, task_comm_parts *parts, const builder *b, double gather_calls,
                        double gather_bytes)
{
    if (gather_calls <= 0)
        return;
    double launch_s = b->s->calibration.launch_overhead_us * 1e-6;
    double pass_s = cost_memory_bytes_s(&b->cm, OPCLASS_ELEMENTWISE, gather_bytes); /* launches counted apart */
    double copies_s = fmax(gather_calls * b->dp.ranks * launch_s, 2 * pass_s);
    double zeros_s = gather_calls * launch_s + pass_s;
    t->duration_s += copies_s + zeros_s;
    t->comm_inside_s += copies_s + zeros_s;
    parts->inside[COMM_ZERO] += copies_s + zeros_s;
}

/* A pass's clock where it is emitted in pieces (a task per layer): the GPU time its pieces took and
 * the host's time to issue them, from the pass's start (host_issue.h). */
typedef struct {
    double gpu_s, host_s;
} pass_clock;

/* Adds a pass's work to compute task t: nl layers (nr of them rerun first by recomputation: a
 * backward's), and the embedding and the head where the pass meets them (a forward meets the
 * embedding first, a backward the head). Where the host issues those kernels slower than the GPU
 * runs them (host_issue.h), the work ends when the host has issued it: the piece ends at the later
 * of the GPU's end (the pieces before, then its own work) and the host's (every piece's kernels so
 * far, issued from the pass's start), so that the host may run ahead within a pass emitted in
 * pieces as within one emitted whole; the difference is the GPU waiting. */
static void add_pass_work(sim_task *t, task_comm_parts *parts, const builder *b, int fwd, int nl, int nr,
                          int with_embed, int with_head, pass_clock *clock)
{
    const pass_cost *layer = fwd ? &b->layer_fwd : &b->layer_bwd;
    double before = t->duration_s;
    clock->host_s += host_issue_pass_s(&b->host, fwd, nl, nr, with_embed, with_head);
    t->duration_s += nl * layer->time_s + nr * b->layer_recompute.time_s;
    fold_comm(t, parts, layer, nl);
    fold_comm(t, parts, &b->layer_recompute, nr);
    t->tp_ring_bytes += nl * layer->tp_ring_bytes + nr * b->layer_recompute.tp_ring_bytes;
    t->flops += nl * layer->flops + nr * b->layer_recompute.flops;
    const pass_cost *first = fwd ? &b->embed_fwd : &b->head_bwd, *then = fwd ? &b->head_fwd : &b->embed_bwd;
    if (fwd ? with_embed : with_head) {
        t->duration_s += first->time_s;
        fold_comm(t, parts, first, 1);
        t->flops += first->flops;
    }
    if (fwd ? with_head : with_embed) {
        t->duration_s += then->time_s;
        fold_comm(t, parts, then, 1);
        t->flops += then->flops;
    }
    double gpu = t->duration_s - before, end = fmax(clock->gpu_s + gpu, clock->host_s);
    t->duration_s += end - clock->gpu_s - gpu;
    clock->gpu_s = end;
}

/* overlap_param_gather: a chunk's first forward waits for the updated parameters' first bucket,
 * its second for all of them. */
static void forward_after_param_gather(step_workload *w, stage_state *st, int id, int chunk)
{
    if (st->forwards_done[chunk] < 2 && st->gather_first[chunk] >= 0)
        workload_add_dep(w, id, st->forwards_done[chunk] == 0 ? st->gather_first[chunk] : st->gather_last[chunk]);
    st->forwards_done[chunk]++;
}

/* A pass's pipeline send (activations to the next virtual stage, gradients to the previous),
 * after its compute task `id`. */
static void emit_send(step_workload *w, const builder *b, stage_state *st, int stage, const pipe_action *a, int id,
                      int **fwd_p2p, int **bwd_p2p)
{
    int fwd = a->phase == PIPE_FORWARD, vs = pipeline_virtual_stage(b->P, stage, a->chunk);
    int to = fwd ? vs + 1 : vs - 1;
    if (to < 0 || to > b->P * b->V - 1)
        return;
    coll_group g = workload_pp_pair(b, stage, to % b->P);
    int p = workload_add_comm(w, b, stage, LANE_P2P, fwd ? "pp_send_activation" : "pp_send_gradient", COMM_PP,
                              COLL_SEND_RECV, b->p2p_bytes, g, id);
    w->tasks[p].peer_stage = to % b->P;
    w->tasks[p].micro_batch = a->micro_batch;
    w->tasks[p].chunk = a->chunk;
    w->tasks[p].phase = a->phase;
    (fwd ? fwd_p2p : bwd_p2p)[vs][a->micro_batch] = p;
    st->last_send = p;
}

/* Whether Megatron-LM's schedule runs a pipeline exchange on this stage between its last pass and
 * pass a (params_p2p_drains_device says whether an exchange synchronises the device). 1F1B
 * (forward_backward_pipelining_without_interleaving): the stage sent after its last pass, or
 * receives for this one; the calls that would do neither are no-ops on the first and last stage
 * and return before the synchronisation. Interleaved (..._with_interleaving): every exchange call
 * synchronises, whatever the stage, and one comes after every warm-up forward, after each
 * steady-state forward-and-backward pair and after every cool-down backward: so before every pass
 * but a steady-state backward, which follows its forward with nothing between. A stage whose
 * forwards are all warm-up (micro-batches as many as stages, on the first stages) has no steady
 * state: its first backward follows the last warm-up forward's exchange. The first pass waits for
 * its initial receive (guarded like 1F1B's) where it has one. */
static int exchange_before(const builder *b, const stage_state *st, const pipe_action *a, int first_dep)
{
    if (b->V > 1 && st->last_phase >= 0)
        return !(a->phase == PIPE_BACKWARD && st->last_phase == PIPE_FORWARD && !st->all_warmup);
    return first_dep >= 0 || st->last_send >= 0;
}

/* One pass (forward or backward of one micro-batch through one model chunk) of a stage: its
 * compute as one task, or per layer where something happens between layers (ZeRO-3's gathers
 * and gradient reduce-scatters; DP buckets of the chunk's last backward when they overlap), then
 * the pipeline send. ZeRO-3 as FSDP2 runs it (zero3.h) gathers only where the chunk's layers are
 * not still gathered from its last pass, and under pipeline parallelism adds each backward's
 * gradients into unsharded ones and reduce-scatters them after the chunk's last backward. */
static int emit_pass(step_workload *w, const builder *b, stage_state *st, int stage,
                     const pipe_action *a, int **fwd_p2p, int **bwd_p2p, int send)
{
    const scenario_config *s = b->s;
    int P = b->P, V = b->V;
    int vs = pipeline_virtual_stage(P, stage, a->chunk);
    int last_vs = P * V - 1;
    int L = b->layers[vs];
    int fwd = a->phase == PIPE_FORWARD, z3 = b->z3.active;
    int z3_once = z3 && !b->z3.reduce_every_backward; /* reduces once, after the chunk's last backward */
    int gathers = z3 && !st->z3_held[a->chunk];
    int first_of_chunk = !fwd && st->backwards_left[a->chunk] == b->m;
    int last_of_chunk = !fwd && --st->backwards_left[a->chunk] == 0;
    /* DeepSpeed up to v0.5.4 lets its persistent tensors go when a backward ends: a forward after
     * one of this stage's backwards gathers them again (zero3.h) */
    int persistent_gone = fwd && z3 && b->z3.list_collectives && st->backwards_run > 0;
    st->backwards_run += !fwd;
    int dpcp = s->parallel.dp * s->parallel.cp;
    /* The chunk's last backward produces its final gradients layer by layer: emitted per layer
     * when DP buckets go out as they fill, or (one GPU with ZeRO-Offload) stream to the host. */
    int split = gathers || (z3 && !z3_once && !fwd) ||
                (!z3_once && last_of_chunk &&
                 ((params_grad_reduce_overlapped(s) && dpcp > 1) ||
                  (dpcp <= 1 && s->parallel.offload_optimizer != OFFLOAD_NONE)));
    int pieces = split ? (L > 0 ? L : 1) : 1;
    int first_dep = fwd ? (vs > 0 ? fwd_p2p[vs - 1][a->micro_batch] : -1)
                        : (vs < last_vs ? bwd_p2p[vs + 1][a->micro_batch] : -1);
    /* parameters outside the layers: the embedding where the model starts, the final norm and
     * the LM head (a tied one re-gathers the embedding's table) where it ends */
    double embed_params = vs == 0 ? params_embedding_per_gpu(s) : 0;
    double h = (double)s->model.hidden_size;
    double head_params = vs == last_vs ? (h < b->z3.persistence_threshold ? 0 : params_final_norm(s)) +
                                             (double)s->model.vocab_size * h / s->parallel.tp
                                       : 0;
    double head_grads = vs == last_vs ? params_stage_outside_layers_per_gpu(s, P - 1) - (P == 1 ? embed_params : 0) : 0;
    int id = -1, reduce_after = -1;
    /* A pipeline exchange before this pass that synchronises the device (exchange_before,
     * params_p2p_drains_device; under interleaving it also received the gradient of the backward
     * paired with this forward, st->pair_input): the pass's first task on each
     * lane waits for everything the stage issued before it. The compute and transfer lanes run in
     * order after the last compute and send, so what is listed is what this pass's first gather
     * (the comm lane's next task) would otherwise not wait for; the compute waits for the comm and
     * host lanes' last tasks (drained_lanes) and the paired backward's transfer, unless its gather,
     * behind them, already makes it. */
    int drain[5], n_drain = 0, after[3], n_after = 0; /* after: what the first compute waits for */
    if (b->p2p_drains_device && exchange_before(b, st, a, first_dep)) {
        int from[5] = {first_dep, st->last_send, st->last_compute, st->last_host_lane, st->pair_input};
        for (int i = 0; i < 5; i++)
            if (from[i] >= 0)
                drain[n_drain++] = from[i];
        n_after = drained_lanes(st, after);
        if (st->pair_input >= 0)
            after[n_after++] = st->pair_input;
    }
    st->pair_input = -1;
    int drained = 0;
    pass_clock clock = {0, 0};
    for (int piece = 0; piece < pieces; piece++) {
        int first = piece == 0, last = piece == pieces - 1;
        int nl = split ? (L > 0 ? 1 : 0) : L;
        /* a forward meets the embedding first and the head last; a backward the other way */
        int with_embed = vs == 0 && (fwd ? first : last), with_head = vs == last_vs && (fwd ? last : first);
        double unit = nl * b->z3.layer_params + (with_embed ? embed_params : 0) + (with_head ? head_params : 0);
        /* the layers the backward recomputes: a piece (one layer, the backward's piece-th from the
         * chunk's end) is recomputed when the chunk's recomputed layers reach it */
        int nr = fwd ? 0
                 : !split ? scenario_recomputed_layers(s, nl)
                 : nl > 0 ? scenario_recomputed_layers(s, L - piece) - scenario_recomputed_layers(s, L - piece - 1)
                          : 0;
        double rerun = b->z3.regather_rerun ? nr * b->z3.layer_params : 0;
        double rerun_calls = rerun > 0 ? nr * b->z3.gather_calls_per_layer : 0;
        /* its calls: the layers' (gather_calls_per_layer each), the embedding's and the head's;
         * what stays from the re-run is neither gathered nor called for again */
        double calls = (b->z3.layer_params > 0 ? nl * b->z3.gather_calls_per_layer : 0) +
                       (with_embed && embed_params > 0 ? b->z3.embed_gather_calls : 0) +
                       (with_head && head_params > 0 ? b->z3.head_gather_calls : 0);
        /* ... a call each, averaged in size with the layer's weights (zero3_unit_gather prices k
         * calls of the same size: the same bytes and latencies, not each call's own protocol) */
        if (persistent_gone) {
            unit += nl * b->z3.persistent_gathered + (with_head ? b->z3.head_persistent_gathered : 0);
            calls += nl * b->z3.persistent_tensors + (with_head ? b->z3.head_persistent_tensors : 0);
        }
        if (rerun > 0) { /* less than an element left is rounding: nothing */
            unit -= nr * b->z3.rerun_kept_params;
            calls -= nr * b->z3.rerun_kept_calls;
            if (unit < 0.5)
                unit = calls = 0;
        }
        double gather_calls = 0, gather_bytes = 0;
        int gather = gathers ? zero3_unit_gather(w, b, st, stage, rerun, rerun_calls, unit, calls, drain,
                                                 drained ? 0 : n_drain, &gather_calls, &gather_bytes)
                             : -1;
        drained |= gather >= 0;
        /* The previous layer's gradients go out after this layer's gather on the one comm stream
         * both share here: the prefetch is not queued behind a reduction that waits for the
         * compute it should overlap (DeepSpeed runs them on two streams that share the NIC; one
         * stream in this order gives the same bytes through it, and the same lane order to the
         * flow replay). */
        if (reduce_after >= 0)
            workload_flush_and_offload(w, b, st, stage, reduce_after, 0);
        reduce_after = -1;

        sim_task t = workload_task(TASK_COMPUTE, LANE_COMPUTE, stage, fwd ? "fwd" : "bwd");
        t.micro_batch = a->micro_batch;
        t.chunk = a->chunk;
        t.phase = a->phase;
        task_comm_parts parts = {0};
        add_pass_work(&t, &parts, b, fwd, nl, nr, with_embed, with_head, &clock);
        if (b->z3.list_collectives) /* the host's copies, rank by rank, for each call the gathers make */
            list_copies(&t, &parts, b, gather_calls, gather_bytes);
        if (first && (fwd ? vs > 0 : vs < last_vs))
            gather_received(&t, &parts, b);
        if (!fwd && z3_once) /* the piece's gradients into the unsharded ones */
            t.duration_s += accumulate_unsharded_s(b, first_of_chunk,
                                                   nl * (b->z3.layer_params + b->z3.layer_persistent) +
                                                       (with_embed ? embed_params : 0) + (with_head ? head_grads : 0));
        id = workload_add_task_parts(w, &t, &parts);
        if (first && first_dep >= 0)
            workload_add_dep(w, id, first_dep);
        if (first)
            wait_for_send(w, b, st, id);
        if (first && st->z3_epilogue >= 0)
            workload_add_dep(w, id, st->z3_epilogue);
        if (first && fwd)
            forward_after_param_gather(w, st, id, a->chunk);
        if (first)
            st->z3_epilogue = -1;
        if (gather >= 0)
            workload_add_dep(w, id, gather);
        else if (!drained)
            depend_on_all(w, id, after, n_after);
        drained = 1; /* a later piece's gather follows this compute's on the comm lane */
        if (z3 && b->z3.list_collectives && st->last_comm >= 0) /* the fetch drains the device (zero3.h) */
            workload_add_dep(w, id, st->last_comm);
        st->last_compute = id;
        if (z3)
            st->z3_history[st->z3_units++ % Z3_HISTORY] = id;
        if (!fwd && z3 && !z3_once) { /* every micro-batch's gradients, reduce-scattered as buckets fill */
            st->pending_grad += (nl * b->grad_bytes_per_layer) +
                                ((with_embed ? embed_params : 0) + (with_head ? head_grads : 0)) * b->grad_elem;
            if (last) { /* DeepSpeed's backward epilogue waits for the reduce stream
                           (independent_gradient_partition_epilogue): the stage's next pass too */
                workload_flush_and_offload(w, b, st, stage, id, 1);
                st->z3_epilogue = st->last_comm;
            } else {
                reduce_after = id;
            }
        } else if (!fwd && split && !z3_once) {
            st->pending_grad += nl * b->grad_bytes_per_layer;
            workload_flush_and_offload(w, b, st, stage, id, 0);
        }
    }
    if (z3)
        st->z3_held[a->chunk] = fwd ? !b->z3.reshard_after_forward : !b->z3.reshard_after_backward;
    if (last_of_chunk && z3_once) { /* FSDP's post-backward, run by hand after the whole pass; its
                                        final callback makes the compute stream wait for the
                                        reductions (finalize_backward, _wait_for_post_backward) */
        st->pending_grad += L * b->grad_bytes_per_layer;
        workload_flush_and_offload(w, b, st, stage, id, 1);
        st->z3_epilogue = st->last_comm;
    } else if (last_of_chunk && !split) {
        st->pending_grad += L * b->grad_bytes_per_layer;
    }
    st->last_phase = a->phase;
    if (send)
        emit_send(w, b, st, stage, a, id, fwd_p2p, bwd_p2p);
    return 0;
}

/* Would this backward be emitted layer by layer (emit_pass's split)? Such a pass is not paired. */
static int backward_splits(const builder *b, const stage_state *st, const pipe_action *a)
{
    const scenario_config *s = b->s;
    int dpcp = s->parallel.dp * s->parallel.cp;
    if (b->z3.active) /* it gathers, or it reduces as buckets fill */
        return b->z3.reduce_every_backward || !st->z3_held[a->chunk];
    return st->backwards_left[a->chunk] == 1 && ((params_grad_reduce_overlapped(s) && dpcp > 1) ||
                                                 (dpcp <= 1 && s->parallel.offload_optimizer != OFFLOAD_NONE));
}

/* parallel.overlap_moe_expert_parallel_comm (sim/step/moe_overlap.h): a backward (bk) and the
 * stage's next forward (fw) as one compute task, their layers paired (the forward's first with
 * the backward's last; layers one pass has more of run alone), then both passes' sends. The pair
 * starts once both have what they receive, as Megatron-Core's combined step does. */
static void emit_combined(step_workload *w, const builder *b, stage_state *st, int stage, const pipe_action *bk,
                          const pipe_action *fw, int **fwd_p2p, int **bwd_p2p)
{
    const scenario_config *s = b->s;
    int P = b->P, last_vs = P * b->V - 1;
    int vb = pipeline_virtual_stage(P, stage, bk->chunk), vf = pipeline_virtual_stage(P, stage, fw->chunk);
    int lb = b->layers[vb], lf = b->layers[vf], pairs = lb < lf ? lb : lf;
    int last_of_chunk = --st->backwards_left[bk->chunk] == 0;
    st->backwards_run++;
    moe_pair_result r;
    if (moe_pair_time(&b->moe_fwd, &b->moe_bwd, pairs, b->overlap_slowdown, &r) != 0)
        memset(&r, 0, sizeof r); /* cannot fail on the builder's parts: they are costs >= 0 */
    sim_task t = workload_task(TASK_COMPUTE, LANE_COMPUTE, stage, "fwd_bwd");
    t.micro_batch = fw->micro_batch; /* the data loader's demand: the forward's micro-batch */
    t.chunk = fw->chunk;
    t.phase = PIPE_FORWARD;
    /* both passes whole, then the pairs' span in place of their layers one after the other, and
     * their all-to-alls' exposed part in place of each pass's own */
    task_comm_parts parts = {0};
    pass_clock fc = {0, 0}, bc = {0, 0}; /* (no host model here: nanotron, the one framework with one,
                                            refuses MoE) */
    add_pass_work(&t, &parts, b, 1, lf, 0, vf == 0, vf == last_vs, &fc);
    add_pass_work(&t, &parts, b, 0, lb, scenario_recomputed_layers(s, lb), vb == 0, vb == last_vs, &bc);
    t.duration_s += r.time_s - pairs * (b->layer_fwd.time_s + b->layer_bwd.time_s);
    double ep_alone = pairs * (b->layer_fwd.comm_cls_s[COMM_EP] + b->layer_bwd.comm_cls_s[COMM_EP]);
    t.comm_inside_s += r.comm_exposed_s - ep_alone;
    parts.inside[COMM_EP] += r.comm_exposed_s - ep_alone;
    parts.hidden[COMM_EP] += ep_alone - r.comm_exposed_s;
    t.overlap_cost_s += r.overlap_cost_s;
    if (vf > 0)
        gather_received(&t, &parts, b);
    if (vb < last_vs)
        gather_received(&t, &parts, b);
    int id = workload_add_task_parts(w, &t, &parts);
    if (vf > 0)
        workload_add_dep(w, id, fwd_p2p[vf - 1][fw->micro_batch]);
    if (vb < last_vs)
        workload_add_dep(w, id, bwd_p2p[vb + 1][bk->micro_batch]);
    if (b->p2p_drains_device) { /* the exchange before it drained the device (emit_pass): an exchange
                                     call follows every combined step, as under interleaving */
        int lanes[2], n = drained_lanes(st, lanes);
        depend_on_all(w, id, lanes, n);
    }
    st->last_phase = PIPE_BACKWARD;
    wait_for_send(w, b, st, id);
    forward_after_param_gather(w, st, id, fw->chunk);
    st->last_compute = id;
    if (last_of_chunk)
        st->pending_grad += lb * b->grad_bytes_per_layer;
    emit_send(w, b, st, stage, fw, id, fwd_p2p, bwd_p2p);
    emit_send(w, b, st, stage, bk, id, fwd_p2p, bwd_p2p);
}

/* Can stage's next action run, i.e. has what it waits for on other stages been emitted? */
static int action_ready(const builder *b, int stage, const pipe_action *a, int **fwd_p2p, int **bwd_p2p)
{
    int vs = pipeline_virtual_stage(b->P, stage, a->chunk);
    if (a->phase == PIPE_FORWARD)
        return vs == 0 || fwd_p2p[vs - 1][a->micro_batch] >= 0;
    return vs == b->P * b->V - 1 || bwd_p2p[vs + 1][a->micro_batch] >= 0;
}

/* DeepSpeed's PipelineEngine (parallel.pipeline_engine "deepspeed") runs TrainSchedule
 * (deepspeed/runtime/pipe/schedule.py): 2 (m + P - 1) steps, step t of stage s a forward when t and
 * s have the same parity and a backward otherwise, each on the micro-batch its formulas give (-1:
 * none, the stage idles). Before a forward the stage receives its input and then sends the previous
 * step's input gradient back; before a backward it sends the previous step's output on and then
 * receives its output gradient. Each of these is its own blocking p2p.send / p2p.recv, so a
 * transfer starts when both stages have reached it and both wait until it is through: neighbours
 * meet at every step, and a step lasts as long as the slower of the two passes beside it (a
 * backward beside a forward, in the steady state), where Megatron-LM's batched send/recv pairs
 * let a stage run ahead. Same per-stage order of passes as 1F1B (P - s forwards before the first
 * backward), which workload_build_scheduled checks against the schedule. */
static void deepspeed_step(int P, int m, int s, int t, int *micro_batch, int *fwd)
{
    int mb;
    *fwd = t % 2 == s % 2;
    if (*fwd)
        mb = (t % 2 == 0 ? t / 2 : (t - 1) / 2) - s / 2; /* _even/_odd_step_forward_id */
    else if (t % 2 == 0)
        mb = t / 2 - P + (s + 1) / 2; /* _even_step_backward_id */
    else
        mb = (t - 1) / 2 - P + 1 + s / 2; /* _odd_step_backward_id */
    *micro_batch = mb >= 0 && mb < m ? mb : -1;
}

/* One blocking transfer between neighbouring stages: after what each stage's stream ran last. */
static void deepspeed_transfer(step_workload *w, const builder *b, stage_state *st, int *stream, int from, int to,
                               int micro_batch, int **fwd_p2p, int **bwd_p2p)
{
    int fwd = to > from;
    int p = workload_add_comm(w, b, from, LANE_P2P, fwd ? "pp_send_activation" : "pp_send_gradient", COMM_PP,
                              COLL_SEND_RECV, b->p2p_bytes, workload_pp_pair(b, from, to), stream[from]);
    if (stream[to] >= 0)
        workload_add_dep(w, p, stream[to]);
    w->tasks[p].peer_stage = to;
    w->tasks[p].micro_batch = micro_batch;
    w->tasks[p].chunk = 0;
    w->tasks[p].phase = fwd ? PIPE_FORWARD : PIPE_BACKWARD;
    (fwd ? fwd_p2p : bwd_p2p)[from][micro_batch] = p;
    st[from].last_send = p;
    stream[from] = stream[to] = p;
}

/* Frameworks that keep fp32 gradients beside bf16 ones add each backward's into them in a pass of
 * their own, on the compute stream, every micro-batch (builder.fp32_accumulate_bytes: bytes a
 * parameter). DeepSpeed's BF16_Optimizer (builder.bf16_optimizer): after every backward, every
 * stage (the pipeline engine's _exec_backward_pass, or the optimizer's own backward on the last
 * stage and without pipeline parallelism) calls update_hp_grads, which for each parameter casts the
 * bf16 gradient to fp32 and adds it to the fp32 one (deepspeed/runtime/bf16_optimizer.py:
 * hp_grad.add_(lp.grad.to(fp32))): 18 bytes (the cast reads 2 and writes 4, the add reads 4 + 4
 * and writes 4). nanotron's FP32GradientAccumulator, after each micro-batch's loss.backward(),
 * runs fp32_grad.add_(half_param.grad) for every parameter (optim/gradient_accumulator.py,
 * backward and _accumulate_grad; in the DDP sync step its fp32 hook does the same add): 10 bytes
 * (reads 2 + 4, writes 4). Megatron-LM accumulates into its fp32 main_grad inside the
 * weight-gradient GEMM (gradient_accumulation_fusion), at no extra pass. */
static void accumulate_fp32_grads(step_workload *w, const builder *b, stage_state *st, int stage)
{
    sim_task t = workload_task(TASK_COMPUTE, LANE_COMPUTE, stage,
                               b->bf16_optimizer ? "update_hp_grads" : "fp32_grad_accumulate");
    t.duration_s =
        cost_memory_s(&b->cm, OPCLASS_ELEMENTWISE, b->fp32_accumulate_bytes * params_stage_per_gpu(b->s, stage));
    st->last_compute = workload_add_task(w, &t);
}

static int deepspeed_schedule(step_workload *w, const builder *b, const pipeline_schedule *sched, stage_state *st,
                              int **fwd_p2p, int **bwd_p2p, config_error *err)
{
    int P = b->P, m = b->m, rc = 0;
    int *mb = malloc((size_t)P * sizeof(int)), *fwd = malloc((size_t)P * sizeof(int));
    int *prev = malloc((size_t)P * sizeof(int)), *stream = malloc((size_t)P * sizeof(int));
    for (int p = 0; p < P; p++)
        prev[p] = stream[p] = -1;
    for (int t = 0; t < 2 * (m + P - 1) && rc == 0; t++) {
        for (int p = 0; p < P; p++)
            deepspeed_step(P, m, p, t, &mb[p], &fwd[p]);
        /* the step's transfers: outputs forward first, then input gradients back (both stages
         * of a pair list them in that order) */
        for (int p = 0; p + 1 < P && rc == 0; p++)
            if (!fwd[p] && prev[p] >= 0) {
                if (!fwd[p + 1] || mb[p + 1] != prev[p])
                    rc = -1;
                else
                    deepspeed_transfer(w, b, st, stream, p, p + 1, prev[p], fwd_p2p, bwd_p2p);
            }
        for (int p = 1; p < P && rc == 0; p++)
            if (fwd[p] && prev[p] >= 0) {
                if (fwd[p - 1] || mb[p - 1] != prev[p])
                    rc = -1;
                else
                    deepspeed_transfer(w, b, st, stream, p, p - 1, prev[p], fwd_p2p, bwd_p2p);
            }
        for (int p = 0; p < P && rc == 0; p++) {
            if (mb[p] >= 0) {
                const pipe_action *a = st[p].next < sched->count[p] ? &sched->actions[p][st[p].next] : NULL;
                if (!a || a->micro_batch != mb[p] || a->chunk != 0 || (a->phase == PIPE_FORWARD) != fwd[p]) {
                    rc = -1;
                    break;
                }
                emit_pass(w, b, &st[p], p, a, fwd_p2p, bwd_p2p, 0);
                if (!fwd[p] && b->fp32_accumulate_bytes > 0)
                    accumulate_fp32_grads(w, b, &st[p], p);
                stream[p] = st[p].last_compute;
                if (++st[p].next == sched->count[p])
                    workload_emit_grad_flush(w, b, &st[p], p);
            }
            prev[p] = mb[p];
        }
    }
    for (int p = 0; p < P && rc == 0; p++)
        if (st[p].next != sched->count[p])
            rc = -1;
    if (rc != 0)
        snprintf(err->msg, sizeof err->msg, "internal error: DeepSpeed's TrainSchedule and the 1f1b schedule "
                                            "disagree on %d stages, %d micro-batches", P, m);
    free(mb);
    free(fwd);
    free(prev);
    free(stream);
    return rc;
}

int workload_build(const scenario_config *s, step_workload *w, config_error *err)
{
    memset(w, 0, sizeof *w);
    pipeline_schedule sched;
    if (scenario_schedule(s, &sched, err) != 0)
        return -1;
    int rc = workload_build_scheduled(s, &sched, w, err);
    pipeline_schedule_free(&sched);
    return rc;
}

int workload_build_scheduled(const scenario_config *s, const pipeline_schedule *schedule, step_workload *w,
                             config_error *err)
{
    memset(w, 0, sizeof *w);
    builder b;
    if (workload_builder_init(&b, s, err) != 0) {
        free(b.layers);
        return -1;
    }
    w->stages = b.P;
    w->overlap_slowdown = b.overlap_slowdown;
    int nvs = b.P * b.V;
    int **fwd_p2p = calloc((size_t)nvs, sizeof *fwd_p2p), **bwd_p2p = calloc((size_t)nvs, sizeof *bwd_p2p);
    stage_state *st = calloc((size_t)b.P, sizeof *st);
    for (int v = 0; v < nvs; v++) {
        fwd_p2p[v] = malloc((size_t)b.m * sizeof(int));
        bwd_p2p[v] = malloc((size_t)b.m * sizeof(int));
        for (int i = 0; i < b.m; i++)
            fwd_p2p[v][i] = bwd_p2p[v][i] = -1;
    }
    for (int p = 0; p < b.P; p++) {
        st[p].last_compute = st[p].last_comm = st[p].last_comm_lane = st[p].last_send = st[p].z3_epilogue = -1;
        st[p].last_host_lane = st[p].last_phase = st[p].pair_input = -1;
        int first_backward = 0; /* the stage's forwards before its first backward */
        while (first_backward < schedule->count[p] && schedule->actions[p][first_backward].phase == PIPE_FORWARD)
            first_backward++;
        st[p].all_warmup = first_backward == b.m * b.V;
        st[p].backwards_left = calloc((size_t)b.V, sizeof(int));
        st[p].gather_first = malloc((size_t)b.V * sizeof(int));
        st[p].gather_last = malloc((size_t)b.V * sizeof(int));
        st[p].forwards_done = calloc((size_t)b.V, sizeof(int));
        st[p].z3_held = calloc((size_t)b.V, sizeof(int));
        for (int c = 0; c < b.V; c++) {
            st[p].backwards_left[c] = b.m;
            st[p].gather_first[c] = st[p].gather_last[c] = -1;
        }
        workload_emit_param_gathers(w, &b, &st[p], p);
    }

    /* Run the schedule: repeatedly advance every stage whose next action has its inputs. */
    int remaining = 0, rc = 0, unpaired = 0; /* unpaired: a round without progress lets a pair's
                                                backward go alone */
    if (s->parallel.pipeline_engine == PIPELINE_ENGINE_DEEPSPEED && b.P > 1)
        rc = deepspeed_schedule(w, &b, schedule, st, fwd_p2p, bwd_p2p, err);
    else
        for (int p = 0; p < b.P; p++)
            remaining += schedule->count[p];
    while (rc == 0 && remaining > 0) {
        int progressed = 0;
        for (int p = 0; p < b.P; p++) {
            while (st[p].next < schedule->count[p] &&
                   action_ready(&b, p, &schedule->actions[p][st[p].next], fwd_p2p, bwd_p2p)) {
                const pipe_action *a = &schedule->actions[p][st[p].next];
                const pipe_action *nx = st[p].next + 1 < schedule->count[p] ? a + 1 : NULL;
                /* combined 1F1B: a backward and the next forward as one pass */
                int pair = s->parallel.overlap_moe_a2a && a->phase == PIPE_BACKWARD && nx &&
                           nx->phase == PIPE_FORWARD && !backward_splits(&b, &st[p], a);
                if (pair && !action_ready(&b, p, nx, fwd_p2p, bwd_p2p) && !unpaired)
                    break; /* the pair waits for the forward's input */
                /* Megatron-LM's interleaved schedule with synchronising transfers: the exchange before
                 * a steady-state forward also received the gradient of the backward after it, and
                 * waited for both (send_forward_backward_recv_forward_backward). The combined 1F1B
                 * path (overlap_moe_a2a) pairs its passes its own way (combined_1f1b.py), which is
                 * not read here: it drains at each combined step only (emit_combined). */
                int both = !s->parallel.overlap_moe_a2a && b.p2p_drains_device && b.V > 1 && !st[p].all_warmup &&
                           a->phase == PIPE_FORWARD && nx && nx->phase == PIPE_BACKWARD;
                if (both && !action_ready(&b, p, nx, fwd_p2p, bwd_p2p))
                    break;
                if (both) {
                    int vb = pipeline_virtual_stage(b.P, p, nx->chunk);
                    st[p].pair_input = vb < b.P * b.V - 1 ? bwd_p2p[vb + 1][nx->micro_batch] : -1;
                }
                if (pair && action_ready(&b, p, nx, fwd_p2p, bwd_p2p)) {
                    emit_combined(w, &b, &st[p], p, a, nx, fwd_p2p, bwd_p2p);
                    st[p].next += 2;
                    remaining -= 2;
                } else {
                    emit_pass(w, &b, &st[p], p, a, fwd_p2p, bwd_p2p, 1);
                    /* after the pass and its send (nanotron's gradient to the stage before goes out
                     * inside its backward; DeepSpeed's pipelines take the other path) */
                    if (a->phase == PIPE_BACKWARD && b.fp32_accumulate_bytes > 0)
                        accumulate_fp32_grads(w, &b, &st[p], p);
                    st[p].next++;
                    remaining--;
                }
                progressed = 1;
                unpaired = 0;
                if (st[p].next == schedule->count[p])
                    workload_emit_grad_flush(w, &b, &st[p], p);
            }
        }
        if (!progressed && s->parallel.overlap_moe_a2a && !unpaired) {
            unpaired = 1; /* every stage waits on a pair: the next round runs a backward alone */
            continue;
        }
        if (!progressed) {
            snprintf(err->msg, sizeof err->msg, "internal error: the %s schedule deadlocks",
                     pipeline_kind_name(s->parallel.schedule));
            rc = -1;
            break;
        }
    }

    if (rc == 0) { /* every stage's gradients are in flight: the step's end */
        workload_emit_step_sync(w, &b, st);
        for (int p = 0; p < b.P; p++)
            workload_emit_optimizer(w, &b, &st[p], p);
    }
    for (int v = 0; v < nvs; v++) {
        free(fwd_p2p[v]);
        free(bwd_p2p[v]);
    }
    for (int p = 0; p < b.P; p++) {
        free(st[p].backwards_left);
        free(st[p].gather_first);
        free(st[p].gather_last);
        free(st[p].forwards_done);
        free(st[p].z3_held);
    }
    free(fwd_p2p);
    free(bwd_p2p);
    free(st);
    free(b.layers);
    if (rc != 0)
        workload_free(w);
    return rc;
}
