/* The costs of one step's pieces, computed once per build: the communication groups of the
 * rank grid, each layer pass's compute and folded communication (forward, backward,
 * recomputation), the embedding, LM head and loss, and the builder's sizes (buckets, pipeline
 * transfers, gradients). workload.c emits the graph from them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static double comm_op_time(const builder *b, const layer_op *op)
{
    coll_group g = b->tp;
    if (op->comm == COMM_CP) g = b->cp;
    else if (op->comm == COMM_EP) g = b->ep;
    const scenario_config *s = b->s;
    if (op->comm == COMM_EP && op->coll == COLL_ALL_TO_ALL && s->parallel.moe_flex_dispatcher) {
        /* DeepEP / HybridEP (collective.h): the groups a token draws from, its experts without
         * group-limited routing */
        double k = s->model.moe_router_topk > 0 ? s->model.moe_router_topk : 1, E = (double)s->model.num_experts;
        int grouped = s->model.moe_router_num_groups > 0;
        return collective_moe_flex_time(&s->platform, &s->calibration, op->bytes, g, E, k,
                                        grouped ? (double)s->model.moe_router_num_groups : E,
                                        grouped ? s->model.moe_router_group_topk : k);
    }
    return workload_collective_s(b, op->coll, op->bytes, g);
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
        op->group <= 1 || op->plain_nccl)
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
            const layer_op *gemm = tp_overlap_partner(b, ops, n, i);
            /* userbuffers moves the chunks itself, not through NCCL (collective.h) */
            double t = gemm ? collective_userbuffers_time(&b->s->platform, &b->s->calibration, op->coll, op->bytes,
                                                          b->tp)
                            : comm_op_time(b, op);
            double steps = op->steps > 0 ? op->steps : 1, total = steps * t;
            double exposed = op->overlaps_attention ? steps * fmax(0, t - attention_s / (steps + 1)) : total;
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

/* Combined 1F1B's nodes of one layer's pass (moe_overlap.h): its op list cut at the two EP
 * all-to-alls. A forward is attention (to the dispatch), dispatch, experts, combine, then the
 * compute after it (the unpermute, to the layer's end); a backward is that compute's gradient,
 * combine, experts, dispatch, attention. A layer without two EP all-to-alls is all attention. */
static void moe_parts(const builder *b, const layer_op *ops, int n, int backward, moe_layer_parts *out)
{
    int cut[2], k = 0;
    for (int i = 0; i < n && k < 2; i++)
        if (ops[i].kind == OPK_COMM && ops[i].comm == COMM_EP)
            cut[k++] = i;
    memset(out, 0, sizeof *out);
    if (k < 2) {
        out->attn = sum_ops(b, ops, n, 0).time_s;
        return;
    }
    double head = sum_ops(b, ops, cut[0], 0).time_s, first = sum_ops(b, ops + cut[0], 1, 0).time_s;
    double mid = sum_ops(b, ops + cut[0] + 1, cut[1] - cut[0] - 1, 0).time_s;
    double second = sum_ops(b, ops + cut[1], 1, 0).time_s;
    double tail = sum_ops(b, ops + cut[1] + 1, n - cut[1] - 1, 0).time_s;
    out->experts = mid;
    if (!backward) {
        out->attn = head;
        out->dispatch = first;
        out->combine = second;
        out->combine_compute = tail;
    } else {
        out->combine_compute = head;
        out->combine = first;
        out->dispatch = second;
        out->attn = tail;
    }
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
    sh->head_dim = scenario_head_dim(s);
    sh->etp = scenario_expert_tp(s);
    sh->ffn_hidden = s->model.ffn_hidden_size;
    sh->swiglu = s->model.swiglu;
    sh->swiglu_unfused = params_swiglu_unfused(s);
    sh->rope = s->model.rope;
    sh->rmsnorm = s->model.rmsnorm;
    sh->num_experts = s->model.num_experts;
    sh->moe_topk = s->model.moe_router_topk;
    sh->tp = s->parallel.tp;
    sh->cp = s->parallel.cp;
    sh->ep = s->parallel.ep;
    sh->sequence_parallel = s->parallel.sequence_parallel;
    sh->attention = s->model.attention;
    sh->cp_comm = s->parallel.cp_comm;
    sh->moe_load = workload_moe_load(s);
    sh->act_bytes = scenario_activation_bytes(s);
    /* FP8 GEMMs quantize their operands (engine/oplist.c, fp8_quantize): 2 bytes read, 2 written
     * an element; current scaling (tensorwise) reads it once more for its amax, in four launches a
     * tensor (Float8CurrentScalingQuantizer::quantize_impl: zero the amax, compute it, compute the
     * scale, cast); delayed scaling casts with the scale it has, one launch, and TE fuses a grouped
     * GEMM's per-expert casts into one (split_quantize's multi-tensor cast, delayed scaling only). */
    if (s->training.precision == PREC_FP8) {
        sh->fp8_quantize_bytes = s->training.fp8_recipe == FP8_RECIPE_TENSORWISE ? 6 : 4;
        sh->fp8_quantize_kernels = s->training.fp8_recipe == FP8_RECIPE_TENSORWISE ? 4 : 1;
        sh->fp8_multi_cast = s->training.fp8_recipe == FP8_RECIPE_DELAYED;
    }
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

int workload_builder_init(builder *b, const scenario_config *s, config_error *err)
{
    memset(b, 0, sizeof *b);
    b->s = s;
    /* DeepSpeed trains bf16 through its BF16_Optimizer, which keeps fp32 gradients and shards its
     * optimizer states itself (ZeRO stage 0 in DeepSpeed's config, "it implements its own zero stage
     * 1", as BLOOM's launch script says), whenever it runs a pipeline (the pipeline engine's
     * _exec_reduce_grads takes bf16 with ZeRO below stage 2 only through it); without a pipeline,
     * ZeRO-1 and up are DeepSpeed's ZeRO optimizers, which accumulate in bf16. */
    b->bf16_optimizer = params_deepspeed_bf16_optimizer(s);
    b->p2p_drains_device = params_p2p_drains_device(s);
    b->fp32_accumulate_bytes = b->bf16_optimizer ? 18 : s->parallel.framework == FRAMEWORK_NANOTRON ? 10 : 0;
    workload_collective_memo_reset();
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
    /* expert parallelism on Megatron-Core's expert grid (parallel_state.py since core_v0.10.0:
     * the stage's TP x CP x DP ranks ordered expert TP innermost, then EP): consecutive groups of
     * etp ranks, as dtrain places them too (engine/gpt_moe_ep.c) */
    b->ep = coll_group_of(s->parallel.ep, scenario_expert_tp(s), b->gpn);
    /* the flex dispatcher's reach (collective.h, moe_reach) is modelled where the expert groups
     * fit in whole nodes and GPUs of the EP group or span whole ones */
    long long groups = s->model.moe_router_num_groups;
    if (s->parallel.moe_flex_dispatcher && groups > 0 &&
        (!moe_reach_modelled(b->ep.nodes, (double)groups) || !moe_reach_modelled(b->ep.ranks, (double)groups))) {
        snprintf(err->msg, sizeof err->msg, "scenario.model.moe_router_num_groups: %lld expert groups over the EP "
                 "group's %d nodes and %d GPUs: the flex dispatcher is modelled where the groups are a multiple of "
                 "each or divide it", groups, b->ep.nodes, b->ep.ranks);
        return -1;
    }

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
    moe_parts(b, ops, n, 0, &b->moe_fwd);
    if (s->training.recompute == RECOMPUTE_FULL) {
        b->layer_recompute = b->layer_fwd;
        /* --distribute-saved-activations: the kept input, split over TP in the forward, is
         * all-gathered before its checkpoint's re-run, on the compute stream (Megatron-LM's
         * CheckpointFunction.backward, gather_split_1d_tensor): a gather a checkpoint, i.e. one
         * recomputed layer (block), or a group of recompute_num_layers layers of a chunk (uniform:
         * ceil(layers / n) a chunk, as memory.c keeps their inputs), spread over the layers: the
         * model's checkpoints over its layers, exact for every chunk when the chunks are equal.
         * Megatron-LM turns it off under SP, whose inputs are split already. */
        if (s->training.distribute_saved_activations && !s->parallel.sequence_parallel && b->tp.ranks > 1) {
            double input = (double)sh.micro_batch * (double)sh.seq_length / sh.cp * (double)sh.hidden * sh.act_bytes;
            double per_layer = 1;
            if (!s->training.recompute_block && s->training.recompute_num_layers > 1) {
                long long n = s->training.recompute_num_layers, checkpoints = 0, layers = 0;
                for (int v = 0; v < b->P * b->V; v++) {
                    checkpoints += (b->layers[v] + n - 1) / n;
                    layers += b->layers[v];
                }
                per_layer = layers > 0 ? (double)checkpoints / (double)layers : 1;
            }
            double g = per_layer * collective_time(&s->platform, &s->calibration, COLL_ALL_GATHER, input, b->tp).time_s;
            b->layer_recompute.time_s += g;
            b->layer_recompute.comm_s += g;
            b->layer_recompute.comm_cls_s[COMM_TP] += g;
            b->layer_recompute.tp_ring_bytes += per_layer * (b->tp.ranks - 1) / (double)b->tp.ranks * input;
        }
    } else if (s->training.recompute == RECOMPUTE_SELECTIVE)
        b->layer_recompute = sum_ops(b, ops, n, 1);
    n = layer_ops_backward(&sh, ops);
    b->layer_bwd = sum_ops(b, ops, n, 0);
    moe_parts(b, ops, n, 1, &b->moe_bwd);
    head_costs(b, &sh);
    host_issue_of(s, &b->host);

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
        double per_gb = cost_memory_bytes_s(&b->cm, OPCLASS_ELEMENTWISE, 2e9 * (natural + grad_elem));
        b->compress_s_per_byte = per_gb / 1e9 / grad_elem;
    }
    b->grad_elem = grad_elem;
    b->grad_bytes_per_layer = (lp.dense + lp.expert) * grad_elem;
    zero3_plan_of(s, &b->z3);
    workload_bucket_bytes(s, &b->z3, grad_elem, &b->call_bytes, &b->bucket_bytes);
    compression_init(&b->comp, s);
    return 0;
}

void workload_bucket_bytes(const scenario_config *s, const zero3_plan *z3, double grad_elem, double *call,
                           double *bucket)
{
    *call = params_dp_bucket_bytes(s);
    if (z3->active) /* DeepSpeed stage 3 reduces in reduce_bucket_size elements */
        *call = z3->reduce_bucket_params * grad_elem;
    /* A call reduces whole elements (Megatron-LM's --ddp-bucket-size counts them; no framework
     * splits one): a bucket_size_mb below one element's bytes is one element. This keeps every
     * count of calls finite for the smallest valid sizes, and no real size is that small. */
    if (*call < grad_elem)
        *call = grad_elem;
    *bucket = s->run.flow_bucket_mb > *call / 1048576.0 ? s->run.flow_bucket_mb * 1048576.0 : *call;
    /* ZeRO-3: no coarser buckets for the flow replay; its reductions keep their places between
     * the layers' gathers (already one task per bucket per layer and micro-batch at most) */
    if (z3->active)
        *bucket = *call;
}
