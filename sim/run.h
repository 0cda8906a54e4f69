/* One simulated run of a scenario: build the step, replay it (analytic or flow), derive the
 * metrics of DESIGN.md, and the memory per GPU. What `dtsim run` prints and `dtsim validate`
 * compares. */
#ifndef DTSIM_SIM_RUN_H
#define DTSIM_SIM_RUN_H

#include "config.h"
#include "compression_effect.h"
#include "replay.h"

typedef struct {
    double weights, gradients, optimizer, activations, buffers, total, capacity; /* GiB */
    int oom;
    int worst_stage;
    /* ZeRO-Offload / ZeRO-Infinity: host memory and NVMe one node needs (GiB; 0 without offload) */
    double host_gib, nvme_gib;
} run_memory;

/* What a step time means for the whole run, when the scenario says what is trained
 * (training.tokens, or Megatron-LM's train_iters / train_samples): steps of global batch x
 * seq_length tokens (train_iters as given, else the budget's tokens rounded up to whole steps),
 * days = steps x step time / 86,400, GPU-hours = days x 24 x GPUs, cost = GPU-hours x
 * platform.price_per_gpu_hour. With failure rates given (faults.gpu_mtbf_hours,
 * node_mtbf_hours), also the same with failures: over the expected goodput at
 * faults.checkpoint_interval_s in closed form (step/checkpoint_cost.h); `dtsim faults` gives
 * its spread and what repairs, spares and elastic jobs change. */
typedef struct {
    int known;      /* 0: the scenario states no budget (nothing below is set) */
    double tokens, steps, days, gpu_hours;
    int has_cost;   /* platform.price_per_gpu_hour given */
    double cost;
    int with_failures;   /* failure rates given: the three below are set */
    double goodput;      /* expected fraction of wall time that trains */
    double checkpoint_interval_s; /* faults.checkpoint_interval_s, which the goodput is at */
    double days_with_failures, gpu_hours_with_failures, cost_with_failures;
} time_to_train;

void run_time_to_train(const scenario_config *s, double step_time_s, int gpus, time_to_train *out);
/* {"tokens", "steps", "days", "gpu_hours"[, "cost", "price_per_gpu_hour"]} (jansson json_t*), or
 * JSON null when not known; price_per_gpu_hour: the platform's (0: none). */
void *time_to_train_to_json(const time_to_train *t, double price_per_gpu_hour);

typedef struct {
    char scenario[CFG_NAME_MAX];
    int gpus;
    int fidelity_flow;
    int steps;
    double step_time_s, tokens_per_s;
    double model_tflops_per_gpu, hardware_tflops_per_gpu, mfu, hfu;
    double bubble_mean, bubble_max;
    int bubble_max_stage;
    double comm_total_s[COMM_CLASS_COUNT], comm_exposed_s[COMM_CLASS_COUNT];
    double compute_s;         /* mean compute-lane busy time per stage */
    double overlap_cost_s;    /* of it, what overlapped communication cost the compute */
    run_memory memory;
    double wall_s;            /* wall-clock time of the simulation itself */
    long tasks;               /* tasks in the step graph */
    int folded;               /* 1: from two short replays (run_scenario_folded), tasks extrapolated */
    long long fold_micro_batches[2]; /* when folded: the micro-batches of the two replays */
    char fold_why[224];       /* run_scenario_folded replayed every micro-batch: why ("" otherwise) */
    long flows;               /* flow fidelity: network flows simulated ... */
    long flows_represented;   /* ... and those of the whole step they stand for (rails, folded replicas) */
    double flow_wall_s, flow_peak_rss_mib; /* flow fidelity: SimGrid's run time and memory */
    char slowest_comm[64];    /* flow fidelity: the longest communication of the step ... */
    int slowest_comm_stage;
    double slowest_comm_s;
    char slowest_link[64];    /* ... and the slowest link on its routes */
    double slowest_link_gbs;
    int flapping_links;       /* flow fidelity: links that flapped during the step */
    /* flow fidelity, faults.step_failure: 1 the step was lost (the GPU went off at
     * failed_at_s, the watchdog stopped the job at detected_at_s, which is then the step
     * time); -1 the failure was due after the step ended; 0 none asked for */
    int step_failed;
    double failed_at_s, detected_at_s;
    /* training.data_loader (input_present 0: input is free and none of these is reported):
     * the mean input stall per step that prefetching did not hide (included in step_time_s),
     * the mean load time of one micro-batch on one reader, a reader's load time per step (all
     * its micro-batches), the share of it hidden behind compute */
    int input_present;
    double input_exposed_s, input_load_s, input_total_s, input_hidden_fraction;
    long long input_readers;
    compression_effect compression; /* gradient compression's effect (sim/step/compression_effect.h) */
    time_to_train to_train;   /* the whole run at this step time (training.tokens and the like) */
    double price_per_gpu_hour; /* the platform's, for the document (0: none) */
} run_result;

/* FLOPs of one step per DESIGN.md: model FLOPs, and hardware FLOPs (with recomputation). */
double run_model_flops_per_step(const scenario_config *s);
double run_hardware_flops_per_step(const scenario_config *s);

/* Flow fidelity's gradient bucket size: the scenario's, or larger so that a stage has at most
 * FLOW_MAX_BUCKETS buckets. */
#define FLOW_MAX_BUCKETS 16
double run_flow_bucket_mb(const scenario_config *s);

/* Memory per GPU at the worst stage (GiB), without simulating the step. */
void run_memory_estimate(const scenario_config *s, run_memory *out);
/* Its two halves, for one layout at several global batches: the stages' peaks of micro-batches in
 * flight at s's micro-batches (pp of them into peak; -1 where its schedule cannot be built, where
 * run_memory_estimate reports nothing), and the memory at those peaks. The memory model reads the
 * batch through the peaks alone: equal peaks, equal memory. */
int run_memory_peaks(const scenario_config *s, int *peak);
void run_memory_at(const scenario_config *s, const int *peak, run_memory *out);

/* Simulates scenario s. Returns 0, or -1 with err (runtime failure), or FLOW_REFUSED
 * (flow.h) with err when this machine cannot hold the flow replay (refused before it ran). With
 * trace_path, also writes a Chrome/Perfetto trace of the step. */
int run_scenario(const scenario_config *s, run_result *r, config_error *err);
int run_scenario_traced(const scenario_config *s, run_result *r, const char *trace_path, config_error *err);
/* The same, also writing each pipeline stage's bubble (compute-lane seconds idle waiting for
 * pipeline work) to stage_bubble_s[0 .. pp) when it is not NULL. */
int run_scenario_stages(const scenario_config *s, run_result *r, const char *trace_path, double *stage_bubble_s,
                        config_error *err);
/* The same in two parts, for a caller that looks at the graph and its task times (run_fold.c): the
 * step's graph of s (not its memory), then its replay, filling r's step time, communication,
 * bubbles and what follows from them (r's memory is the caller's, and what this fidelity does not
 * produce, the flow replay's figures under analytic, is left as it was: start from a zeroed r),
 * and handing the task times
 * over in keep_times when that is not NULL and it succeeds (the caller frees them with
 * replay_times_free; w stays the caller's, with whatever the replay added to it). */
int run_graph_build(const scenario_config *s, step_workload *w, config_error *err);
int run_graph_replay(const scenario_config *s, step_workload *w, run_result *r, const char *trace_path,
                     double *stage_bubble_s, replay_times *keep_times, config_error *err);
/* What follows from the step time: tokens/s, TFLOP/s, MFU and HFU, the time to train. */
void run_result_finish(const scenario_config *s, run_result *r);
/* run_scenario's result for a pipeline of many micro-batches, from two replays of few. The
 * analytic step of a synchronous pipeline is periodic once its warm-up and the transients after
 * it have passed: every stage runs the same forward and backward tasks for each micro-batch, and
 * the step, like every time summed over it, grows by the same amount per micro-batch (per pp
 * micro-batches when interleaved), a max-plus linear system in its cycle. The step of m
 * micro-batches is extrapolated from replays of m1 and m1 + one period once the second shows,
 * task by task, that the step is periodic from m1 on (sim/replay/periodic.h); m1 is one pipeline
 * depth and a period first, then two, four, ... depths, while the replays cost less than the full
 * one, which runs otherwise, and wherever something varies by micro-batch outside the graph (flow
 * fidelity, stragglers and degraded links, input stalls, gradient compression, shared devices:
 * run_fold.c). Memory and everything after the step time are the scenario's own. `dtsim plan`
 * evaluates its layouts this way; tests/plan/test_fold.c holds every fitting layout of every
 * shipped scenario's search to the full replay. */
int run_scenario_folded(const scenario_config *s, run_result *r, config_error *err);
/* Asked before each replay run_scenario_folded_gated makes: a fold attempt's pair of short
 * replays (replay: s with their micro-batches together, full 0), and the step's own replay where
 * the step cannot fold or no attempt certifies (replay: s, full 1). 0 lets it run; else, with err
 * saying why, the call stops: a refused attempt goes on to ask for the full replay, a refused full
 * replay returns RUN_GATED (nothing more runs). dtsim run and sweep pass their budget this way
 * (sim/budget.h, budget_gate_allow), so that only the replays that will run are priced. */
typedef struct {
    int (*allow)(void *ctx, const scenario_config *replay, int full, config_error *err);
    void *ctx;
} run_gate;
#define RUN_GATED (-3)
/* A command's exit code after a simulation returned `ran` (not 0): 2 where it was refused before
 * running (RUN_GATED: over the limits; FLOW_REFUSED: more than this machine holds), else 1, a
 * runtime failure. */
int run_exit_code(int ran);
int run_scenario_folded_gated(const scenario_config *s, run_result *r, const run_gate *gate, config_error *err);
/* The micro-batches of the first replay run_scenario_folded makes: its first attempt's pair, or
 * the step's own where it cannot fold or is too short to try. */
long long run_fold_first_replay_micro_batches(const scenario_config *s);
/* m1 of the fold's attempt 0, 1, 2, ...: one pipeline depth (pp x vpp micro-batches) and a period,
 * then 2, 4, ... depths, in whole periods. */
long long run_fold_micro_batches(const scenario_config *s, int attempt);

/* The `dtsim run --json` document (jansson json_t*, caller decrefs). */
void *run_result_to_json(const run_result *r);
/* The human summary. */
void run_result_print(const run_result *r, const scenario_config *s, void *file);
/* A count as people read it: 300B, 1.2T, 85.9K (three significant figures). */
void run_words(double x, char *out, size_t n);
/* Looks up a key of the --json document by dotted path ("memory_gib.total"); 0 if absent. */
int run_result_lookup(const run_result *r, const char *key, double *value);
/* Whether some run's --json document may hold the numeric figure `key` (the optional parts, such as
 * input.* and time_to_train.*, counted as present): a name no run prints is refused before any run. */
int run_result_may_name(const char *key);

#endif
