/* See workload_bound.h. */
#include <math.h>
#include <stdlib.h>
#include "workload_bound.h"
#include "workload_internal.h"

/* What a pass holds its stage's compute stream for at least. The communication folded into it
 * (TP's all-reduces, what of them the GEMMs do not hide) blocks that stream as the compute does,
 * and the replay runs a compute task for its whole duration or longer, so a pass's whole time
 * counts (sum_ops in workload_costs.c: compute ops, exposed communication, overlap's cost).
 * Megatron-Core's combined 1F1B (overlap_moe_a2a) is the exception: a backward and the next
 * forward run as one task shorter than the two (their EP all-to-alls hidden under each other's
 * compute, workload.c emit_combined), so there only the compute ops count. */
static double pass_s(const builder *b, const pass_cost *c)
{
    if (b->s->parallel.overlap_moe_a2a)
        return fmax(0, c->time_s - c->comm_s - c->overlap_cost_s);
    return c->time_s;
}

/* ZeRO-3 where every pass gathers (DeepSpeed's stage 3 and Megatron-FSDP: a forward and a backward
 * both let their layers go, zero3.h): the gathers of stage p's layers on its communication stream,
 * a layer's gather a pass (and one more for a layer full recomputation re-runs, where that
 * re-gathers), each the time the graph gives it (gather_calls_per_layer calls of
 * workload_collective_s); 0 otherwise. The reduce-scatters, the embedding's and the head's
 * gathers count as 0. */
static double zero3_gathers_s(const builder *b, const scenario_config *s, int p)
{
    const zero3_plan *z = &b->z3;
    if (!z->active || !z->reshard_after_forward || !z->reshard_after_backward || b->dp.ranks <= 1 ||
        !(z->layer_params > 0))
        return 0;
    double k = fmax(1, z->gather_calls_per_layer), gathers = 0;
    double one = k * workload_collective_s(b, COLL_ALL_GATHER, z->layer_params * b->cm.act_bytes / k, b->dp);
    /* a re-run layer's backward gathers what its re-run did not keep (zero3.h) */
    double left = z->layer_params - z->rerun_kept_params, left_calls = k - z->rerun_kept_calls, after_rerun = 0;
    if (left >= 0.5)
        after_rerun = fmax(1, left_calls) *
                      workload_collective_s(b, COLL_ALL_GATHER, left * b->cm.act_bytes / fmax(1, left_calls), b->dp);
    for (int c = 0; c < b->V; c++) {
        int L = b->layers[pipeline_virtual_stage(b->P, p, c)];
        double rerun = z->regather_rerun ? scenario_recomputed_layers(s, L) : 0;
        gathers += (2.0 * L - rerun) * one + rerun * (one + after_rerun);
    }
    return (double)b->m * gathers;
}

double workload_step_lower_bound(const scenario_config *s)
{
    builder b;
    config_error err;
    if (workload_builder_init(&b, s, &err) != 0) {
        free(b.layers);
        return 0;
    }
    int last_vs = b.P * b.V - 1;
    double m = b.m, fwd = pass_s(&b, &b.layer_fwd), bwd = pass_s(&b, &b.layer_bwd);
    double rerun = s->training.recompute == RECOMPUTE_NONE ? 0 : pass_s(&b, &b.layer_recompute);
    double ahead = 0, behind = 0, bound = 0; /* chunk 0's forwards and backwards of the stages before */
    for (int p = 0; p < b.P; p++) {
        double work = 0, first_fwd = 0, first_bwd = 0;
        for (int c = 0; c < b.V; c++) {
            int vs = pipeline_virtual_stage(b.P, p, c), L = b.layers[vs];
            /* a forward meets the embedding first and the head last, a backward the other way */
            double f = L * fwd + (vs == 0 ? pass_s(&b, &b.embed_fwd) : 0) +
                       (vs == last_vs ? pass_s(&b, &b.head_fwd) : 0);
            double k = L * bwd + scenario_recomputed_layers(s, L) * rerun +
                       (vs == 0 ? pass_s(&b, &b.embed_bwd) : 0) + (vs == last_vs ? pass_s(&b, &b.head_bwd) : 0);
            /* a pass takes at least the host's issue of its kernels (host_issue.h; 0 where none) */
            f = fmax(f, host_issue_pass_s(&b.host, 1, L, 0, vs == 0, vs == last_vs));
            k = fmax(k, host_issue_pass_s(&b.host, 0, L, scenario_recomputed_layers(s, L), vs == 0, vs == last_vs));
            work += m * (f + k);
            if (c == 0) {
                first_fwd = f;
                first_bwd = k;
            }
        }
        bound = fmax(bound, fmax(ahead + work + behind, zero3_gathers_s(&b, s, p)));
        ahead += first_fwd;
        behind += first_bwd;
    }
    free(b.layers);
    return bound;
}
