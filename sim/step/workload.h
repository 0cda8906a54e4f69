/* The workload of one training step: a dependency graph of tasks for ONE representative
 * pipeline replica (all DP replicas and all TP ranks of a stage move in lockstep in a healthy
 * step). Built once from the scenario (schedule + op list + cost model); replayed by the
 * analytic replay (critical path, no contention) or the flow replay (SimGrid, contention),
 * which expands the template onto the real ranks of the cluster.
 * The graph's tasks and ordering rules: workload_graph.h. */
#ifndef DTSIM_SIM_WORKLOAD_H
#define DTSIM_SIM_WORKLOAD_H

#include "workload_graph.h"

/* Builds the workload of one step of scenario s. Returns 0 or -1 with err. */
int workload_build(const scenario_config *s, step_workload *w, config_error *err);
/* The same on the scenario's schedule built already (scenario_schedule), which a run shares
 * with the memory model. */
int workload_build_scheduled(const scenario_config *s, const pipeline_schedule *schedule, step_workload *w,
                             config_error *err);

/* MoE: the tokens the busiest expert-parallel rank runs over the mean, after the capacity limit
 * (model.moe_load_imbalance, else the sampling floor of a balanced router; 1 for dense models). */
double workload_moe_load(const scenario_config *s);
/* One layer's shape on one GPU under the scenario's micro-batch, precision and TP/SP/CP/EP split. */
void workload_layer_shape(const scenario_config *s, layer_shape *sh);

#endif
