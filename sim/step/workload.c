/* Builds the task graph of one training step (see workload.h) from the pipeline schedule,
 * the layer op list and the cost model.
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
#include "params.h"
#include "workload_internal.h"


/* The group of one dimension of the rank grid (engine/rank_grid.h): its size, the nodes it spans
 * at its stride. */
static coll_group group_for(const builder *b, const rank_grid *g, grid_dim d, int size)
{
    return coll_group_of(size, (int)rank_grid_stride(g, d), b->gpn);
}

/* The gradient group: DP replicas times the CP ranks of each. Its node count is counted from
 * the member ranks, which ascend in (replica, cp) order: with TP filling a node the CP ranks sit
 * on different nodes, and scaling the DP group's members per node by cp (as if CP ranks shared a
 * node) would give each node cp NICs it lacks. */
static coll_group gradient_group(const builder *b, const rank_grid *grid)
{
    int dp = grid->size[GRID_DP], cp = grid->size[GRID_CP];
    coll_group g = {dp * cp, 1, dp * cp};
    if (g.ranks <= 1 || b->gpn <= 0)
        return g;
    long last = -1;
    int nodes = 0;
    for (int d = 0; d < dp; d++)
        for (int c = 0; c < cp; c++) {
            long node = rank_grid_rank(grid, 0, c, 0, d) / b->gpn;
            if (node != last) {
                nodes++;
                last = node;
            }
        }
    g.nodes = nodes;
    g.per_node = (g.ranks + nodes - 1) / nodes;
    return g;
}

/* The two GPUs of a pipeline transfer between stages a and b (same TP and CP rank, replica 0, as
 * the rank grid places them): on one node, the transfer goes over NVLink. Stages
 * that share a node when TP x CP is smaller than a node are common (TP 1, PP 16 puts eight
 * stages on each node), and only the boundaries between nodes cross the network. */
coll_group workload_pp_pair(const builder *b, int a, int c)
{
    rank_grid grid = scenario_rank_grid(b->s);
    int same = b->gpn > 0 && rank_grid_rank(&grid, 0, 0, a, 0) / b->gpn == rank_grid_rank(&grid, 0, 0, c, 0) / b->gpn;
    coll_group g = {2, same ? 1 : 2, same ? 2 : 1};
    return g;
}

static double comm_op_time(const builder *b, const layer_op *op)
{
    coll_group g = b->tp;
    if (op->comm == COMM_CP) g = b->cp;
    else if (op->comm == COMM_EP) g = b->ep;
    return collective_time(&b->s->platform, &b->s->calibration, op->coll, op->bytes, g).time_s;
}

/* The ops of core attention (what selective recomputation reruns, and what ring attention's
 * K/V passes overlap). */
static int is_attention_op(const layer_op *op)
{
    static const char *const names[] = {"attn_score", "attn_softmax", "attn_dropout", "attn_value", "attn_fused",
                                        "attention", "cp_ring_kv"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strncmp(op->name, names[i], strlen(names[i])))
            return 1;
    return 0;
}

/* parallel.tp_comm_overlap (Megatron's --tp-comm-overlap, through Transformer Engine's
 * userbuffers): a sequence-parallel all-gather runs in chunks ahead of the GEMM it feeds (the op
 * after it), a reduce-scatter in chunks behind the GEMM that produces it (the op before it); the
 * backward's mirrored pairs alike. Returns that GEMM, or NULL for a collective that stays whole
 * (without SP the all-reduces cannot be split from their GEMMs). */
static const layer_op *tp_overlap_partner(const builder *b, const layer_op *ops, int n, int i)
{
    const layer_op *op = &ops[i];
    if (!b->s->parallel.tp_comm_overlap || !b->s->parallel.sequence_parallel || op->comm != COMM_TP ||
        op->group <= 1)
        return NULL;
    int j = op->coll == COLL_ALL_GATHER ? i + 1 : op->coll == COLL_REDUCE_SCATTER ? i - 1 : -1;
    return j >= 0 && j < n && ops[j].kind == OPK_GEMM ? &ops[j] : NULL;
}

/* Sums an op list into a pass cost. `attention_only` keeps the ops selective recomputation
 * reruns (attention scores, softmax, values; with ring attention its K/V passes). A comm op that
 * overlaps the attention (ring attention's passes: steps of them, each beside one of the
 * steps + 1 blocks of the attention) shows only what the block beside it does not cover; the
 * rest is hidden communication. */
static pass_cost sum_ops(const builder *b, const layer_op *ops, int n, int attention_only)
{
    pass_cost c;
    memset(&c, 0, sizeof c);
    double attention_s = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].kind != OPK_COMM && is_attention_op(&ops[i]))
            attention_s += cost_compute_op_s(&b->cm, &ops[i]);
    for (int i = 0; i < n; i++) {
        const layer_op *op = &ops[i];
        if (attention_only && !is_attention_op(op))
            continue;
        if (op->kind == OPK_COMM) {
            double t = comm_op_time(b, op), steps = op->steps > 0 ? op->steps : 1, total = steps * t;
            double exposed = op->overlaps_attention ? steps * fmax(0, t - attention_s / (steps + 1)) : total;
            const layer_op *gemm = tp_overlap_partner(b, ops, n, i);
            if (gemm) { /* chunked beside its GEMM (parallel.tp_comm_overlap) */
                double k = b->chunks, G = cost_compute_op_s(&b->cm, gemm), slow = b->overlap_slowdown;
                double pair = t / k + (k - 1) * fmax(t / k, slow * G / k) + G / k;
                double cost = (k - 1) * (slow - 1) * G / k;
                exposed = pair - G - cost;
                c.time_s += cost;
                c.overlap_cost_s += cost;
            }
            c.time_s += exposed;
            c.comm_s += exposed;
            c.comm_cls_s[op->comm] += exposed;
            c.comm_hidden_cls_s[op->comm] += total - exposed;
            if (op->comm == COMM_TP && op->group > 1) /* what the compute stream waits for: the exposed part */
                c.tp_ring_bytes += (op->coll == COLL_ALL_REDUCE ? 2.0 : 1.0) * (op->group - 1) / op->group * op->bytes *
                                   (total > 0 ? exposed / total : 1);
        } else {
            c.time_s += cost_compute_op_s(&b->cm, op);
            c.flops += op->flops;
        }
    }
    return c;
}

double workload_moe_load(const scenario_config *s)
{
    if (s->model.num_experts <= 0)
        return 1;
    double cap = s->model.moe_expert_capacity_factor;
    if (cap > 0 && s->model.moe_pad_expert_input_to_capacity)
        return cap; /* every expert runs its full capacity, padded */
    double load = s->model.moe_load_imbalance;
    if (load <= 0) {
        /* A balanced router still samples: of the T k token copies routed from each of the ep
         * ranks of an EP group, each rank receives Binomial(T k ep, 1/ep): mean T k, standard
         * deviation sqrt(T k (1 - 1/ep)); the busiest of ep is E[max of ep normals] of them above
         * the mean. A floor: real routers are less even (set moe_load_imbalance from their logs). */
        double ep = s->parallel.ep > 0 ? s->parallel.ep : 1;
        double k = s->model.moe_router_topk > 0 ? s->model.moe_router_topk : 1;
        double cp = s->parallel.cp > 0 ? s->parallel.cp : 1;
        double T = (double)s->training.micro_batch_size * (double)s->model.seq_length / cp;
        load = 1 + sqrt((1 - 1 / ep) / (T * k)) * cost_expected_max_normal(ep);
    }
    return cap > 0 && load > cap ? cap : load; /* beyond its capacity an expert drops tokens */
}

void workload_layer_shape(const scenario_config *s, layer_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    sh->micro_batch = s->training.micro_batch_size;
    sh->seq_length = s->model.seq_length;
    sh->hidden = s->model.hidden_size;
    sh->heads = s->model.num_attention_heads;
    sh->kv_groups = s->model.num_query_groups;
    sh->ffn_hidden = s->model.ffn_hidden_size;
    sh->swiglu = s->model.swiglu;
    sh->num_experts = s->model.num_experts;
    sh->moe_topk = s->model.moe_router_topk;
    sh->tp = s->parallel.tp;
    sh->cp = s->parallel.cp;
    sh->ep = s->parallel.ep;
    sh->sequence_parallel = s->parallel.sequence_parallel;
    sh->attention = s->model.attention;
    sh->cp_comm = s->parallel.cp_comm;
    sh->moe_load = workload_moe_load(s);
    sh->act_bytes = (s->training.precision == PREC_FP32 || s->training.precision == PREC_TF32) ? 4 : 2;
}

/* The loss over this rank's logits, as the framework's code path moves them: bytes per logit
 * element in forward and backward (a = the activation dtype's bytes), and its TP all-reduces of
 * one float per token. Megatron-LM at d98e8a64:
 *  - unfused (default; megatron/core/tensor_parallel/cross_entropy.py): .float() copies the
 *    logits to fp32 (a + 4, nothing under fp32), max reads 4, the in-place subtract 4 + 4, exp
 *    into its own buffer 4 + 4, the sum 4, div_ 4 + 4: 32 + cast; backward mul_ 4 + 4 and the cast
 *    back (4 + a under bf16). All-reduces of the max, the predicted logit and the exp sum: 3.
 *  - native fusion (--cross-entropy-loss-fusion; megatron/core/fusions/fused_cross_entropy.py):
 *    the same steps in three jit-fused kernels: the fp32 copy with its max (a + 4, or 4), subtract,
 *    exp and sum in one pass (4 + 4), div_ (4 + 4); backward reads the softmax and writes bf16
 *    (4 + a). Two all-reduces (the predicted logit and exp sum batched in one).
 *  - te (--cross-entropy-fusion-impl te; dtrain's own kernel): one pass reads the logits
 *    forward (a), backward reads and writes them (2a), two all-reduces; dtrain's profiler counts
 *    its kernel so (engine/gpt.c); Transformer Engine's kernel is read as such a single pass, not
 *    checked against its code. */
static void loss_traffic(const scenario_config *s, double a, double *fwd, double *bwd, int *allreduces)
{
    double cast = a < 4 ? a + 4 : 0;
    if (!s->model.cross_entropy_loss_fusion) {
        *fwd = cast + 32;
        *bwd = 8 + (a < 4 ? 4 + a : 0);
        *allreduces = 3;
    } else if (s->model.cross_entropy_fusion_impl == 0) {
        *fwd = (a < 4 ? a + 4 : 4) + 16;
        *bwd = 4 + a;
        *allreduces = 2;
    } else {
        *fwd = a;
        *bwd = 2 * a;
        *allreduces = 2;
    }
}

/* Embedding and LM head: memory-bound lookups, the vocabulary GEMM and the loss, with the
 * vocab-parallel TP all-reduces of the embedding output, of the loss's per-token sums and of the
 * head's input grad. */
static void head_costs(builder *b, const layer_shape *sh)
{
    const scenario_config *s = b->s;
    double tokens = (double)sh->micro_batch * (double)sh->seq_length / sh->cp;
    double h = (double)sh->hidden, V = (double)s->model.vocab_size, tp = sh->tp;
    double act = tokens * h * sh->act_bytes;
    double tp_ar = collective_time(&s->platform, &s->calibration, COLL_ALL_REDUCE, act, b->tp).time_s;

    b->embed_fwd.time_s = cost_memory_s(&b->cm, OPCLASS_EMBEDDING, 3 * act) + tp_ar;
    b->embed_fwd.comm_s = b->embed_fwd.comm_cls_s[COMM_TP] = tp_ar;
    b->embed_bwd.time_s = cost_memory_s(&b->cm, OPCLASS_EMBEDDING, 3 * tokens * h * 4);

    double logits = tokens * V / tp, loss_fwd, loss_bwd;
    int loss_ars;
    loss_traffic(s, sh->act_bytes, &loss_fwd, &loss_bwd, &loss_ars);
    double loss_ar = tp > 1 ? loss_ars * collective_time(&s->platform, &s->calibration, COLL_ALL_REDUCE, tokens * 4,
                                                         b->tp).time_s : 0;
    b->head_fwd.flops = 2 * tokens * h * V / tp;
    b->head_fwd.time_s = cost_gemm_s(&b->cm, tokens, V / tp, h, 1)
                         + cost_memory_s(&b->cm, OPCLASS_CROSS_ENTROPY, logits * loss_fwd) + loss_ar;
    b->head_fwd.comm_s = b->head_fwd.comm_cls_s[COMM_TP] = loss_ar;
    b->head_bwd.flops = 2 * b->head_fwd.flops;
    b->head_bwd.time_s = cost_gemm_s(&b->cm, tokens, h, V / tp, 1) + cost_gemm_s(&b->cm, V / tp, h, tokens, 1)
                         + cost_memory_s(&b->cm, OPCLASS_CROSS_ENTROPY, logits * loss_bwd) + tp_ar;
    b->head_bwd.comm_s = b->head_bwd.comm_cls_s[COMM_TP] = tp_ar;
}

static int builder_init(builder *b, const scenario_config *s, config_error *err)
{
    memset(b, 0, sizeof *b);
    b->s = s;
    cost_model_init(&b->cm, s);
    b->chunks = s->parallel.tp_comm_overlap_chunks > 0 ? s->parallel.tp_comm_overlap_chunks : 4;
    b->overlap_slowdown = s->calibration.overlap_slowdown >= 1 ? s->calibration.overlap_slowdown : 1;
    b->P = s->parallel.pp;
    b->V = s->parallel.vpp > 0 ? s->parallel.vpp : 1;
    b->m = (int)scenario_micro_batches(s);
    b->gpn = s->platform.node.gpus > 0 ? s->platform.node.gpus : 1;
    rank_grid grid = scenario_rank_grid(s);
    b->tp = group_for(b, &grid, GRID_TP, grid.size[GRID_TP]);
    b->cp = group_for(b, &grid, GRID_CP, grid.size[GRID_CP]);
    b->pp = group_for(b, &grid, GRID_PP, grid.size[GRID_PP]);
    /* Gradients are reduced over DP x CP: the DP replicas, each CP rank's partial sums. */
    b->dp = gradient_group(b, &grid);
    /* expert parallelism spans data-parallel replicas (Megatron-LM's EP within DP) */
    b->ep = group_for(b, &grid, GRID_DP, s->parallel.ep);

    b->layers = calloc((size_t)b->P * b->V, sizeof(int));
    char why[256];
    if (!b->layers || scenario_layer_split(s, b->layers, why, sizeof why) != 0) {
        snprintf(err->msg, sizeof err->msg, "scenario.parallel: %s", b->layers ? why : "out of memory");
        return -1;
    }

    layer_shape sh;
    workload_layer_shape(s, &sh);
    layer_op ops[LAYER_OPS_MAX];
    int n = layer_ops_forward(&sh, ops);
    b->layer_fwd = sum_ops(b, ops, n, 0);
    if (s->training.recompute == RECOMPUTE_FULL)
        b->layer_recompute = b->layer_fwd;
    else if (s->training.recompute == RECOMPUTE_SELECTIVE)
        b->layer_recompute = sum_ops(b, ops, n, 1);
    n = layer_ops_backward(&sh, ops);
    b->layer_bwd = sum_ops(b, ops, n, 0);
    head_costs(b, &sh);

    /* Activations (and their gradients) between stages. With TP each rank sends through its own
     * NIC: its sequence shard with SP; without SP, its 1/tp slice of the activation when
     * scatter_gather_p2p (Megatron's scatter/gather optimisation), else all of it. */
    double tokens = (double)sh.micro_batch * (double)sh.seq_length / sh.cp;
    double activation = tokens * (double)sh.hidden * sh.act_bytes;
    int tp = s->parallel.tp, sliced = tp > 1 && (s->parallel.sequence_parallel || s->parallel.scatter_gather_p2p);
    b->p2p_bytes = sliced ? activation / tp : activation;
    /* Without SP every TP rank needs the whole activation, so scattered slices are gathered over
     * NVLink before the next stage computes; with SP each rank's slice is already its input. */
    if (sliced && !s->parallel.sequence_parallel)
        b->p2p_gather_s = collective_time(&s->platform, &s->calibration, COLL_ALL_GATHER, activation, b->tp).time_s;

    layer_params lp = params_layer_per_gpu(s);
    double natural = (s->training.precision == PREC_FP32 || s->training.precision == PREC_TF32) ? 4 : 2;
    double grad_elem = params_grad_reduce_bytes(s);
    if (grad_elem < natural) {
        /* per reduced element: pack (read natural, write grad_elem bytes), unpack (the reverse) */
        double per_gb = cost_memory_s(&b->cm, OPCLASS_ELEMENTWISE, 2e9 * (natural + grad_elem)) -
                        cost_memory_s(&b->cm, OPCLASS_ELEMENTWISE, 0); /* bandwidth part only */
        b->compress_s_per_byte = per_gb / 1e9 / grad_elem;
    }
    b->grad_elem = grad_elem;
    b->grad_bytes_per_layer = (lp.dense + lp.expert) * grad_elem;
    b->call_bytes = s->parallel.bucket_size_mb > 0 ? s->parallel.bucket_size_mb * 1048576.0 : 40 * 1048576.0;
    zero3_plan_of(s, &b->z3);
    if (b->z3.active) /* DeepSpeed stage 3 reduces in reduce_bucket_size elements */
        b->call_bytes = b->z3.reduce_bucket_params * grad_elem;
    b->bucket_bytes = s->run.flow_bucket_mb > b->call_bytes / 1048576.0 ? s->run.flow_bucket_mb * 1048576.0
                                                                        : b->call_bytes;
    /* ZeRO-3: no coarser buckets for the flow replay; its reductions keep their places between
     * the layers' gathers (already one task per bucket per layer and micro-batch at most) */
    if (b->z3.active)
        b->bucket_bytes = b->call_bytes;
    compression_init(&b->comp, s);
    return 0;
}

int workload_add_comm(step_workload *w, const builder *b, int stage, task_lane lane, const char *name,
                      comm_class cls, coll_kind coll, double bytes, coll_group g, int dep)
{
    sim_task t = workload_task(lane == LANE_P2P ? TASK_P2P : TASK_COLLECTIVE, lane, stage, name);
    t.comm = cls;
    t.coll = coll;
    t.group = g.ranks;
    t.span_nodes = g.nodes;
    t.bytes = bytes;
    t.duration_s = collective_time(&b->s->platform, &b->s->calibration, coll, bytes, g).time_s;
    int id = workload_add_task(w, &t);
    if (dep >= 0)
        workload_add_dep(w, id, dep);
    return id;
}


static void flush_bucket(step_workload *w, const builder *b, stage_state *st, int stage, int dep,
                         int force)
{
    const scenario_config *s = b->s;
    if (s->parallel.dp * s->parallel.cp <= 1) {
        st->pending_grad = 0;
        return;
    }
    coll_kind coll = s->parallel.zero_stage >= 1 ? COLL_REDUCE_SCATTER : COLL_ALL_REDUCE;
    while (st->pending_grad >= b->bucket_bytes || (force && st->pending_grad > 0)) {
        double bytes = fmin(st->pending_grad, b->bucket_bytes);
        if (b->comp.active) { /* compressed: the bucket becomes compress, collective(s), decompress */
            st->last_comm = compression_emit_bucket(w, &b->comp, stage, dep, bytes / b->grad_elem,
                                                    st->pending_embedding, b->dp, (int)ceil(bytes / b->call_bytes));
            st->pending_grad -= bytes;
            continue;
        }
        const char *name = coll == COLL_ALL_REDUCE ? "dp_grad_allreduce" : "dp_grad_reduce_scatter";
        st->last_comm = workload_add_comm(w, b, stage, LANE_COMM, name, COMM_DP, coll, bytes, b->dp, dep);
        w->tasks[st->last_comm].calls = (int)ceil(bytes / b->call_bytes);
        if (b->compress_s_per_byte > 0) /* packing to the narrower type and back, on the comm lane */
            w->tasks[st->last_comm].duration_s += bytes * b->compress_s_per_byte;
        st->pending_grad -= bytes;
    }
}

/* flush_bucket, then (ZeRO-Offload) the reduced gradients' copy to the host (host_offload.h). */
void workload_flush_and_offload(step_workload *w, const builder *b, stage_state *st, int stage, int dep, int force)
{
    double before = st->pending_grad;
    int last_comm = st->last_comm;
    flush_bucket(w, b, st, stage, dep, force);
    double elements = (before - st->pending_grad) / b->grad_elem;
    offload_grads_to_host(w, b->s, stage, elements, st->last_comm != last_comm ? st->last_comm : dep);
}

/* A pass that starts from what the previous stage sent first gathers its TP slices (folded into
 * the pass like TP communication: it runs on the compute stream, over the TP group's NVLink). */
static void gather_received(sim_task *pass, const builder *b)
{
    pass->duration_s += b->p2p_gather_s;
    pass->comm_inside_s += b->p2p_gather_s;
    pass->comm_inside_cls[COMM_TP] += b->p2p_gather_s;
}

/* n times a pass's communication, folded into a compute task by kind (its time is already in
 * the task's duration). */
static void fold_comm(sim_task *t, const pass_cost *c, double n)
{
    t->comm_inside_s += n * c->comm_s;
    t->overlap_cost_s += n * c->overlap_cost_s;
    for (int k = 0; k < COMM_CLASS_COUNT; k++) {
        t->comm_inside_cls[k] += n * c->comm_cls_s[k];
        t->comm_hidden_cls[k] += n * c->comm_hidden_cls_s[k];
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
 * (the live set holds the running unit and d prefetched ones); `count` gathers one after another
 * (the backward's, then again for the recomputed forward). With ZeRO-Infinity the rank's shard
 * first comes in from the host or NVMe (host_offload.h). -1 when ZeRO-3 is off. */
static int zero3_unit_gather(step_workload *w, const builder *b, stage_state *st, int stage, double params, int count)
{
    if (!b->z3.active || params <= 0)
        return -1;
    int d = b->z3.prefetch_layers, u = st->z3_units;
    int dep = u - d - 1 >= 0 ? st->z3_history[(u - d - 1) % Z3_HISTORY] : -1;
    int id = -1;
    for (int c = 0; c < count; c++) {
        int fetch = offload_param_fetch(w, b->s, stage, params, dep);
        int g = -1;
        if (b->dp.ranks > 1) {
            g = workload_add_comm(w, b, stage, LANE_COMM, "zero3_param_allgather", COMM_ZERO, COLL_ALL_GATHER,
                                  params * b->cm.act_bytes, b->dp, dep);
            if (fetch >= 0)
                workload_add_dep(w, g, fetch);
        }
        id = g >= 0 ? g : fetch;
        if (id >= 0)
            dep = id;
    }
    return id;
}

/* One pass (forward or backward of one micro-batch through one model chunk) of a stage: its
 * compute as one task, or per layer where something happens between layers (ZeRO-3's gathers
 * and gradient reduce-scatters; DP buckets of the chunk's last backward when they overlap), then
 * the pipeline send. */
static int emit_pass(step_workload *w, const builder *b, stage_state *st, int stage,
                     const pipe_action *a, int **fwd_p2p, int **bwd_p2p)
{
    const scenario_config *s = b->s;
    int P = b->P, V = b->V;
    int vs = pipeline_virtual_stage(P, stage, a->chunk);
    int last_vs = P * V - 1;
    int L = b->layers[vs];
    int fwd = a->phase == PIPE_FORWARD, z3 = b->z3.active;
    int last_of_chunk = !fwd && --st->backwards_left[a->chunk] == 0;
    int dpcp = s->parallel.dp * s->parallel.cp;
    /* The chunk's last backward produces its final gradients layer by layer: emitted per layer
     * when DP buckets go out as they fill, or (one GPU with ZeRO-Offload) stream to the host. */
    int split = z3 || (last_of_chunk && ((s->parallel.overlap_grad_reduce && dpcp > 1) ||
                                         (dpcp <= 1 && s->parallel.offload_optimizer != OFFLOAD_NONE)));
    int pieces = split ? (L > 0 ? L : 1) : 1;
    int first_dep = fwd ? (vs > 0 ? fwd_p2p[vs - 1][a->micro_batch] : -1)
                        : (vs < last_vs ? bwd_p2p[vs + 1][a->micro_batch] : -1);
    /* parameters outside the layers: the embedding where the model starts, the final norm and
     * the LM head (a tied one re-gathers the embedding's table) where it ends */
    double embed_params = vs == 0 ? params_embedding_per_gpu(s) : 0;
    double h = (double)s->model.hidden_size;
    double head_params = vs == last_vs ? (h < s->parallel.stage3_param_persistence_threshold ? 0 : 2 * h) +
                                             (double)s->model.vocab_size * h / s->parallel.tp
                                       : 0;
    double head_grads = vs == last_vs ? params_stage_outside_layers_per_gpu(s, P - 1) - (P == 1 ? embed_params : 0) : 0;
    int id = -1, reduce_after = -1;
    for (int piece = 0; piece < pieces; piece++) {
        int first = piece == 0, last = piece == pieces - 1;
        int nl = split ? (L > 0 ? 1 : 0) : L;
        /* a forward meets the embedding first and the head last; a backward the other way */
        int with_embed = vs == 0 && (fwd ? first : last), with_head = vs == last_vs && (fwd ? last : first);
        double unit = nl * b->z3.layer_params + (with_embed ? embed_params : 0) + (with_head ? head_params : 0);
        int gather = zero3_unit_gather(w, b, st, stage, unit, fwd ? b->z3.gathers_forward : b->z3.gathers_backward);
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
        if (fwd) {
            t.duration_s = nl * b->layer_fwd.time_s;
            fold_comm(&t, &b->layer_fwd, nl);
            t.tp_ring_bytes = nl * b->layer_fwd.tp_ring_bytes;
            t.flops = nl * b->layer_fwd.flops;
            if (with_embed) {
                t.duration_s += b->embed_fwd.time_s;
                fold_comm(&t, &b->embed_fwd, 1);
            }
            if (with_head) {
                t.duration_s += b->head_fwd.time_s;
                fold_comm(&t, &b->head_fwd, 1);
                t.flops += b->head_fwd.flops;
            }
        } else {
            t.duration_s = nl * (b->layer_bwd.time_s + b->layer_recompute.time_s);
            fold_comm(&t, &b->layer_bwd, nl);
            fold_comm(&t, &b->layer_recompute, nl);
            t.tp_ring_bytes = nl * (b->layer_bwd.tp_ring_bytes + b->layer_recompute.tp_ring_bytes);
            t.flops = nl * (b->layer_bwd.flops + b->layer_recompute.flops);
            if (with_head) {
                t.duration_s += b->head_bwd.time_s;
                fold_comm(&t, &b->head_bwd, 1);
                t.flops += b->head_bwd.flops;
            }
            if (with_embed)
                t.duration_s += b->embed_bwd.time_s;
        }
        if (first && (fwd ? vs > 0 : vs < last_vs))
            gather_received(&t, b);
        id = workload_add_task(w, &t);
        if (first && first_dep >= 0)
            workload_add_dep(w, id, first_dep);
        if (first)
            wait_for_send(w, b, st, id);
        if (first && st->z3_epilogue >= 0)
            workload_add_dep(w, id, st->z3_epilogue);
        if (first && fwd && st->forwards_done[a->chunk] < 2 && st->gather_first[a->chunk] >= 0)
            workload_add_dep(w, id, st->forwards_done[a->chunk] == 0 ? st->gather_first[a->chunk]
                                                                     : st->gather_last[a->chunk]);
        if (first && fwd)
            st->forwards_done[a->chunk]++;
        if (first)
            st->z3_epilogue = -1;
        if (gather >= 0)
            workload_add_dep(w, id, gather);
        st->last_compute = id;
        if (z3)
            st->z3_history[st->z3_units++ % Z3_HISTORY] = id;
        if (!fwd && z3) { /* every micro-batch's gradients, reduce-scattered as buckets fill */
            st->pending_grad += (nl * b->grad_bytes_per_layer) +
                                ((with_embed ? embed_params : 0) + (with_head ? head_grads : 0)) * b->grad_elem;
            if (last) { /* DeepSpeed's backward epilogue waits for the reduce stream
                           (independent_gradient_partition_epilogue): the stage's next pass too */
                workload_flush_and_offload(w, b, st, stage, id, 1);
                st->z3_epilogue = st->last_comm;
            } else {
                reduce_after = id;
            }
        } else if (!fwd && split) {
            st->pending_grad += nl * b->grad_bytes_per_layer;
            workload_flush_and_offload(w, b, st, stage, id, 0);
        }
    }
    if (last_of_chunk && !split)
        st->pending_grad += L * b->grad_bytes_per_layer;

    int to = fwd ? vs + 1 : vs - 1;
    if (to >= 0 && to <= last_vs) {
        coll_group g = workload_pp_pair(b, stage, to % P);
        int p = workload_add_comm(w, b, stage, LANE_P2P, fwd ? "pp_send_activation" : "pp_send_gradient", COMM_PP,
                                  COLL_SEND_RECV, b->p2p_bytes, g, id);
        w->tasks[p].peer_stage = to % P;
        w->tasks[p].micro_batch = a->micro_batch;
        w->tasks[p].chunk = a->chunk;
        w->tasks[p].phase = a->phase;
        (fwd ? fwd_p2p : bwd_p2p)[vs][a->micro_batch] = p;
        st->last_send = p;
    }
    return 0;
}

/* Can stage's next action run, i.e. has what it waits for on other stages been emitted? */
static int action_ready(const builder *b, int stage, const pipe_action *a, int **fwd_p2p, int **bwd_p2p)
{
    int vs = pipeline_virtual_stage(b->P, stage, a->chunk);
    if (a->phase == PIPE_FORWARD)
        return vs == 0 || fwd_p2p[vs - 1][a->micro_batch] >= 0;
    return vs == b->P * b->V - 1 || bwd_p2p[vs + 1][a->micro_batch] >= 0;
}

int workload_build(const scenario_config *s, step_workload *w, config_error *err)
{
    memset(w, 0, sizeof *w);
    builder b;
    if (builder_init(&b, s, err) != 0) {
        free(b.layers);
        return -1;
    }
    pipeline_schedule sched;
    char why[256];
    if (pipeline_schedule_build(&sched, s->parallel.schedule, b.P, b.m, b.V, why, sizeof why) != 0) {
        snprintf(err->msg, sizeof err->msg, "scenario.parallel.schedule: %s", why);
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
        st[p].last_compute = st[p].last_comm = st[p].last_send = st[p].z3_epilogue = -1;
        st[p].backwards_left = calloc((size_t)b.V, sizeof(int));
        st[p].gather_first = malloc((size_t)b.V * sizeof(int));
        st[p].gather_last = malloc((size_t)b.V * sizeof(int));
        st[p].forwards_done = calloc((size_t)b.V, sizeof(int));
        for (int c = 0; c < b.V; c++) {
            st[p].backwards_left[c] = b.m;
            st[p].gather_first[c] = st[p].gather_last[c] = -1;
        }
        workload_emit_param_gathers(w, &b, &st[p], p);
    }

    /* Run the schedule: repeatedly advance every stage whose next action has its inputs. */
    int remaining = 0;
    for (int p = 0; p < b.P; p++)
        remaining += sched.count[p];
    int rc = 0;
    while (remaining > 0) {
        int progressed = 0;
        for (int p = 0; p < b.P; p++) {
            while (st[p].next < sched.count[p] &&
                   action_ready(&b, p, &sched.actions[p][st[p].next], fwd_p2p, bwd_p2p)) {
                emit_pass(w, &b, &st[p], p, &sched.actions[p][st[p].next], fwd_p2p, bwd_p2p);
                st[p].next++;
                remaining--;
                progressed = 1;
                if (st[p].next == sched.count[p])
                    workload_emit_grad_flush(w, &b, &st[p], p);
            }
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
    }
    free(fwd_p2p);
    free(bwd_p2p);
    free(st);
    free(b.layers);
    pipeline_schedule_free(&sched);
    if (rc != 0)
        workload_free(w);
    return rc;
}
