/* Whether a replayed pipeline step has reached its periodic regime, shown from the task times
 * rather than assumed from a depth.
 *
 * The planner evaluates a step of m micro-batches from two short replays, A of m1 micro-batches
 * and B of m1 + one period (run_fold.c), and extrapolates linearly. That is exact once the step
 * is periodic: each further period shifts every later task by the same time. A fixed depth does
 * not guarantee it: where the communication stream fills a little more every period (ZeRO-3's
 * gathers and reduce-scatters near its capacity) the step's slope changes long after two pipeline
 * depths, and three equally spaced step times can agree while the backlog still grows unseen
 * (bench/zero3_fold_check.py lists such layouts).
 *
 * The certificate (the step is a max-plus system: a task starts at the latest end of its inputs
 * and of the task before it on its lane; with the compute slowed beside communication, the same
 * events shifted in time). Graph B is graph A with one period inserted on each lane (its extra
 * tasks, the block) and the tasks after it relabelled one period later: A's lanes are checked to
 * be B's with the block taken out, task for task (every field a replay or a metric reads) and
 * input for input (an input of a task after the cut one period later on its lane). Every task of B
 * after the cut (the block and what follows) has its inputs in the block, after it, in a window
 * of the tasks just before the cut on each lane, or in tasks that never repeat (lanes with no task
 * per period) and end before it needs them with a period to spare. If the window's tasks one
 * period later (the block's or the window's own) are the same tasks, with the same inputs one
 * period later, and start and end exactly one period time lambda later, then the tasks after a
 * second inserted block see inputs shifted by lambda, and so on by induction: every later period
 * adds lambda to the step, and the sums the metrics take (communication, compute, bubbles) grow by
 * what B's block added, where each is booked from periodic tasks only: the metrics book a compute
 * lane's idle gap by walking back through what its task waited for (replay_gap_walk), so the
 * windows also cover every task those walks compare, and a walk that compares a task that never
 * repeats is refused. Two more conditions make that the step's own growth: the periodic tasks
 * end a period after every task before the cut (else one that never repeats sets the shorter
 * steps' end), and communication does not cross the cut beside compute (what ran before the
 * window is over before the first task after the cut of its stage starts; nothing after the cut
 * runs beside a compute task before it, which would make A's early tasks differ from B's). The
 * tolerance is 1e-12 of the step: float rounding of the times, far below any backlog that grows
 * by a visible amount in a period. tests/sim/test_periodic.c holds each condition to random steps
 * against their full replays. */
#ifndef DTSIM_SIM_REPLAY_PERIODIC_H
#define DTSIM_SIM_REPLAY_PERIODIC_H

#include "replay.h"

typedef struct {
    int certified;     /* 1: periodic from the cut on */
    double period_s;   /* lambda: what each further period adds to every later task and the step */
    long window_tasks; /* tasks of b compared with their copies a period later */
    char why[160];     /* when not certified, the first condition that failed */
} replay_period;

/* a: the graph of m1 micro-batches (built, not replayed); b: that of m1 + period (period_mb: the
 * period in micro-batches), tb: b's replayed times. Returns 0 (out->certified says the outcome),
 * -1 out of memory. */
int replay_period_certify(const step_workload *a, const step_workload *b, const replay_times *tb, int period_mb,
                          replay_period *out);

#endif
