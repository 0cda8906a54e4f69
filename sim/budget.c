/* See budget.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "budget.h"
#include "async_ps.h"
#include "faults.h"
#include "flow.h"
#include "run.h"
#include "workload_size.h"

/* The analytic replay: GPT-3 175B on 1,024 A100 at global batches of 1,536 to 1,572,864 (dtsim
 * run scenarios/gpt3-175b-1024-a100.json --set training.global_batch_size=B, under
 * /usr/bin/time): 7,139 to 6,096,035 tasks at 0.29-0.69 us a task (run to run and size to size;
 * 0.47 us at the largest on a quiet machine). Peak memory 2026-11-27, since a task's communication
 * by kind is kept beside it and its enums in a byte each (sim_task 216 -> 112 bytes): 100,148 KiB
 * at 382,115 tasks, 1,107,696 KiB at 6,096,035, 181 bytes a task between them (285 before,
 * measured the same way back to back). */
#define ANALYTIC_S_PER_TASK 0.5e-6
#define ANALYTIC_BYTES_PER_TASK 190.0
/* The planner's candidates, each a small graph evaluated on its own thread: bench/plan_bench.sh's
 * exhaustive plan (GPT-3 175B on 1,024 A100, 1,078 simulated) holds 1.32e7 tasks in its first
 * replays by plan_estimate's count and took 1.18 s on 2 threads (best of 3, 2026-11-28): 0.18 us
 * a task and thread. The default search simulates few of them (0.035 s); deeper fold attempts,
 * which DeepSpeed-style ZeRO-3 under a pipeline needs at large batches, are not in the count: at
 * 1,572,864 sequences the exhaustive search took 22 s where 6.65 s are estimated (and the default
 * search 1.1 s), each such attempt held to the limits when it comes (budget_replay_allow). */
#define PLAN_S_PER_TASK 0.18e-6
/* What any command holds before its work: a small run's peak RSS is 33-46 MB. */
#define BASE_BYTES 50e6
/* The flow replay where it simulates every replica (static routing, faults: flow_replicas_of),
 * a lane actor replaying up to 64 flows' worth of replicas: Llama 3 405B's layout on 16,384 and
 * 65,536 H100 with every replica simulated (bench/flow_scale.sh's sizes, measured 2026-11-27
 * before the replay folded replicas): 265,472 and
 * 1,061,888 flows in about 2.5 and 16 s of SimGrid (run to run 1.8-3.1 and 15.1-17.8 s), 85 and
 * 301 MiB peak. A flow's cost grows with how many there are (SimGrid's sharing solves over more
 * flows at once): 9.4 us at 265,472, 15 us at 1,061,888, as flows^0.34; 5.3 us at 50,176. A flow
 * ends before most others start: about 30 bytes a flow beside the platform (7 and 29 MiB over
 * the same sizes folded). */
#define FLOW_S_PER_FLOW 5.3e-6
#define FLOW_FLOWS_REF 50176.0
#define FLOW_GROWTH 0.34
#define FLOW_BYTES_PER_FLOW 30.0
/* What the cluster itself costs the flow replay, its flows aside: Llama 3 405B's layout folded
 * (flow_replicas_of: 4,148 flows at every size) on 16,384, 65,536 and 131,072 H100 (bench/
 * flow_scale.sh, 2026-11-27): 0.3-0.4, 1.3 and 2.7-3.1 s, 78, 272 and 533 MiB peak: loading a
 * host and its links per GPU, the routes' latencies: about 24 us and 4.0 KB a GPU. */
#define FLOW_S_PER_GPU 24e-6
#define FLOW_BYTES_PER_GPU 4.0e3
/* dtsim async scenarios/gpt3-2.7b-32-a100-ps.json (32 workers) --set parameter_server.servers=S:
 * a worker's step updates every server's shard, so the work is workers x servers x steps
 * updates, and SimGrid's cost of each grows with the actors (ps_actors): S = 4, 16, 64 (100, 100,
 * 40 steps; 164 to 2,144 actors): 28, 28, 31 us an update; S = 256, 512 (10 steps; 8,480 and
 * 16,928 actors): 72 and 69 us (2026-11-29, the 2-core CI machine). 30 us + 5 ns an actor bounds
 * them all (9 us measured at S = 4 over 1,000 steps; S = 1,000, 3 steps, 33,032 actors: 10.3 s
 * measured, 18.7 s so estimated). Memory: 34 MB at S <= 64; 108, 208 and 527 MB at 8,480, 16,928
 * and 33,032 actors: 9 to 15 KB an actor (its context, channel and semaphores), 16 KB taken. */
#define ASYNC_S_PER_UPDATE 30e-6
#define ASYNC_S_PER_UPDATE_ACTOR 5e-9
#define ASYNC_BYTES_PER_ACTOR 16e3
#define ASYNC_BYTES_PER_UPDATE 4.0 /* the staleness of each update, kept for its percentiles */
/* dtsim faults scenarios/llama3-405b-54d-faults.json --runs 100 / 2,000 / 10,000 (16,384 GPUs,
 * 54 days, about 420 failures a run): 0.13, 0.20 and 0.51 s, the checkpoint-interval search's
 * 56 x 50 timelines included. A timeline's loop turns about three times a failure (the
 * checkpoint cycles between two are taken at once): 0.51 s / (12,800 timelines x 1,258) is
 * 0.032 us a turn. */
#define FAULTS_S_PER_EVENT 0.035e-6

double budget_analytic_seconds(double tasks)
{
    return tasks * ANALYTIC_S_PER_TASK;
}

double budget_plan_seconds(double tasks, int threads)
{
    return tasks * PLAN_S_PER_TASK / (threads > 0 ? threads : 1);
}

double budget_analytic_bytes(double tasks)
{
    return BASE_BYTES + tasks * ANALYTIC_BYTES_PER_TASK;
}

static void count_words(double n, char *out, size_t len)
{
    if (n >= 1e9)
        snprintf(out, len, "%.1fG", n / 1e9);
    else if (n >= 1e6)
        snprintf(out, len, "%.1fM", n / 1e6);
    else if (n >= 1e4)
        snprintf(out, len, "%.0fK", n / 1e3);
    else
        snprintf(out, len, "%.0f", n);
}

void budget_estimate_run(const scenario_config *s, work_estimate *e)
{
    scenario_config coarse = *s;
    if (s->run.fidelity_flow)
        coarse.run.flow_bucket_mb = run_flow_bucket_mb(s);
    workload_size z;
    workload_size_estimate(&coarse, &z);
    char n[32];
    if (!s->run.fidelity_flow) {
        count_words(z.tasks, n, sizeof n);
        snprintf(e->work, sizeof e->work, "%s tasks of the step graph (analytic replay)", n);
        e->seconds = budget_analytic_seconds(z.tasks);
        e->bytes = budget_analytic_bytes(z.tasks);
        return;
    }
    /* The flow replay moves every communication task of every data-parallel replica it simulates
     * (all, or folded a few standing for all: flow_replicas_of) as flows, over a platform of every
     * GPU. */
    double replicas = (double)flow_replicas_of(s, NULL).simulated * (s->parallel.cp > 0 ? s->parallel.cp : 1);
    double flows = z.comm_tasks * replicas, gpus = (double)scenario_gpus(s);
    count_words(flows, n, sizeof n);
    snprintf(e->work, sizeof e->work, "%s flows (flow replay, SimGrid)", n);
    e->seconds = flows * FLOW_S_PER_FLOW * pow(fmax(flows, FLOW_FLOWS_REF) / FLOW_FLOWS_REF, FLOW_GROWTH) +
                 budget_analytic_seconds(z.tasks) + gpus * FLOW_S_PER_GPU;
    e->bytes = budget_analytic_bytes(z.tasks) + flows * FLOW_BYTES_PER_FLOW + gpus * FLOW_BYTES_PER_GPU;
}

void budget_estimate_async(const scenario_config *s, int steps, work_estimate *e)
{
    /* the workers are the data-parallel replicas (async_ps_compare.c); before them, one step of
     * the scenario and one of a replica are simulated as dtsim run simulates them */
    double workers = s->parallel.dp > 0 ? s->parallel.dp : 1, servers = s->parameter_server.servers;
    double updates = workers * servers * (steps > 0 ? steps : 1), actors = ps_actors(workers, servers);
    work_estimate step;
    budget_estimate_run(s, &step);
    char w[32];
    count_words(updates, w, sizeof w);
    snprintf(e->work, sizeof e->work, "%s shard updates (%d steps x %.0f workers x %.0f servers)", w, steps,
             workers, servers);
    e->seconds = updates * (ASYNC_S_PER_UPDATE + ASYNC_S_PER_UPDATE_ACTOR * actors) + 2 * step.seconds;
    e->bytes = fmax(BASE_BYTES + actors * ASYNC_BYTES_PER_ACTOR + updates * ASYNC_BYTES_PER_UPDATE, step.bytes);
}

/* dtsim sweep scenarios/gpt3-2.7b-32-a100-ps.json (a 76-task step) over 1,000 and 10,000 points
 * (--vary platform.price_per_gpu_hour=1..100 --vary faults.seed=1..10 / 1..100): 1.66 s, 43 MB and
 * 14.2 s, 134 MB (2026-11-29, the 2-core CI machine): 1.39 ms and 10 KB a point beside its step
 * (its scenario, platform and calibration loaded with its values, its row kept for sweep.json
 * and sweep.csv), where the steps themselves were 0.06 ms a point. */
#define SWEEP_S_PER_POINT 1.4e-3
#define SWEEP_BYTES_PER_POINT 10e3

void budget_add_sweep_points(double points, work_estimate *e)
{
    e->seconds += points * SWEEP_S_PER_POINT;
    e->bytes += points * SWEEP_BYTES_PER_POINT;
}

void budget_estimate_faults(const scenario_config *s, int runs, double days, work_estimate *e)
{
    double gpus = scenario_gpus(s), gpn = s->platform.node.gpus > 0 ? s->platform.node.gpus : 1;
    double hours = days * 24, failures = 0;
    if (s->faults.gpu_mtbf_hours > 0)
        failures += gpus * hours / s->faults.gpu_mtbf_hours;
    if (s->faults.node_mtbf_hours > 0)
        failures += ceil(gpus / gpn) * hours / s->faults.node_mtbf_hours;
    /* counted as drawn failures: for a replayed trace (one run per searched interval) an upper bound */
    double events = faults_timelines(runs, 0) * (3 * failures + 1);
    char n[32];
    count_words(events, n, sizeof n);
    snprintf(e->work, sizeof e->work, "%s timeline events (%d runs of %.3g days and the interval search)", n, runs,
             days);
    e->seconds = events * FAULTS_S_PER_EVENT;
    e->bytes = BASE_BYTES;
}

double budget_machine_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : 0;
}

static void duration_words(double s, char *out, size_t len)
{
    if (s < 120)
        snprintf(out, len, "%.3g s", s);
    else if (s < 7200)
        snprintf(out, len, "%.3g min", s / 60);
    else if (s < 2 * 86400)
        snprintf(out, len, "%.3g h", s / 3600);
    else
        snprintf(out, len, "%.3g days", s / 86400);
}

static void limits_of(const budget_limits *l, double *max_bytes, double *max_s)
{
    *max_bytes = l->memory_gib > 0 ? l->memory_gib * 1073741824.0 : budget_machine_bytes();
    *max_s = l->seconds > 0 ? l->seconds : BUDGET_DEFAULT_SECONDS;
}

int budget_within(const work_estimate *e, const budget_limits *l)
{
    double max_bytes, max_s;
    limits_of(l, &max_bytes, &max_s);
    return !(max_bytes > 0 && e->bytes > max_bytes) && !(e->seconds > max_s);
}

/* What e passes of l, in words: "N would take about G GiB and T on this machine, over ...". */
static void over_words(const work_estimate *e, const budget_limits *l, char *out, size_t len)
{
    double max_bytes, max_s;
    limits_of(l, &max_bytes, &max_s);
    int over_memory = max_bytes > 0 && e->bytes > max_bytes, over_time = e->seconds > max_s;
    char took[64], limit[64];
    duration_words(e->seconds, took, sizeof took);
    duration_words(max_s, limit, sizeof limit);
    int n = snprintf(out, len, "%s would take about %.3g GiB and %s on this machine", e->work, e->bytes / 1073741824.0,
                     took);
    if (over_memory && n > 0 && (size_t)n < len)
        n += snprintf(out + n, len - (size_t)n, ", over %s %.3g GiB",
                      l->memory_gib > 0 ? "--max-memory-gib" : "this machine's memory of", max_bytes / 1073741824.0);
    if (over_time && n > 0 && (size_t)n < len)
        snprintf(out + n, len - (size_t)n, "%s %s %s", over_memory ? " and" : ", over",
                 l->seconds > 0 ? "--max-seconds" : "the default limit of", limit);
}

static int limits_valid(const budget_limits *l)
{
    return l->memory_gib >= 0 && l->seconds >= 0 && isfinite(l->memory_gib) && isfinite(l->seconds);
}

#define BUDGET_ADVICE                                                                                     \
    "Make the work smaller (fewer micro-batches per step: a smaller global batch or a larger "          \
    "micro-batch; fewer GPUs, runs or steps; analytic fidelity in place of flow), or raise the "        \
    "limit with --max-memory-gib / --max-seconds if the machine can take it."

int budget_check(const char *command, const work_estimate *e, const budget_limits *l)
{
    return budget_check_before(command, "starting", e, l);
}

int budget_check_before(const char *command, const char *before, const work_estimate *e, const budget_limits *l)
{
    if (!limits_valid(l)) {
        fprintf(stderr, "dtsim %s: --max-memory-gib and --max-seconds take a positive number\n", command);
        return 2;
    }
    if (budget_within(e, l))
        return 0;
    char words[768];
    over_words(e, l, words, sizeof words);
    fprintf(stderr, "dtsim %s: refused before %s: %s. " BUDGET_ADVICE "\n", command, before, words);
    return 2;
}

/* A replay the gate refuses: err says which (the whole step's, or a fold attempt's pair of
 * `micro_batches` in all), what it would take and the limit it passes; 1. */
static int refuse_replay(const work_estimate *e, const budget_limits *l, int full, long long micro_batches,
                         config_error *err)
{
    char words[768], which[96];
    over_words(e, l, words, sizeof words);
    if (full)
        snprintf(which, sizeof which, "replaying every micro-batch (%lld)", micro_batches);
    else
        snprintf(which, sizeof which, "a fold attempt (two short replays, %lld micro-batches)", micro_batches);
    snprintf(err->msg, sizeof err->msg, "refused before %s: %s. " BUDGET_ADVICE, which, words);
    return 1;
}

int budget_replay_allow(void *ctx, const scenario_config *replay, int full, config_error *err)
{
    const budget_replay_gate *g = ctx;
    work_estimate e;
    budget_estimate_run(replay, &e);
    int threads = g->threads > 1 ? g->threads : 1;
    e.bytes *= threads;
    if (threads > 1) {
        size_t n = strlen(e.work);
        snprintf(e.work + n, sizeof e.work - n, ", on each of %d threads,", threads);
    }
    if (budget_within(&e, &g->limits))
        return 0;
    return refuse_replay(&e, &g->limits, full, scenario_micro_batches(replay), err);
}

void budget_estimate_step(const scenario_config *s, int full, work_estimate *e)
{
    long long first = full ? scenario_micro_batches(s) : run_fold_first_replay_micro_batches(s);
    if (first >= scenario_micro_batches(s)) {
        budget_estimate_run(s, e);
        return;
    }
    scenario_config pair = scenario_with_micro_batches(s, first);
    budget_estimate_run(&pair, e);
    size_t n = strlen(e->work);
    snprintf(e->work + n, sizeof e->work - n, ", the fold's first two short replays of a step of %lld micro-batches",
             scenario_micro_batches(s));
}

int budget_gate_allow(void *ctx, const scenario_config *replay, int full, config_error *err)
{
    budget_gate *g = ctx;
    work_estimate e;
    budget_estimate_run(replay, &e);
    work_estimate so_far = e;
    so_far.seconds += g->spent_s; /* every replay run so far counts against --max-seconds */
    if (g->spent_s > 0) {
        size_t n = strlen(so_far.work);
        snprintf(so_far.work + n, sizeof so_far.work - n, ", with the replays before it,");
    }
    if (budget_within(&so_far, &g->limits)) {
        g->spent_s = so_far.seconds;
        return 0;
    }
    return refuse_replay(&so_far, &g->limits, full, scenario_micro_batches(replay), err);
}
