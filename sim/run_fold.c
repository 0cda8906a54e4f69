/* See run.h, run_scenario_folded. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "cost.h"
#include "run.h"
#include "zero3.h"

/* Whether the analytic step repeats per micro-batch (see run.h). Not under ZeRO-3 that gathers
 * every micro-batch: its gathers and reduce-scatters, prefetched across micro-batch boundaries
 * (zero3.h), had not settled into a cycle 5 pipeline depths in on GPT-3 175B's layouts (exposed
 * DP time up to 50% off, the step up to 3.3%; FSDP2's "always" under PP, 1.2e-6 of the step);
 * FSDP2 under PP that never reshards gathers in a chunk's first forward and reduces after its last
 * backward, around the same steady state as ZeRO-1/2 (tests/plan checks it layout by layout). Nor
 * where ranks time-share a device (the CPU engine's closed loops): their pace depends on the
 * micro-batch count (cost.h, cost_ranks_per_device). Those replay in full. */
static int zero3_folds(const scenario_config *s)
{
    zero3_plan z3;
    zero3_plan_of(s, &z3);
    return z3.active && !z3.reduce_every_backward && !z3.reshard_after_forward;
}

static int foldable(const scenario_config *s)
{
    return !s->run.fidelity_flow && s->faults.straggler_count == 0 && s->faults.degraded_count == 0 &&
           !s->training.data_loader.present && s->parallel.grad_compression == GRAD_COMPRESSION_NONE &&
           (s->parallel.zero_stage < 3 || zero3_folds(s)) && cost_ranks_per_device(s) == 1.0;
}

static double extrapolate(double a, double b, double k)
{
    return a + k * (b - a);
}

int run_scenario_folded(const scenario_config *s, run_result *r, config_error *err)
{
    /* one period: a micro-batch, or a round of pp when interleaved (its micro-batch count is a
     * multiple of pp) */
    long long pp = s->parallel.pp > 0 ? s->parallel.pp : 1, v = s->parallel.vpp > 1 ? s->parallel.vpp : 1;
    long long m = scenario_micro_batches(s), period = v > 1 ? pp : 1;
    long long m1 = (RUN_FOLD_DEPTHS * pp * v + period - 1) / period * period;
    if (!foldable(s) || 2 * m1 + period >= m) /* the two replays would cost the full one or more */
        return run_scenario(s, r, err);
    scenario_config a = *s, b = *s;
    long long per = s->training.micro_batch_size * s->parallel.dp; /* sequences per micro-batch round */
    a.training.global_batch_size = m1 * per;
    b.training.global_batch_size = (m1 + period) * per;
    int stages = (int)pp;
    double *bubble = malloc(2 * (size_t)stages * sizeof *bubble);
    if (!bubble) {
        snprintf(err->msg, sizeof err->msg, "out of memory for %d stages' bubbles", stages);
        return -1;
    }
    run_result ra, rb;
    if (run_scenario_stages(&a, &ra, NULL, bubble, err) != 0 ||
        run_scenario_stages(&b, &rb, NULL, bubble + stages, err) != 0 || !(ra.step_time_s > 0) ||
        !(rb.step_time_s > 0)) {
        free(bubble);
        return run_scenario(s, r, err); /* the full replay says what went wrong, if anything */
    }
    double k = (double)(m - m1) / (double)period; /* periods beyond the first replay's */
    *r = rb;
    r->step_time_s = extrapolate(ra.step_time_s, rb.step_time_s, k);
    for (int c = 0; c < COMM_CLASS_COUNT; c++) {
        r->comm_total_s[c] = extrapolate(ra.comm_total_s[c], rb.comm_total_s[c], k);
        r->comm_exposed_s[c] = extrapolate(ra.comm_exposed_s[c], rb.comm_exposed_s[c], k);
    }
    r->compute_s = extrapolate(ra.compute_s, rb.compute_s, k);
    r->overlap_cost_s = extrapolate(ra.overlap_cost_s, rb.overlap_cost_s, k);
    r->tasks = (long)llround(extrapolate((double)ra.tasks, (double)rb.tasks, k));
    /* each stage's bubble in seconds, which add up, then as fractions of the step again; the
     * largest may be another stage's than at m1 */
    for (int p = 0; p < stages; p++)
        bubble[p] = extrapolate(bubble[p], bubble[stages + p], k);
    replay_bubble_summary(bubble, stages, r->step_time_s, &r->bubble_mean, &r->bubble_max, &r->bubble_max_stage);
    free(bubble);
    run_memory_estimate(s, &r->memory);
    run_result_finish(s, r);
    r->wall_s = ra.wall_s + rb.wall_s;
    r->folded = 1;
    return 0;
}
