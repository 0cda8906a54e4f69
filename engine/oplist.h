/* The op list of one transformer layer: what one GPU runs for one micro-batch, with the
 * tensor-parallel / sequence-parallel / context-parallel / expert-parallel split applied.
 * Pure C. dtrain runs these ops (same names), dtcal times them, dtsim sums them.
 *
 * FLOP convention (DESIGN.md, Metrics): a GEMM of (m x k) by (k x n) is 2*m*n*k FLOPs;
 * attention score and value products are counted in full (no causal halving). */
#ifndef DTSIM_ENGINE_OPLIST_H
#define DTSIM_ENGINE_OPLIST_H

/* How an op's time is modelled. */
typedef enum {
    OPK_GEMM = 0,     /* dense GEMM, timed from the calibration's GEMM table */
    OPK_BATCHED_GEMM, /* attention score / value products: batch x (m x k)(k x n) */
    OPK_MEMORY,       /* memory-bound: time = bytes / calibrated bandwidth of op class */
    OPK_FUSED_ATTENTION, /* flash-style attention: FLOPs at the calibrated attention efficiency */
    OPK_COMM          /* a collective inside the layer (TP, SP, CP, EP) */
} layer_op_kind;

/* Memory-bound op classes; names equal the calibration's "ops" keys. */
typedef enum {
    OPCLASS_LAYERNORM = 0, OPCLASS_SOFTMAX, OPCLASS_GELU, OPCLASS_ELEMENTWISE,
    OPCLASS_CROSS_ENTROPY, OPCLASS_ADAMW, OPCLASS_EMBEDDING,
    OPCLASS_RMSNORM, OPCLASS_SWIGLU, OPCLASS_ROPE, OPCLASS_COUNT
} op_class;
const char *op_class_name(op_class c); /* "layernorm", "softmax", "gelu", "elementwise",
                                          "cross_entropy", "adamw", "embedding", "rmsnorm",
                                          "swiglu", "rope" */
/* The class whose rate stands in for c where a calibration has not measured c: LayerNorm's for
 * RMSNorm, GELU's for SwiGLU, the elementwise rate for rope (each the same memory traffic per
 * element; on a GPU all are bandwidth-bound alike, on a CPU the transcendental functions differ,
 * which is why dtcal kernels measures them apart). c itself for the others. */
op_class op_class_fallback(op_class c);

/* Collectives; names equal the calibration's "collectives" keys. */
typedef enum {
    COLL_ALL_REDUCE = 0, COLL_ALL_GATHER, COLL_REDUCE_SCATTER, COLL_ALL_TO_ALL, COLL_SEND_RECV,
    COLL_BROADCAST, COLL_KIND_COUNT
} coll_kind;
const char *coll_kind_name(coll_kind c); /* "all_reduce", "all_gather", "reduce_scatter",
                                            "all_to_all", "send_recv" */
int coll_kind_from_name(const char *name); /* the kind of that name, or -1 */

/* Which parallel dimension a communication belongs to (for reporting exposed comm). */
typedef enum { COMM_TP = 0, COMM_PP, COMM_DP, COMM_ZERO, COMM_CP, COMM_EP, COMM_CLASS_COUNT } comm_class;
const char *comm_class_name(comm_class c); /* "tp", "pp", "dp", "zero", "cp", "ep" */

typedef enum { ATTENTION_UNFUSED = 0, ATTENTION_FLASH = 1 } attention_impl;

/* How context parallelism moves keys and values (Megatron-Core's --cp-comm-type):
 *  p2p: ring attention: cp - 1 steps, each passing a K/V block to the next CP rank while the
 *       attention of the block in hand runs (backward: K/V and their gradients, twice the bytes);
 *  all_gather: every rank gathers the whole sequence's K/V before attention (Llama 3's);
 *  a2a: Ulysses: an all-to-all turns a sequence shard of every head into the whole sequence of
 *       1/cp of the heads before attention, and one back after it. */
typedef enum { CP_COMM_P2P = 0, CP_COMM_ALL_GATHER, CP_COMM_A2A } cp_comm_kind;

/* Everything that shapes one layer's work on one GPU. */
typedef struct {
    long long micro_batch;   /* b */
    long long seq_length;    /* s (full sequence; CP divides it) */
    long long hidden;        /* h */
    long long heads;         /* a */
    long long kv_groups;     /* g (= a for multi-head attention) */
    double head_dim;         /* d, one head's width (Megatron's --kv-channels); 0: h / a */
    long long ffn_hidden;    /* f */
    int swiglu;              /* 1: gated MLP with 3 weight matrices */
    int swiglu_unfused;      /* with swiglu: the activation as eager PyTorch runs it, SiLU of the gate
                                then a multiply by the up projection, two kernels (nanotron's
                                GLUActivation); 0: one fused kernel (Megatron's, dtrain's) */
    int rope;                /* 1: rotary position embeddings turn q and k after the QKV GEMM */
    int rmsnorm;             /* 1: the norms are RMSNorm (their own calibration class) */
    long long num_experts;   /* 0 = dense MLP */
    int moe_topk;
    int tp, cp, ep;          /* tensor, context, expert parallel sizes */
    int etp;                 /* the experts' tensor-parallel size: 0 or tp (split like the dense
                                MLP), or 1 with tp > 1 and SP (whole experts on each GPU's own
                                sequence shard: Megatron-Core's expert_tensor_parallel_size 1) */
    int sequence_parallel;   /* Megatron SP: norms/dropout split over TP, AG/RS instead of AR */
    attention_impl attention;
    int act_bytes;           /* bytes per activation element (2 for bf16/fp16, 4 fp32, 1 fp8 GEMM inputs still 2) */
    cp_comm_kind cp_comm;    /* with cp > 1 */
    double moe_load;         /* MoE: tokens the busiest EP rank's experts run over the mean (>= 1;
                                0 = 1: balanced), after any capacity limit */
    double fp8_quantize_bytes; /* FP8 GEMMs (Transformer Engine): bytes moved per element of each
                                  operand quantized to fp8, the forward's activation input and the
                                  backward's output gradient; 0: no FP8 (oplist.c, fp8_quantize) */
    int fp8_quantize_kernels;  /* kernels one tensor's quantization launches (0 read as 1) */
    int fp8_multi_cast;        /* 1: a grouped GEMM's experts are cast in one launch (TE's fused
                                  multi-tensor cast); 0: one quantization per expert */
} layer_shape;

typedef struct {
    const char *name;     /* "ln1", "qkv", "attn_score", "attn_softmax", "attn_value", "attn_proj",
                             "residual1", "ln2", "fc1", "gelu" or "swiglu", "rope", "fc2", "residual2",
                             "router", "tp_allreduce_attn", ... ; backward ops end in "_bwd",
                             GEMM backward splits into "<name>_dgrad" and "<name>_wgrad" */
    layer_op_kind kind;
    op_class cls;         /* for OPK_MEMORY */
    long long m, n, k;    /* GEMM shape; batched or grouped: per batch entry */
    long long batch;      /* batched GEMM count, or a grouped GEMM's (one per local expert); 1 otherwise */
    double flops;         /* FLOPs on this GPU */
    double bytes;         /* memory-bound: bytes read + written; comm: payload bytes per rank */
    coll_kind coll;       /* for OPK_COMM */
    comm_class comm;      /* for OPK_COMM */
    int group;            /* for OPK_COMM: ranks in the collective */
    int backward;         /* 1 for the backward pass's ops (a calibration may time them apart) */
    int steps;            /* OPK_COMM: times it runs (ring attention's cp - 1 passes; 0 = once) */
    int overlaps_attention; /* OPK_COMM: runs beside the layer's attention, block by block */
    int quantize;         /* OPK_MEMORY: an FP8 quantization of a GEMM operand (its backward is the
                             quantization of that GEMM's output gradient, not twice its bytes) */
    int plain_nccl;       /* OPK_COMM: an NCCL call of its own, never chunked beside a GEMM by
                             Transformer Engine's userbuffers (the MoE dispatcher's expert-TP
                             gather and scatter) */
    int launches;         /* kernels the op launches, each paying the calibration's launch overhead
                             (0 read as 1): a grouped GEMM one per expert, a quantization as its
                             recipe runs it (oplist.c) */
} layer_op;

#define LAYER_OPS_MAX 64

/* Forward ops of one layer for one micro-batch, in execution order. Returns the count. */
int layer_ops_forward(const layer_shape *sh, layer_op *out);
/* Backward ops (reverse order, GEMMs split into dgrad + wgrad with the forward's FLOPs each,
 * memory-bound ops moving 2x the forward's bytes, TP comm mirrored). */
int layer_ops_backward(const layer_shape *sh, layer_op *out);

/* Model-level FLOPs per the DESIGN.md formulas, for one sequence (s tokens):
 * forward FLOPs of one layer, and of the LM head (2*s*h*V). */
double layer_forward_flops_per_sequence(const layer_shape *sh_tp1_unsplit);
double lm_head_forward_flops_per_sequence(long long seq, long long hidden, long long vocab);

#endif
