/* The planner's search: enumerate the candidate layouts, check each against the layout rules
 * and the memory model, simulate those that fit (analytic; with a keep, only until the best keep
 * are known), rank. Candidates are independent, so worker threads take them; each thread keeps
 * its own tallies, merged at the end, and neither the ranking nor the counts depend on which
 * thread ran what. See plan.h. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "plan.h"
#include "workload_bound.h"
#include "workload_size.h"
#include "wall_clock.h"

#define PLAN_MAX_THREADS 64
#define PLAN_CHUNK 8 /* candidates a thread takes at once: small, the costs vary a lot */

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

/* ---- the two passes over the candidates ------------------------------------------------------
 * Pass 1 (cheap, every candidate): the layout rules, then memory; what fits is kept with the
 * lower bound on its step (workload_bound.h). Pass 2 (the simulations): the fitting layouts in
 * the order of their bounds, the scenario's own first; once the best `keep` are known, a layout
 * whose bound is slower than the keep-th best step cannot be among them, nor can any after it
 * (their bounds are larger still), and the rest is not simulated: branch and bound, exact for the
 * best `keep`. keep 0 simulates every fitting layout, costliest first (their first replays' tasks in
 * closed form, so the few large simulations do not come last). Each replay is asked of the
 * limits first (budget_replay_allow): a layout whose fold needs a replay past them stops the
 * search, unless the cut comes before it. Which thread ran what changes neither the
 * ranking nor the counts: plan_search_threads settles the cut as one thread would have, simulating
 * itself what the threads left undone before it and dropping what they ran past it. */

/* Bounds compared with steps: a bound equal to a step but for rounding does not cut. */
#define PLAN_BOUND_SLACK 1e-9

typedef struct {
    long cand;                 /* index into the candidates */
    double key;                /* pass 2 takes the smallest first: with keep > 0 the lower bound
                                  on its step (no replay of it is faster: what the cut compares),
                                  with keep 0 minus its first replay's tasks in closed form
                                  (costliest first; nothing is cut) */
    long order;                /* enumeration order: the tie-breaker */
    int own;                   /* the scenario's own layout: always simulated, first */
} fitting;

/* One thread's tallies of pass 1. */
typedef struct {
    long enumerated, invalid, out_of_memory;
    plan_tally invalid_by, oom_by;
    char first_invalid[sizeof ((config_error *)0)->msg]; /* a layout rule's reason, whole */
    long first_invalid_order;  /* which candidate gave first_invalid: the earliest wins */
    fitting *fit;
    long n_fit, cap_fit;
    int failed;                /* out of host memory */
} check_out;

/* What pass 2 made of one fitting layout. */
enum { SIM_NOT_RUN = 0, SIM_DONE, SIM_FAILED, SIM_GATED };
typedef struct {
    plan_layout layout;        /* with its result when SIM_DONE */
    char *error;               /* SIM_FAILED, SIM_GATED (a replay over the limits): why (malloc'ed) */
    unsigned char status;
} simulated;

/* The best `keep` step times so far, a max-heap: its top is the step to beat. */
typedef struct {
    double *step;
    int n, keep;
} best_steps;

static void best_add(best_steps *b, double step)
{
    if (b->n < b->keep) {
        int i = b->n++;
        while (i > 0 && b->step[(i - 1) / 2] < step) {
            b->step[i] = b->step[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        b->step[i] = step;
        return;
    }
    if (step >= b->step[0])
        return;
    int i = 0; /* the top replaced, sifted down */
    for (;;) {
        int c = 2 * i + 1;
        if (c >= b->n)
            break;
        if (c + 1 < b->n && b->step[c + 1] > b->step[c])
            c++;
        if (b->step[c] <= step)
            break;
        b->step[i] = b->step[c];
        i = c;
    }
    b->step[i] = step;
}

/* Whether a layout with this bound can still be among the best: 1 until `keep` are known. */
static int best_admits(const best_steps *b, double bound_s)
{
    return b->keep <= 0 || b->n < b->keep || bound_s <= b->step[0] * (1 + PLAN_BOUND_SLACK);
}

typedef struct {
    const scenario_config *base;
    const plan_layout *cand;
    long total;
    int keep;
    const run_gate *gate;      /* asked before each replay (NULL: none) */
    atomic_long next;
    /* pass 2 */
    const fitting *fit;
    long n_fit;
    simulated *sim;
    atomic_long next_fit;
    atomic_int cut;            /* a thread met a bound past the best: nothing more starts */
    pthread_mutex_t lock;      /* guards best */
    best_steps best;
    progress_meter *progress;  /* NULL: none */
    atomic_long settled;       /* candidates done with: refused or out of memory in pass 1, then
                                  simulated or cut in pass 2 (what progress counts) */
    long noted;                /* the last count told the meter (one thread at a time tells it) */
} search_job;

/* Tells the meter the candidates settled, when that grew (from one thread only). */
static void note_progress(search_job *job)
{
    long done = atomic_load(&job->settled);
    if (done > job->noted) {
        progress_note(job->progress, (double)done, (double)job->total);
        job->noted = done;
    }
}

typedef struct {
    search_job *job;
    check_out out;
    int reports_progress;
} worker;

static void first_invalid(check_out *o, long order, const char *msg)
{
    if (!o->first_invalid[0] || order < o->first_invalid_order) {
        snprintf(o->first_invalid, sizeof o->first_invalid, "%s", msg);
        o->first_invalid_order = order;
    }
}

/* The tasks of the step graph the search replays first for s: the fold's first pair of short
 * replays (run.h, run_fold_first_replay_micro_batches), or the whole step where it cannot fold;
 * in closed form. s is given back as it came. */
static double first_replay_tasks(scenario_config *s)
{
    long long first = run_fold_first_replay_micro_batches(s), batch = s->training.global_batch_size;
    if (first < scenario_micro_batches(s))
        scenario_set_micro_batches(s, first); /* in place, and back: no copy of the scenario */
    workload_size z;
    workload_size_estimate(s, &z);
    s->training.global_batch_size = batch;
    return z.tasks;
}

/* Pass 1 for one candidate: the rules, memory, and the bound of one that fits. */
static void check(search_job *job, long i, check_out *o)
{
    const plan_layout *l = &job->cand[i];
    scenario_config s;
    config_error err;
    plan_apply(job->base, l, &s);
    o->enumerated++;
    if (scenario_validate_layout(&s, &err) != 0) {
        o->invalid++;
        first_invalid(o, l->order, err.msg);
        plan_tally_add(&o->invalid_by, err.msg);
        atomic_fetch_add(&job->settled, 1);
        return;
    }
    run_memory mem;
    run_memory_estimate(&s, &mem);
    if (mem.oom) {
        o->out_of_memory++;
        plan_oom_reason(&mem, &o->oom_by);
        atomic_fetch_add(&job->settled, 1);
        return;
    }
    if (o->n_fit == o->cap_fit) {
        long cap = o->cap_fit ? 2 * o->cap_fit : 256;
        fitting *grown = realloc(o->fit, (size_t)cap * sizeof *grown);
        if (!grown) {
            o->failed = 1;
            return;
        }
        o->fit = grown;
        o->cap_fit = cap;
    }
    fitting *f = &o->fit[o->n_fit++];
    f->cand = i;
    f->order = l->order;
    f->own = l->is_scenario_own;
    f->key = job->keep > 0 ? workload_step_lower_bound(&s) : -first_replay_tasks(&s);
}

static void *check_work(void *arg)
{
    worker *w = arg;
    search_job *job = w->job;
    for (;;) {
        long start = atomic_fetch_add(&job->next, PLAN_CHUNK);
        if (start >= job->total || w->out.failed)
            break;
        long end = start + PLAN_CHUNK < job->total ? start + PLAN_CHUNK : job->total;
        for (long i = start; i < end && !w->out.failed; i++)
            check(job, i, &w->out);
        if (w->reports_progress) /* one thread only: a meter is not shared */
            note_progress(job);
    }
    return NULL;
}

/* Pass 2 for one fitting layout: its simulation (analytic, folded where exact), each replay
 * asked of the gate. */
static void simulate(const search_job *job, const plan_layout *cand, simulated *r)
{
    scenario_config s;
    config_error err;
    r->layout = *cand;
    plan_apply(job->base, cand, &s);
    int rc = run_scenario_folded_gated(&s, &r->layout.result, job->gate, &err);
    if (rc != 0) {
        r->error = strdup(err.msg);
        r->status = rc == RUN_GATED ? SIM_GATED : SIM_FAILED;
        return;
    }
    run_time_to_train(&s, r->layout.result.step_time_s, r->layout.result.gpus, &r->layout.to_train);
    r->status = SIM_DONE;
}

static void *simulate_work(void *arg)
{
    worker *w = arg;
    search_job *job = w->job;
    for (;;) {
        long i = atomic_fetch_add(&job->next_fit, 1);
        if (i >= job->n_fit || atomic_load(&job->cut))
            break;
        const fitting *f = &job->fit[i];
        pthread_mutex_lock(&job->lock);
        int admitted = f->own || best_admits(&job->best, f->key);
        pthread_mutex_unlock(&job->lock);
        if (!admitted) { /* the later ones are bounded by more: none of them either */
            atomic_store(&job->cut, 1);
            break;
        }
        simulated *r = &job->sim[i];
        simulate(job, &job->cand[f->cand], r);
        if (r->status == SIM_GATED) { /* the search fails unless the cut comes first: settle says */
            atomic_store(&job->cut, 1);
            break;
        }
        if (r->status == SIM_DONE) {
            pthread_mutex_lock(&job->lock);
            best_add(&job->best, r->layout.result.step_time_s);
            pthread_mutex_unlock(&job->lock);
        }
        atomic_fetch_add(&job->settled, 1);
        if (w->reports_progress) /* one thread only: a meter is not shared */
            note_progress(job);
    }
    return NULL;
}

int plan_run_threads(int threads, void *(*fn)(void *), void *args, size_t stride)
{
    pthread_t tid[PLAN_MAX_THREADS];
    int started = 0;
    for (int t = 1; t < threads && t < PLAN_MAX_THREADS; t++)
        if (pthread_create(&tid[t], NULL, fn, (char *)args + (size_t)t * stride) == 0)
            started = t;
        else
            break;
    fn(args);
    for (int t = 1; t <= started; t++)
        pthread_join(tid[t], NULL);
    return started + 1;
}

/* Pass 2's order: the scenario's own first, then the smallest key, then enumeration order. */
static int pass2_order(const void *a, const void *b)
{
    const fitting *x = a, *y = b;
    if (x->own != y->own)
        return y->own - x->own;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}
static int same_layout(const plan_layout *a, const plan_layout *b)
{
    return a->tp == b->tp && a->pp == b->pp && a->dp == b->dp && a->cp == b->cp && a->ep == b->ep &&
           a->vpp == b->vpp && a->sp == b->sp && a->zero == b->zero && a->micro_batch == b->micro_batch &&
           a->recompute == b->recompute && a->schedule == b->schedule;
}

/* Each candidate is handed to a visitor, in enumeration order (l->order), as it is made. */
typedef void (*candidate_fn)(void *ctx, const plan_layout *l);

/* The candidates of one model-parallel shape (tp, pp, dp, cp, ep): every micro-batch size,
 * interleaving depth, ZeRO stage, recomputation and sequence-parallel choice; the scenario's own
 * layout (own, when it is a candidate) is skipped: it comes first. */
static void add_candidates(candidate_fn take, void *ctx, long *n, int tp, int pp, int dp, int cp, int ep,
                           const plan_layout *own)
{
    static const int mbs[] = {1, 2, 4, 8};
    plan_layout l;
    memset(&l, 0, sizeof l);
    for (int mi = 0; mi < 4; mi++)
        for (int vpp = 1; vpp <= (pp > 1 ? 4 : 1); vpp *= 2)
            for (int zero = 0; zero <= (dp * cp > 1 ? 3 : 0); zero++)
                for (int rec = 0; rec <= RECOMPUTE_FULL; rec++)
                    for (int sp = 0; sp <= (tp > 1); sp++) {
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
                        l.order = *n;
                        take(ctx, &l);
                        (*n)++;
                    }
}

/* Every candidate, the scenario's own layout first (so the plan is never worse than it), handed
 * to take; returns the count. */
static long each_candidate(const scenario_config *base, int gpus, candidate_fn take, void *ctx)
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
    long n = 0;
    if (own_fits_gpus)
        take(ctx, &own), n++;
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
                    add_candidates(take, ctx, &n, tp, (int)pp, dp, cp, ep, own_fits_gpus ? &own : NULL);
                }
            }
        }
    return n;
}

static void count_one(void *ctx, const plan_layout *l)
{
    (void)ctx;
    (void)l;
}

static void store_one(void *ctx, const plan_layout *l)
{
    plan_layout *cand = ctx;
    cand[l->order] = *l;
}

/* Every candidate into an array (each_candidate's order). Returns the count, or -1 when out of
 * memory; *out is malloc'ed. */
static long enumerate(const scenario_config *base, int gpus, plan_layout **out)
{
    long n = each_candidate(base, gpus, count_one, NULL);
    plan_layout *cand = calloc((size_t)(n ? n : 1), sizeof *cand);
    if (!cand)
        return -1;
    each_candidate(base, gpus, store_one, cand);
    *out = cand;
    return n;
}

/* Each fitting candidate priced at its first replay: what the search does for most (every fitting
 * layout of the shipped searches folds at its first attempt but DeepSpeed-style ZeRO-3 under deep
 * pipelines at large batches: tests/plan/test_fold.c). A deeper attempt or a full replay is asked
 * of the limits when it comes (budget_replay_allow), so a step that does not fold is never
 * replayed unpriced. At several global batches what does not depend on the batch is done once
 * for each candidate: its enumeration, its set-up, the rules that do not read the batch
 * (scenario_validate_layout_batchless); for each batch only the batch's rules, the memory (from
 * the stages' peaks in flight, computed again only where they change: run_memory_at) and the
 * first replay's tasks (computed again only where its length changes: a fold's first pair is as
 * long at every batch long enough to fold). */
typedef struct {
    const scenario_config *base;
    const long long *batches;  /* NULL: the scenario's own, nb 1 */
    int nb;
    scenario_config *s;        /* base with the candidate at hand set on it (plan_reapply) */
    int *peak, *priced;        /* the stages' peaks at this batch, and those `mem` is the memory at */
    double *tasks, *largest;   /* by batch: the first replays' tasks, and the largest one */
    long *fit;                 /* by batch: the fitting candidates */
} first_replays;

static void price_one(void *ctx, const plan_layout *l)
{
    first_replays *f = ctx;
    scenario_config *s = f->s;
    plan_reapply(f->base, l, s);
    if (scenario_validate_layout_batchless(s, NULL) != 0)
        return; /* refused by a rule at every batch, as pass 1 refuses it: no replay */
    run_memory mem, none;
    memset(&none, 0, sizeof none);
    int have_mem = 0;
    long long replayed = -1; /* the last first replay's micro-batches (-1: none, or a whole step) */
    double replay_tasks = 0; /* and its tasks */
    for (int b = 0; b < f->nb; b++) {
        s->training.global_batch_size = f->batches ? f->batches[b] : f->base->training.global_batch_size;
        if (scenario_validate_batch(s, NULL) != 0)
            continue;
        const run_memory *at = &none; /* no schedule: nothing reported, as run_memory_estimate */
        if (run_memory_peaks(s, f->peak) == 0) {
            if (!have_mem || memcmp(f->peak, f->priced, (size_t)l->pp * sizeof *f->peak) != 0) {
                run_memory_at(s, f->peak, &mem);
                memcpy(f->priced, f->peak, (size_t)l->pp * sizeof *f->peak);
                have_mem = 1;
            }
            at = &mem;
        }
        if (at->oom)
            continue;
        long long m = scenario_micro_batches(s), first = run_fold_first_replay_micro_batches(s);
        if (first >= m || first != replayed) {
            replay_tasks = first_replay_tasks(s);
            replayed = first < m ? first : -1;
        }
        f->fit[b]++;
        f->tasks[b] += replay_tasks;
        f->largest[b] = fmax(f->largest[b], replay_tasks);
    }
}

int plan_estimate_batches(const scenario_config *base, int gpus, int threads, const long long *batches, int nb,
                          work_estimate *e, long *fitting)
{
    if (gpus <= 0)
        gpus = scenario_gpus(base);
    if (threads <= 0)
        threads = plan_default_threads();
    if (nb < 1 || (!batches && nb != 1))
        return -1;
    /* a candidate's stages: PP divides the layers, or the scenario's own */
    long long stages = base->model.num_layers > base->parallel.pp ? base->model.num_layers : base->parallel.pp;
    first_replays f = {.base = base, .batches = batches, .nb = nb, .s = malloc(sizeof *f.s),
                       .peak = malloc(2 * (size_t)(stages > 0 ? stages : 1) * sizeof *f.peak),
                       .tasks = calloc(2 * (size_t)nb, sizeof *f.tasks), .fit = calloc((size_t)nb, sizeof *f.fit)};
    long total = -1;
    if (f.s && f.peak && f.tasks && f.fit) {
        f.priced = f.peak + stages;
        f.largest = f.tasks + nb;
        *f.s = *base;
        total = each_candidate(base, gpus, price_one, &f);
    }
    for (int b = 0; b < nb && total >= 0; b++) {
        snprintf(e[b].work, sizeof e[b].work,
                 "up to %ld of %ld candidate layouts simulated on %d GPUs (%.3g tasks in their first replays)",
                 f.fit[b], total, gpus, f.tasks[b]);
        /* at least the largest first replay alone, as the replay gate prices each replay it is
         * asked for (budget_replay_allow): on many threads one dominant layout must not be refused
         * by the gate after the estimate let the search start */
        e[b].seconds = fmax(budget_plan_seconds(f.tasks[b], threads), budget_analytic_seconds(f.largest[b]));
        e[b].bytes = threads * budget_analytic_bytes(f.largest[b]) + (double)total * sizeof(plan_layout);
        if (fitting)
            fitting[b] = f.fit[b];
    }
    free(f.s);
    free(f.peak);
    free(f.tasks);
    free(f.fit);
    return total < 0 ? -1 : 0;
}

int plan_estimate(const scenario_config *base, int gpus, int threads, work_estimate *e)
{
    return plan_estimate_batches(base, gpus, threads, NULL, 1, e, NULL);
}

int plan_search(const scenario_config *base, int gpus, plan_result *out, config_error *err,
                progress_meter *progress)
{
    return plan_search_threads(base, gpus, 0, 0, NULL, out, err, progress);
}

/* Pass 1's tallies into out, and its fitting layouts into one array (NULL, with *n -1, when out
 * of memory). */
static fitting *merge_checks(worker *w, int ran, plan_result *out, long *n)
{
    long first_order = -1, count = 0;
    int failed = 0;
    for (int t = 0; t < ran; t++) {
        check_out *o = &w[t].out;
        failed |= o->failed;
        count += o->n_fit;
        out->enumerated += o->enumerated;
        out->invalid += o->invalid;
        out->out_of_memory += o->out_of_memory;
        for (int i = 0; i < o->invalid_by.count; i++)
            plan_tally_count(&out->invalid_by, o->invalid_by.reason[i].rule, o->invalid_by.reason[i].count);
        for (int i = 0; i < o->oom_by.count; i++)
            plan_tally_count(&out->oom_by, o->oom_by.reason[i].rule, o->oom_by.reason[i].count);
        if (o->first_invalid[0] && (first_order < 0 || o->first_invalid_order < first_order)) {
            first_order = o->first_invalid_order;
            snprintf(out->first_invalid, sizeof out->first_invalid, "%s", o->first_invalid);
        }
    }
    fitting *all = failed ? NULL : malloc((size_t)(count ? count : 1) * sizeof *all);
    *n = all ? 0 : -1;
    for (int t = 0; t < ran; t++) {
        if (all && w[t].out.n_fit > 0) { /* a thread that kept none has no array */
            memcpy(all + *n, w[t].out.fit, (size_t)w[t].out.n_fit * sizeof *all);
            *n += w[t].out.n_fit;
        }
        free(w[t].out.fit);
        w[t].out.fit = NULL;
    }
    return all;
}

/* Pass 2 as one thread taking the fitting layouts in order would have run it: what the threads
 * left undone before the cut is simulated here (a thread may cut early, its best known from
 * layouts after the one it stopped at), what they ran past it is dropped (bounded). Fills out's
 * layouts and bounded count; -1 when out of memory, -2 with err when a layout before the cut had
 * a replay the gate refused. */
static int settle(search_job *job, plan_result *out, config_error *err)
{
    long keep = job->keep < job->n_fit ? job->keep : job->n_fit;
    best_steps best = {malloc((size_t)(keep > 0 ? keep : 1) * sizeof(double)), 0, (int)keep};
    if (!best.step)
        return -1;
    long i;
    int rc = 0;
    for (i = 0; i < job->n_fit && rc == 0; i++) {
        const fitting *f = &job->fit[i];
        if (!f->own && !best_admits(&best, f->key))
            break;
        simulated *r = &job->sim[i];
        if (r->status == SIM_NOT_RUN)
            simulate(job, &job->cand[f->cand], r);
        if (r->status == SIM_GATED) {
            const plan_layout *l = &job->cand[f->cand];
            snprintf(err->msg, sizeof err->msg, "layout TP %d PP %d DP %d CP %d EP %d (VPP %d, micro-batch %lld, "
                     "ZeRO %d): %s", l->tp, l->pp, l->dp, l->cp, l->ep, l->vpp, l->micro_batch, l->zero, r->error);
            rc = -2;
            break;
        }
        if (r->status == SIM_FAILED) {
            out->invalid++;
            plan_tally_add(&out->invalid_by, r->error ? r->error : "out of host memory");
            continue;
        }
        best_add(&best, r->layout.result.step_time_s);
        rc = push(out, &r->layout);
    }
    out->bounded = job->n_fit - i;
    free(best.step);
    return rc;
}

int plan_search_threads(const scenario_config *base, int gpus, int threads, int keep, const budget_limits *limits,
                        plan_result *out, config_error *err, progress_meter *progress)
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
    budget_replay_gate limit_each = {limits ? *limits : (budget_limits){0, 0}, threads};
    run_gate gate = {budget_replay_allow, &limit_each};
    search_job job = {.base = base, .cand = cand, .total = total, .keep = keep > 0 ? keep : 0,
                      .gate = limits ? &gate : NULL, .progress = progress};
    atomic_init(&job.next, 0);
    atomic_init(&job.next_fit, 0);
    atomic_init(&job.settled, 0);
    atomic_init(&job.cut, 0);
    pthread_mutex_init(&job.lock, NULL);
    worker *w = calloc((size_t)threads, sizeof *w);
    if (!w) {
        free(cand);
        snprintf(err->msg, sizeof err->msg, "out of host memory");
        return -1;
    }
    for (int t = 0; t < threads; t++) {
        w[t].job = &job;
        w[t].reports_progress = t == 0;
    }

    int ran = plan_run_threads(threads, check_work, w, sizeof *w);
    long n_fit;
    fitting *fit = merge_checks(w, ran, out, &n_fit);
    int failed = !fit, gated = 0;
    if (fit) {
        if (n_fit > 1)
            qsort(fit, (size_t)n_fit, sizeof *fit, pass2_order);
        long keep_n = job.keep < n_fit ? job.keep : n_fit;
        job.fit = fit;
        job.n_fit = n_fit;
        job.sim = calloc((size_t)(n_fit ? n_fit : 1), sizeof *job.sim);
        job.best.step = malloc((size_t)(keep_n > 0 ? keep_n : 1) * sizeof(double));
        job.best.keep = (int)keep_n;
        failed = !job.sim || !job.best.step;
    }
    if (!failed) {
        ran = plan_run_threads(ran, simulate_work, w, sizeof *w);
        int settled = settle(&job, out, err);
        gated = settled == -2;
        failed = settled != 0;
        atomic_store(&job.settled, total); /* the cut settles the rest */
        note_progress(&job);
    }
    for (long i = 0; job.sim && i < n_fit; i++)
        free(job.sim[i].error);
    free(job.sim);
    free(job.best.step);
    free(fit);
    free(w);
    free(cand);
    pthread_mutex_destroy(&job.lock);
    if (failed) {
        if (!gated)
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
    out->threads = ran;
    return 0;
}
