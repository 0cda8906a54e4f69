/* The planner's search: enumerate the candidate layouts, check each against the layout rules
 * and the memory model, simulate the rest (analytic), rank. Candidates are independent, so
 * worker threads take them in chunks; each thread keeps its own results and tallies, merged
 * at the end, and the ranking does not depend on which thread ran what. See plan.h. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "plan.h"
#include "workload_size.h"
#include "wall_clock.h"

#define PLAN_MAX_THREADS 64
#define PLAN_CHUNK 8 /* candidates a thread takes at once: small, the costs vary a lot */
/* plan_estimate checks a candidate's memory (its schedule walked) below this many tasks */
#define PLAN_ESTIMATE_MEMORY_TASKS 100000

int plan_default_threads(void)
{
    const char *env = getenv("DTSIM_THREADS");
    long n = env && *env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > PLAN_MAX_THREADS ? PLAN_MAX_THREADS : (int)n;
}

static int push(plan_result *r, const plan_layout *l)
{
    if (r->count == r->cap) {
        int cap = r->cap ? 2 * r->cap : 256;
        plan_layout *grown = realloc(r->layouts, (size_t)cap * sizeof *r->layouts);
        if (!grown)
            return -1;
        r->layouts = grown;
        r->cap = cap;
    }
    r->layouts[r->count++] = *l;
    return 0;
}

/* One thread's share of the work. */
typedef struct {
    plan_result part;
    long first_invalid_order;  /* which candidate gave part.first_invalid: the earliest wins */
    int failed;                /* out of host memory */
} worker_out;

typedef struct {
    const scenario_config *base;
    const plan_layout *cand;
    const long *order;         /* the candidates in the order threads take them: costliest first */
    long total;
    atomic_long next, done;
    progress_meter *progress;  /* NULL: none */
} search_job;

typedef struct {
    search_job *job;
    worker_out out;
    int reports_progress;
} worker;

/* Evaluates one candidate: layout rules, then memory, then the simulation. -1 only when the
 * result cannot be stored. */
static int evaluate(const scenario_config *base, const plan_layout *cand, worker_out *w)
{
    plan_result *r = &w->part;
    plan_layout l = *cand;
    scenario_config s;
    config_error err;
    plan_apply(base, &l, &s);
    r->enumerated++;
    if (scenario_validate_layout(&s, &err) != 0) {
        r->invalid++;
        if (!r->first_invalid[0] || l.order < w->first_invalid_order) {
            snprintf(r->first_invalid, sizeof r->first_invalid, "%s", err.msg);
            w->first_invalid_order = l.order;
        }
        plan_tally_add(&r->invalid_by, err.msg);
        return 0;
    }
    run_memory mem;
    run_memory_estimate(&s, &mem);
    if (mem.oom) {
        r->out_of_memory++;
        plan_oom_reason(&mem, &r->oom_by);
        return 0;
    }
    if (run_scenario_folded(&s, &l.result, &err) != 0) {
        r->invalid++;
        plan_tally_add(&r->invalid_by, err.msg);
        return 0;
    }
    run_time_to_train(&s, l.result.step_time_s, l.result.gpus, &l.to_train);
    return push(r, &l);
}

static void *work(void *arg)
{
    worker *w = arg;
    search_job *job = w->job;
    for (;;) {
        long start = atomic_fetch_add(&job->next, PLAN_CHUNK);
        if (start >= job->total || w->out.failed)
            break;
        long end = start + PLAN_CHUNK < job->total ? start + PLAN_CHUNK : job->total;
        for (long i = start; i < end && !w->out.failed; i++)
            if (evaluate(job->base, &job->cand[job->order ? job->order[i] : i], &w->out) != 0)
                w->out.failed = 1;
        long done = atomic_fetch_add(&job->done, end - start) + (end - start);
        if (w->reports_progress) /* one thread only: a meter is not shared */
            progress_note(job->progress, (double)done, (double)job->total);
    }
    return NULL;
}

static int same_layout(const plan_layout *a, const plan_layout *b)
{
    return a->tp == b->tp && a->pp == b->pp && a->dp == b->dp && a->cp == b->cp && a->ep == b->ep &&
           a->vpp == b->vpp && a->sp == b->sp && a->zero == b->zero && a->micro_batch == b->micro_batch &&
           a->recompute == b->recompute && a->schedule == b->schedule;
}

/* The candidates of one model-parallel shape (tp, pp, dp, cp, ep): every micro-batch size,
 * interleaving depth, ZeRO stage, recomputation and sequence-parallel choice. pass 0 counts,
 * pass 1 also stores; the scenario's own layout (own, when it is a candidate) is skipped: it
 * comes first. */
static void add_candidates(plan_layout *cand, long *n, int pass, int tp, int pp, int dp, int cp, int ep,
                           const plan_layout *own)
{
    static const int mbs[] = {1, 2, 4, 8};
    for (int mi = 0; mi < 4; mi++)
        for (int vpp = 1; vpp <= (pp > 1 ? 4 : 1); vpp *= 2)
            for (int zero = 0; zero <= (dp * cp > 1 ? 3 : 0); zero++)
                for (int rec = 0; rec <= RECOMPUTE_FULL; rec++)
                    for (int sp = 0; sp <= (tp > 1); sp++) {
                        plan_layout l;
                        memset(&l, 0, sizeof l);
                        l.tp = tp;
                        l.pp = pp;
                        l.dp = dp;
                        l.cp = cp;
                        l.ep = ep;
                        l.vpp = vpp;
                        l.sp = sp;
                        l.zero = zero;
                        l.micro_batch = mbs[mi];
                        l.recompute = (recompute_kind)rec;
                        l.schedule = vpp > 1 ? PIPELINE_INTERLEAVED : PIPELINE_1F1B;
                        if (own && same_layout(&l, own))
                            continue;
                        if (pass == 1) {
                            l.order = *n;
                            cand[*n] = l;
                        }
                        (*n)++;
                    }
}

/* Every candidate, the scenario's own layout first (so the plan is never worse than it).
 * Returns the count, or -1 when out of memory; *out is malloc'ed. */
static long enumerate(const scenario_config *base, int gpus, plan_layout **out)
{
    int gpn = base->platform.node.gpus;
    long long L = base->model.num_layers, seq = base->model.seq_length, experts = base->model.num_experts;
    plan_layout own;
    memset(&own, 0, sizeof own);
    own.tp = base->parallel.tp;
    own.pp = base->parallel.pp;
    own.dp = base->parallel.dp;
    own.cp = base->parallel.cp;
    own.ep = base->parallel.ep;
    own.vpp = base->parallel.vpp;
    own.sp = base->parallel.sequence_parallel;
    own.zero = base->parallel.zero_stage;
    own.micro_batch = base->training.micro_batch_size;
    own.recompute = base->training.recompute;
    own.schedule = base->parallel.schedule;
    own.is_scenario_own = 1;
    int own_fits_gpus = (long long)own.tp * own.pp * own.dp * own.cp == gpus;

    static const int cps[] = {1, 2, 4, 8};
    plan_layout *cand = NULL;
    long n = 0;
    for (int pass = 0; pass < 2; pass++) { /* pass 0 counts, pass 1 fills */
        n = 0;
        if (own_fits_gpus) {
            if (pass == 1)
                cand[0] = own;
            n++;
        }
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
                    /* Expert parallel (MoE): powers of two dividing the experts and DP x CP
                     * (Megatron's expert groups lie inside the data-parallel ranks). */
                    for (int ep = 1; ep == 1 || ep <= experts; ep *= 2) {
                        if (ep > 1 && (experts % ep || ((long long)dp * cp) % ep))
                            continue;
                        add_candidates(cand, &n, pass, tp, (int)pp, dp, cp, ep, own_fits_gpus ? &own : NULL);
                    }
                }
            }
        if (pass == 0 && !(cand = calloc((size_t)(n ? n : 1), sizeof *cand)))
            return -1;
    }
    *out = cand;
    return n;
}

/* Candidate l applied to base (into s) and, when the layout rules accept it, the size of its step
 * graph in closed form; 0 accepted, -1 refused by a rule. */
static int candidate_size(const scenario_config *base, const plan_layout *l, scenario_config *s, workload_size *z)
{
    config_error err;
    plan_apply(base, l, s);
    if (scenario_validate_layout(s, &err) != 0)
        return -1;
    workload_size_estimate(s, z);
    return 0;
}

/* The order the threads take the candidates in: the costliest first (the step graph's tasks in
 * closed form, workload_size_estimate; those a rule refuses cost nothing), so the few large
 * simulations start early instead of leaving one thread alone at the end (longest processing
 * time first). Which thread runs what does not change the result (see plan.h). NULL when out of
 * memory: the enumeration order then. */
typedef struct {
    double cost;
    long index;
} cand_cost;

static int costliest_first(const void *a, const void *b)
{
    const cand_cost *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost > y->cost ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static long *costliest_first_order(const scenario_config *base, const plan_layout *cand, long total)
{
    cand_cost *c = malloc((size_t)(total ? total : 1) * sizeof *c);
    long *order = malloc((size_t)(total ? total : 1) * sizeof *order);
    if (!c || !order) {
        free(c);
        free(order);
        return NULL;
    }
    for (long i = 0; i < total; i++) {
        scenario_config s;
        workload_size z = {0};
        candidate_size(base, &cand[i], &s, &z);
        c[i].cost = z.tasks;
        c[i].index = i;
    }
    qsort(c, (size_t)total, sizeof *c, costliest_first);
    for (long i = 0; i < total; i++)
        order[i] = c[i].index;
    free(c);
    return order;
}

int plan_estimate(const scenario_config *base, int gpus, int threads, work_estimate *e)
{
    if (gpus <= 0)
        gpus = scenario_gpus(base);
    if (threads <= 0)
        threads = plan_default_threads();
    plan_layout *cand;
    long total = enumerate(base, gpus, &cand);
    if (total < 0)
        return -1;
    double tasks = 0, largest = 0;
    long simulated = 0;
    for (long i = 0; i < total; i++) {
        scenario_config s;
        workload_size z;
        if (candidate_size(base, &cand[i], &s, &z) != 0)
            continue; /* refused by a rule, as the search refuses it: no work */
        /* The memory check walks the schedule (2 P V m passes): done here when that is small next to
         * what the candidate would cost, else the candidate is counted as if it fitted. */
        if (z.tasks < PLAN_ESTIMATE_MEMORY_TASKS) {
            run_memory mem;
            run_memory_estimate(&s, &mem);
            if (mem.oom)
                continue;
        }
        simulated++;
        tasks += z.tasks;
        largest = z.tasks > largest ? z.tasks : largest;
    }
    free(cand);
    snprintf(e->work, sizeof e->work, "%ld of %ld candidate layouts simulated on %d GPUs (%.3g tasks in all)",
             simulated, total, gpus, tasks);
    e->seconds = budget_plan_seconds(tasks, threads);
    e->bytes = threads * budget_analytic_bytes(largest) + (double)total * sizeof(plan_layout);
    return 0;
}

int plan_search(const scenario_config *base, int gpus, plan_result *out, config_error *err,
                progress_meter *progress)
{
    return plan_search_threads(base, gpus, 0, out, err, progress);
}

int plan_search_threads(const scenario_config *base, int gpus, int threads, plan_result *out, config_error *err,
                        progress_meter *progress)
{
    memset(out, 0, sizeof *out);
    double t0 = wall_clock_s();
    long long platform_gpus = (long long)base->platform.network.nodes * base->platform.node.gpus;
    if (gpus <= 0)
        gpus = scenario_gpus(base);
    if (gpus > platform_gpus) {
        snprintf(err->msg, sizeof err->msg, "--gpus %d: the platform has only %lld GPUs", gpus, platform_gpus);
        return -1;
    }
    if (threads <= 0)
        threads = plan_default_threads();
    if (threads > PLAN_MAX_THREADS)
        threads = PLAN_MAX_THREADS;

    plan_layout *cand;
    long total = enumerate(base, gpus, &cand);
    if (total < 0) {
        snprintf(err->msg, sizeof err->msg, "out of host memory enumerating layouts");
        return -1;
    }
    long *order = threads > 1 ? costliest_first_order(base, cand, total) : NULL;
    search_job job = {.base = base, .cand = cand, .order = order, .total = total, .progress = progress};
    atomic_init(&job.next, 0);
    atomic_init(&job.done, 0);
    worker *w = calloc((size_t)threads, sizeof *w);
    pthread_t tid[PLAN_MAX_THREADS];
    int started = 0;
    if (!w) {
        free(cand);
        free(order);
        snprintf(err->msg, sizeof err->msg, "out of host memory");
        return -1;
    }
    for (int t = 0; t < threads; t++) {
        w[t].job = &job;
        w[t].reports_progress = t == 0;
    }
    /* Thread 0 is this one; the others are started, and any that cannot be leave their share
     * to those that could. */
    for (int t = 1; t < threads; t++)
        if (pthread_create(&tid[t], NULL, work, &w[t]) == 0)
            started = t;
        else
            break;
    work(&w[0]);
    for (int t = 1; t <= started; t++)
        pthread_join(tid[t], NULL);

    /* Merge the parts. */
    int failed = 0;
    long first_order = -1;
    for (int t = 0; t <= started; t++) {
        plan_result *p = &w[t].out.part;
        failed |= w[t].out.failed;
        out->enumerated += p->enumerated;
        out->invalid += p->invalid;
        out->out_of_memory += p->out_of_memory;
        for (int i = 0; i < p->invalid_by.count; i++)
            plan_tally_count(&out->invalid_by, p->invalid_by.reason[i].rule, p->invalid_by.reason[i].count);
        for (int i = 0; i < p->oom_by.count; i++)
            plan_tally_count(&out->oom_by, p->oom_by.reason[i].rule, p->oom_by.reason[i].count);
        if (p->first_invalid[0] && (first_order < 0 || w[t].out.first_invalid_order < first_order)) {
            first_order = w[t].out.first_invalid_order;
            snprintf(out->first_invalid, sizeof out->first_invalid, "%s", p->first_invalid);
        }
        for (int i = 0; i < p->count && !failed; i++)
            if (push(out, &p->layouts[i]) != 0)
                failed = 1;
        plan_result_free(p);
    }
    free(w);
    free(cand);
    free(order);
    if (failed) {
        snprintf(err->msg, sizeof err->msg, "out of host memory after %d simulated layouts", out->count);
        plan_result_free(out);
        return -1;
    }
    for (int i = 0; i < out->count; i++)
        out->layouts[i].global_batch = base->training.global_batch_size;
    if (out->count > 1)
        qsort(out->layouts, (size_t)out->count, sizeof *out->layouts, plan_compare);
    plan_tally_sort(&out->invalid_by);
    plan_tally_sort(&out->oom_by);
    out->wall_s = wall_clock_s() - t0;
    out->threads = started + 1;
    return 0;
}
