/* The layout planner: for a scenario's model, batch and platform, every valid parallel layout
 * (TP inside a node, PP dividing the layers, DP, CP, interleaving, micro-batch, ZeRO stage,
 * recomputation, sequence parallelism), those that do not fit in memory dropped, the rest
 * simulated (analytic fidelity) and ranked by step time. */
#ifndef DTSIM_SIM_PLAN_H
#define DTSIM_SIM_PLAN_H

#include "run.h"

typedef struct {
    int tp, pp, dp, cp, vpp, sp, zero;
    long long micro_batch;
    recompute_kind recompute;
    pipeline_kind schedule;
    int is_scenario_own;       /* the scenario's own layout (always a candidate) */
    run_result result;
    double days_to_train;      /* training.tokens / tokens per second; 0 when no budget */
} plan_layout;

typedef struct {
    plan_layout *layouts;      /* fitting layouts, best first */
    int count, cap;
    long enumerated, invalid, out_of_memory;
    char first_invalid[1024];   /* an example reason, for the summary */
    double wall_s;
} plan_result;

/* Searches the layouts of base on `gpus` GPUs (0: the scenario's own count). progress, when
 * not NULL, is called now and then with (done, total). Returns 0, or -1 with err. */
int plan_search(const scenario_config *base, int gpus, plan_result *out, config_error *err,
                void (*progress)(long done, long total));
void plan_result_free(plan_result *r);

/* Applies a layout to a copy of base (the copy shares base's owned pointers: never free it). */
void plan_apply(const scenario_config *base, const plan_layout *l, scenario_config *out);

const char *recompute_name(recompute_kind r);
/* Orders layouts by step time (qsort comparator). */
int plan_compare(const void *a, const void *b);
#endif
