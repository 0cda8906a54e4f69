/* The op list of one transformer layer on one GPU for one micro-batch (see oplist.h).
 *
 * Notation: T = b*s/cp tokens on this GPU, h hidden, a heads of width d (h/a unless the model
 * says otherwise), q = a*d the queries' width, kv = g*d the keys' or values' (GQA), f the FFN
 * width, t the TP size, act the bytes of an activation element. With
 * sequence parallelism the norms and dropout/residual ops work on T/t tokens and the TP
 * all-reduces become all-gather (before QKV and FC1) + reduce-scatter (after projection and
 * FC2), as Megatron-LM does. */
#include <stdio.h>
#include <string.h>
#include "oplist.h"

const char *op_class_name(op_class c)
{
    static const char *names[OPCLASS_COUNT] = {"layernorm", "softmax", "gelu", "elementwise", "cross_entropy", "adamw",
                                               "embedding", "rmsnorm", "swiglu", "rope"};
    return (c >= 0 && c < OPCLASS_COUNT) ? names[c] : "?";
}

op_class op_class_fallback(op_class c)
{
    switch (c) {
    case OPCLASS_RMSNORM: return OPCLASS_LAYERNORM;
    case OPCLASS_SWIGLU: return OPCLASS_GELU;
    case OPCLASS_ROPE: return OPCLASS_ELEMENTWISE;
    default: return c;
    }
}

const char *coll_kind_name(coll_kind c)
{
    static const char *names[COLL_KIND_COUNT] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                                 "send_recv", "broadcast"};
    return (c >= 0 && c < COLL_KIND_COUNT) ? names[c] : "?";
}

int coll_kind_from_name(const char *name)
{
    for (int k = 0; k < COLL_KIND_COUNT; k++)
        if (!strcmp(name, coll_kind_name((coll_kind)k)))
            return k;
    return -1;
}

const char *comm_class_name(comm_class c)
{
    static const char *names[COMM_CLASS_COUNT] = {"tp", "pp", "dp", "zero", "cp", "ep"};
    return (c >= 0 && c < COMM_CLASS_COUNT) ? names[c] : "?";
}

typedef struct {
    layer_op *ops;
    int n;
} op_list;

static layer_op *push(op_list *l, const char *name, layer_op_kind kind)
{
    layer_op *op = &l->ops[l->n++];
    memset(op, 0, sizeof *op);
    op->name = name;
    op->kind = kind;
    op->batch = 1;
    op->group = 1;
    return op;
}

/* groups equal GEMMs of m x n x k each (a grouped GEMM: one per local expert), or one. Transformer
 * Engine's GroupedLinear, which Megatron-Core's TEGroupedMLP runs, launches one cuBLASLt GEMM per
 * expert (transformer_engine/pytorch/cpp_extensions/gemm.py general_grouped_gemm, looping
 * nvte_cublas_gemm over its compute streams): one launch each. */
static void grouped_gemm(op_list *l, const char *name, double groups, double m, double n, double k)
{
    layer_op *op = push(l, name, OPK_GEMM);
    op->batch = (long long)groups;
    op->launches = groups > 1 ? (int)groups : 1;
    op->m = (long long)m;
    op->n = (long long)n;
    op->k = (long long)k;
    op->flops = 2.0 * groups * m * n * k;
}

static void gemm(op_list *l, const char *name, double m, double n, double k)
{
    grouped_gemm(l, name, 1, m, n, k);
}

static void batched_gemm(op_list *l, const char *name, double batch, double m, double n, double k)
{
    layer_op *op = push(l, name, OPK_BATCHED_GEMM);
    op->batch = (long long)batch;
    op->m = (long long)m;
    op->n = (long long)n;
    op->k = (long long)k;
    op->flops = 2.0 * batch * m * n * k;
}

static void memory_op(op_list *l, const char *name, op_class cls, double bytes)
{
    layer_op *op = push(l, name, OPK_MEMORY);
    op->cls = cls;
    op->bytes = bytes;
}

static void comm(op_list *l, const char *name, comm_class cc, coll_kind kind, int group, double bytes)
{
    if (group <= 1)
        return;
    layer_op *op = push(l, name, OPK_COMM);
    op->comm = cc;
    op->coll = kind;
    op->group = group;
    op->bytes = bytes;
}

/* TP communication around a column-parallel GEMM's input (f) and after a row-parallel GEMM
 * (g): identity / all-reduce without SP, all-gather / reduce-scatter with SP. */
static void tp_before_column(op_list *l, const layer_shape *sh, const char *name, double full_bytes)
{
    if (sh->sequence_parallel)
        comm(l, name, COMM_TP, COLL_ALL_GATHER, sh->tp, full_bytes);
}

static void tp_after_row(op_list *l, const layer_shape *sh, const char *name, double full_bytes)
{
    comm(l, name, COMM_TP, sh->sequence_parallel ? COLL_REDUCE_SCATTER : COLL_ALL_REDUCE, sh->tp, full_bytes);
}

/* FP8 training through Transformer Engine (Megatron-Core's TE layers): a GEMM takes fp8 operands,
 * so before it runs its activation input (m x k elements) is quantized, and in the backward its
 * output gradient (m x n). TE's quantize reads the bf16 tensor once and writes it twice in fp8,
 * row-wise for the forward and dgrad GEMMs and column-wise (transposed) for wgrad, which Hopper's
 * fp8 tensor cores take in TN layout only (cast_transpose): 2 + 1 + 1 bytes an element. With
 * per-tensor current scaling (Megatron-LM's --fp8-recipe tensorwise) the scale comes from the
 * tensor itself, so an amax kernel reads it once more first (Float8CurrentScalingQuantizer::
 * quantize_impl: nvte_compute_amax, then nvte_quantize): 6 bytes. Delayed scaling takes its scale
 * from the amax history and finds the new amax inside the cast: 4. sh->fp8_quantize_bytes holds
 * which (0: no FP8). Weights are quantized once a step, not per micro-batch: not here. */
static void fp8_quantize(op_list *l, const layer_shape *sh, const char *name, double elements, double groups)
{
    if (sh->fp8_quantize_bytes <= 0)
        return;
    memory_op(l, name, OPCLASS_ELEMENTWISE, elements * sh->fp8_quantize_bytes);
    layer_op *op = &l->ops[l->n - 1];
    op->quantize = 1;
    /* A grouped GEMM's input is split per expert and each part quantized on its own
     * (transformer_engine/pytorch/module/grouped_linear.py, split_quantize), except under delayed
     * scaling, whose casts TE fuses into one multi-tensor launch. */
    int per_tensor = sh->fp8_quantize_kernels > 0 ? sh->fp8_quantize_kernels : 1;
    op->launches = groups > 1 && sh->fp8_multi_cast ? 1 : per_tensor * (int)(groups > 1 ? groups : 1);
}

/* One head's width, and the queries' and the keys' (or values') widths. */
static double head_dim(const layer_shape *sh)
{
    return sh->head_dim > 0 ? sh->head_dim : (double)sh->hidden / (double)sh->heads;
}

static void attention_widths(const layer_shape *sh, double *q, double *kv)
{
    double g = sh->kv_groups > 0 ? (double)sh->kv_groups : (double)sh->heads;
    *q = (double)sh->heads * head_dim(sh);
    *kv = g * head_dim(sh);
}

/* The MLP over `tokens` rows, its FFN split over t ranks, split into `groups` equal GEMMs (a
 * GPU's local experts, each taking tokens / groups rows: the GEMM shape sets its efficiency), or
 * one dense MLP. */
static void mlp(op_list *l, const layer_shape *sh, double tokens, double groups, double t)
{
    double h = (double)sh->hidden, f = (double)sh->ffn_hidden, act = sh->act_bytes;
    fp8_quantize(l, sh, "fc1_quantize", tokens * h, groups);
    grouped_gemm(l, "fc1", groups, tokens / groups, (sh->swiglu ? 2 : 1) * f / t, h);
    if (sh->swiglu && sh->swiglu_unfused) {
        /* SiLU reads the gate and writes its output, the multiply reads that and the up half and
         * writes the product: 5 elements a row element against the fused kernel's 3, two launches
         * (their backward, four: the multiply's two gradients, SiLU's, and the split's cat; its
         * bytes by the convention below, 10, where counting its tensors gives 13) */
        memory_op(l, "swiglu", OPCLASS_SWIGLU, 5.0 * tokens * f / t * act);
        l->ops[l->n - 1].launches = 2;
    } else if (sh->swiglu)
        memory_op(l, "swiglu", OPCLASS_SWIGLU, 3.0 * tokens * f / t * act);
    else
        memory_op(l, "gelu", OPCLASS_GELU, 2.0 * tokens * f / t * act);
    fp8_quantize(l, sh, "fc2_quantize", tokens * f / t, groups);
    grouped_gemm(l, "fc2", groups, tokens / groups, h, f / t);
}

int layer_ops_forward(const layer_shape *sh, layer_op *out)
{
    op_list l = {out, 0};
    double b = (double)sh->micro_batch, s = (double)sh->seq_length, h = (double)sh->hidden;
    double a = (double)sh->heads, d = head_dim(sh), q, kv;
    double t = sh->tp > 0 ? sh->tp : 1, cp = sh->cp > 0 ? sh->cp : 1, act = sh->act_bytes;
    attention_widths(sh, &q, &kv);
    double T = b * s / cp;                          /* tokens on this GPU */
    double Tn = sh->sequence_parallel ? T / t : T;  /* tokens of the norm / dropout ops */
    double full = T * h * act;                      /* one activation tensor of the layer */

    op_class norm = sh->rmsnorm ? OPCLASS_RMSNORM : OPCLASS_LAYERNORM;
    memory_op(&l, "ln1", norm, 2.0 * Tn * h * act);
    tp_before_column(&l, sh, "tp_allgather_attn", full);
    fp8_quantize(&l, sh, "qkv_quantize", T * h, 1);
    gemm(&l, "qkv", T, (q + 2 * kv) / t, h);
    if (sh->rope) /* q and k turned in place (Megatron-Core's fused rope reads and writes them once) */
        memory_op(&l, "rope", OPCLASS_ROPE, 2.0 * T * (q + kv) / t * act);
    int ulysses = cp > 1 && sh->cp_comm == CP_COMM_A2A;
    if (cp > 1 && sh->cp_comm == CP_COMM_ALL_GATHER) /* each CP rank gathers the whole sequence's K and V */
        comm(&l, "cp_allgather_kv", COMM_CP, COLL_ALL_GATHER, sh->cp, 2.0 * T * cp * kv / t * act);
    if (ulysses) /* this rank's tokens of every head out, the whole sequence of 1/cp of the heads in */
        comm(&l, "cp_alltoall_qkv", COMM_CP, COLL_ALL_TO_ALL, sh->cp, T * (q + 2 * kv) / t * act);
    /* Attention: under ring attention and all-gather, the rank's s/cp queries against all s keys
     * for its heads; under Ulysses, all s queries and keys for 1/cp of its heads: the same FLOPs. */
    double heads = b * a / t / (ulysses ? cp : 1), queries = ulysses ? s : s / cp;
    if (sh->attention == ATTENTION_FLASH) {
        layer_op *op = push(&l, "attn_fused", OPK_FUSED_ATTENTION);
        op->m = (long long)queries;  /* queries */
        op->n = (long long)s;        /* keys */
        op->k = (long long)d;        /* head dimension */
        op->batch = (long long)heads;
        op->flops = 4.0 * heads * queries * s * d;
        op->bytes = (T * (q + 2 * kv) / t + T * q / t) * act;
    } else {
        double scores = heads * queries * s;
        batched_gemm(&l, "attn_score", heads, queries, s, d);
        memory_op(&l, "attn_softmax", OPCLASS_SOFTMAX, 2.0 * scores * act);
        memory_op(&l, "attn_dropout", OPCLASS_ELEMENTWISE, 2.0 * scores * act + scores);
        batched_gemm(&l, "attn_value", heads, queries, d, s);
    }
    if (cp > 1 && sh->cp_comm == CP_COMM_P2P) { /* ring attention: a K/V block to the next rank, cp - 1 times */
        comm(&l, "cp_ring_kv", COMM_CP, COLL_SEND_RECV, sh->cp, 2.0 * T * kv / t * act);
        l.ops[l.n - 1].steps = sh->cp - 1;
        l.ops[l.n - 1].overlaps_attention = 1;
    }
    if (ulysses) /* the attention output back to this rank's tokens of every head */
        comm(&l, "cp_alltoall_out", COMM_CP, COLL_ALL_TO_ALL, sh->cp, T * q / t * act);
    fp8_quantize(&l, sh, "attn_proj_quantize", T * q / t, 1);
    gemm(&l, "attn_proj", T, h, q / t);
    tp_after_row(&l, sh, "tp_allreduce_attn", full);
    memory_op(&l, "residual1", OPCLASS_ELEMENTWISE, 3.0 * Tn * h * act + Tn * h);
    memory_op(&l, "ln2", norm, 2.0 * Tn * h * act);
    /* Experts with a TP of their own of 1 (folded) under TP > 1 and SP: each GPU routes its own
     * sequence shard and runs whole experts, so no TP gather or scatter around the MLP; EP then
     * spans the stage's TP x CP x DP ranks (sim/config/layout.c). Experts split over TP under SP
     * (sharded): Megatron-Core's alltoall dispatcher also routes and sends each GPU's own shard,
     * then all-gathers the rows that arrive over the experts' TP group, runs its share of each
     * expert on all of them, and reduce-scatters their outputs back before the combine
     * (token_dispatcher.py, MoEAlltoAllTokenDispatcher: dispatch_postprocess and
     * combine_preprocess; read at core_v0.10.0 and d98e8a64): the network carries each token once
     * a TP group, not once a TP rank; dtrain's layer too (engine/gpt_moe.c). */
    int folded = sh->num_experts > 0 && sh->etp > 0 && sh->etp < sh->tp;
    int sharded = sh->num_experts > 0 && !folded && sh->tp > 1 && sh->sequence_parallel;
    if (!folded && !sharded)
        tp_before_column(&l, sh, "tp_allgather_mlp", full);
    if (sh->num_experts > 0) {
        double topk = sh->moe_topk > 0 ? sh->moe_topk : 1, load = sh->moe_load > 1 ? sh->moe_load : 1;
        double ep = sh->ep > 0 ? sh->ep : 1, local = (double)sh->num_experts / ep;
        double split = folded ? sh->etp : t;
        double routed = folded || sharded ? Tn : T; /* the tokens this GPU routes */
        double sent = routed * topk * load; /* the token copies the busiest EP rank receives */
        double rows = sharded ? sent * t : sent; /* ... and runs (those of its whole TP group) */
        gemm(&l, "router", routed, (double)sh->num_experts, h);
        /* Megatron-Core's token dispatcher gathers each token's topk copies in expert order
         * before the dispatch (moe_utils.permute) and, after the combine, sums each token's
         * copies weighted by its router probabilities (unpermute), as engine/gpt_moe.c does:
         * memory-bound passes that read the routed (or routed x topk) rows once and write the
         * other, the traffic of the fused kernels (--moe-permute-fusion). */
        memory_op(&l, "moe_permute", OPCLASS_ELEMENTWISE, (routed + routed * topk) * h * act);
        /* Each GPU routes routed x topk token copies; the busiest EP rank receives and runs `load`
         * times the mean of them, and every rank waits for it. Its E / ep experts run as one
         * grouped GEMM (--moe-grouped-gemm), each expert's share of the rows a GEMM of its own
         * shape: small experts run small, less efficient GEMMs. */
        comm(&l, "ep_alltoall_dispatch", COMM_EP, COLL_ALL_TO_ALL, sh->ep, sent * h * act);
        if (sharded) {
            comm(&l, "moe_tp_allgather", COMM_TP, COLL_ALL_GATHER, sh->tp, rows * h * act);
            l.ops[l.n - 1].plain_nccl = 1;
        }
        /* Megatron-Core's dispatcher then sorts the rows that arrived (by sending rank, then local
         * expert) into local-expert order, and sorts them back before the combine
         * (dispatch_postprocess / combine_preprocess: sort_chunks_by_idxs, or a transpose copy
         * when padded to capacity; whenever a GPU holds more than one expert): a pass that reads
         * and writes every row. dtrain's layer does it on the host as the rows arrive
         * (engine/gpt_moe_ep.c, regroup), inside its exchanges' timed ops. */
        int sorted = local > 1;
        if (sorted)
            memory_op(&l, "moe_sort_chunks", OPCLASS_ELEMENTWISE, 2.0 * rows * h * act);
        mlp(&l, sh, rows, local, split);
        if (sorted)
            memory_op(&l, "moe_unsort_chunks", OPCLASS_ELEMENTWISE, 2.0 * rows * h * act);
        if (sharded) {
            comm(&l, "moe_tp_reducescatter", COMM_TP, COLL_REDUCE_SCATTER, sh->tp, rows * h * act);
            l.ops[l.n - 1].plain_nccl = 1;
        }
        comm(&l, "ep_alltoall_combine", COMM_EP, COLL_ALL_TO_ALL, sh->ep, sent * h * act);
        memory_op(&l, "moe_unpermute", OPCLASS_ELEMENTWISE, (routed * topk + routed) * h * act);
    } else {
        mlp(&l, sh, T, 1, t);
    }
    if (!folded && !sharded)
        tp_after_row(&l, sh, "tp_allreduce_mlp", full);
    memory_op(&l, "residual2", OPCLASS_ELEMENTWISE, 3.0 * Tn * h * act + Tn * h);
    return l.n;
}

/* Names of backward ops: static storage per forward name. */
static const char *bwd_name(const char *fwd, const char *suffix)
{
    static const char *table[][4] = {
        {"qkv", "qkv_dgrad", "qkv_wgrad", "qkv_grad_quantize"},
        {"attn_proj", "attn_proj_dgrad", "attn_proj_wgrad", "attn_proj_grad_quantize"},
        {"fc1", "fc1_dgrad", "fc1_wgrad", "fc1_grad_quantize"}, {"fc2", "fc2_dgrad", "fc2_wgrad", "fc2_grad_quantize"},
        {"router", "router_dgrad", "router_wgrad", NULL},
        {"attn_score", "attn_score_dgrad", "attn_score_wgrad", NULL},
        {"attn_value", "attn_value_dgrad", "attn_value_wgrad", NULL},
        {"ln1", "ln1_bwd", NULL, NULL}, {"ln2", "ln2_bwd", NULL, NULL}, {"gelu", "gelu_bwd", NULL, NULL},
        {"swiglu", "swiglu_bwd", NULL, NULL}, {"rope", "rope_bwd", NULL, NULL}, {"attn_softmax", "attn_softmax_bwd", NULL, NULL},
        {"attn_dropout", "attn_dropout_bwd", NULL, NULL}, {"residual1", "residual1_bwd", NULL, NULL},
        {"residual2", "residual2_bwd", NULL, NULL}, {"attn_fused", "attn_fused_bwd", NULL, NULL},
        {"moe_permute", "moe_permute_bwd", NULL, NULL}, {"moe_unpermute", "moe_unpermute_bwd", NULL, NULL},
        {"moe_sort_chunks", "moe_sort_chunks_bwd", NULL, NULL}, {"moe_unsort_chunks", "moe_unsort_chunks_bwd", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i][0], fwd)) {
            if (!strcmp(suffix, "quantize") && table[i][3])
                return table[i][3];
            return !strcmp(suffix, "wgrad") && table[i][2] ? table[i][2] : table[i][1];
        }
    return fwd;
}

int layer_ops_backward(const layer_shape *sh, layer_op *out)
{
    layer_op fwd[LAYER_OPS_MAX];
    int nf = layer_ops_forward(sh, fwd);
    op_list l = {out, 0};
    for (int i = nf - 1; i >= 0; i--) {
        const layer_op *f = &fwd[i];
        switch (f->kind) {
        case OPK_GEMM: {
            /* An FP8 GEMM's output gradient is quantized before its dgrad and wgrad (fp8_quantize);
             * the router runs in the training precision. */
            if (strcmp(f->name, "router"))
                fp8_quantize(&l, sh, bwd_name(f->name, "quantize"), (double)f->batch * (double)f->m * (double)f->n,
                             (double)f->batch);
            /* dX[m,k] = dY[m,n] W[n,k]; dW[n,k] = dY^T[n,m] X[m,k]: same FLOPs each. */
            double g = (double)f->batch; /* a grouped GEMM's backward is grouped alike */
            grouped_gemm(&l, bwd_name(f->name, "dgrad"), g, (double)f->m, (double)f->k, (double)f->n);
            grouped_gemm(&l, bwd_name(f->name, "wgrad"), g, (double)f->n, (double)f->k, (double)f->m);
            /* The conjugate of the identity before a column-parallel GEMM is an all-reduce of
             * its input gradient (without SP; with SP the reduce-scatter mirrors the forward
             * all-gather below). */
            int column_input = !strcmp(f->name, "qkv") || (!strcmp(f->name, "fc1") && sh->num_experts == 0) ||
                               !strcmp(f->name, "router");
            if (column_input && !sh->sequence_parallel && sh->tp > 1)
                comm(&l, !strcmp(f->name, "qkv") ? "tp_allreduce_attn_bwd" : "tp_allreduce_mlp_bwd", COMM_TP,
                     COLL_ALL_REDUCE, sh->tp,
                     (double)sh->micro_batch * sh->seq_length / (sh->cp > 0 ? sh->cp : 1) * sh->hidden * sh->act_bytes);
            break;
        }
        case OPK_BATCHED_GEMM: {
            /* Two batched products per forward one (gradients of both operands). */
            layer_op *d = push(&l, bwd_name(f->name, "dgrad"), OPK_BATCHED_GEMM);
            *d = *f;
            d->name = bwd_name(f->name, "dgrad");
            layer_op *w = push(&l, bwd_name(f->name, "wgrad"), OPK_BATCHED_GEMM);
            *w = *f;
            w->name = bwd_name(f->name, "wgrad");
            break;
        }
        case OPK_MEMORY:
            if (f->quantize) /* its backward is the output gradient's, at the GEMM above */
                break;
            /* Twice the forward's bytes. Counting tensors (input and output gradient read, input
             * gradient written) says 1.5x; measured on the CPU engine, GELU's backward costs 1.1x
             * its forward. Kept at 2x until measured on GPUs (docs/model.md). */
            memory_op(&l, bwd_name(f->name, "bwd"), f->cls, 2.0 * f->bytes);
            if (sh->swiglu_unfused && !strcmp(f->name, "swiglu")) /* two gradients, SiLU's, the cat */
                l.ops[l.n - 1].launches = 4;
            break;
        case OPK_FUSED_ATTENTION: {
            layer_op *op = push(&l, "attn_fused_bwd", OPK_FUSED_ATTENTION);
            op->m = f->m;
            op->n = f->n;
            op->k = f->k;
            op->batch = f->batch;
            op->flops = 2.0 * f->flops;
            op->bytes = 2.0 * f->bytes;
            break;
        }
        case OPK_COMM: {
            coll_kind k = f->coll;
            if (f->comm == COMM_TP && k == COLL_ALL_REDUCE)
                break; /* its conjugate is emitted after the column-parallel GEMM's grads */
            if (k == COLL_ALL_GATHER)
                k = COLL_REDUCE_SCATTER;
            else if (k == COLL_REDUCE_SCATTER)
                k = COLL_ALL_GATHER;
            layer_op *op = push(&l, f->name, OPK_COMM);
            *op = *f;
            op->coll = k;
            if (f->overlaps_attention) /* ring attention's backward passes K/V and their gradients */
                op->bytes = 2.0 * f->bytes;
            break;
        }
        }
    }
    for (int i = 0; i < l.n; i++)
        out[i].backward = 1;
    return l.n;
}

double layer_forward_flops_per_sequence(const layer_shape *sh)
{
    double s = (double)sh->seq_length, h = (double)sh->hidden, f = (double)sh->ffn_hidden, q, kv;
    attention_widths(sh, &q, &kv);
    double mlp = (sh->swiglu ? 3.0 : 2.0) * h * f;
    double router = 0;
    if (sh->num_experts > 0) {
        mlp *= sh->moe_topk > 0 ? sh->moe_topk : 1;
        router = h * (double)sh->num_experts;
    }
    return 2.0 * s * (h * (q + 2 * kv) + q * h + mlp + router) + 4.0 * s * s * q;
}

double lm_head_forward_flops_per_sequence(long long seq, long long hidden, long long vocab)
{
    return 2.0 * (double)seq * (double)hidden * (double)vocab;
}
