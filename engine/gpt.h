/* A pre-norm decoder (DESIGN.md, Engine): GPT-2's blocks (token and position embeddings,
 * LayerNorm, causal multi-head attention, a GELU MLP, an LM head tied to the token embedding) or
 * Llama's (RMSNorm, rotary position embeddings, grouped-query attention, a SwiGLU MLP, an untied
 * LM head), each choice on its own as Megatron-LM's flags make it. All work goes through a
 * kernels_backend, so the same code runs on the CPU and CUDA backends.
 *
 * Parameter layout (the "single-rank layout" that params_crc32 covers, in this order), with
 * hd = C / heads, G the query groups (heads without GQA), F the MLP width (4C for GPT-2), F1 = 2F
 * with SwiGLU (gate rows, then up rows) else F:
 *   wte (V, C), wpe (T, C) (absent with rope),
 *   for each layer: ln1_w (C), ln1_b (C) (absent with RMSNorm), qkv_w ((C + 2 G hd), C) (q rows,
 *                   then k, then v), qkv_b (C + 2 G hd), proj_w (C, C), proj_b (C), ln2_w (C),
 *                   ln2_b (C) (absent with RMSNorm), fc_w (F1, C), fc_b (F1), fcproj_w (C, F),
 *                   fcproj_b (C), router_w (E, C) (absent without experts),
 *   lnf_w (C), lnf_b (C) (absent with RMSNorm), lm_head (V, C) (absent when tied to wte).
 * With E experts, fc_w, fc_b, fcproj_w and fcproj_b hold E of each, expert after expert.
 * An absent tensor keeps its place in the table with no floats, so GPT-2's layout, and its
 * CRC, are what they were before the Llama choices existed. */
#ifndef DTSIM_ENGINE_GPT_H
#define DTSIM_ENGINE_GPT_H

#include <stddef.h>
#include <stdint.h>
#include "kernels.h"
#include "oplist.h"
#include "profiler.h"

typedef struct {
    int num_layers, hidden, heads, seq_len, vocab;
    /* The Llama choices, with Megatron-LM's names in model files. 0 in kv_groups and ffn_hidden
     * means the GPT-2 value (heads, 4 x hidden): gpt_config_validate fills them in. */
    int kv_groups;   /* num_query_groups (grouped-query attention below heads) */
    int ffn_hidden;  /* ffn_hidden_size */
    int swiglu;      /* swiglu: gated SiLU MLP, fc_w holds 2F rows */
    int rmsnorm;     /* normalization "RMSNorm" (else "LayerNorm") */
    int rope;        /* position_embedding_type "rope" (else "learned_absolute") */
    int untied;      /* untie_embeddings_and_output_weights */
    /* Mixture of experts (gpt_moe.c), Megatron-LM's names: num_experts (0: a dense MLP),
     * moe_router_topk, moe_expert_capacity_factor (0: dropless). */
    int num_experts, moe_topk;
    double moe_capacity_factor;
} gpt_config;

/* The op list's shape of one layer of cfg (oplist.h) for micro-batches of `micro_batch`
 * sequences on one of tp ranks: what the profiler's FLOPs and the run folder's model FLOPs both
 * count. */
void gpt_layer_shape(const gpt_config *cfg, int micro_batch, int tp, layer_shape *out);

/* Rotary embeddings' base (Megatron-LM's --rotary-base default, 10000). */
#define GPT_ROPE_BASE 10000.0f

/* "tiny", "tiny-llama", "small", or a JSON file {"num_layers", "hidden", "heads", "seq_len", "vocab"} or with
 * dtsim's (Megatron-LM's) model keys. Returns 0, or -1 with a reason. */
int gpt_config_from_name(const char *name, int tokenizer_vocab, gpt_config *cfg, char *err, size_t errlen);
/* Checks the shape rules (hidden divisible by heads, groups dividing heads, positive sizes,
 * limits) and fills in the GPT-2 defaults of kv_groups and ffn_hidden. */
int gpt_config_validate(gpt_config *cfg, char *err, size_t errlen);
/* The model's description as checkpoints and run folders record it (Megatron-LM's names for the
 * Llama choices), and its reading back: keys a file lacks take GPT-2's values (older files).
 * Returns 0, or -1 when a recorded value is not an integer or boolean of its kind. */
int gpt_config_to_json(const gpt_config *cfg, void *json_object);
int gpt_config_from_json(const void *json_object, gpt_config *cfg);
/* The two describe the same parameters (after defaults). */
int gpt_config_same(const gpt_config *a, const gpt_config *b);
/* "(layers 4, hidden 128, heads 4, seq 64, vocab 256[, groups 2, ffn 344, swiglu, RMSNorm, rope,
 * untied])", for messages. */
void gpt_config_describe(const gpt_config *cfg, char *out, size_t len);

enum { LAYER_TENSORS = 13 };
/* At most this many windows of parameters (and as many of gradients) are mapped at once: the
 * head uses wte and the final norm together, and under ZeRO-3 a recomputed group keeps each of
 * its layers' parameters mapped from their re-run to their backward (data_parallel.c, whose pools
 * hold as many: DP_WINDOWS). */
enum { GPT_WINDOWS = 16 };

/* A resident range [lo, lo + n) of the flat layout, and the windows mapped beside it. */
typedef struct {
    size_t lo, n;
    struct {
        float *buf; /* backend memory; buf[0] is element lo; NULL: unused */
        size_t lo, hi;
    } windows[GPT_WINDOWS];
} gpt_range;

typedef struct {
    size_t offset, count;  /* in this rank's flat buffers; count 0 for a tensor held elsewhere */
    int decay;             /* AdamW weight decay applies (matrices), or not (biases, norms) */
    size_t global_offset;  /* where the whole tensor starts in the single-rank layout */
    int counted;           /* this rank's copy is the one norms and gathers count (a tensor
                              replicated over TP ranks, or wte on the last stage, counts once) */
    int expert;            /* an MoE layer's expert weights (fc, fcproj): under expert parallelism
                              this rank holds its EP rank's experts only */
} gpt_tensor;

/* How this rank's part of the model is cut (DESIGN.md, Engine). Tensor parallel as Megatron:
 * QKV and FC1 split by output rows (heads and MLP columns), projection and FC2 by input
 * columns, a sum over the TP group after each of those two; the token embedding and the tied
 * LM head split by vocabulary rows with a parallel cross-entropy; norms, the biases of the
 * row-parallel GEMMs and the position embedding are replicated. Pipeline parallel: a rank runs a subset
 * of the layers; the first stage the embedding, the last the final norm, LM head and loss. */
typedef struct {
    int tp, tp_rank;
    const unsigned char *layers;  /* NULL: every layer; else layers[l] != 0 for the ones run here */
    int embedding, head;
    int slots;                    /* micro-batches whose activations are held at once (>= 1) */
    /* Sums a backend buffer of n floats over the TP group (called only when tp > 1). */
    void (*tp_allreduce)(float *buf, size_t n, void *ctx);
    /* Sequence parallelism (Megatron-LM's --sequence-parallel, tp > 1): the residual stream holds
     * this rank's B*T/tp tokens (rank r the r-th contiguous block of the micro-batch's B*T); a
     * column-parallel GEMM's input is all-gathered over the TP group first, a row-parallel GEMM's
     * output reduce-scattered after, and their backwards mirror them. The two collectives work in
     * place on a backend buffer of n floats, the whole sequence: all-gather from each rank's part,
     * reduce-scatter into it. */
    int sequence_parallel;
    void (*tp_allgather)(float *buf, size_t n, void *ctx);
    void (*tp_reduce_scatter)(float *buf, size_t n, void *ctx);
    /* Megatron-LM's --tp-comm-overlap (with sequence parallelism): each of those collectives runs
     * as a ring in TP steps, beside the GEMM of the block of tokens already at hand. tp_ring_start
     * starts one step: n floats of send (backend) to the next TP rank, n into recv (backend) from
     * the previous; tp_ring_wait ends it. */
    int tp_comm_overlap;
    void *(*tp_ring_start)(const float *send, float *recv, size_t n, void *ctx);
    void (*tp_ring_wait)(void *step, void *ctx);
    /* Context parallelism (gpt_cp.c): cp ranks share each sequence, this one cp_rank; its
     * all-gather and reduce-scatter over the CP group, in place on a backend buffer of n floats
     * (the ranks' equal blocks in order), for cp_comm_type all_gather. cp_ring_p2p: ring
     * attention instead (Megatron-Core's cp_comm_type p2p, its default; gpt_cp_ring.c), whose
     * steps cp_ring_start starts (n floats of send, a backend buffer, to the next CP rank; n into
     * recv from the previous) and cp_ring_wait ends; one step is in flight at a time. */
    int cp, cp_rank;
    /* cp_a2a: Megatron-Core's cp_comm_type a2a (DeepSpeed-Ulysses, gpt_cp_a2a.c) instead of both:
     * an all-to-all of host buffers over the CP group (n floats in all, cp equal blocks in rank
     * order, block j to rank j) turns the rank's positions of every head into the whole sequence of 1/cp of the
     * heads before attention, and one back after it */
    int cp_a2a;
    void (*cp_alltoall)(const float *send, float *recv, size_t n, void *ctx);
    void (*cp_allgather)(float *buf, size_t n, void *ctx);
    void (*cp_reduce_scatter)(float *buf, size_t n, void *ctx);
    int cp_ring_p2p;
    void *(*cp_ring_start)(const float *send, float *recv, size_t n, void *ctx);
    void (*cp_ring_wait)(void *step, void *ctx);
    /* Sum (max = 0) or maximum (max = 1) of a host buffer over the CP group: the mixture of
     * experts' load-balancing counts over the whole sequence (gpt_moe.c) */
    void (*cp_allreduce_host)(float *buf, size_t n, int max, void *ctx);
    void *cp_ctx;
    /* Sum (max = 0) or maximum (max = 1) of a host buffer over the TP group: the vocabulary-
     * parallel cross-entropy's row statistics. */
    void (*tp_allreduce_host)(float *buf, size_t n, int max, void *ctx);
    void *tp_ctx;
    /* ZeRO over dp data-parallel ranks (this one dp_rank): the device holds from the start only
     * what the rank keeps between passes, its DP shard (gpt_dp_shard_range) of the moments (zero
     * >= 1), the gradients (zero >= 2) and the parameters (zero >= 3), so a ZeRO-3 model is never
     * whole on the device. dp 0 or 1: everything. */
    int dp, dp_rank, zero;
    /* Activation recomputation, as Megatron-LM's --recompute-granularity, --recompute-method and
     * --recompute-num-layers (gpt_acts.c). */
    int recompute;                /* GPT_RECOMPUTE_NONE | _SELECTIVE | _FULL */
    int recompute_block;          /* full: method block (the first recompute_layers layers of each
                                     chunk, one at a time); 0: uniform (every layer, in groups) */
    int recompute_layers;         /* full: the group size (uniform) or the count (block); >= 1 */
    double moe_aux_loss_coeff;    /* Megatron-LM's --moe-aux-loss-coeff (gpt_moe.c); 0: none */
    /* Expert parallelism (gpt_moe_ep.c; Megatron-LM's --expert-model-parallel-size): ep ranks
     * share each MoE layer's experts, this one (ep_rank) holding experts [ep_rank E/ep, (ep_rank
     * + 1) E/ep). Each routes its own tokens and exchanges rows with the others: an all-to-all of
     * n ints per rank, and one of floats with a count per rank (host buffers; blocks in rank order). */
    int ep, ep_rank;
    void (*ep_alltoall_int)(const int *send, int *recv, size_t n, void *ctx);
    void (*ep_alltoallv)(const float *send, const size_t *send_counts, float *recv, const size_t *recv_counts,
                         void *ctx);
    void *ep_ctx;
} gpt_shard;

/* Test aid (dtrain --test-plain-attention): a copy of backend k without its optional attention
 * kernels (the positional and ring attention block ones), as CUDA's is for now, so the CPU runs
 * context parallelism's whole-sequence fallbacks (gpt_cp.c, gpt_cp_ring.c). One static copy. */
const kernels_backend *gpt_cp_plain_backend(const kernels_backend *k);

/* Recomputation granularities. Selective reruns the attention core (the fused attention kernel)
 * in the backward and keeps none of its own outputs between the passes; full keeps only the
 * input of each recomputed group of layers and reruns the group's forward, its TP all-reduces
 * included, when the backward reaches the group's last layer. */
enum { GPT_RECOMPUTE_NONE = 0, GPT_RECOMPUTE_SELECTIVE = 1, GPT_RECOMPUTE_FULL = 2 };

typedef struct gpt_moe_route gpt_moe_route;

typedef struct {
    float *input;                    /* (B,T,C) received from the previous stage, when the
                                        layer before this one runs elsewhere */
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *lse, *proj, *res2;
    float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *fcproj, *res3;
    /* mixture of experts: the experts' input and output rows (up to N K of each, C wide; fch and
     * fch_gelu then hold as many rows), and the routing (gpt_moe.c) */
    float *moe_in, *moe_out;
    gpt_moe_route *route;
    /* context parallelism's all-to-all form (gpt_cp_a2a.c): the whole sequence of the rank's 1/cp
     * of the heads, its qkv, attention output and log-sum-exp rows, kept for the backward */
    float *a2a_qkv, *a2a_atty, *a2a_lse;
} gpt_layer_acts;

/* One micro-batch's activations (buffers of layers not run here stay NULL). */
typedef struct {
    float *encoded;                  /* (B,T,C) */
    gpt_layer_acts *layers;
    float *lnf, *lnf_mean, *lnf_rstd, *logits, *losses;
    int *tokens, *targets;           /* backend memory, B*T (tokens: this rank's vocabulary rows
                                        when the vocabulary is split) */
    unsigned char *in_vocab;         /* host, B*T: the token's row is on this rank (tp > 1) */
    int *host_targets;               /* host, B*T (tp > 1) */
    float *ce_max, *ce_sum;          /* host, B*T: row max and sum of exponentials (tp > 1) */
} gpt_acts;

/* FLOPs of the ops the profiler times that compute (one micro-batch on this rank), taken from
 * the op list the simulator sums (engine/oplist.h: layer_ops_forward/backward of this rank's
 * layer shape, lm_head_forward_flops_per_sequence): a GEMM's backward is its dgrad + wgrad,
 * attention its score and value products, the LM head's backward twice its forward. */
typedef struct {
    double qkv, attention, attn_proj, fc1, fc2, lm_head;
} gpt_op_flops;

typedef struct gpt_model_s {
    gpt_config cfg;
    const kernels_backend *k;
    kernels_precision prec;
    int B, T;                        /* activation buffers sized for this micro-batch */
    gpt_shard shard;
    unsigned char *runs_layer;       /* L flags: this rank runs layer l */
    size_t num_params;               /* this rank's */
    size_t global_params;            /* the whole model's (single-rank layout) */
    gpt_tensor *tensors;             /* 2 + 12 L + GPT_HEAD_TENSORS of them */
    int num_tensors;
    /* Parameters and gradients (backend memory). Each holds a range of this rank's flat layout:
     * all num_params floats, or a ZeRO rank's shard (params under ZeRO-3, grads under ZeRO-2 and
     * 3). A tensor outside the range is reached through a window mapped for one pass
     * (gpt_map_range); gpt_param and gpt_grad look in both. */
    float *params, *grads;
    gpt_range param_range, grad_range;
    float *m, *v;                    /* AdamW moments of local parameters [moments_lo, moments_lo +
                                        moments_n): all of them, or a ZeRO rank's shard */
    size_t moments_lo, moments_n;
    /* Floats of parameters, gradients and moments on the device now, and the most at any moment
     * since gpt_init_shard (a buffer being replaced counts with its replacement). */
    size_t state_floats, state_floats_peak;
    gpt_acts *acts;                  /* shard.slots of them */
    /* Recomputation (gpt_acts.c): per layer, the first layer of its recomputed group, or -1 where
     * the layer keeps its activations; the buffers the recomputed layers share across micro-
     * batches (recompute_layers layer sets under full, one attention output under selective). */
    int *recompute_group;
    gpt_layer_acts *scratch;
    int scratch_layers;
    /* Sequence parallelism's scratch: one whole-sequence (B*T x C) buffer for the gathered or
     * partial tensor of the moment, and a LayerNorm's two gradients (2 C) of one micro-batch. */
    float *sp_full, *sp_norm_grad;
    float *sp_ring[2], *sp_recv;     /* --tp-comm-overlap: a ring's two send blocks and its receive */
    /* Context parallelism's scratch (gpt_cp.c): the ranks' qkv blocks, the whole sequences' qkv,
     * attention output, log-sum-exp rows and their gradients; the position table's lookup; the
     * rank's tokens and targets (host) */
    float *cp_blocks, *cp_qkv, *cp_dqkv, *cp_atty, *cp_dout, *cp_lse, *cp_zeros, *cp_sink, *cp_pos_rows;
    int *cp_positions, *cp_tokens, *cp_targets;
    struct gpt_cp_ring *cp_ring;     /* ring attention's scratch (gpt_cp_ring.c); NULL under all_gather */
    struct gpt_cp_a2a *cp_a2a;       /* the all-to-all form's scratch (gpt_cp_a2a.c); NULL otherwise */
    /* Grouped-query attention's repeated qkv and its gradient (gpt_block.c); rotary embeddings'
     * positions of the rank's rows under CP (host; NULL: 0..T-1). */
    float *gqa_qkv, *gqa_dqkv;
    int *rope_pos;
    struct gpt_moe_scratch *moe;     /* mixture of experts' shared scratch (gpt_moe.c) */
    double moe_aux_loss;             /* the load-balancing loss of the layers of the last forward
                                        (gpt_forward_layers), weighted by its coefficient */
    double moe_load_sum;             /* the routing balance (gpt_moe_route.balance) summed over */
    int moe_load_n;                  /* these MoE layer forwards since gpt_moe_load_take */
    int recomputing;                 /* a full recomputation's rerun of a forward is under way */
    /* Activation floats this rank holds (every slot and the shared recompute buffers; the
     * backward's scratch d_* buffers are not counted). */
    size_t act_floats;
    /* backward scratch */
    float *d_res, *d_a, *d_b, *d_big, *d_big2, *d_qkv, *d_logits;
    /* vocabulary-parallel embedding scratch (tp > 1): zeros, a row table, gradient sinks */
    float *vp_zeros, *vp_tmp, *vp_sink;
    int *vp_zero_tokens;
    float *vp_host_logits;
    profiler *prof;                  /* optional */
    gpt_op_flops flops_fwd, flops_bwd; /* for the profiler, set by gpt_init_shard */
    /* Optional: called before and after a forward or backward pass uses tensors [first, first +
     * count): ZeRO-3 gathers their parameters just in time and lets them go after; ZeRO-2 and 3
     * give the backward a gradient window and reduce it into the shard after. */
    void (*pass_hook)(struct gpt_model_s *m, int first, int count, int before, int backward, void *ctx);
    void *pass_hook_ctx;
} gpt_model;

/* Allocates parameters and activations for micro-batches of B sequences of cfg.seq_len
 * tokens, initialised as GPT-2 (normal 0.02; residual projections scaled by 1/sqrt(2L)). */
void gpt_init(gpt_model *m, const gpt_config *cfg, const kernels_backend *k, kernels_precision prec, int B,
              uint64_t seed);
/* The same for this rank's part of the model; its parameters are the single-rank model's
 * (same seed) cut as `shard` says. Returns 0, or -1 with a reason (heads or hidden not
 * divisible by tp) before allocating anything. */
int gpt_init_shard(gpt_model *m, const gpt_config *cfg, const kernels_backend *k, kernels_precision prec, int B,
                   uint64_t seed, const gpt_shard *shard, char *err, size_t errlen);
void gpt_free(gpt_model *m);

/* Forward on host tokens/targets (B x T); returns the mean loss (fp32 arithmetic). */
float gpt_forward(gpt_model *m, const int *tokens, const int *targets);
/* Backward of the last forward; adds to m->grads with the loss gradient scaled by dloss (the
 * caller folds loss scaling and micro-batch averaging into it). */
void gpt_backward(gpt_model *m, float dloss);

/* The floats of one micro-batch's residual stream on this rank: B*T*C, or B*T/tp*C under
 * sequence parallelism (what a pipeline stage sends and receives). */
size_t gpt_stream_floats(const gpt_model *m);

/* Pipeline pieces. Forward of layers [l0, l1) on activation slot `slot`: from the tokens when
 * l0 == 0 (the embedding; tokens/targets are host arrays, targets used by the head), else from
 * `in` (a backend buffer of gpt_stream_floats floats, the previous stage's output). Runs the head when
 * l1 == L, storing the mean loss in *loss. Returns the output (layer l1-1's, a backend buffer
 * valid until the slot is reused). */
const float *gpt_forward_layers(gpt_model *m, int slot, int l0, int l1, const int *tokens, const int *targets,
                                const float *in, float *loss);
/* Backward of layers [l0, l1) on slot: from the loss (scaled by dloss) when l1 == L, else from
 * `dout` (dL/d output of layer l1-1, gpt_stream_floats floats). Returns dL/d input of layer l0 (a backend
 * buffer valid until the next backward), or NULL when l0 == 0 (the embedding took it). */
const float *gpt_backward_layers(gpt_model *m, int slot, int l0, int l1, float dloss, const float *dout);
/* Mixture of experts' routing balance (gpt_moe.c): the mean, over the MoE layer forwards this
 * rank ran since the last call (each layer and micro-batch once, full recomputation's reruns
 * not counted), of the rows of the busiest EP rank's experts over the mean over EP ranks (1
 * without expert parallelism); 0 when none ran (a dense model). Resets the sum. Every rank of
 * an EP group has the same (from the counts the dispatch exchanges). */
double gpt_moe_load_take(gpt_model *m);

/* The single-rank layout <-> this rank's tensors. gpt_write_global writes the tensors this
 * rank counts into `global` (global_params floats, host), leaving the rest untouched. */
void gpt_write_global(const gpt_model *m, const float *local_host, float *global);
void gpt_read_global(const gpt_model *m, const float *global, float *local_host);
/* As gpt_write_global, for the expert tensors only (each EP rank's experts, once the dense ones
 * are written by one rank). */
void gpt_write_global_experts(const gpt_model *m, const float *local_host, float *global);
/* As gpt_write_global, adding instead of copying (assembling a model from shards). */
void gpt_add_global(const gpt_model *m, const float *local_host, float *global);
/* The tensor table of a rank's part (no memory allocated): for reading another layout's shard. */
int gpt_layout_view(gpt_model *m, const gpt_config *cfg, const gpt_shard *shard, char *err, size_t errlen);
void gpt_layout_view_free(gpt_model *m);

/* Pointer to a tensor's parameters / gradients (backend memory). A tensor outside a ZeRO rank's
 * shard is found in a mapped window; one in neither aborts (a pass used it without its hook). */
float *gpt_param(const gpt_model *m, int tensor);
float *gpt_grad(const gpt_model *m, int tensor);
/* The index of layer l's tensor j (0..11), and of wte/wpe/lnf_w/lnf_b. */
int gpt_layer_tensor(const gpt_model *m, int layer, int j);
enum { GPT_WTE = 0, GPT_WPE = 1 };
int gpt_lnf_w(const gpt_model *m);
/* The head's tensors run from gpt_lnf_w: lnf_w, lnf_b, lm_head (the last two may hold nothing). */
enum { GPT_HEAD_TENSORS = 3 };
/* The LM head's weight: the lm_head tensor when untied, else wte. */
int gpt_head_weight(const gpt_model *m);

/* CRC32 (zlib) over every parameter in fp32, in the layout above (a single-rank model). */
uint32_t gpt_params_crc32(const gpt_model *m);
/* CRC32 of n host floats (a gathered single-rank layout). */
uint32_t gpt_crc32_floats(const float *x, size_t n);

/* The flat-buffer range [lo, hi) that DP rank `rank` of `dp` owns, of n floats: equal
 * contiguous shards in rank order (the last ones shorter when dp does not divide n). */
void gpt_dp_shard_range(size_t n, int dp, int rank, size_t *lo, size_t *hi);
/* ZeRO-1/2 with expert parallelism (data_parallel_ep.c), Megatron-Core's distributed optimizer:
 * the dense tensors (kind 0) and the expert tensors (kind 1) each form a packed sequence, their
 * floats in flat order. The dense one is sharded over the DP group (dp ranks, this one dp_rank),
 * the expert one over the expert-data-parallel group (dp / ep ranks holding the same experts,
 * this one dp_rank / ep), each as gpt_dp_shard_range. lo, hi: this rank's shard of each, in
 * packed positions; the moments (and ZeRO-2's gradients) hold the dense shard, then the expert
 * shard. */
typedef struct {
    size_t n[2], lo[2], hi[2];
} gpt_ep_shards;
void gpt_ep_shards_of(const gpt_model *m, int dp, int dp_rank, int ep, gpt_ep_shards *s);
size_t gpt_ep_shards_floats(const gpt_ep_shards *s);
/* The flat values' two shards, packed (the dense shard, then the expert shard), into the start
 * of flat (host, num_params floats): ZeRO-3 under EP keeps its parameters so. */
void gpt_ep_pack_shards(const gpt_model *m, const gpt_ep_shards *s, float *flat);
/* Keeps the AdamW moments of local parameters [lo, hi) only, as ZeRO-1 and up do (the rest is
 * other DP ranks' state): the buffers shrink to hi - lo floats, their values move along. */
void gpt_keep_moments(gpt_model *m, size_t lo, size_t hi);
/* The same for the parameters (ZeRO-3) or the gradients (ZeRO-2/3, which start at zero): the
 * device keeps [lo, hi) only. Each does nothing when the buffer holds [lo, hi) already. */
void gpt_keep_params(gpt_model *m, size_t lo, size_t hi);
void gpt_keep_grads(gpt_model *m, size_t lo, size_t hi);
/* Makes the flat-layout range [lo, hi), held in buf (backend memory, buf[0] is element lo),
 * visible to gpt_param or gpt_grad until unmapped. Aborts when every window is in use. */
void gpt_map_range(gpt_range *r, float *buf, size_t lo, size_t hi);
void gpt_unmap_range(gpt_range *r, const float *buf);

#endif
