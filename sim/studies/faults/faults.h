/* Failures over a long run (DESIGN.md `dtsim faults`): a Monte Carlo of the job's timeline.
 * docs/faults.md states every assumption and default; in short:
 *
 * Components: every GPU (lifetimes with mean gpu_mtbf_hours) and every node (node_mtbf_hours)
 * the job uses, exponential (weibull_shape 1) or Weibull, each renewed when it fails; or the
 * failures of a trace file, replayed as they are. Each failure interrupts the job: detection
 * (detect_s), restart (restart_s, the whole figure, communicator set-up included), restore of
 * the last durable checkpoint (size / storage read bandwidth), and the training done since that
 * checkpoint is lost. Checkpoints every checkpoint_interval_s of training cost their blocking
 * time: the whole write (size / storage write bandwidth) when sync; the copy of each GPU's shard
 * to host memory over PCIe when async, the write going on in the background (a checkpoint is
 * usable only once written). The failed node is swapped for a free one (the platform's nodes the
 * job does not use, plus spare_nodes) and returns after repair_hours; with none free the job
 * waits for the first repair or, if elastic, drops the data-parallel replica that held the node
 * and goes on at (dp - lost) / dp of its throughput until a node returns. */
#ifndef DTSIM_SIM_FAULTS_H
#define DTSIM_SIM_FAULTS_H

#include "config.h"
#include "progress.h"

typedef struct {
    double mean, p5, p50, p95;
} faults_stat;

enum { LOSS_DETECTION = 0, LOSS_RESTART, LOSS_RESTORE, LOSS_LOST_WORK, LOSS_CHECKPOINT, LOSS_WAIT_REPAIR, LOSS_COUNT };
const char *faults_loss_name(int cause); /* "detection", "restart", "restore", "lost_work", "checkpoint_save", "repair_wait" */

/* ---- failure traces (faults.failure_trace) ---------------------------------------------
 * A text file, one failure a line: `time_hours kind index`, kind `gpu` (index 0..GPUs-1) or
 * `node` (index 0..nodes-1), times from the start of the job in wall-clock hours, in
 * non-decreasing order; blank lines and `#` comments are ignored. */
typedef struct {
    double t_s;     /* seconds from the start of the job */
    int node;       /* 1 node failure, 0 GPU failure */
    int index;
} faults_event;

typedef struct {
    int count;
    faults_event *events; /* owned */
} faults_trace;

/* Reads and validates a trace for a job of `gpus` GPUs on `nodes` nodes. Returns 0, or -1 with
 * err ("trace.txt:7: kind 'cpu' is neither gpu nor node"). Free with faults_trace_free. */
int faults_trace_load(const char *path, int gpus, int nodes, faults_trace *out, config_error *err);
/* The trace path of a scenario: faults.failure_trace relative to the scenario's folder if it
 * exists there, else as given. */
void faults_trace_path(const scenario_config *s, char *out, size_t size);
void faults_trace_free(faults_trace *t);

enum { FAULTS_ELASTIC_MAX = 256 };
/* A run with training.tokens ends, unfinished, after this many times its failure-free training
 * time: its goodput is under 1 / FAULTS_RUN_CAP and its days to train only bounded below. Failures
 * faster than the job can checkpoint would otherwise go on for ever, and the up-front estimate
 * (sim/budget.c) counts the failures of at most that long a run. */
#define FAULTS_RUN_CAP 10.0

/* ---- the Monte Carlo ------------------------------------------------------------------- */
typedef struct {
    int runs;
    double step_time_s, tokens_per_s;      /* from the analytic simulation of the scenario */
    double checkpoint_bytes, checkpoint_block_s, checkpoint_write_s, restore_s;
    double system_mtbf_hours;              /* 1 / (sum of component failure rates) */
    double expected_failures;              /* N x T / MTBF over the horizon (exponential) */
    double horizon_s, target_train_s;      /* target_train_s: training time for training.tokens (0 = none) */
    faults_stat interruptions, goodput, days_to_train, lost_hours[LOSS_COUNT];
    int unfinished_runs;                   /* runs that hit FAULTS_RUN_CAP: days_to_train infinite */
    double optimal_checkpoint_interval_s, young_daly_interval_s;
    double optimal_goodput, goodput_at_scenario_interval;
    int curve_points;                      /* goodput vs checkpoint interval, for plots */
    double curve_interval_s[64], curve_goodput[64];
    int replayed;                          /* 1 when the failures came from a trace */
    /* elastic jobs: throughput without k DP replicas, relative to the whole job, simulated at
     * DP - k with the per-replica batch kept (0 where not simulated: (DP - k) / DP is used) */
    double elastic_rate[FAULTS_ELASTIC_MAX + 1];
} faults_report;

/* Runs the Monte Carlo. step_time_s / tokens_per_s: set them in *out before the call to use a
 * step already simulated (0: simulate it here). A faults.failure_trace is loaded and replayed.
 * Returns 0, or -1 with err. */
int faults_run(const scenario_config *s, int runs, faults_report *out, config_error *err);
/* The checkpoint-interval search: FAULTS_GRID_POINTS intervals on a log grid, then
 * FAULTS_REFINE_POINTS across the best cell, each at most FAULTS_SEARCH_RUNS runs (a trace: one). */
#define FAULTS_GRID_POINTS 40
#define FAULTS_REFINE_POINTS 16
#define FAULTS_SEARCH_RUNS 50
/* The timelines faults_run_trace simulates for `runs` runs (replay: a trace): the runs, then the
 * search's. */
double faults_timelines(int runs, int replay);

/* Same with an already loaded trace (NULL: draw the failures), counting the timelines it
 * simulates on progress (NULL: none): the runs, then the checkpoint-interval search's. */
int faults_run_trace(const scenario_config *s, const faults_trace *trace, int runs, progress_meter *progress,
                     faults_report *out, config_error *err);

/* One timeline with a given checkpoint interval (exposed for tests). params: a report whose
 * step, checkpoint and horizon figures are filled (faults_run fills them). trace: NULL to draw. */
typedef struct {
    double wall_s, train_s, interruptions, lost_s[LOSS_COUNT];
    int unfinished;                        /* 1: training.tokens not trained within FAULTS_RUN_CAP */
} faults_timeline;
void faults_simulate_one(const scenario_config *s, const faults_report *params, double interval_s,
                         unsigned long long seed, faults_timeline *out);
void faults_simulate_trace(const scenario_config *s, const faults_report *params, const faults_trace *trace,
                           double interval_s, unsigned long long seed, faults_timeline *out);

/* The seed of Monte Carlo run `run` of a scenario seeded `seed` (splitmix64 of both, so that
 * neighbouring runs and neighbouring scenario seeds give unrelated streams). */
unsigned long long faults_run_seed(unsigned long long seed, int run);

#endif
