/* What a command will take, said before it starts: an estimate of its memory and wall time
 * from the scenario alone, and the refusal (exit 2, with the estimate and what to change) when it
 * is over the limits: --max-memory-gib (default: this machine's memory) and --max-seconds
 * (default: one hour). Shared by run, sweep, plan, compare, validate, report, faults and async, so that no valid input
 * exhausts the machine or runs for hours unannounced.
 *
 * The per-unit costs are measurements of this project's own replays on the 2-core CI machine
 * (AMD EPYC, 2026-11-26; commands beside each constant in budget.c): a faster machine finishes
 * sooner than estimated. The estimate is the order of magnitude a refusal needs, not a promise:
 * tests/sim/test_workload_size.c keeps the task counts it stands on within 2.5x. */
#ifndef DTSIM_SIM_BUDGET_H
#define DTSIM_SIM_BUDGET_H

#include "config.h"

typedef struct {
    double memory_gib;   /* --max-memory-gib (above 0 when given); 0: not given, the machine's memory */
    double seconds;      /* --max-seconds (above 0 when given); 0: not given, BUDGET_DEFAULT_SECONDS */
} budget_limits;

#define BUDGET_DEFAULT_SECONDS 3600.0

typedef struct {
    char work[256];      /* what is counted: "6.1M tasks of the step graph (analytic replay)" */
    double bytes;        /* peak memory */
    double seconds;      /* wall time */
} work_estimate;

/* The options and their help lines, for each command's table and usage. */
#define BUDGET_OPTIONS(l) \
    CLI_OPT_POSITIVE("max-memory-gib", &(l)->memory_gib), CLI_OPT_POSITIVE("max-seconds", &(l)->seconds)
#define BUDGET_HELP                                                                                        \
    "  --max-memory-gib G  refuse, before anything runs (exit 2, with the estimate), work estimated\n"   \
    "                      to need more than G GiB (G > 0; default: this machine's memory); a long step's\n"   \
    "                      fold is priced replay by replay, each before it runs\n"                      \
    "  --max-seconds S     ... or more than S seconds (S > 0; default 3600)\n"

/* One simulated step of s at its fidelity: the analytic replay's tasks, or the flow replay's
 * flows. */
void budget_estimate_run(const scenario_config *s, work_estimate *e);
/* The analytic replay of a graph of `tasks` tasks (plan's candidates, sweep's points). */
double budget_analytic_seconds(double tasks);
double budget_analytic_bytes(double tasks);
/* The planner's candidates: `tasks` in all over `threads` threads. */
double budget_plan_seconds(double tasks, int threads);
/* dtsim async: steps x workers of the parameter-server replay. */
void budget_estimate_async(const scenario_config *s, int steps, work_estimate *e);
/* dtsim sweep: what each of `points` points costs beside its step, added to e. */
void budget_add_sweep_points(double points, work_estimate *e);
/* dtsim faults: runs x the timeline events of one run of `days` (failures and checkpoints). */
void budget_estimate_faults(const scenario_config *s, int runs, double days, work_estimate *e);

/* One step as dtsim run and sweep replay it, priced up front: the fold's first pair of short
 * replays where the step may fold (sim/run.h, run_fold_first_replay_micro_batches), else, and
 * with full (--full), the whole step. A fold that does not certify asks budget_gate_allow before
 * each further replay. */
void budget_estimate_step(const scenario_config *s, int full, work_estimate *e);
/* The run_gate (sim/run.h) of one command: each replay the fold asks for is estimated and held to
 * the limits, its seconds added to those of the replays it let run before (spent_s, 0 to start:
 * the first pair, priced up front, is asked too). 0 to go on; else 1 with err saying what it would take and which limit it passes. */
typedef struct {
    budget_limits limits;
    double spent_s;
} budget_gate;
int budget_gate_allow(void *ctx, const scenario_config *replay, int full, config_error *err);
/* The run_gate of work that replays on `threads` threads at once, each replay independent of the
 * others (dtsim plan's layouts): each replay the fold asks for is held to the limits on its own,
 * its memory once a thread, and nothing is summed, so that the answer does not depend on which
 * thread asked first. The work priced up front (each layout's first replay) stays within the
 * limits by that price; what this gate sees is a fold attempt beyond it or a full replay. Same
 * returns as budget_gate_allow. */
typedef struct {
    budget_limits limits;
    int threads;
} budget_replay_gate;
int budget_replay_allow(void *ctx, const scenario_config *replay, int full, config_error *err);

/* This machine's physical memory in bytes (0 when unknown: no memory limit by default). */
double budget_machine_bytes(void);
/* 1 when e is within the limits (nothing printed). */
int budget_within(const work_estimate *e, const budget_limits *l);
/* 0 when e is within the limits; else prints "dtsim COMMAND: ..." with the estimate, the limit
 * it passes and what to do, and returns 2 (also for a limit that is not a positive number). */
int budget_check(const char *command, const work_estimate *e, const budget_limits *l);
/* The same for a later part of a command's work, priced once what it runs on is known ("refused
 * before `before`: ..."; dtsim plan's --confirm replays, once the best are known). */
int budget_check_before(const char *command, const char *before, const work_estimate *e, const budget_limits *l);

#endif
