/* A lower bound on a step's analytic time from its layers' compute alone, in closed form: what
 * the planner prunes by (sim/studies/plan/plan_search.c) before it replays a layout. */
#ifndef DTSIM_SIM_WORKLOAD_BOUND_H
#define DTSIM_SIM_WORKLOAD_BOUND_H

#include "config.h"

/* Seconds no replay of s's step can beat, from the same pass costs the graph is built from
 * (workload_costs.c), O(stages x chunks). The argument, for every pipeline stage p, on its compute
 * stream:
 *  - its compute stream runs every micro-batch's forward and backward (with the layers it
 *    recomputes) through each of its chunks, one task at a time, each at least its compute ops'
 *    time (communication folded into a task, what overlap costs and the contention of the
 *    replay only add to it);
 *  - none of that can start before the first micro-batch's forward has crossed chunk 0 of stages
 *    0 .. p-1, and its last task, a chunk-0 backward, is followed by that micro-batch's backward
 *    through chunk 0 of stages p-1 .. 0 (each needs the one before: a forward its input, a
 *    backward its output gradient);
 * so the step takes at least those forwards, the stage's compute and those backwards. And on its
 * communication stream, where ZeRO-3 gathers every layer in every pass (DeepSpeed's stage 3,
 * Megatron-FSDP), those gathers one after the other. The bound is the largest of these over the
 * stages. Pipeline sends, collectives, the optimizer and the step's other fixed
 * work count as 0, which keeps it a bound: 1F1B without communication gives (m + p - 1)(f + b),
 * the schedule's own time. 0 where the costs cannot be computed (the build then says why).
 * tests/plan/test_fold.c holds it under the full replay of every fitting layout of every shipped
 * scenario's search. */
double workload_step_lower_bound(const scenario_config *s);

#endif
