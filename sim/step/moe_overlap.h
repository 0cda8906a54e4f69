/* Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm; Megatron-LM
 * docs/user-guide/features/moe_a2a_overlap.md): a stage runs the backward of one micro-batch and
 * the forward of the next as one pass, layer against layer (the forward's first with the
 * backward's last), so that each one's expert-parallel all-to-alls run on the communication
 * stream beside the other's compute. Each layer is four nodes: attention (with the router and
 * the dispatch's preprocessing) and the experts on the compute stream, the dispatch and the
 * combine all-to-alls on the communication stream. For one forward/backward layer pair the
 * issue order is
 *     compute stream:        F.attn, B.experts, F.experts, B.attn
 *     communication stream:  B.combine, F.dispatch, B.dispatch, F.combine
 * and each node waits for its predecessor in its own pass (F: attn -> dispatch -> experts ->
 * combine -> next layer's attn; B: combine -> experts -> dispatch -> attn -> next layer's
 * combine). Megatron-Core runs the combine's local postprocessing (unpermute, and here what
 * follows it to the layer's end) on the communication stream; dtsim keeps it compute, on the
 * compute stream: the backward's before its combine (B.pre, first of the pair's compute), the
 * forward's after its combine (F.post, last). While an all-to-all runs, the compute
 * beside it progresses at 1 / overlap_slowdown (the calibration's factor, as every overlap in
 * dtsim). */
#ifndef DTSIM_SIM_MOE_OVERLAP_H
#define DTSIM_SIM_MOE_OVERLAP_H

/* One layer's pass split at its two EP all-to-alls (seconds): for a forward attn -> dispatch ->
 * experts -> combine -> combine_compute, for a backward combine_compute -> combine -> experts ->
 * dispatch -> attn (each the gradient's node of that name). dispatch and combine are the
 * all-to-alls alone; combine_compute is the compute on the combine's side of the layer (the
 * unpermute, and to the layer's end). A dense layer is all attn. */
typedef struct {
    double attn, dispatch, experts, combine, combine_compute;
} moe_layer_parts;

typedef struct {
    double time_s;          /* the pair's span: first node's start to last node's end */
    double compute_s;       /* the compute stream's busy time (slowed where beside an all-to-all) */
    double overlap_cost_s;  /* what the slowdown added to the compute (in compute_s) */
    double comm_exposed_s;  /* time an all-to-all ran with the compute stream idle (<= comm_total_s) */
    double comm_total_s;    /* every all-to-all's time */
} moe_pair_result;

/* `pairs` forward/backward layer pairs, every layer alike (f: the forward's parts, b: the
 * backward's), run as above from an idle GPU. Returns 0, or -1 for pairs < 0 or a part < 0. */
int moe_pair_time(const moe_layer_parts *f, const moe_layer_parts *b, int pairs, double overlap_slowdown,
                  moe_pair_result *out);
#endif
