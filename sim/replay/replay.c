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

/* Whether task k is a communication kernel on its GPU that the compute stream runs beside: a
 * collective on the comm stream or a pipeline transfer. Host-lane work (PCIe copies by the copy
 * engines, the CPU optimizer) takes no SMs. */
static int contends(const sim_task *k)
{
    return k->kind != TASK_COMPUTE && (k->lane == LANE_COMM || k->lane == LANE_P2P);
}

/* The analytic replay when communication costs the compute beside it: the same lanes and
 * dependencies as list scheduling, run as events, because a collective placed later in the
 * graph's order (a ZeRO-3 prefetch, issued after the compute it overlaps) still slows that
 * compute. Collectives and transfers keep their durations (the network is uncontended here); a
 * compute-lane task first does its compute at its stage's share of the device, then the
 * communication folded into it, unshared (as the flow replay runs it). */
static int replay_shared(const step_workload *w, replay_times *t)
{
    int n = w->n_tasks, P = w->stages, nl = P * LANE_COUNT;
    workload_index x;
    if (workload_index_build(w, &x) != 0)
        return -1;
    int *pending = malloc(((size_t)n + 1) * sizeof(int)), *lane_next = malloc((size_t)nl * sizeof(int));
    int *lane_run = malloc((size_t)nl * sizeof(int)), *comm_running = calloc((size_t)P, sizeof(int));
    int *running = malloc(((size_t)nl + 1) * sizeof(int));
    double *work = calloc((size_t)n + 1, sizeof(double)), *tail = calloc((size_t)n + 1, sizeof(double));
    double *rate = malloc(((size_t)nl + 1) * sizeof(double)); /* of each running task, this event */
    /* The lanes whose next task may start: all at first, then those an event touched (a task of
     * theirs ended, or an input of one did). A lane nobody touched cannot have changed, so each
     * event looks at a few lanes, not at every lane of every stage. */
    int *touched = malloc(((size_t)nl + 1) * sizeof(int));
    unsigned char *is_touched = calloc((size_t)nl + 1, 1);
    int ok = pending && lane_next && lane_run && comm_running && running && work && tail && rate && touched &&
             is_touched;
    for (int i = 0; ok && i < n; i++)
        pending[i] = w->tasks[i].dep_count;
    int n_touched = 0;
    for (int q = 0; ok && q < nl; q++) {
        lane_next[q] = x.lane_begin[q];
        lane_run[q] = -1;
        touched[n_touched++] = q;
        is_touched[q] = 1;
    }
    int n_running = 0, done = 0;
    double now = 0;
    while (ok && done < n) {
        /* start what can start: a lane's next task, once the lane is idle and its inputs are done */
        for (int z = 0; z < n_touched; z++) {
            int q = touched[z];
            is_touched[q] = 0;
            if (lane_run[q] >= 0 || lane_next[q] >= x.lane_begin[q + 1])
                continue;
            int i = x.lane_task[lane_next[q]];
            if (pending[i] > 0)
                continue;
            const sim_task *k = &w->tasks[i];
            lane_next[q]++;
            lane_run[q] = i;
            running[n_running++] = i;
            t->start[i] = now;
            if (k->kind == TASK_COMPUTE && k->lane == LANE_COMPUTE) {
                tail[i] = fmin(k->comm_inside_s, k->duration_s);
                work[i] = k->duration_s - tail[i];
            } else {
                work[i] = 0;
                tail[i] = k->duration_s;
                if (contends(k))
                    comm_running[k->stage]++;
            }
        }
        n_touched = 0;
        if (n_running == 0) { /* nothing can run: a dependency cycle or an undone input */
            ok = 0;
            break;
        }
        /* the next end: compute at its stage's share, then the fixed part */
        double next = INFINITY;
        for (int r = 0; r < n_running; r++) {
            int i = running[r];
            rate[r] = work[i] > 0 ? cost_overlap_compute_share(comm_running[w->tasks[i].stage], w->overlap_slowdown)
                                  : 1;
            next = fmin(next, now + (work[i] > 0 ? work[i] / rate[r] : tail[i]));
        }
        for (int r = 0; r < n_running; r++) {
            int i = running[r];
            if (work[i] > 0) {
                if (now + work[i] / rate[r] <= next)
                    work[i] = 0; /* its compute is done: its fixed part runs from next */
                else
                    work[i] -= rate[r] * (next - now);
            } else if (now + tail[i] <= next) {
                running[r] = -1 - i; /* ends at next */
            } else {
                tail[i] -= next - now;
            }
        }
        now = next;
        for (int r = 0; r < n_running; r++) {
            if (running[r] >= 0)
                continue;
            int i = -1 - running[r];
            const sim_task *k = &w->tasks[i];
            t->finish[i] = now;
            t->contention[i] = k->kind == TASK_COMPUTE && k->lane == LANE_COMPUTE
                                   ? fmax(0, now - t->start[i] - k->duration_s) : 0;
            if (contends(k))
                comm_running[k->stage]--;
            int q = k->stage * LANE_COUNT + k->lane;
            lane_run[q] = -1;
            if (!is_touched[q]) {
                is_touched[q] = 1;
                touched[n_touched++] = q;
            }
            for (int d = x.dependent_begin[i]; d < x.dependent_begin[i + 1]; d++) {
                const sim_task *j = &w->tasks[x.dependent[d]];
                int qj = j->stage * LANE_COUNT + j->lane;
                if (--pending[x.dependent[d]] == 0 && !is_touched[qj]) {
                    is_touched[qj] = 1;
                    touched[n_touched++] = qj;
                }
            }
            done++;
        }
        int kept = 0;
        for (int r = 0; r < n_running; r++)
            if (running[r] >= 0)
                running[kept++] = running[r];
        n_running = kept;
    }
    free(pending); free(lane_next); free(lane_run); free(comm_running); free(running); free(work); free(tail);
    free(rate); free(touched); free(is_touched);
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
 * -1 for none), the one that finished last. -1 if none. */
static int blocking_dep(const step_workload *w, const replay_times *t, const int *lane_prev, int i)
{
    const sim_task *k = &w->tasks[i];
    int best = lane_prev[i];
    for (int d = 0; d < k->dep_count; d++) {
        int j = w->deps[k->dep_begin + d];
        if (best < 0 || t->finish[j] > t->finish[best])
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
                          double gap_start, double gap_end, double *bubble, double *exposed)
{
    double end = gap_end;
    int cur = i;
    while (end > gap_start) {
        int j = blocking_dep(w, t, lane_prev, cur);
        int cls = j >= 0 ? sync_class(&w->tasks[j]) : -1;
        /* another stage's own reduction (what the step's global all-reduces wait for) is that
         * stage's communication: for this one the wait is imbalance between stages, a bubble */
        if (cls >= 0 && w->tasks[j].kind != TASK_P2P && w->tasks[j].stage != w->tasks[i].stage)
            cls = -1;
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

double replay_inside_parts(const sim_task *k, double dur, double part[COMM_CLASS_COUNT])
{
    double inside = fmin(k->comm_inside_s, dur), booked = 0;
    for (int c = 0; c < COMM_CLASS_COUNT; c++)
        booked += k->comm_inside_cls[c];
    for (int c = 0; c < COMM_CLASS_COUNT; c++) /* in proportion when a replay ran the task shorter */
        part[c] = booked > 0 ? inside * k->comm_inside_cls[c] / booked : (c == COMM_TP ? inside : 0);
    return inside;
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
        int *last = &lane_last[w->tasks[i].stage * LANE_COUNT + w->tasks[i].lane];
        lane_prev[i] = *last;
        *last = i;
    }

    for (int i = 0; i < w->n_tasks; i++) {
        const sim_task *k = &w->tasks[i];
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
        if (k->lane != LANE_COMPUTE)
            continue;
        /* TP, CP and EP communication inside a layer is folded into compute tasks and blocks
         * the compute stream: all of it is exposed, booked by its kind. */
        double part[COMM_CLASS_COUNT];
        double inside = replay_inside_parts(k, dur, part);
        /* by how much a replay ran the task shorter (stragglers aside), leaving out what
         * communication beside it added (booked as overlap cost below) */
        double ran = k->duration_s > 0 ? (dur - t->contention[i]) / k->duration_s : 0;
        for (int c = 0; c < COMM_CLASS_COUNT; c++) {
            tot[c] += part[c] + k->comm_hidden_cls[c] * ran;
            ex[c] += part[c];
        }
        m->stage_compute_s[k->stage] += dur - inside;
        m->overlap_cost_s += (k->overlap_cost_s * ran + t->contention[i]) / P;
        attribute_gap(w, t, lane_prev, i, last_finish[k->stage], t->start[i], &m->stage_bubble_s[k->stage], ex);
        last_finish[k->stage] = t->finish[i];
    }
    /* After its last task a stage waits for the slowest stage: pipeline bubble. */
    for (int s = 0; s < P; s++)
        m->stage_bubble_s[s] += fmax(0, m->step_time_s - last_finish[s]);

    m->bubble_max_stage = 0;
    for (int s = 0; s < P; s++) {
        double f = m->step_time_s > 0 ? m->stage_bubble_s[s] / m->step_time_s : 0;
        m->bubble_mean += f / P;
        if (f > m->bubble_max) {
            m->bubble_max = f;
            m->bubble_max_stage = s;
        }
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
