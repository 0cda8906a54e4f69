/* What a replay of one step produces, and the metrics derived from it. Both the analytic
 * replay and the flow (SimGrid) replay fill start/finish per task of the step_workload; the
 * step time, bubbles and exposed communication are then derived here, in one place, so the
 * two fidelities report the same things the same way. */
#ifndef DTSIM_SIM_REPLAY_H
#define DTSIM_SIM_REPLAY_H

#include "workload.h"

typedef struct {
    int n_tasks;
    double *start;   /* seconds from step start, per task */
    double *finish;
    double *contention; /* per compute-lane task: what communication running beside it on its
                           device added to its time (step_workload.overlap_slowdown), in seconds */
} replay_times;

typedef struct {
    double step_time_s;
    int stages;
    double *stage_compute_s;  /* busy time of the compute lane, per stage */
    double *stage_bubble_s;   /* compute-lane idle time waiting for pipeline work, per stage */
    double bubble_mean, bubble_max;   /* fractions of step time */
    int bubble_max_stage;
    double comm_total_s[COMM_CLASS_COUNT];   /* all comm time, hidden or not, mean over stages */
    double comm_exposed_s[COMM_CLASS_COUNT]; /* comm the compute lane waited for, mean over stages */
    double overlap_cost_s;    /* what overlapping communication cost the compute, mean over stages */
} replay_metrics;

int replay_times_alloc(replay_times *t, int n_tasks);
void replay_times_free(replay_times *t);

/* What the analytic replay's contention is made of (step_workload.overlap_slowdown > 1):
 * replay_contends, a communication kernel the compute stream runs beside (a collective on the comm
 * stream or a pipeline transfer; host-lane work, PCIe copies and the CPU optimizer, takes no SMs);
 * replay_slowed, a compute task of the compute lane with compute left beside its inside
 * communication, which runs at cost_overlap_compute_share while such kernels of its stage run. */
int replay_contends(const sim_task *k);
int replay_slowed(const sim_task *k);

/* Analytic replay: list scheduling of the graph with task durations. The network is
 * uncontended; a compute-lane task runs at cost_overlap_compute_share of its device while
 * collectives and transfers of its stage placed before it run beside it. */
int replay_analytic(const step_workload *w, replay_times *t);

/* The stages' bubbles (seconds each) as fractions of the step: their mean, the largest and its
 * stage (the first of equals). */
void replay_bubble_summary(const double *stage_bubble_s, int stages, double step_time_s, double *mean, double *max,
                           int *max_stage);
/* Derives the metrics from the task times. */
int replay_metrics_compute(const step_workload *w, const replay_times *t, replay_metrics *m);
/* The TP, CP and EP communication inside compute task k of w that ran for dur, by kind, into
 * part: comm_inside_s (at most dur) shared in proportion to its parts' inside (all TP when it has
 * none). Returns the whole. What the metrics book as exposed, and the trace draws. */
double replay_inside_parts(const step_workload *w, const sim_task *k, double dur, double part[COMM_CLASS_COUNT]);
void replay_metrics_free(replay_metrics *m);

/* The metrics book each idle gap of a stage's compute lane, from the end of its compute task
 * before (gap_start) to the start of compute task i, by walking back from i through what it
 * waited for (exposed communication by kind, else bubble). replay_gap_task: whether k is such a
 * compute task. replay_gap_walk: that walk for task i, telling consult each task it compares
 * (lane_prev: each task's predecessor on its lane, -1 for none), so that a caller can say what
 * the booking depended on (periodic.c); nothing is booked. */
typedef void (*replay_gap_consult)(void *ctx, int task);
int replay_gap_task(const sim_task *k);
void replay_gap_walk(const step_workload *w, const replay_times *t, const int *lane_prev, int i, double gap_start,
                     replay_gap_consult consult, void *ctx);

#endif
