/* A Chrome / Perfetto trace of one replayed step: one process per pipeline stage, one track
 * per lane (compute, comm, p2p), a slice per task (args: micro-batch, chunk, bytes, FLOPs) and
 * the compute lane's idle gaps as "bubble / wait" slices. Written to a temporary name and
 * renamed. Open it in ui.perfetto.dev or chrome://tracing. */
#ifndef DTSIM_SIM_TRACE_H
#define DTSIM_SIM_TRACE_H

#include "replay.h"

int trace_write_chrome(const char *path, const step_workload *w, const replay_times *t, const char *scenario_name,
                       config_error *err);
#endif
