/* "DP comm saved vs compute added" of a scenario's gradient compression (compression.h), for
 * `dtsim run`: the step is built a second time with compression off (reduction in the training
 * precision) and the two DP gradient synchronisations are compared on one stage. */
#ifndef DTSIM_SIM_STEP_COMPRESSION_EFFECT_H
#define DTSIM_SIM_STEP_COMPRESSION_EFFECT_H

#include "workload.h"

/* What compression changed, per step on one GPU of `stage` (present 0: no compression). */
typedef struct {
    int present, stage;
    char method[48];
    double bytes_ratio;    /* DP wire bytes per rank with / without */
    double comm_without_s; /* DP collective time without compression */
    double comm_saved_s;   /* of it, what compression saves */
    double compute_s;      /* compression compute added */
} compression_effect;

/* Fills e from the built step w of scenario s (the scenario as built, e.g. with flow
 * fidelity's coarse buckets); present 0 when s has no compression. 0 or -1 with err. */
int compression_effect_fill(const scenario_config *s, const step_workload *w, compression_effect *e,
                            config_error *err);
/* Adds the "compression" object to the --json document (json_t*) when present. */
void compression_effect_json(const compression_effect *e, void *doc);
/* The summary line, when present. */
void compression_effect_print(const compression_effect *e, void *file);

#endif
