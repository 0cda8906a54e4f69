/* See run.h, run_scenario_folded. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compression.h"
#include "config_json.h"
#include "cost.h"
#include "run.h"
#include "periodic.h"
#include "wall_clock.h"
#include "zero3.h"

/* Under a pipeline, DeepSpeed's stage 3 reduce-scatters every backward's gradients and the stage's
 * next pass waits for them: the stages settle into their common period one by one from the first,
 * past 160 micro-batches on GPT-3 175B at TP 8 x PP 32 (tests/plan/test_fold.c). On that model's
 * search the certificate accepted 47 of its 118 such layouts at two pipeline depths and 13 at one
 * depth and a period, and the attempts cost more than they saved (2.2-2.4 s of replays against
 * 1.64 s replaying them all in full; 2026-11-28, the 2-core VM, one thread). So their first
 * attempt is eight pipeline depths, past the five that layout takes: a planner's short steps
 * (fewer than 16 depths) replay in full, and a long step (a dtsim run of thousands of
 * micro-batches) is shown periodic and extended at the first attempt. Starting at four depths
 * cost the planner 4% (GPT-3 175B's search, one thread, 2.49 s against 2.58 s, best of 7) for
 * attempts that mostly failed. Only the cost depends on where the attempts start; the
 * certificate decides what is extended. */
static int zero3_settles_late(const scenario_config *s)
{
    zero3_plan z3;
    zero3_plan_of(s, &z3);
    return z3.active && z3.reduce_every_backward && s->parallel.pp > 1;
}

/* What may fold at all: the analytic replay of one step with nothing that varies by micro-batch
 * outside the graph (stragglers and degraded links, input stalls, gradient compression's
 * per-bucket work) and no ranks time-sharing a device (the CPU engine's closed loops), whose pace
 * depends on the micro-batch count (cost.h, cost_ranks_per_device). Whether the step is periodic
 * by the depth replayed is then shown, not assumed (periodic.h). NULL where it may, else why not. */
static const char *unfoldable(const scenario_config *s)
{
    if (s->run.fidelity_flow)
        return "flow fidelity";
    if (s->faults.straggler_count > 0 || s->faults.degraded_count > 0)
        return "stragglers or degraded links";
    if (s->training.data_loader.present)
        return "input stalls (training.data_loader)";
    char how[64];
    if (compression_describe(s, how, sizeof how)[0]) /* its effect is summed over the whole step */
        return "gradient compression or a narrower gradient reduction";
    if (cost_ranks_per_device(s) != 1.0)
        return "ranks share a device";
    return NULL;
}

/* The attempt the fold starts at: DeepSpeed-style ZeRO-3 under a pipeline settles late (above). */
static int first_attempt(const scenario_config *s)
{
    return zero3_settles_late(s) ? 3 : 0;
}

/* One period: a micro-batch, or a round of pp when interleaved (its micro-batch count is a
 * multiple of pp). */
static long long fold_period(const scenario_config *s)
{
    long long pp = s->parallel.pp > 0 ? s->parallel.pp : 1;
    return s->parallel.vpp > 1 ? pp : 1;
}

/* Every figure extended is a sum of times, never negative: one near zero (an overlap cost of
 * 1e-16 s) may round below it. */
static double extrapolate(double a, double b, double k)
{
    return fmax(0, a + k * (b - a));
}

/* The step of m1 + period micro-batches (b) replayed, and whether it shows the step periodic from
 * m1 on (sim/replay/periodic.h) beside the graph of m1 (a); only then a replayed too, as the
 * extrapolation needs both. 1: certified, ra and rb filled; 0: not; -1: error. */
static int replay_pair(const scenario_config *s, long long m1, long long period, run_result *ra, run_result *rb,
                       double *bubble, replay_period *cert, config_error *err)
{
    scenario_config a = scenario_with_micro_batches(s, m1), b = scenario_with_micro_batches(s, m1 + period);
    int stages = s->parallel.pp > 0 ? s->parallel.pp : 1;
    step_workload wa, wb;
    replay_times tb;
    memset(ra, 0, sizeof *ra);
    memset(rb, 0, sizeof *rb);
    if (run_graph_build(&a, &wa, err) != 0)
        return -1;
    int rc = -1;
    if (run_graph_build(&b, &wb, err) == 0) {
        if (run_graph_replay(&b, &wb, rb, NULL, bubble + stages, &tb, err) == 0) {
            rc = replay_period_certify(&wa, &wb, &tb, (int)period, cert);
            if (rc != 0)
                snprintf(err->msg, sizeof err->msg, "out of memory certifying a %d-stage step", stages);
            replay_times_free(&tb);
        }
        workload_free(&wb);
    }
    if (rc == 0 && cert->certified) {
        rc = run_graph_replay(&a, &wa, ra, NULL, bubble, NULL, err);
        /* the step too grows by the certified period (as it must: its end is after the cut) */
        if (rc == 0 && !(fabs(rb->step_time_s - ra->step_time_s - cert->period_s) <= 1e-9 * rb->step_time_s)) {
            cert->certified = 0;
            snprintf(cert->why, sizeof cert->why, "the step grew by %.9g s, not the period's %.9g s",
                     rb->step_time_s - ra->step_time_s, cert->period_s);
        }
    }
    workload_free(&wa);
    return rc < 0 ? -1 : cert->certified;
}

long long run_fold_micro_batches(const scenario_config *s, int attempt)
{
    long long pp = s->parallel.pp > 0 ? s->parallel.pp : 1, v = s->parallel.vpp > 1 ? s->parallel.vpp : 1;
    long long period = fold_period(s), depth = pp * v;
    long long m1 = attempt == 0 ? depth + period : depth << (attempt < 40 ? attempt : 40);
    return (m1 + period - 1) / period * period;
}

long long run_fold_first_replay_micro_batches(const scenario_config *s)
{
    long long m = scenario_micro_batches(s), period = fold_period(s);
    if (unfoldable(s))
        return m;
    long long m1 = run_fold_micro_batches(s, first_attempt(s));
    return 2 * m1 + period >= m ? m : 2 * m1 + period;
}

/* Whether the gate lets the replay of `micro_batches` of s run (full: the step's own). */
static int gate_allows(const run_gate *gate, const scenario_config *s, long long micro_batches, int full,
                       config_error *err)
{
    if (!gate)
        return 1;
    scenario_config c = full ? *s : scenario_with_micro_batches(s, micro_batches);
    return gate->allow(gate->ctx, &c, full, err) == 0;
}

int run_scenario_folded(const scenario_config *s, run_result *r, config_error *err)
{
    return run_scenario_folded_gated(s, r, NULL, err);
}

int run_scenario_folded_gated(const scenario_config *s, run_result *r, const run_gate *gate, config_error *err)
{
    long long pp = s->parallel.pp > 0 ? s->parallel.pp : 1;
    long long m = scenario_micro_batches(s), period = fold_period(s);
    const char *not_here = unfoldable(s);
    if (not_here) {
        if (!gate_allows(gate, s, m, 1, err))
            return RUN_GATED;
        int rc = run_scenario(s, r, err);
        if (!s->run.fidelity_flow) /* a flow replay never folds: nothing to explain */
            snprintf(r->fold_why, sizeof r->fold_why, "%s", not_here);
        return rc;
    }
    double t0 = wall_clock_s();
    int stages = (int)pp;
    double *bubble = malloc(2 * (size_t)stages * sizeof *bubble);
    if (!bubble) {
        snprintf(err->msg, sizeof err->msg, "out of memory for %d stages' bubbles", stages);
        return -1;
    }
    run_result ra, rb;
    double spent = 0; /* micro-batches replayed so far */
    long long m1 = 0;
    int certified = 0, attempt_refused = 0;
    config_error refused; /* the gate's refusal of an attempt, when it refused one */
    char why[sizeof r->fold_why];
    snprintf(why, sizeof why, "%lld micro-batches, fewer than two short replays take", m);
    /* deeper while the step is not yet periodic, as long as the two replays and those before
     * them cost less than the full one */
    for (int attempt = first_attempt(s); !certified; attempt++) {
        long long last = m1;
        m1 = run_fold_micro_batches(s, attempt);
        if (m1 <= last && attempt == 1) /* one stage: one depth and a period is two depths already */
            continue;
        if (m1 <= last || spent + 2 * m1 + period >= m)
            break;
        if (!gate_allows(gate, s, 2 * m1 + period, 0, &refused)) { /* the full replay is asked next */
            if (spent == 0)
                snprintf(why, sizeof why, "its short replays of %lld micro-batches are over the limits too", m1);
            attempt_refused = 1;
            break;
        }
        replay_period cert;
        int rc = replay_pair(s, m1, period, &ra, &rb, bubble, &cert, err);
        spent += 2 * m1 + period;
        if (rc < 0) {
            /* the summary's reason, not the error: whole where it fits, else marked where cut */
            if ((size_t)snprintf(why, sizeof why, "%s", err->msg) >= sizeof why)
                memcpy(why + sizeof why - sizeof CONFIG_CUT, CONFIG_CUT, sizeof CONFIG_CUT);
            break; /* the full replay says what went wrong, if anything */
        }
        certified = rc == 1 && ra.step_time_s > 0 && rb.step_time_s > 0;
        if (!certified)
            snprintf(why, sizeof why, "not shown periodic from %lld micro-batches: %s", m1,
                     rc == 1 ? "a step of no time" : cert.why);
    }
    if (!certified) {
        free(bubble);
        if (!gate_allows(gate, s, m, 1, err)) {
            /* the attempt refused first is what stopped the fold: its figures, not the (larger)
             * full replay's, say what the limits would have to let through */
            if (attempt_refused)
                *err = refused;
            size_t n = strlen(err->msg);
            snprintf(err->msg + n, sizeof err->msg - n, " Not folded: %s.", why);
            return RUN_GATED;
        }
        int rc = run_scenario(s, r, err);
        r->wall_s = wall_clock_s() - t0; /* the attempts too */
        snprintf(r->fold_why, sizeof r->fold_why, "%s", why);
        return rc;
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
    r->wall_s = wall_clock_s() - t0; /* builds, certificates and attempts that failed included */
    r->folded = 1;
    r->fold_micro_batches[0] = m1;
    r->fold_micro_batches[1] = m1 + period;
    return 0;
}
