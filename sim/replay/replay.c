/* Analytic replay (list scheduling on an idle cluster) and the metrics every replay shares.
 * See replay.h and workload.h for the rules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "compression.h"
#include "cost.h"
#include "replay.h"

int replay_times_alloc(replay_times *t, int n_tasks)
{
    t->n_tasks = n_tasks;
    t->start = calloc((size_t)n_tasks + 1, sizeof *t->start);
    t->finish = calloc((size_t)n_tasks + 1, sizeof *t->finish);
    t->contention = calloc((size_t)n_tasks + 1, sizeof *t->contention);
    return (t->start && t->finish && t->contention) ? 0 : -1;
}

void replay_times_free(replay_times *t)
{
    free(t->start);
    free(t->finish);
    free(t->contention);
    memset(t, 0, sizeof *t);
}

int replay_contends(const sim_task *k)
{
    return k->kind != TASK_COMPUTE && (k->lane == LANE_COMM || k->lane == LANE_P2P);
}

int replay_slowed(const sim_task *k)
{
    return k->kind == TASK_COMPUTE && k->lane == LANE_COMPUTE && k->duration_s > k->comm_inside_s;
}

/* A min-heap of lanes keyed by the projected end of the task each runs: the next event is its
 * top, and a lane whose task's end moves is re-keyed in place (pos: a lane's slot, -1 when idle).
 * Each slot holds its key beside its lane, so sifting reads one array, not a key a lane away. */
typedef struct {
    double key;
    int lane;
} heap_slot;

typedef struct {
    int n, *pos;
    heap_slot *slot;
} lane_heap;

static void heap_fix(lane_heap *h, int s)
{
    heap_slot moving = h->slot[s];
    while (s > 0 && moving.key < h->slot[(s - 1) / 2].key) { /* up */
        h->slot[s] = h->slot[(s - 1) / 2];
        h->pos[h->slot[s].lane] = s;
        s = (s - 1) / 2;
    }
    for (;;) { /* down */
        int c = 2 * s + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->slot[c + 1].key < h->slot[c].key)
            c++;
        if (h->slot[c].key >= moving.key)
            break;
        h->slot[s] = h->slot[c];
        h->pos[h->slot[s].lane] = s;
        s = c;
    }
    h->slot[s] = moving;
    h->pos[moving.lane] = s;
}

/* Sets lane q's key, adding the lane if it is not in the heap. */
static void heap_set(lane_heap *h, int q, double key)
{
    if (h->pos[q] < 0) {
        h->pos[q] = h->n;
        h->slot[h->n++].lane = q;
    }
    h->slot[h->pos[q]].key = key;
    heap_fix(h, h->pos[q]);
}

static void heap_pop(lane_heap *h)
{
    int q = h->slot[0].lane;
    h->pos[q] = -1;
    if (--h->n > 0) {
        h->slot[0] = h->slot[h->n];
        heap_fix(h, 0);
    }
}

/* Replay state beyond the heap: a lane's running task and, for a compute task, its compute left
 * (work) as of `since` at the rate it has run at since then, and the fixed part after it (tail). */
typedef struct {
    int *run, *next;
    double *work, *since, *rate, *tail;
} lane_state;

/* What the event loop needs of each task, read once in index order: its compute at the stage's
 * share (work), its fixed part (tail) and how it runs. The tasks' own records are large and the
 * loop visits them out of order, so reading them there costs a cache miss a task. */
enum { RUNS_FIXED, RUNS_SHARED, RUNS_CONTENDING };
typedef struct {
    double *work, *tail;
    unsigned char *how;
} task_costs;

static int task_costs_build(const step_workload *w, task_costs *c, int *pending)
{
    size_t n = (size_t)w->n_tasks + 1;
    c->work = malloc(n * sizeof(double));
    c->tail = malloc(n * sizeof(double));
    c->how = malloc(n);
    if (!c->work || !c->tail || !c->how)
        return -1;
    for (int i = 0; i < w->n_tasks; i++) {
        const sim_task *k = &w->tasks[i];
        int shared = k->kind == TASK_COMPUTE && k->lane == LANE_COMPUTE;
        c->tail[i] = shared ? fmin(k->comm_inside_s, k->duration_s) : k->duration_s;
        c->work[i] = shared ? k->duration_s - c->tail[i] : 0;
        c->how[i] = shared ? RUNS_SHARED : replay_contends(k) ? RUNS_CONTENDING : RUNS_FIXED;
        pending[i] = k->dep_count; /* the inputs it waits for: here, while the record is read */
    }
    return 0;
}

/* Lane q's task's projected end, its compute first brought up to now at the rate it ran at. */
static double lane_settle(lane_state *l, int q, double now)
{
    double ran = now - l->since[q];
    if (l->work[q] > 0 && l->work[q] <= l->rate[q] * ran) { /* its compute ended: the tail runs */
        double end = l->since[q] + l->work[q] / l->rate[q] + l->tail[q];
        l->work[q] = 0;
        l->tail[q] = end - now;
    } else if (l->work[q] > 0) {
        l->work[q] -= l->rate[q] * ran;
    } else {
        l->tail[q] -= ran;
    }
    l->since[q] = now;
    return now + (l->work[q] > 0 ? l->work[q] / l->rate[q] : 0) + l->tail[q];
}

/* The analytic replay when communication costs the compute beside it: the same lanes and
 * dependencies as list scheduling, run as events, because a collective placed later in the
 * graph's order (a ZeRO-3 prefetch, issued after the compute it overlaps) still slows that
 * compute. Collectives and transfers keep their durations (the network is uncontended here); a
 * compute-lane task first does its compute at its stage's share of the device, then the
 * communication folded into it, unshared (as the flow replay runs it). Each event touches only
 * the lanes whose task ended or whose inputs did, and re-keys only the compute task of a stage
 * whose running communication changed, so a step costs O(tasks log lanes), as the planner needs. */
static int replay_shared(const step_workload *w, replay_times *t)
{
    int n = w->n_tasks, P = w->stages, nl = P * LANE_COUNT;
    workload_index x;
    if (workload_index_build(w, &x) != 0)
        return -1;
    size_t ln = (size_t)nl + 1;
    int *pending = malloc(((size_t)n + 1) * sizeof(int)), *comm_running = calloc((size_t)P, sizeof(int));
    lane_state l = {malloc(ln * sizeof(int)), malloc(ln * sizeof(int)), calloc(ln, sizeof(double)),
                    calloc(ln, sizeof(double)), calloc(ln, sizeof(double)), calloc(ln, sizeof(double))};
    lane_heap h = {0, malloc(ln * sizeof(int)), malloc(ln * sizeof(heap_slot))};
    /* lanes whose next task may start (a task of theirs ended, or an input of one did), and stages
     * whose running communication changed, this event */
    int *touched = malloc(ln * sizeof(int)), *dirty = malloc(((size_t)P + 1) * sizeof(int));
    unsigned char *is_touched = calloc(ln, 1), *is_dirty = calloc((size_t)P + 1, 1);
    task_costs c = {0};
    int ok = pending && task_costs_build(w, &c, pending) == 0 && comm_running && l.run && l.next && l.work && l.since &&
             l.rate && l.tail && h.pos && h.slot && touched && dirty && is_touched && is_dirty;
    int n_touched = 0, n_dirty = 0, done = 0;
    for (int q = 0; ok && q < nl; q++) {
        l.next[q] = x.lane_begin[q];
        l.run[q] = -1;
        h.pos[q] = -1;
        touched[n_touched++] = q;
        is_touched[q] = 1;
    }
#define MARK(set, is, count, v) do { if (!is[v]) { is[v] = 1; set[count++] = v; } } while (0)
    double now = 0;
    while (ok && done < n) {
        /* start what can start: a lane's next task, once the lane is idle and its inputs are done */
        for (int z = 0; z < n_touched; z++) {
            int q = touched[z];
            is_touched[q] = 0;
            if (l.run[q] >= 0 || l.next[q] >= x.lane_begin[q + 1])
                continue;
            int i = x.lane_task[l.next[q]];
            if (pending[i] > 0)
                continue;
            l.next[q]++;
            l.run[q] = i;
            t->start[i] = now;
            l.since[q] = now;
            l.rate[q] = 1;
            l.work[q] = c.work[i];
            l.tail[q] = c.tail[i];
            if (c.how[i] != RUNS_FIXED) /* a compute task's rate, or its stage's, changes: below */
                MARK(dirty, is_dirty, n_dirty, q / LANE_COUNT);
            if (c.how[i] == RUNS_CONTENDING)
                comm_running[q / LANE_COUNT]++;
            if (c.how[i] != RUNS_SHARED)
                heap_set(&h, q, now + l.tail[q]);
        }
        n_touched = 0;
        /* the compute task of a stage whose communication changed runs at its new share from now */
        for (int z = 0; z < n_dirty; z++) {
            int s = dirty[z], q = s * LANE_COUNT + LANE_COMPUTE;
            is_dirty[s] = 0;
            if (l.run[q] < 0)
                continue;
            double end = lane_settle(&l, q, now);
            if (l.work[q] > 0) {
                l.rate[q] = cost_overlap_compute_share(comm_running[s], w->overlap_slowdown);
                end = now + l.work[q] / l.rate[q] + l.tail[q];
            }
            heap_set(&h, q, end);
        }
        n_dirty = 0;
        if (h.n == 0) { /* nothing runs: a dependency cycle or an undone input */
            ok = 0;
            break;
        }
        /* end every task whose projected end is the next one */
        now = h.slot[0].key;
        while (h.n > 0 && h.slot[0].key <= now) {
            int q = h.slot[0].lane, i = l.run[q];
            heap_pop(&h);
            t->finish[i] = now;
            t->contention[i] = c.how[i] == RUNS_SHARED ? fmax(0, now - t->start[i] - c.work[i] - c.tail[i]) : 0;
            if (c.how[i] == RUNS_CONTENDING) {
                comm_running[q / LANE_COUNT]--;
                MARK(dirty, is_dirty, n_dirty, q / LANE_COUNT);
            }
            l.run[q] = -1;
            MARK(touched, is_touched, n_touched, q);
            for (int d = x.dependent_begin[i]; d < x.dependent_begin[i + 1]; d++)
                if (--pending[x.dependent[d]] == 0)
                    MARK(touched, is_touched, n_touched, x.lane_of[x.dependent[d]]);
            done++;
        }
    }
#undef MARK
    free(pending); free(comm_running); free(l.run); free(l.next); free(l.work); free(l.since); free(l.rate);
    free(l.tail); free(h.pos); free(h.slot); free(touched); free(dirty); free(is_touched);
    free(is_dirty); free(c.work); free(c.tail); free(c.how);
    workload_index_free(&x);
    return ok ? 0 : -1;
}

int replay_analytic(const step_workload *w, replay_times *t)
{
    if (w->overlap_slowdown > 1)
        return replay_shared(w, t);
    double *lane_free = calloc((size_t)w->stages * LANE_COUNT, sizeof *lane_free);
    if (!lane_free)
        return -1;
    for (int i = 0; i < w->n_tasks; i++) {
        const sim_task *k = &w->tasks[i];
        double ready = lane_free[k->stage * LANE_COUNT + k->lane];
        for (int d = 0; d < k->dep_count; d++)
            ready = fmax(ready, t->finish[w->deps[k->dep_begin + d]]);
        t->start[i] = ready;
        t->finish[i] = ready + k->duration_s;
        t->contention[i] = 0;
        lane_free[k->stage * LANE_COUNT + k->lane] = t->finish[i];
    }
    free(lane_free);
    return 0;
}

/* What task i waited for: of its dependencies and the task before it on its lane (lane_prev,
 * -1 for none), the one that finished last; with stage >= 0, of those on that stage only. -1 if
 * none. Each task compared is told to consult (when not NULL). */
static int blocking_dep(const step_workload *w, const replay_times *t, const int *lane_prev, int i, int stage,
                        replay_gap_consult consult, void *ctx)
{
    const sim_task *k = &w->tasks[i];
    int best = lane_prev[i] >= 0 && (stage < 0 || w->tasks[lane_prev[i]].stage == stage) ? lane_prev[i] : -1;
    if (consult && best >= 0)
        consult(ctx, best);
    for (int d = 0; d < k->dep_count; d++) {
        int j = w->deps[k->dep_begin + d];
        if (stage >= 0 && w->tasks[j].stage != stage)
            continue;
        if (consult)
            consult(ctx, j);
        /* finishes equal but for rounding (sums of the same durations taken in another order)
         * are a tie, kept by the first in order: else which of two equal waits is charged would
         * flip with the rounding of ever larger times, step by step */
        if (best < 0 || t->finish[j] > t->finish[best] + 1e-12 * fabs(t->finish[best]))
            best = j;
    }
    return best;
}

/* Synchronisation work off the compute stream: collectives, transfers, and compression compute
 * chained to a DP collective on the comm stream (sim/step/compression.c), which belongs to the
 * gradient synchronisation and is counted with DP. -1 for anything else. */
static int sync_class(const sim_task *k)
{
    if (k->kind != TASK_COMPUTE)
        return k->kind == TASK_P2P ? COMM_PP : (int)k->comm;
    return compression_is_compute(k) && k->lane != LANE_COMPUTE ? COMM_DP : -1;
}

/* Attributes the compute-lane idle gap [gap_start, gap_end) before task i of a stage by walking
 * back along what each task waited for: the time a collective or transfer itself ran is exposed
 * communication of its kind; before it, what it waited for in turn (an earlier collective on its
 * lane, a gradient bucket's reduction before its host copy, ...); once the chain reaches compute
 * (the upstream stage still computing, or nothing), the rest is pipeline bubble. So no class is
 * charged more than its tasks ran. */
static void attribute_gap(const step_workload *w, const replay_times *t, const int *lane_prev, int i,
                          double gap_start, double gap_end, double *bubble, double *exposed,
                          replay_gap_consult consult, void *ctx)
{
    double end = gap_end;
    int cur = i;
    while (end > gap_start) {
        int j = blocking_dep(w, t, lane_prev, cur, -1, consult, ctx);
        int cls = j >= 0 ? sync_class(&w->tasks[j]) : -1;
        /* another stage's work (what the step's global all-reduces wait for: its reduction, the
         * embedding sum) is that stage's: for this one the wait past its own reduction is imbalance
         * between stages, a bubble; its own reduction, which it waited for as well (Megatron's
         * gradient all-reduce before the norm), is still its exposed communication */
        if (j >= 0 && w->tasks[j].kind != TASK_P2P && w->tasks[j].stage != w->tasks[i].stage) {
            /* (only while the walk is still on this stage: past a transfer from another stage,
             * that stage's own tasks are not this one's) */
            int own = w->tasks[cur].stage == w->tasks[i].stage
                          ? blocking_dep(w, t, lane_prev, cur, w->tasks[i].stage, consult, ctx)
                          : -1;
            int own_cls = own >= 0 ? sync_class(&w->tasks[own]) : -1;
            if (own_cls >= 0 && t->finish[own] > gap_start) {
                *bubble += end - fmax(t->finish[own], gap_start);
                end = fmax(t->finish[own], gap_start);
                j = own;
                cls = own_cls;
            } else {
                cls = -1;
            }
        }
        if (cls < 0) {
            *bubble += end - gap_start;
            return;
        }
        double from = fmax(t->start[j], gap_start);
        exposed[cls] += fmax(0, fmin(end, t->finish[j]) - from);
        if (t->finish[j] < end) /* j was done before the gap's end: what else kept cur: bubble */
            *bubble += end - fmax(t->finish[j], from);
        end = from;
        cur = j;
    }
}

int replay_gap_task(const sim_task *k)
{
    return sync_class(k) < 0 && k->lane == LANE_COMPUTE;
}

void replay_gap_walk(const step_workload *w, const replay_times *t, const int *lane_prev, int i, double gap_start,
                     replay_gap_consult consult, void *ctx)
{
    double bubble = 0, exposed[COMM_CLASS_COUNT] = {0};
    attribute_gap(w, t, lane_prev, i, gap_start, t->start[i], &bubble, exposed, consult, ctx);
}

double replay_inside_parts(const step_workload *w, const sim_task *k, double dur, double part[COMM_CLASS_COUNT])
{
    const double *cls = workload_task_parts(w, k)->inside;
    double inside = fmin(k->comm_inside_s, dur), booked = 0;
    for (int c = 0; c < COMM_CLASS_COUNT; c++)
        booked += cls[c];
    for (int c = 0; c < COMM_CLASS_COUNT; c++) /* in proportion when a replay ran the task shorter */
        part[c] = booked > 0 ? inside * cls[c] / booked : (c == COMM_TP ? inside : 0);
    return inside;
}

void replay_bubble_summary(const double *stage_bubble_s, int stages, double step_time_s, double *mean, double *max,
                           int *max_stage)
{
    *mean = *max = 0;
    *max_stage = 0;
    for (int s = 0; s < stages; s++) {
        double f = step_time_s > 0 ? stage_bubble_s[s] / step_time_s : 0;
        *mean += f / stages;
        if (f > *max) {
            *max = f;
            *max_stage = s;
        }
    }
}

int replay_metrics_compute(const step_workload *w, const replay_times *t, replay_metrics *m)
{
    memset(m, 0, sizeof *m);
    int P = w->stages;
    m->stages = P;
    m->stage_compute_s = calloc((size_t)P, sizeof(double));
    m->stage_bubble_s = calloc((size_t)P, sizeof(double));
    double *last_finish = calloc((size_t)P, sizeof(double));
    double *exposed = calloc((size_t)P * COMM_CLASS_COUNT, sizeof(double));
    double *total = calloc((size_t)P * COMM_CLASS_COUNT, sizeof(double));
    if (!m->stage_compute_s || !m->stage_bubble_s || !last_finish || !exposed || !total) {
        free(last_finish); free(exposed); free(total);
        return -1;
    }

    for (int i = 0; i < w->n_tasks; i++)
        m->step_time_s = fmax(m->step_time_s, t->finish[i]);
    int *lane_prev = malloc((size_t)(w->n_tasks > 0 ? w->n_tasks : 1) * sizeof(int));
    int *lane_last = malloc((size_t)P * LANE_COUNT * sizeof(int));
    if (!lane_prev || !lane_last) {
        free(lane_prev); free(lane_last); free(last_finish); free(exposed); free(total);
        return -1;
    }
    for (int q = 0; q < P * LANE_COUNT; q++)
        lane_last[q] = -1;

    for (int i = 0; i < w->n_tasks; i++) {
        const sim_task *k = &w->tasks[i];
        /* the task before it on its lane, known here: what a gap is attributed to (below) walks
         * back to earlier tasks only */
        int *last = &lane_last[k->stage * LANE_COUNT + k->lane];
        lane_prev[i] = *last;
        *last = i;
        double *ex = &exposed[k->stage * COMM_CLASS_COUNT];
        double *tot = &total[k->stage * COMM_CLASS_COUNT];
        double dur = t->finish[i] - t->start[i];
        if (sync_class(k) >= 0) {
            tot[sync_class(k)] += dur;
            /* a pipeline transfer runs on both GPUs (a send kernel and a receive kernel), and
             * either may wait for it: the receiver for its input, a blocking sender for delivery */
            if (k->kind == TASK_P2P && k->peer_stage >= 0 && k->peer_stage != k->stage)
                total[k->peer_stage * COMM_CLASS_COUNT + COMM_PP] += dur;
            continue;
        }
        if (!replay_gap_task(k))
            continue;
        /* TP, CP and EP communication inside a layer is folded into compute tasks and blocks
         * the compute stream: all of it is exposed, booked by its kind. */
        double part[COMM_CLASS_COUNT];
        double inside = replay_inside_parts(w, k, dur, part);
        const double *hidden = workload_task_parts(w, k)->hidden;
        /* by how much a replay ran the task shorter (stragglers aside), leaving out what
         * communication beside it added (booked as overlap cost below) */
        double ran = k->duration_s > 0 ? (dur - t->contention[i]) / k->duration_s : 0;
        for (int c = 0; c < COMM_CLASS_COUNT; c++) {
            tot[c] += part[c] + hidden[c] * ran;
            ex[c] += part[c];
        }
        m->stage_compute_s[k->stage] += dur - inside;
        m->overlap_cost_s += (k->overlap_cost_s * ran + t->contention[i]) / P;
        attribute_gap(w, t, lane_prev, i, last_finish[k->stage], t->start[i], &m->stage_bubble_s[k->stage], ex, NULL,
                      NULL);
        last_finish[k->stage] = t->finish[i];
    }
    /* After its last task a stage waits for the slowest stage: pipeline bubble. */
    for (int s = 0; s < P; s++)
        m->stage_bubble_s[s] += fmax(0, m->step_time_s - last_finish[s]);

    replay_bubble_summary(m->stage_bubble_s, P, m->step_time_s, &m->bubble_mean, &m->bubble_max,
                          &m->bubble_max_stage);
    for (int s = 0; s < P; s++) {
        for (int c = 0; c < COMM_CLASS_COUNT; c++) {
            m->comm_total_s[c] += total[s * COMM_CLASS_COUNT + c] / P;
            m->comm_exposed_s[c] += exposed[s * COMM_CLASS_COUNT + c] / P;
        }
    }
    free(lane_prev);
    free(lane_last);
    free(last_finish);
    free(exposed);
    free(total);
    return 0;
}

void replay_metrics_free(replay_metrics *m)
{
    free(m->stage_compute_s);
    free(m->stage_bubble_s);
    memset(m, 0, sizeof *m);
}
