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

/* The dependency of task i that finished last: what it waited for. -1 if none. */
static int blocking_dep(const step_workload *w, const replay_times *t, int i)
{
    const sim_task *k = &w->tasks[i];
    int best = -1;
    for (int d = 0; d < k->dep_count; d++) {
        int j = w->deps[k->dep_begin + d];
        if (best < 0 || t->finish[j] > t->finish[best])
            best = j;
    }
    return best;
}

/* Attributes the compute-lane idle gap [gap_start, gap_end) before task i of a stage:
 * waiting on a DP/ZeRO/CP/EP collective is exposed communication of that kind; waiting on a
 * pipeline transfer is exposed PP communication while the transfer runs and pipeline bubble
 * before it (the upstream stage was still computing); anything else is bubble. */
static void attribute_gap(const step_workload *w, const replay_times *t, int i, double gap_start,
                          double gap_end, double *bubble, double *exposed)
{
    double gap = gap_end - gap_start;
    if (gap <= 0)
        return;
    int j = blocking_dep(w, t, i);
    /* compression compute chained to a DP collective on the comm stream (sim/compression.c)
     * is part of the gradient synchronisation the optimizer waits for: exposed DP */
    if (j < 0 || (w->tasks[j].kind == TASK_COMPUTE && !(compression_is_compute(&w->tasks[j]) &&
                                                         w->tasks[j].lane != LANE_COMPUTE))) {
        *bubble += gap;
        return;
    }
    const sim_task *d = &w->tasks[j];
    if (d->kind == TASK_P2P) {
        double comm = fmin(gap, t->finish[j] - fmax(t->start[j], gap_start));
        comm = fmax(comm, 0);
        exposed[COMM_PP] += comm;
        *bubble += gap - comm;
        return;
    }
    exposed[d->comm] += gap;
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

    for (int i = 0; i < w->n_tasks; i++) {
        const sim_task *k = &w->tasks[i];
        double *ex = &exposed[k->stage * COMM_CLASS_COUNT];
        double *tot = &total[k->stage * COMM_CLASS_COUNT];
        double dur = t->finish[i] - t->start[i];
        if (k->kind != TASK_COMPUTE) {
            tot[k->comm] += dur;
            continue;
        }
        if (k->lane != LANE_COMPUTE)
            continue;
        /* TP (and other in-layer) communication is folded into compute tasks and blocks the
         * compute stream: all of it is exposed. */
        double inside = fmin(k->comm_inside_s, dur);
        tot[COMM_TP] += inside;
        ex[COMM_TP] += inside;
        m->stage_compute_s[k->stage] += dur - inside;
        attribute_gap(w, t, i, last_finish[k->stage], t->start[i], &m->stage_bubble_s[k->stage], ex);
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
