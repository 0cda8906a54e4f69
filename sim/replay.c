/* Analytic replay (list scheduling on an idle cluster) and the metrics every replay shares.
 * See replay.h and workload.h for the rules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "compression.h"
#include "replay.h"

int replay_times_alloc(replay_times *t, int n_tasks)
{
    t->n_tasks = n_tasks;
    t->start = calloc((size_t)n_tasks + 1, sizeof *t->start);
    t->finish = calloc((size_t)n_tasks + 1, sizeof *t->finish);
    return (t->start && t->finish) ? 0 : -1;
}

void replay_times_free(replay_times *t)
{
    free(t->start);
    free(t->finish);
    memset(t, 0, sizeof *t);
}

int replay_analytic(const step_workload *w, replay_times *t)
{
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
 * chained to a DP collective on the comm stream (sim/compression.c), which belongs to the
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
        double inside = fmin(k->comm_inside_s, dur), booked = 0;
        for (int c = 0; c < COMM_CLASS_COUNT; c++)
            booked += k->comm_inside_cls[c];
        double ran = k->duration_s > 0 ? dur / k->duration_s : 0;
        for (int c = 0; c < COMM_CLASS_COUNT; c++) {
            /* by kind, in proportion when a replay ran the task shorter; unbooked: TP */
            double part = booked > 0 ? inside * k->comm_inside_cls[c] / booked : (c == COMM_TP ? inside : 0);
            tot[c] += part + k->comm_hidden_cls[c] * ran;
            ex[c] += part;
        }
        m->stage_compute_s[k->stage] += dur - inside;
        m->overlap_cost_s += k->overlap_cost_s * ran / P;
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
