/* One timeline of a long run under failures (see faults.h, docs/faults.md). Event-driven in
 * wall-clock seconds: the next checkpoint, the next failure, the next repair or the end,
 * whichever comes first; failure times are drawn (or read from a trace), never tested step by
 * step, so 54 days on 16,384 GPUs cost a few thousand events. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "faults.h"

const char *faults_loss_name(int cause)
{
    static const char *names[LOSS_COUNT] = {"detection", "restart", "restore", "lost_work", "checkpoint_save",
                                            "repair_wait"};
    return cause >= 0 && cause < LOSS_COUNT ? names[cause] : "?";
}

/* ---- random numbers: splitmix64, one integer of state, reproducible runs ---------------- */
typedef struct {
    unsigned long long s;
} mc_rng;

static unsigned long long mix64(unsigned long long z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double mc_uniform(mc_rng *r)
{
    unsigned long long z = mix64(r->s += 0x9e3779b97f4a7c15ull);
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0; /* open interval (0, 1): log() is safe */
}

unsigned long long faults_run_seed(unsigned long long seed, int run)
{
    return mix64(mix64(seed + 0x9e3779b97f4a7c15ull) + (unsigned long long)run * 0xd1b54a32d192ed03ull);
}

/* A lifetime of the given mean: exponential for shape 1, else Weibull with scale
 * mean / Gamma(1 + 1/shape) (inverse transform of the survival function exp(-(t/scale)^k)). */
static double lifetime(mc_rng *r, double mean, double shape)
{
    double u = -log(mc_uniform(r));
    if (shape == 1.0)
        return mean * u;
    return mean / tgamma(1.0 + 1.0 / shape) * pow(u, 1.0 / shape);
}

/* ---- a binary min-heap of component failure times (Weibull: each component ages alone) ---- */
typedef struct {
    double *t;
    unsigned char *kind; /* 0 GPU, 1 node */
    int n;
} heap;

static void heap_push(heap *h, double t, int kind)
{
    int i = h->n++;
    while (i > 0 && h->t[(i - 1) / 2] > t) {
        h->t[i] = h->t[(i - 1) / 2];
        h->kind[i] = h->kind[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->t[i] = t;
    h->kind[i] = (unsigned char)kind;
}

static void heap_pop(heap *h, double *t, int *kind)
{
    *t = h->t[0];
    *kind = h->kind[0];
    double lt = h->t[--h->n];
    unsigned char lk = h->kind[h->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->t[c + 1] < h->t[c])
            c++;
        if (h->t[c] >= lt)
            break;
        h->t[i] = h->t[c];
        h->kind[i] = h->kind[c];
        i = c;
    }
    h->t[i] = lt;
    h->kind[i] = lk;
}

/* ---- nodes away for repair: return times, kept sorted (few at a time) ---- */
typedef struct {
    double *t;
    int n, cap;
} repair_queue;

static void repair_add(repair_queue *q, double when)
{
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 32;
        double *t = realloc(q->t, (size_t)cap * sizeof *t);
        if (!t)
            return; /* out of memory: the node never returns, the run is only pessimistic */
        q->t = t;
        q->cap = cap;
    }
    int i = q->n++;
    while (i > 0 && q->t[i - 1] > when) {
        q->t[i] = q->t[i - 1];
        i--;
    }
    q->t[i] = when;
}

static void repair_pop(repair_queue *q)
{
    memmove(q->t, q->t + 1, (size_t)(--q->n) * sizeof *q->t);
}

/* ---- the job's fleet and where its failures come from ---- */
typedef struct {
    int gpus, nodes_used, pool, dp;
    int replicas_per_node;          /* DP replicas a node failure takes out of an elastic job */
    double gpu_mean_s, node_mean_s, shape, rate_total;
} fleet;

static void fleet_of(const scenario_config *s, fleet *f)
{
    f->gpus = scenario_gpus(s);
    int gpn = s->platform.node.gpus > 0 ? s->platform.node.gpus : 1;
    f->nodes_used = (f->gpus + gpn - 1) / gpn;
    /* Free nodes: the platform's nodes the job leaves idle, plus the declared spares. */
    f->pool = s->platform.network.nodes - f->nodes_used + s->faults.spare_nodes;
    if (f->pool < 0)
        f->pool = s->faults.spare_nodes;
    f->dp = s->parallel.dp > 0 ? s->parallel.dp : 1;
    /* Ranks are laid out TP fastest, then CP, PP, DP: a replica of tp x cp x pp GPUs spans whole
     * nodes, or a node holds several replicas. */
    long long replica = (long long)(s->parallel.tp > 0 ? s->parallel.tp : 1) * (s->parallel.cp > 0 ? s->parallel.cp : 1) *
                        (s->parallel.pp > 0 ? s->parallel.pp : 1);
    f->replicas_per_node = replica >= gpn ? 1 : (int)(gpn / replica);
    f->gpu_mean_s = s->faults.gpu_mtbf_hours * 3600;
    f->node_mean_s = s->faults.node_mtbf_hours * 3600;
    f->shape = s->faults.weibull_shape > 0 ? s->faults.weibull_shape : 1;
    f->rate_total = (f->gpu_mean_s > 0 ? f->gpus / f->gpu_mean_s : 0) +
                    (f->node_mean_s > 0 ? f->nodes_used / f->node_mean_s : 0);
}

typedef struct {
    fleet F;
    mc_rng rng;
    heap h;                    /* Weibull */
    const faults_trace *trace; /* replay */
    int cursor;
    double next_fail;
    int next_kind;
} failure_source;

static void source_init(failure_source *src, const scenario_config *s, const faults_trace *trace,
                        unsigned long long seed)
{
    memset(src, 0, sizeof *src);
    fleet_of(s, &src->F);
    src->rng.s = seed;
    src->trace = trace;
    src->next_fail = INFINITY;
    const fleet *F = &src->F;
    if (trace) {
        if (trace->count > 0)
            src->next_fail = trace->events[0].t_s;
    } else if (F->shape != 1.0) {
        int n = (F->gpu_mean_s > 0 ? F->gpus : 0) + (F->node_mean_s > 0 ? F->nodes_used : 0);
        src->h.t = malloc(((size_t)n + 1) * sizeof *src->h.t);
        src->h.kind = malloc(((size_t)n + 1) * sizeof *src->h.kind);
        if (!src->h.t || !src->h.kind)
            return; /* no memory: no failures drawn; faults_run checks the allocation first */
        if (F->gpu_mean_s > 0)
            for (int i = 0; i < F->gpus; i++)
                heap_push(&src->h, lifetime(&src->rng, F->gpu_mean_s, F->shape), 0);
        if (F->node_mean_s > 0)
            for (int i = 0; i < F->nodes_used; i++)
                heap_push(&src->h, lifetime(&src->rng, F->node_mean_s, F->shape), 1);
        if (src->h.n > 0)
            heap_pop(&src->h, &src->next_fail, &src->next_kind);
    } else if (F->rate_total > 0) {
        src->next_fail = -log(mc_uniform(&src->rng)) / F->rate_total;
    }
}

/* After the failure at fail_at was handled and the job is back at `now`: the next failure.
 * The fleet keeps failing while the job is down; such a failure is found at restart. */
static void source_next(failure_source *src, double fail_at, double now)
{
    const fleet *F = &src->F;
    double next;
    if (src->trace) {
        src->cursor++;
        next = src->cursor < src->trace->count ? src->trace->events[src->cursor].t_s : INFINITY;
    } else if (src->h.t) {
        /* The replaced part starts a fresh lifetime when the job restarts on it. */
        double mean = src->next_kind ? F->node_mean_s : F->gpu_mean_s;
        heap_push(&src->h, now + lifetime(&src->rng, mean, F->shape), src->next_kind);
        heap_pop(&src->h, &next, &src->next_kind);
    } else if (F->rate_total > 0) {
        next = fail_at - log(mc_uniform(&src->rng)) / F->rate_total; /* memoryless: from the failure */
    } else {
        next = INFINITY;
    }
    src->next_fail = next < now ? now : next;
}

/* Where one run's timeline stands: t, the wall clock; p, the training done, in seconds of the
 * healthy job; durable, the training the newest written checkpoint holds; ckpt_point, where the
 * last checkpoint was taken; pending_p and pending_at, an async checkpoint still being written
 * (pending_p < 0: none) and when it will be on disk. */
typedef struct {
    double t, p, durable, ckpt_point, pending_p, pending_at;
} run_clock;

/* Right after a checkpoint, until the next failure, repair or the end, the timeline is the same
 * cycle over and over: train interval_s of the healthy job (interval_s / rate of wall time), then
 * block for the copy (and, async, for the previous write when it outlasts the training). Whole
 * cycles that end at least one cycle before the next event are taken at once, with the state
 * they leave (the step loop's own checkpoint branch does the rest): a 54-day run at a 30-minute
 * interval is 2,600 checkpoints and a few hundred failures, and this leaves the failures. */
static void skip_cycles(const failure_source *src, const faults_report *P, const repair_queue *rq, int lost,
                        double rate, double interval_s, double copy_s, int async, run_clock *c,
                        faults_timeline *out)
{
    double train = interval_s / rate;
    double cycle = (async ? fmax(train, P->checkpoint_write_s) : train) + copy_s;
    double room = src->next_fail - c->t; /* wall time to the next failure */
    if (lost > 0 && rq->n > 0)
        room = fmin(room, rq->t[0] - c->t); /* the rate changes when a node returns */
    if (P->target_train_s <= 0)
        room = fmin(room, P->horizon_s - c->t);
    double n = floor(room / cycle) - 1;
    if (P->target_train_s > 0) /* training, not wall time, ends the run */
        n = fmin(n, floor((P->target_train_s - c->p) / interval_s) - 1);
    if (!(n >= 1) || !isfinite(cycle) || cycle <= 0)
        return;
    c->t += n * cycle;
    c->p += n * interval_s;
    c->ckpt_point = c->p;
    out->lost_s[LOSS_CHECKPOINT] += n * (cycle - train);
    if (async) { /* the one before the last is on disk; the last is being written */
        c->durable = c->p - interval_s;
        c->pending_p = c->p;
        c->pending_at = c->t + P->checkpoint_write_s;
    } else {
        c->durable = c->p;
    }
}

void faults_simulate_trace(const scenario_config *s, const faults_report *P, const faults_trace *trace,
                           double interval_s, unsigned long long seed, faults_timeline *out)
{
    memset(out, 0, sizeof *out);
    failure_source src;
    source_init(&src, s, trace, seed);
    const fleet *F = &src.F;
    const int async = s->faults.checkpoint_async;
    const double repair_s = s->faults.repair_hours * 3600;
    /* relaunch and communicator set-up: a fixed part and, if given, a part growing with the job */
    const double restart_s = s->faults.restart_s + s->faults.restart_per_node_s * F->nodes_used;
    const double copy_s = async ? P->checkpoint_block_s : P->checkpoint_write_s;
    repair_queue rq = {0};

    run_clock c = {.pending_p = -1}; /* the job starts at zero with nothing written */
    int pool = F->pool, lost = 0; /* lost: DP replicas an elastic job runs without */
    for (;;) {
        while (rq.n > 0 && rq.t[0] <= c.t) { /* repaired nodes return: to the job first */
            if (lost > 0)
                lost = lost > F->replicas_per_node ? lost - F->replicas_per_node : 0;
            else
                pool++;
            repair_pop(&rq);
        }
        double rate = lost > 0 && lost <= FAULTS_ELASTIC_MAX && P->elastic_rate[lost] > 0 ? P->elastic_rate[lost]
                                                                                      : (double)(F->dp - lost) / F->dp;
        double to_ckpt = (c.ckpt_point + interval_s - c.p) / rate;
        double to_end = P->target_train_s > 0 ? (P->target_train_s - c.p) / rate : P->horizon_s - c.t;
        double to_fail = src.next_fail - c.t;
        double to_repair = lost > 0 && rq.n > 0 ? rq.t[0] - c.t : INFINITY; /* the rate changes then */
        double dt = fmin(fmin(to_ckpt, to_end), fmin(to_fail, to_repair));
        if (dt < 0)
            dt = 0;
        c.t += dt;
        c.p += dt * rate;
        if (c.pending_p >= 0 && c.pending_at <= c.t) { /* the async write finished before now */
            c.durable = c.pending_p;
            c.pending_p = -1;
        }
        /* the end; also when a checkpoint's block ran past it (to_end < 0, dt clamped to 0): that
         * was not a failure */
        if (to_end <= dt && to_end <= to_fail)
            break;
        if (dt == to_repair && to_repair < to_fail)
            continue;
        double fail_at = src.next_fail;
        if (dt == to_ckpt && to_ckpt < to_fail) {
            /* The step loop blocks: for the whole write (sync), or for the previous async write
             * to finish (one in flight at a time) and the copy to host memory (async). */
            double wait = c.pending_p >= 0 ? c.pending_at - c.t : 0;
            double block = wait + copy_s;
            if (fail_at < c.t + block) { /* a failure during the save: this checkpoint is lost */
                out->lost_s[LOSS_CHECKPOINT] += fail_at - c.t;
                if (c.pending_p >= 0 && c.pending_at <= fail_at) {
                    c.durable = c.pending_p;
                    c.pending_p = -1;
                }
                c.t = fail_at;
            } else {
                c.t += block;
                out->lost_s[LOSS_CHECKPOINT] += block;
                if (c.pending_p >= 0) {
                    c.durable = c.pending_p;
                    c.pending_p = -1;
                }
                if (async) {
                    c.pending_p = c.p;
                    c.pending_at = c.t + P->checkpoint_write_s;
                } else {
                    c.durable = c.p;
                }
                c.ckpt_point = c.p;
                skip_cycles(&src, P, &rq, lost, rate, interval_s, copy_s, async, &c, out);
                continue;
            }
        }
        /* A failure. An elastic job without some replicas: it may strike a node that idles. */
        if (lost > 0 && mc_uniform(&src.rng) < (double)lost / F->dp) {
            source_next(&src, fail_at, c.t);
            continue;
        }
        out->interruptions++;
        out->lost_s[LOSS_LOST_WORK] += (c.p - c.durable) / rate;
        c.p = c.ckpt_point = c.durable;
        c.pending_p = -1;
        c.t += s->faults.detect_s;
        out->lost_s[LOSS_DETECTION] += s->faults.detect_s;
        int queue_failed = 1;
        if (pool > 0) {
            pool--; /* swap in a free node */
        } else if (s->faults.elastic && F->dp - lost > F->replicas_per_node) {
            lost += F->replicas_per_node; /* drop the replica(s) that held the node */
        } else if (rq.n > 0 && rq.t[0] < c.t + repair_s) {
            double wait = rq.t[0] - c.t; /* the first node back from repair */
            if (wait > 0) {
                c.t += wait;
                out->lost_s[LOSS_WAIT_REPAIR] += wait;
            }
            repair_pop(&rq);
        } else {
            c.t += repair_s; /* the failed node itself, repaired */
            out->lost_s[LOSS_WAIT_REPAIR] += repair_s;
            queue_failed = 0;
        }
        if (queue_failed)
            repair_add(&rq, c.t + repair_s);
        c.t += restart_s + P->restore_s;
        out->lost_s[LOSS_RESTART] += restart_s;
        out->lost_s[LOSS_RESTORE] += P->restore_s;
        source_next(&src, fail_at, c.t);
        if (P->target_train_s <= 0 && c.t >= P->horizon_s)
            break;
        /* a run that cannot train its tokens (failures faster than checkpoints or restarts) */
        if (P->target_train_s > 0 && c.t >= FAULTS_RUN_CAP * P->target_train_s) {
            out->unfinished = 1;
            break;
        }
    }
    out->wall_s = c.t;
    out->train_s = c.p;
    free(src.h.t);
    free(src.h.kind);
    free(rq.t);
}

void faults_simulate_one(const scenario_config *s, const faults_report *P, double interval_s,
                         unsigned long long seed, faults_timeline *out)
{
    faults_simulate_trace(s, P, NULL, interval_s, seed, out);
}
