/* Asynchronous data parallelism with parameter servers (docs/async.md): W workers (one DP
 * replica each) compute a step, push their gradient shards to S server hosts, each server
 * applies the update on its CPU, and the worker pulls the fresh shard back; no global barrier,
 * or a stale-synchronous bound. Simulated on SimGrid in a forked child (as the flow replay),
 * beside the synchronous all-reduce run of the same scenario. */
#ifndef DTSIM_SIM_ASYNC_PS_H
#define DTSIM_SIM_ASYNC_PS_H

#include "config.h"
#include "progress.h"

/* Default CPU memory bandwidth of a server host when the platform gives no
 * node.host_memory_bandwidth_gbs: one socket with 8 channels of DDR4-3200 (3200 MT/s x 8 B =
 * 25.6 GB/s per channel, JEDEC JESD79-4), i.e. 204.8 GB/s peak (docs/async.md). */
#define PS_DEFAULT_HOST_MEMORY_GBS 204.8

/* The most shard updates (workers x servers x steps) one simulation takes: each keeps its
 * staleness, and the count is an int inside the simulation. */
#define PS_MAX_UPDATES 2e8

/* The simulated system, independent of any scenario (the tests build it directly). */
typedef struct {
    int workers, servers;
    int steps;                    /* per worker */
    int max_staleness;            /* 0: fully asynchronous; s > 0: a worker starts step t only
                                     when every worker has finished step t - s */
    double compute_s;             /* a worker's compute time per step (before variation) */
    double compute_cv;            /* lognormal variation of it, per step and worker (mean 1) */
    const double *worker_slowdown;/* per worker compute factor (stragglers); NULL: all 1 */
    unsigned long long seed;
    double push_bytes;            /* gradient bytes one worker sends per step (all servers) */
    double pull_bytes;            /* parameter bytes one worker receives per step (all servers) */
    double update_s;              /* a server's CPU time to apply one worker's shard update */
    double worker_Bps;            /* a worker host's link, per direction */
    double server_Bps;            /* a server host's link, per direction */
    double backbone_Bps;          /* the fabric between them, per direction */
    double link_latency_s;        /* per host link */
    double backbone_latency_s;
    progress_meter *progress;     /* steps done, on stderr (progress.h); NULL: none */
} ps_model;

typedef struct {
    double makespan_s;            /* the last worker's finish */
    double steps_per_s;           /* sum over workers of steps / that worker's finish time */
    double *worker_finish_s;      /* [workers] */
    double *server_in_bytes, *server_out_bytes; /* [servers] */
    long updates;                 /* workers x steps x servers shard updates */
    int *staleness;               /* [updates]: updates the server applied to the shard between
                                     the worker's pull and its push */
    int max_steps_ahead;          /* largest (worker's step - slowest worker's step) at a start */
    double sim_wall_s;            /* SimGrid's run time */
} ps_result;

/* Simulates m. Returns 0, or -1 with err (bad model, SimGrid failure). Free with
 * ps_result_free. */
int ps_simulate(const ps_model *m, ps_result *r, config_error *err);
/* The SimGrid actors ps_simulate starts: one a server, one a worker, and one a (worker, server)
 * channel; each holds a context stack, one memory map (flow_actors_fit). */
double ps_actors(double workers, double servers);
void ps_result_free(ps_result *r);
/* A worker's compute-time factor for one step: lognormal of mean 1 and coefficient of variation
 * cv, from the worker's own stream (state starts at ps_worker_seed(seed, worker)). */
double ps_compute_factor(unsigned long long *state, double cv);
unsigned long long ps_worker_seed(unsigned long long seed, int worker);

/* Staleness statistics of r (nearest-rank percentiles). hist (may be NULL) gets
 * hist_len = max + 1 counts, owned by the caller. */
typedef struct {
    double mean;
    int p50, p90, p99, max;
    long *hist;
    int hist_len;
} ps_staleness;
void ps_staleness_stats(const ps_result *r, ps_staleness *st);

/* ---- the scenario-level comparison (`dtsim async`) ----------------------------------- */
typedef struct {
    ps_model m;
    ps_result r;
    ps_staleness st;
    double *slowdown;             /* owned, [workers] */
    double replica_params;        /* parameters one worker pushes and pulls per step */
    double update_bytes_per_param;
    double host_memory_gbs;
    int host_memory_default;      /* 1: PS_DEFAULT_HOST_MEMORY_GBS */
    double samples_per_worker_step, tokens_per_sample;
    double sync_step_s;           /* run_scenario at the scenario's DP */
    /* The synchronous step with the same compute variation and stragglers as the workers: the
     * slowest replica's compute, then the exposed communication of the regular run (mean over
     * the steps; equal to sync_step_s without variation or stragglers). */
    double sync_varied_step_s;
    double server_util_in_mean, server_util_in_max, server_util_out_mean, server_util_out_max;
    double server_cpu_util;       /* fraction of the time a server's CPU applies updates */
    char scenario[CFG_NAME_MAX];
    double wall_s;
} async_report;

/* Builds the model from s (s->parameter_server must be present; steps > 0 overrides its
 * steps) and simulates it and the synchronous run, counting the steps on progress (NULL: none).
 * Returns 0; -2 with err for input the model cannot take (exit 2); -1 with err on a runtime
 * failure. Free with async_report_free. */
int async_ps_run_scenario(const scenario_config *s, int steps, progress_meter *progress, async_report *a,
                          config_error *err);
void async_report_free(async_report *a);
void *async_report_to_json(const async_report *a);   /* json_t*, caller decrefs */
void async_report_print(const async_report *a, void *file);

#endif
