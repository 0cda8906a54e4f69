/* See host_issue.h. */
#include <string.h>
#include "host_issue.h"

/* nanotron's launches per micro-batch, read from its code at the branch the Ultra-Scale Playbook
 * ran (huggingface/nanotron nouamane/bench2 @ 67c5ebb6; a code survey of 2026-11-30, counts of
 * kernels and NCCL calls, each about +-10%):
 *  - a LlamaDecoderLayer's forward at TP 1 (models/llama.py): RMSNorm (one Triton kernel), the QKV
 *    linear, a contiguous copy of q, a cat and a copy of k and v, two rotary kernels, six small
 *    kernels rebuilding cu_seqlens, flash_attn_varlen_func, the output linear, a residual add, the
 *    second RMSNorm, gate_up, SiLU and a multiply, down, a residual add: 22. At TP > 1 (its
 *    REDUCE_SCATTER mode, sequence parallelism: config_playbook.c refuses the other) its
 *    column-parallel linears (parallel/tensor_parallel/functional.py,
 *    _ColumnLinearAsyncCommunication) add an all-gather and split the GEMM around the rank's own
 *    shard (two GEMMs on the group's edge ranks, three in the middle) and its row-parallel
 *    linears a reduce-scatter: 28 at TP 2, 30 from TP 3 on (the middle ranks set the pace: every
 *    collective waits for the slowest rank);
 *  - its backward: 35-40 at TP 1 and 45-50 at TP > 1 (six NCCL calls), 38 and 48 here, plus the
 *    fp32 gradient accumulation's add_ per parameter (optim/gradient_accumulator.py: six a layer);
 *  - the embedding (parallel/tensor_parallel/nn.py): a lookup at TP 1, its vocabulary mask,
 *    lookup, masking and reduce-scatter at TP > 1 (10); backward 2 and 5;
 *  - the final norm, LM head and loss (models/llama.py: the head's linear, the cast to fp32, Loss,
 *    _ShardedCrossEntropy, whose three all-reduces run at TP 1 too, and masked_mean): 27 at TP 1,
 *    30 at TP > 1 (the head's linear gathers and splits as the layers' do); backward 10 and 12. */
void host_launches_of(const scenario_config *s, host_launches *out)
{
    memset(out, 0, sizeof *out);
    if (s->parallel.framework != FRAMEWORK_NANOTRON)
        return;
    int tp = s->parallel.tp;
    out->layer_fwd = tp <= 1 ? 22 : tp == 2 ? 28 : 30;
    out->layer_bwd = (tp <= 1 ? 38 : 48) + 6;
    out->embed_fwd = tp <= 1 ? 1 : 10;
    out->embed_bwd = tp <= 1 ? 2 : 5;
    out->head_fwd = tp <= 1 ? 27 : 30;
    out->head_bwd = tp <= 1 ? 10 : 12;
}

void host_issue_of(const scenario_config *s, host_issue *out)
{
    host_launches_of(s, &out->launches);
    out->launch_s = s->calibration.host_issue_us * 1e-6;
}

double host_issue_pass_s(const host_issue *h, int fwd, double nl, double nr, int with_embed, int with_head)
{
    const host_launches *n = &h->launches;
    double launches = nl * (fwd ? n->layer_fwd : n->layer_bwd) + nr * n->layer_fwd +
                      (with_embed ? (fwd ? n->embed_fwd : n->embed_bwd) : 0) +
                      (with_head ? (fwd ? n->head_fwd : n->head_bwd) : 0);
    return launches * h->launch_s;
}
