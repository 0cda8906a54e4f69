/* The layout planner; see plan.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "plan.h"

const char *recompute_name(recompute_kind r)
{
    static const char *names[] = {"none", "selective", "full"};
    return r <= RECOMPUTE_FULL ? names[r] : "?";
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void plan_apply(const scenario_config *base, const plan_layout *l, scenario_config *out)
{
    *out = *base;
    out->parallel.tp = l->tp;
    out->parallel.pp = l->pp;
    out->parallel.dp = l->dp;
    out->parallel.cp = l->cp;
    out->parallel.vpp = l->vpp;
    out->parallel.sequence_parallel = l->sp;
    out->parallel.zero_stage = l->zero;
    out->parallel.schedule = l->schedule;
    out->training.micro_batch_size = l->micro_batch;
    out->training.recompute = l->recompute;
    /* A hand-made uneven split belongs to the scenario's own pipeline depth only. */
    if (l->pp != base->parallel.pp || l->vpp != base->parallel.vpp) {
        out->parallel.pipeline_layers = NULL;
        out->parallel.pipeline_layers_count = 0;
    }
    out->run.fidelity_flow = 0;
}

static void push(plan_result *r, const plan_layout *l)
{
    if (r->count == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 256;
        r->layouts = realloc(r->layouts, (size_t)r->cap * sizeof *r->layouts);
    }
    r->layouts[r->count++] = *l;
}

/* Evaluates one candidate: layout rules, then memory, then the simulation. */
static void evaluate(const scenario_config *base, plan_layout *l, plan_result *r)
{
    scenario_config s;
    config_error err;
    plan_apply(base, l, &s);
    r->enumerated++;
    if (scenario_validate_layout(&s, &err) != 0) {
        r->invalid++;
        if (!r->first_invalid[0])
            snprintf(r->first_invalid, sizeof r->first_invalid, "%s", err.msg);
        return;
    }
    run_memory mem;
    run_memory_estimate(&s, &mem);
    if (mem.oom) {
        r->out_of_memory++;
        return;
    }
    if (run_scenario(&s, &l->result, &err) != 0) {
        r->invalid++;
        return;
    }
    double tokens = s.training.tokens;
    l->days_to_train = tokens > 0 && l->result.tokens_per_s > 0 ? tokens / l->result.tokens_per_s / 86400.0 : 0;
    push(r, l);
}

int plan_compare(const void *a, const void *b)
{
    double x = ((const plan_layout *)a)->result.step_time_s, y = ((const plan_layout *)b)->result.step_time_s;
    return (x > y) - (x < y);
}

static int same_layout(const plan_layout *a, const plan_layout *b)
{
    return a->tp == b->tp && a->pp == b->pp && a->dp == b->dp && a->cp == b->cp && a->vpp == b->vpp &&
           a->sp == b->sp && a->zero == b->zero && a->micro_batch == b->micro_batch &&
           a->recompute == b->recompute && a->schedule == b->schedule;
}

int plan_search(const scenario_config *base, int gpus, plan_result *out, config_error *err,
                void (*progress)(long done, long total))
{
    memset(out, 0, sizeof *out);
    double t0 = now_s();
    long long platform_gpus = (long long)base->platform.network.nodes * base->platform.node.gpus;
    if (gpus <= 0)
        gpus = scenario_gpus(base);
    if (gpus > platform_gpus) {
        snprintf(err->msg, sizeof err->msg, "--gpus %d: the platform has only %lld GPUs", gpus, platform_gpus);
        return -1;
    }
    int gpn = base->platform.node.gpus;
    long long L = base->model.num_layers, seq = base->model.seq_length;

    /* The scenario's own layout first, so the plan is never worse than it. */
    plan_layout own;
    memset(&own, 0, sizeof own);
    own.tp = base->parallel.tp;
    own.pp = base->parallel.pp;
    own.dp = base->parallel.dp;
    own.cp = base->parallel.cp;
    own.vpp = base->parallel.vpp;
    own.sp = base->parallel.sequence_parallel;
    own.zero = base->parallel.zero_stage;
    own.micro_batch = base->training.micro_batch_size;
    own.recompute = base->training.recompute;
    own.schedule = base->parallel.schedule;
    own.is_scenario_own = 1;
    if ((long long)own.tp * own.pp * own.dp * own.cp == gpus)
        evaluate(base, &own, out);

    static const int mbs[] = {1, 2, 4, 8};
    static const int cps[] = {1, 2, 4, 8};
    long total = 0, done = 0;
    for (int pass = 0; pass < 2; pass++) { /* pass 0 counts, pass 1 evaluates */
        for (int tp = 1; tp <= gpn && tp <= gpus; tp *= 2)
            for (long long pp = 1; pp <= L && tp * pp <= gpus; pp++) {
                if (L % pp)
                    continue;
                for (int ci = 0; ci < 4; ci++) {
                    int cp = cps[ci];
                    if (cp > 1 && (seq < 8192 || seq % cp))
                        continue;
                    long long model = (long long)tp * pp * cp;
                    if (gpus % model)
                        continue;
                    int dp = (int)(gpus / model);
                    for (int mi = 0; mi < 4; mi++)
                        for (int vpp = 1; vpp <= (pp > 1 ? 4 : 1); vpp *= 2)
                            for (int zero = 0; zero <= (dp * cp > 1 ? 3 : 0); zero++)
                                for (int rec = 0; rec <= RECOMPUTE_FULL; rec++)
                                    for (int sp = 0; sp <= (tp > 1); sp++) {
                                        if (pass == 0) {
                                            total++;
                                            continue;
                                        }
                                        plan_layout l;
                                        memset(&l, 0, sizeof l);
                                        l.tp = tp;
                                        l.pp = (int)pp;
                                        l.dp = dp;
                                        l.cp = cp;
                                        l.vpp = vpp;
                                        l.sp = sp;
                                        l.zero = zero;
                                        l.micro_batch = mbs[mi];
                                        l.recompute = (recompute_kind)rec;
                                        l.schedule = vpp > 1 ? PIPELINE_INTERLEAVED : PIPELINE_1F1B;
                                        if (!same_layout(&l, &own))
                                            evaluate(base, &l, out);
                                        if (progress && (++done % 500 == 0 || done == total))
                                            progress(done, total);
                                    }
                }
            }
    }
    if (out->count > 1)
        qsort(out->layouts, (size_t)out->count, sizeof *out->layouts, plan_compare);
    out->wall_s = now_s() - t0;
    return 0;
}

void plan_result_free(plan_result *r)
{
    free(r->layouts);
    memset(r, 0, sizeof *r);
}
