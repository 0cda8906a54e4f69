/* What checkpoints and failures cost a training run, from the scenario alone: the checkpoint's
 * size and its write, read and blocking times (storage and PCIe bandwidths), the job's failure
 * rate (its GPUs and nodes over their MTBFs), what one failure costs before training resumes,
 * and the expected goodput in closed form. dtsim faults' Monte Carlo starts from the same
 * figures; dtsim run and plan give time_to_train with failures from the closed form. */
#ifndef DTSIM_SIM_STEP_CHECKPOINT_COST_H
#define DTSIM_SIM_STEP_CHECKPOINT_COST_H
#include "config.h"

typedef struct {
    double bytes;            /* one checkpoint: weights, fp32 master copy under mixed precision, Adam moments */
    double write_s, read_s;  /* at platform.storage's checkpoint bandwidths (0 where not given) */
    double block_s;          /* the step loop waits this long per checkpoint: the write, or with
                                faults.checkpoint_async each GPU's copy of its shard to host memory */
    double failure_rate;     /* failures a second: GPUs / GPU MTBF + nodes / node MTBF (0: none given) */
    double recovery_s;       /* a failure's fixed cost: detection, restart (with its per-node part), restore */
} checkpoint_cost;

void checkpoint_cost_of(const scenario_config *s, checkpoint_cost *out);

/* The expected fraction of wall time that trains, with failures arriving at random (exponential,
 * rate failure_rate), a checkpoint after every interval_s of training that blocks block_s, and
 * each failure costing recovery_s plus the work since the last checkpoint: Daly (2006), "A higher
 * order estimate of the optimum checkpoint interval for restart dumps", eq. (11) for the wall
 * time of one interval, M e^{R/M} (e^{(tau + delta)/M} - 1). Without failures, interval /
 * (interval + block). Spares are assumed (no wait for repair). */
double checkpoint_expected_goodput(const checkpoint_cost *c, double interval_s);
#endif
