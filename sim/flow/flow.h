/* The flow replay (DESIGN.md, "flow" fidelity): the step's task graph replayed on SimGrid 3.32
 * over a model of the cluster (railzone.cpp), so flows share links: DP rings of many replicas
 * crossing the spines, pipeline transfers meeting gradient buckets, degraded NICs, stragglers.
 *
 * Granularity (docs/flow.md): one actor per (pipeline stage, DP replica, lane); the TP (and CP)
 * ranks of a stage move in lockstep, so compute is one timed wait per group and TP communication
 * stays inside it (NVLink, nothing else contends there); a pipeline transfer is one flow per
 * rail (one per lockstep GPU); a DP/ZeRO collective is one flow per ring edge carrying the
 * ring's 2(n-1)/n (all-reduce) or (n-1)/n of the bytes, with as many parallel rings (channels)
 * as NICs the group has per node, plus the ring's latency terms analytically.
 * SimGrid can be initialised once per process: each replay runs in a child process. */
#ifndef DTSIM_SIM_FLOW_H
#define DTSIM_SIM_FLOW_H

#include "replay.h"

typedef struct {
    double wall_s;            /* the SimGrid run itself */
    double platform_load_s;
    long actors, flows, waits;
    double peak_rss_mib;
    /* the longest communication of the step and the slowest link on its routes */
    char slowest_comm[64];
    int slowest_comm_stage;
    double slowest_comm_s;
    char slowest_link[64];
    double slowest_link_gbs;
} flow_report;

/* Replays w on the scenario's cluster. t must be allocated for w->n_tasks. Returns 0, or -1
 * with err (SimGrid missing, platform module not found, child failure). */
int replay_flow(const scenario_config *s, const step_workload *w, replay_times *t, flow_report *r,
                config_error *err);

/* The same at a finer level, to measure what the lockstep granularity costs (docs/flow.md):
 * the TP communication inside compute tasks becomes NVLink ring flows between the group's
 * GPUs (the embedding's and LM head's small TP all-reduces stay folded in). */
int replay_flow_fine(const scenario_config *s, const step_workload *w, replay_times *t, flow_report *r,
                     config_error *err);
#endif
