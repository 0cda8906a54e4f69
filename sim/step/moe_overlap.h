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
 * combine). While an all-to-all runs, the compute beside it progresses at 1 / overlap_slowdown
 * (the calibration's factor, as every overlap in dtsim). */
#ifndef DTSIM_SIM_MOE_OVERLAP_H
#define DTSIM_SIM_MOE_OVERLAP_H

/* One layer's pass split at its two EP all-to-alls (seconds): for a forward attn -> dispatch ->
 * experts -> combine, for a backward combine -> experts -> dispatch -> attn (each the gradient's
 * node of that name). Compute after the combine (its unpermute) belongs to the combine node, as
 * in Megatron-Core. A dense layer is all attn. */
typedef struct {
    double attn, dispatch, experts, combine;
} moe_layer_parts;

typedef struct {
    double time_s;          /* the pair's span: first node's start to last node's end */
    double compute_s;       /* the compute stream's busy time (slowed where beside communication) */
    double overlap_cost_s;  /* what the slowdown added to the compute (in compute_s) */
    double comm_exposed_s;  /* time an all-to-all ran with the compute stream idle */
    double comm_total_s;    /* every all-to-all's time */
} moe_pair_result;

/* `pairs` forward/backward layer pairs, every layer alike (f: the forward's parts, b: the
 * backward's), run as above from an idle GPU. Returns 0, or -1 for pairs < 0 or a part < 0. */
int moe_pair_time(const moe_layer_parts *f, const moe_layer_parts *b, int pairs, double overlap_slowdown,
                  moe_pair_result *out);
#endif
