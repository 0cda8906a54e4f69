/* "DP comm saved vs compute added" of a scenario's gradient compression (compression.h), for
 * `dtsim run`: the step is built a second time with compression off (reduction in the training
 * precision) and the two DP gradient synchronisations are compared on one stage. */
#ifndef DTSIM_SIM_STEP_COMPRESSION_EFFECT_H
#define DTSIM_SIM_STEP_COMPRESSION_EFFECT_H

#include "run.h"
#include "workload.h"

/* Fills r's compression fields from the built step w of scenario s (the scenario as built,
 * e.g. with flow fidelity's coarse buckets). Does nothing when s has no compression. 0 or -1. */
int compression_effect_fill(const scenario_config *s, const step_workload *w, run_result *r, config_error *err);
/* Adds the "compression" object to the --json document (json_t*) when present. */
void compression_effect_json(const run_result *r, void *doc);
/* The summary line, when present. */
void compression_effect_print(const run_result *r, void *file);

#endif
