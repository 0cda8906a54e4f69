/* A Chrome / Perfetto trace of one replayed step: one process per pipeline stage (named once),
 * one track per lane (compute, comm, p2p, host), a slice per task (args: micro-batch, chunk,
 * bytes, FLOPs), the compute lane's idle gaps as "bubble / wait" slices, and on a track of its
 * own (TRACE_INSIDE_TID) the TP, CP and EP communication each compute task holds, by kind, at
 * the task's end. A collective's args name the algorithm and protocol NCCL's choice (or the
 * scenario's nccl_algo / nccl_proto) gives one of its calls (sim/step/collective.h). Written to a
 * temporary name and renamed. Open it in ui.perfetto.dev or chrome://tracing. */
#ifndef DTSIM_SIM_TRACE_H
#define DTSIM_SIM_TRACE_H

#include "replay.h"

#define TRACE_INSIDE_TID LANE_COUNT /* the track of the communication inside compute tasks */

int trace_write_chrome(const char *path, const step_workload *w, const replay_times *t, const scenario_config *s,
                       config_error *err);
#endif
