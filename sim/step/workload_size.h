/* How large a step's task graph will be, from the scenario alone, before anything is built: what
 * the commands' up-front work estimate (sim/budget.h) stands on. */
#ifndef DTSIM_SIM_WORKLOAD_SIZE_H
#define DTSIM_SIM_WORKLOAD_SIZE_H

#include "config.h"

typedef struct {
    double tasks;         /* every task of the step graph */
    double comm_tasks;    /* of those, the communication ones (pipeline sends, DP/ZeRO collectives):
                             the flow replay simulates each once per data-parallel replica */
} workload_size;

/* An estimate in closed form, O(1): the passes of the schedule (2 P V m), the pieces a pass is
 * split into (one per layer under ZeRO-3, or for the last backward of a chunk whose gradients
 * go out as they fill), the ZeRO-3 gathers, the pipeline sends and the gradient buckets. Within
 * a small factor of workload_build's n_tasks (tests/sim/test_workload_size.c checks it). */
void workload_size_estimate(const scenario_config *s, workload_size *z);

#endif
