/* Internal to the model's two files (gpt.c: allocation, forward and backward; gpt_layout.c:
 * parameter layout and initialisation). */
#ifndef DTSIM_ENGINE_GPT_INTERNAL_H
#define DTSIM_ENGINE_GPT_INTERNAL_H
#include <stdint.h>
#include <stdio.h>
#include "gpt.h"

/* Timing one op of the model m for the profiler (m->prof may be NULL). */
#define PROF_BEGIN() profiler_begin(m->prof)
/* PROF_END(name, layer, flops, bytes, shape format, ...): the shape is written only when
 * profiling, so an unprofiled run pays one branch per op. GEMM shapes use the simulator's
 * (m, n, k) of engine/oplist.h: out (m x n) = inp (m x k) @ weight^T. */
#define PROF_END(name, layer, flops, bytes, ...)                                                         \
    do {                                                                                                \
        if (m->prof) {                                                                                  \
            char shape_[48];                                                                            \
            snprintf(shape_, sizeof shape_, __VA_ARGS__);                                               \
            profiler_end(m->prof, name, layer, shape_, flops, bytes);                                   \
        }                                                                                               \
    } while (0)

/* A layer's tensors, in the order of gpt.h. */
enum { J_LN1_W, J_LN1_B, J_QKV_W, J_QKV_B, J_PROJ_W, J_PROJ_B, J_LN2_W, J_LN2_B, J_FC_W, J_FC_B, J_FCPROJ_W,
       J_FCPROJ_B, J_ROUTER_W };

/* The block's choices (gpt_block.c). gpt_qkv_width: floats of a token's qkv row on this rank
 * ((heads + 2 groups) x head size / tp); gpt_mlp_width: the MLP's width here (F / tp; fc1's
 * output is twice that under SwiGLU). gpt_block_alloc / _free: grouped-query attention's repeated
 * qkv and its gradient (one layer's, shared), rotary embeddings' positions under CP.
 * gpt_norm_forward: the stream's norm (LayerNorm or RMSNorm; mean and b unused by the latter);
 * gpt_norm_backward_tokens: its backward over this rank's stream tokens (dbias unused by RMSNorm).
 * gpt_rope_forward / _backward: in place on a qkv (or its gradient) buffer. The attention core
 * from the (rotated) qkv: the multi-head kernel on the layer's qkv, or on its groups repeated;
 * the backward adds to dqkv. gpt_mlp_act_*: GELU over fc1's output, or SwiGLU over its halves;
 * the backward adds to dfch. */
int gpt_qkv_width(const gpt_model *m);
int gpt_mlp_width(const gpt_model *m);
void gpt_block_alloc(gpt_model *m);
void gpt_block_free(gpt_model *m);
void gpt_norm_forward(gpt_model *m, float *out, float *mean, float *rstd, const float *inp, const float *w,
                      const float *b);
void gpt_norm_backward_tokens(gpt_model *m, float *dinp, float *dweight, float *dbias, const float *dout,
                              const float *inp, const float *weight, const float *mean, const float *rstd);
void gpt_rope_forward(gpt_model *m, float *qkv);
void gpt_rope_backward(gpt_model *m, float *dqkv);
void gpt_attention_core_forward(gpt_model *m, float *atty, float *lse, const float *qkv);
/* The attention core under CP's all-to-all form, its three ops profiled (layer l): into x, and
 * (out) x's output to atty; the backward from dout into dqkv (which it zeroes first) from what x
 * kept. */
void gpt_attention_a2a_forward(gpt_model *m, gpt_layer_acts *x, const float *qkv, float *atty, int out, int l);
void gpt_attention_a2a_backward(gpt_model *m, const gpt_layer_acts *x, float *dqkv, const float *dout, int l);
void gpt_attention_core_backward(gpt_model *m, float *dqkv, const float *dout, const float *qkv, const float *atty,
                                 const float *lse);
void gpt_mlp_act_forward(gpt_model *m, float *out, const float *fch);
void gpt_mlp_act_backward(gpt_model *m, float *dfch, const float *fch, const float *dout);
void gpt_mlp_act_forward_rows(gpt_model *m, float *out, const float *fch, int rows);
void gpt_mlp_act_backward_rows(gpt_model *m, float *dfch, const float *fch, const float *dout, int rows);
/* An activation as a half-precision buffer would hold it (nothing in fp32). */
void gpt_round_act(const gpt_model *m, float *x, size_t n);

/* Mixture of experts (gpt_moe.c): one layer's routing of a micro-batch (host), its allocation;
 * the model's shared scratch; the layer's MoE in place of the MLP, from a->ln2 to a->fcproj
 * (the TP sum applied), with the layer's parameters w; its backward from m->d_res into dnorm (the
 * stream's tokens, TP-summed), adding to the gradients g, the load-balancing loss's gradient
 * scaled by dloss (the backward's per-token loss scale). */
struct gpt_moe_route {
    int *expert;   /* N K: the k-th choice of token t */
    float *prob;   /* N K: its weight */
    int *row;      /* N K: its row among the experts' inputs, -1 when dropped */
    int *token;    /* rows: the token of each row, grouped by expert, in token order */
    int *offset;   /* E + 1: expert e's rows [offset[e], offset[e + 1]) */
    float *scores; /* N E: the softmax of all logits (the load-balancing loss) */
    int *counts;   /* E: choices routed to each expert before any drop (with the load-balancing
                      loss on, after the forward: under sequence parallelism the TP group's, under
                      context parallelism the CP group's, the whole micro-batch's) */
    /* Expert parallelism (gpt_moe_ep.c): the rows this rank's experts run, from every EP rank */
    int *recv;     /* E = ep x E/ep: rows EP rank s sends to local expert i, at s E/ep + i */
    int *xoffset;  /* E/ep + 1: local expert i's rows [xoffset[i], xoffset[i + 1]) of them, by
                      expert, then sending rank, each sender's rows in its order */
    int *sent_all; /* ep x E: rows EP rank s sends to expert e (after drops), at s E + e: every
                      rank's routing, the same on every rank of the EP group */
    double balance;/* rows of the busiest EP rank's experts over the mean over EP ranks (>= 1;
                      1 without expert parallelism; under sequence parallelism the TP group's
                      rows, which its experts run): what dtsim's moe_load_imbalance means */
    /* Sequence parallelism (gpt_moe.c): the TP group's rows that this rank's experts run */
    int *tp_counts;/* tp x E/ep: TP rank r's rows for local expert i, at r E/ep + i */
    int *aoffset;  /* E/ep + 1: local expert i's rows [aoffset[i], aoffset[i + 1]) of the
                      group's, by expert, then TP rank */
};
/* The routing of this rank's N tokens from their router logits (host, N x E): top K, weights,
 * capacity drops, rows by expert. N: the micro-batch's B T, or under sequence parallelism this
 * rank's B T / tp (the capacity too is over them, as Megatron-Core's router counts the tokens it
 * sees). Returns the number of rows. */
int gpt_moe_route_tokens(const gpt_model *m, const float *logits, gpt_moe_route *r);
gpt_moe_route *gpt_moe_route_alloc(const gpt_model *m);
void gpt_moe_route_free(gpt_moe_route *r);
void gpt_moe_alloc(gpt_model *m);
void gpt_moe_free(gpt_model *m);
void gpt_moe_forward(gpt_model *m, gpt_layer_acts *a, float *const *w, int layer);
void gpt_moe_backward(gpt_model *m, gpt_layer_acts *a, float *const *w, float *const *g, float *dnorm, float dloss,
                      int layer);
/* Expert parallelism's exchanges (gpt_moe_ep.c; shard.ep > 1), on host rows C floats wide.
 * gpt_moe_ep_rows: the most rows a rank's experts may receive (every EP rank's every choice).
 * gpt_moe_ep_plan: after routing, the EP ranks tell each other how many rows each sends to each
 * expert (r->sent_all, r->recv, r->xoffset, r->balance); returns the rows this rank's experts
 * run. gpt_moe_ep_dispatch:
 * this rank's rows (grouped by expert, as routed) to their experts' ranks, arriving in `x` by
 * local expert (r->xoffset); gpt_moe_ep_combine: the reverse, the experts' rows in x back to
 * the ranks that sent them, into `own`. scratch: gpt_moe_ep_rows x C floats. Each is collective
 * over the EP group. */
size_t gpt_moe_ep_rows(const gpt_model *m);
int gpt_moe_ep_plan(gpt_model *m, gpt_moe_route *r);
/* From sent_all (ep x E, as gpt_moe_route's): the rows of the busiest EP rank's experts (E/ep
 * consecutive ones a rank) over the mean over the ep ranks; 1 when no row was routed. */
double gpt_moe_ep_balance(const int *sent_all, int ep, int E);
/* Each of El local experts' rows [off[i], off[i + 1]) when `senders` ranks send counts[s El + i]
 * rows to expert i, grouped by expert, then sender (off: El + 1). */
void gpt_moe_expert_offsets(const int *counts, int senders, int El, int *off);
void gpt_moe_ep_dispatch(gpt_model *m, const gpt_moe_route *r, const float *own, float *x, float *scratch);
void gpt_moe_ep_combine(gpt_model *m, const gpt_moe_route *r, const float *x, float *own, float *scratch);

/* GPT-2 initialisation of the whole model in the single-rank layout, on the host (malloc'd,
 * global_params floats); the tensor table must be filled. */
float *gpt_init_global(const gpt_model *m, uint64_t seed);

/* Activations (gpt_acts.c): the recompute plan from shard's settings (m->recompute_group, the
 * shared buffers), then one slot's buffers, pointing the recomputed layers' intermediates at the
 * shared ones. gpt_free_acts frees a slot's own buffers; gpt_free_recompute the shared ones. */
void gpt_plan_recompute(gpt_model *m);
void gpt_alloc_acts(gpt_model *m, gpt_acts *a);
void gpt_free_acts(gpt_model *m, gpt_acts *a);
void gpt_free_recompute(gpt_model *m);
/* The last layer of layer l's recomputed group (the backward reruns the group when it reaches
 * it); -1 when l is not recomputed in full. */
int gpt_recompute_group_end(const gpt_model *m, int l);

/* Sequence parallelism (gpt_sp.c). gpt_sp: it is on (and tp > 1). gpt_stream_tokens: the tokens
 * of the residual stream this rank holds (B*T, or B*T/tp). gpt_sp_gather: the whole sequence of
 * stream tensor x (this rank's part) in m->sp_full, or x itself without SP. gpt_sp_reduce: the
 * TP sum of a row-parallel GEMM's whole-sequence partial output into out (this rank's tokens
 * under SP, reduce-scattered; all of them otherwise, all-reduced); partial is overwritten.
 * gpt_sp_own: this rank's tokens within a whole-sequence buffer. gpt_sp_norm_backward: a
 * LayerNorm's backward over this rank's tokens, its weight and bias gradients summed over the TP
 * group under SP (each rank saw only its tokens). */
int gpt_sp(const gpt_model *m);
int gpt_stream_tokens(const gpt_model *m);
const float *gpt_sp_gather(gpt_model *m, const float *x);
void gpt_sp_reduce(gpt_model *m, float *partial, float *out);
float *gpt_sp_own(const gpt_model *m, float *whole);
void gpt_sp_norm_backward(gpt_model *m, float *dinp, float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight, const float *mean, const float *rstd);
/* Context parallelism (gpt_cp.c). gpt_cp: it is on. gpt_cp_position: the global position of the
 * rank's t-th. gpt_cp_attention_forward/backward: the attention kernel on the rank's rows (the
 * plain kernel without CP); the backward adds to dqkv. gpt_cp_add_positions / _backward: the
 * position embedding at the global positions (the token lookup then uses a zero position
 * table). gpt_cp_local_tokens: the rank's positions of whole sequences (host, B x T each).
 * gpt_cp_alloc / gpt_cp_free: the scratch above. */
int gpt_cp(const gpt_model *m);
int gpt_cp_position(const gpt_model *m, int t);
int gpt_cp_position_of(const gpt_model *m, int r, int t); /* CP rank r's t-th */
void gpt_cp_attention_forward(gpt_model *m, float *atty, float *lse, const float *qkv);
void gpt_cp_attention_backward(gpt_model *m, float *dqkv, const float *dout, const float *qkv, const float *atty,
                               const float *lse);
void gpt_cp_add_positions(gpt_model *m, float *x);
void gpt_cp_positions_backward(gpt_model *m, const float *dx);
void gpt_cp_local_tokens(const gpt_model *m, const int *whole, int *local);
void gpt_cp_alloc(gpt_model *m);
void gpt_cp_free(gpt_model *m);
/* gpt_cp_chunk: the global chunk (of 2 cp) that holds CP rank r's c-th (0 or 1) half of its
 * positions: r, then 2 cp - 1 - r. Ring attention (gpt_cp_ring.c, shard.cp_ring_p2p): the
 * forward and backward of the rank's attention with K/V blocks passed around the CP group, in
 * place of the all-gather; _alloc / _free its scratch. */
int gpt_cp_chunk(const gpt_model *m, int r, int c);
void gpt_cp_ring_forward(gpt_model *m, float *atty, float *lse, const float *qkv);
void gpt_cp_ring_backward(gpt_model *m, float *dqkv, const float *dout, const float *qkv, const float *atty,
                          const float *lse);
/* Without the block kernels: gpt_cp_ring_gather puts every rank's K and V (brought by the ring)
 * and the rank's own qkv rows into m->cp_qkv (other ranks' queries zero); gpt_cp_ring_reduce
 * sends the K/V gradients of m->cp_dqkv around the ring to their owners and adds the rank's rows
 * (its dq, its K/V gradient from every rank) to dqkv. gpt_cp_rows: CP rank r's rows (B x T, w
 * floats) of whole sequences (B x cp T), to the whole (to_whole) or from it. */
void gpt_cp_ring_gather(gpt_model *m, const float *qkv);
void gpt_cp_ring_reduce(gpt_model *m, float *dqkv);
void gpt_cp_rows(const gpt_model *m, float *whole, float *local, int r, int w, int to_whole);
void gpt_cp_ring_alloc(gpt_model *m);
void gpt_cp_ring_free(gpt_model *m);
/* The all-to-all form (gpt_cp_a2a.c; shard.cp_a2a, DeepSpeed-Ulysses), one profiled op each:
 * gpt_cp_a2a_qkv: the layer's qkv rows (the q, k and v blocks one after another; k and v as
 * query groups under GQA, sent so and repeated to heads on arrival) to x's whole sequence of its
 * heads; _attention: the causal
 * attention of those heads there, into x; _out: x's output back to the rank's rows (atty). The
 * backward: _dout: the output gradient to the heads' ranks; _attention_backward: on what x
 * kept; _dqkv: the qkv gradient back to the positions' owners, added to dqkv. _free_acts: a
 * layer's kept tensors (gpt_acts.c allocates them); _alloc / _free: the exchanges' scratch. */
int gpt_cp_a2a(const gpt_model *m);
void gpt_cp_a2a_qkv(gpt_model *m, gpt_layer_acts *x, const float *qkv);
void gpt_cp_a2a_attention(gpt_model *m, gpt_layer_acts *x);
void gpt_cp_a2a_out(gpt_model *m, gpt_layer_acts *x, float *atty);
void gpt_cp_a2a_dout(gpt_model *m, const float *dout);
void gpt_cp_a2a_attention_backward(gpt_model *m, const gpt_layer_acts *x);
void gpt_cp_a2a_dqkv(gpt_model *m, float *dqkv);
void gpt_cp_a2a_free_acts(const kernels_backend *k, gpt_layer_acts *x);
void gpt_cp_a2a_alloc(gpt_model *m);
void gpt_cp_a2a_free(gpt_model *m);

/* The TP GEMMs with their collectives (gpt_sp.c), one call each on every path: without TP the
 * GEMM alone, with TP an all-reduce, under SP an all-gather or reduce-scatter, and under
 * --tp-comm-overlap those as rings beside the GEMMs of the blocks of tokens at hand.
 *   column_forward: out (N x n) = all tokens of stream x (k wide) times w^T, + b.
 *   row_forward: out (the stream's tokens, n wide) = the TP sum of in (N x k) times w^T (+ b,
 *     which only TP rank 0 passes).
 *   row_backward: its backward from the stream's dout: dinp (N x k, zeroed first), dw, db.
 *   column_backward: column_forward's backward from dout (N x n) and the stream's input in:
 *     dw, db, and the TP sum of the input gradient into dnorm (the stream's tokens), through
 *     scratch (N x k) where not overlapped. */
void gpt_sp_column_forward(gpt_model *m, const float *x, const float *w, const float *b, float *out, int k, int n);
void gpt_sp_row_forward(gpt_model *m, const float *in, const float *w, const float *b, float *out, int k, int n);
void gpt_sp_row_backward(gpt_model *m, float *dinp, float *dw, float *db, const float *dout, const float *in,
                         const float *w, int k, int n);
void gpt_sp_column_backward(gpt_model *m, float *dnorm, float *dw, float *db, const float *dout, const float *in,
                            const float *w, int k, int n, float *scratch);
#endif
