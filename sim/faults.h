/* Failures over a long run (DESIGN.md `dtsim faults`): a Monte Carlo of the job's timeline.
 *
 * Components: every GPU (lifetimes with mean gpu_mtbf_hours) and every node (node_mtbf_hours),
 * exponential (weibull_shape 1) or Weibull, each replaced (a fresh lifetime) when it fails.
 * Each failure interrupts the job: detection (detect_s), restart (restart_s), restore of the last
 * checkpoint (size / storage read bandwidth), and the work done since that checkpoint is lost.
 * Checkpoints every checkpoint_interval_s of training cost their blocking time: the whole write
 * (size / storage write bandwidth) when sync; the copy to host memory (per-GPU shard / PCIe) when
 * async, the write going on in the background (a checkpoint is only usable once written).
 * A failed node is swapped for a free one (the platform's nodes the job does not use, plus
 * spare_nodes) which then returns after repair_hours; with none free the job waits for the
 * first repair, or, if elastic, continues on fewer nodes (throughput scaled accordingly). */
#ifndef DTSIM_SIM_FAULTS_H
#define DTSIM_SIM_FAULTS_H

#include "config.h"

typedef struct {
    double mean, p5, p50, p95;
} faults_stat;

enum { LOSS_DETECTION = 0, LOSS_RESTART, LOSS_RESTORE, LOSS_LOST_WORK, LOSS_CHECKPOINT, LOSS_WAIT_REPAIR, LOSS_COUNT };
const char *faults_loss_name(int cause); /* "detection", "restart", "restore", "lost_work", "checkpoint_save", "repair_wait" */

typedef struct {
    int runs;
    double step_time_s, tokens_per_s;      /* from the analytic simulation of the scenario */
    double checkpoint_bytes, checkpoint_block_s, checkpoint_write_s, restore_s;
    double system_mtbf_hours;              /* 1 / (sum of component failure rates) */
    double expected_failures;              /* N x T / MTBF over the horizon (exponential) */
    double horizon_s, target_train_s;      /* target_train_s: training time for training.tokens (0 = none) */
    faults_stat interruptions, goodput, days_to_train, lost_hours[LOSS_COUNT];
    double optimal_checkpoint_interval_s, young_daly_interval_s;
    double optimal_goodput, goodput_at_scenario_interval;
    int curve_points;                      /* goodput vs checkpoint interval, for plots */
    double curve_interval_s[64], curve_goodput[64];
} faults_report;

/* Runs the Monte Carlo. step_time_s / tokens_per_s: the scenario's healthy step (pass 0 to
 * simulate it here). Returns 0, or -1 with err. */
int faults_run(const scenario_config *s, int runs, faults_report *out, config_error *err);

/* One timeline with a given checkpoint interval (exposed for tests): returns goodput and fills
 * interruptions / lost seconds by cause. */
typedef struct {
    double wall_s, train_s, interruptions, lost_s[LOSS_COUNT];
} faults_timeline;
void faults_simulate_one(const scenario_config *s, const faults_report *params, double interval_s,
                         unsigned long long seed, faults_timeline *out);
#endif
