/* The layout planner: for a scenario's model, batch and platform, every valid parallel layout
 * (TP inside a node, PP dividing the layers, DP, CP, interleaving, micro-batch, ZeRO stage,
 * recomputation, sequence parallelism), those that do not fit in memory dropped, the rest
 * simulated (analytic fidelity) and ranked by step time. */
#ifndef DTSIM_SIM_PLAN_H
#define DTSIM_SIM_PLAN_H

#include <stddef.h>
#include "run.h"
#include "budget.h"
#include "progress.h"

typedef struct {
    int tp, pp, dp, cp, vpp, sp, zero;
    int ep;                    /* expert parallel (MoE models; 1 for dense ones) */
    long long micro_batch;
    long long global_batch;    /* sequences a step; 0 until searched: the scenario's */
    recompute_kind recompute;
    pipeline_kind schedule;
    int is_scenario_own;       /* the scenario's own layout (always a candidate) */
    long order;                /* enumeration order: the last tie-breaker of the ranking */
    run_result result;
    time_to_train to_train;    /* the whole run at this layout's step time (run.h); known 0 when the
                                  scenario states no budget */
} plan_layout;

/* Why candidates were dropped: one rule (numbers replaced by N, so "TP 3 does not divide 96
 * heads" and "TP 5 does not divide 96 heads" count together) and how many it dropped. */
#define PLAN_MAX_REASONS 24
typedef struct {
    char rule[200];
    long count;
} plan_reason;

typedef struct {
    int count;                 /* distinct rules; the last slot collects "other" when full */
    plan_reason reason[PLAN_MAX_REASONS];
} plan_tally;

typedef struct {
    plan_layout *layouts;      /* the simulated fitting layouts, best first */
    int count, cap;
    long enumerated, invalid, out_of_memory;
    long bounded;              /* fitting layouts not simulated: the lower bound on their step
                                  (workload_bound.h) is slower than the keep-th best's, so none of
                                  them is among the best keep; fitting = count + bounded */
    char first_invalid[sizeof ((config_error *)0)->msg]; /* an example reason, for the summary: whole */
    plan_tally invalid_by;     /* invalid candidates by the layout rule they break */
    plan_tally oom_by;         /* candidates over the GPU's memory, by their largest state */
    double wall_s;
    int threads;               /* worker threads that ran the search */
} plan_result;

/* Searches the layouts of base on `gpus` GPUs (0: the scenario's own count), simulating every
 * fitting one. progress, when not NULL, is told the candidates done of all enumerated
 * (progress_note, from one thread only); the caller started it and ends it. Uses
 * plan_default_threads() threads. Returns 0, or -1 with err. */
int plan_search(const scenario_config *base, int gpus, plan_result *out, config_error *err,
                progress_meter *progress);
/* The same with `threads` worker threads (0: plan_default_threads()), and with keep > 0 only as
 * many simulated as it takes to know the best `keep` exactly (and the scenario's own layout): the
 * fitting layouts are simulated in the order of a lower bound on their step (workload_bound.h),
 * and the search stops at the first whose bound is slower than the keep-th best step found, as
 * every later one is too (branch and bound; out->bounded counts them). The best `keep`, their
 * order and every figure of theirs are those of keep 0, which simulates every fitting layout.
 * Neither the result nor the counts depend on the thread count: the ranking's last tie-breaker is
 * the enumeration order, and the cut is settled as one thread would have made it. With limits
 * (NULL: none), each replay a layout's fold asks for beyond the first is held to them on its own
 * (budget_replay_allow: its memory once a thread); one refused before the cut fails the search
 * with err naming the layout and the limit. */
int plan_search_threads(const scenario_config *base, int gpus, int threads, int keep, const budget_limits *limits,
                        plan_result *out, config_error *err, progress_meter *progress);
/* ---- the cluster that meets a deadline (dtsim plan --deadline-days) ----------------------
 * Cluster sizes from one node up (1, 2, 4, ... nodes, then halving the gap to the smallest that
 * meets the deadline, and the two sizes above it), the layouts of each searched as plan_search
 * does with the scenario's global batch, and those that finish training.tokens within the
 * deadline ranked by GPU-hours (so by cost at one price per GPU-hour). */
#define PLAN_MAX_SIZES 32
typedef struct {
    int gpus;
    long fitting;              /* layouts that fit in memory at this size */
    double fastest_days;       /* the fastest layout's days (0: none fits) */
    int feasible;              /* one finishes within the deadline */
    double best_gpu_hours, best_days; /* the cheapest of those */
} plan_size;

typedef struct {
    double deadline_days;
    int max_gpus;              /* 0: the platform's nodes; more grows the fabric to them */
    int threads;               /* 0: plan_default_threads() */
    int keep_per_size;         /* cheapest layouts within the deadline kept from each size */
    const budget_limits *limits; /* each size's search held to them (plan_search_threads; NULL: none) */
    double batch_tokens_min, batch_tokens_max; /* > 0: the global batch may be any of 2^a 3^b
                                  sequences with its tokens in this range (plan_batches), not
                                  only the scenario's */
    void (*progress)(const plan_size *done); /* after each size (may be NULL) */
} plan_deadline_input;

typedef struct {
    double deadline_days;
    int max_nodes;
    plan_size sizes[PLAN_MAX_SIZES]; /* in the order searched */
    int size_count;
    plan_layout *layouts;      /* within the deadline, every size, cheapest first */
    int count, cap;
} plan_deadline_result;

/* The global batches (sequences) a batch range allows: every 2^a 3^b with tokens in [lo, hi]
 * (the sizes most data-parallel widths divide), and the scenario's own when in range; at most
 * PLAN_MAX_BATCHES, evenly spread over the range when there are more. Returns the count (0:
 * none in range). */
#define PLAN_MAX_BATCHES 12
int plan_batches(const scenario_config *s, double lo, double hi, long long out[PLAN_MAX_BATCHES]);

/* Returns 0 (out->count 0 when no size meets the deadline), or -1 with err (no token budget,
 * a bad size). Free with plan_deadline_free. */
int plan_deadline(const scenario_config *base, const plan_deadline_input *in, plan_deadline_result *out,
                  config_error *err);
void plan_deadline_free(plan_deadline_result *r);
/* What plan_deadline would take at most: plan_estimate at every size it may search and every batch
 * it searches there (1, 2, 4, ... nodes up to the largest, each at every batch of the range or the
 * scenario's own; of the sizes of 3 x 2^k nodes it may search between two, the costliest), summed;
 * the largest one's memory. The sizes are priced on in->threads threads. 0, or -1 out of memory. */
int plan_deadline_estimate(const scenario_config *base, const plan_deadline_input *in, work_estimate *e);

/* What plan_search_threads would take: every fitting candidate priced at the first replay its
 * fold makes (the graph's tasks in closed form), as if simulated, though a search for the best K
 * bounds most of them. A deeper fold attempt is priced when asked for (plan_search_threads's
 * limits). 0, or -1 out of memory. */
int plan_estimate(const scenario_config *base, int gpus, int threads, work_estimate *e);
/* plan_estimate at each of nb global batches (sequences; batches NULL with nb 1: the scenario's
 * own), into e[0..nb-1], and how many candidates fit at each (fitting, may be NULL): the
 * candidates enumerated once for all. 0, or -1 out of memory. */
int plan_estimate_batches(const scenario_config *base, int gpus, int threads, const long long *batches, int nb,
                          work_estimate *e, long *fitting);

/* Runs fn on `threads` threads (this one among them; at most 64), thread t given
 * (char *)args + t * stride (stride 0: all share args); returns how many ran. Any that cannot be
 * started leave their share to those that could: fn takes its work from a shared counter. */
int plan_run_threads(int threads, void *(*fn)(void *), void *args, size_t stride);
/* $DTSIM_THREADS when set, else the online CPUs (at most 64). */
int plan_default_threads(void);
void plan_result_free(plan_result *r);

/* Applies a layout to a copy of base (the copy shares base's owned pointers: never free it). */
void plan_apply(const scenario_config *base, const plan_layout *l, scenario_config *out);
/* The same on an out that plan_apply filled from base before (with any layout): only what a layout
 * sets is set again, for a caller that tries many layouts without copying base for each. */
void plan_reapply(const scenario_config *base, const plan_layout *l, scenario_config *out);

const char *recompute_name(recompute_kind r);

/* A layout as DESIGN.md's plan --json entry: "parallel" (the scenario's keys, so each can be
 * given back with --set), "training", the figures and "memory_gib" (json_t*, caller decrefs). */
void *plan_layout_to_json(const scenario_config *base, const plan_layout *l);
/* A tally as {"rule": count, ...} (json_t*), most frequent first. */
void *plan_tally_to_json(const plan_tally *t);
/* Sorts a tally by count, most frequent first. */
void plan_tally_sort(plan_tally *t);
/* Counts one occurrence of a rule message (numbers folded into N). */
void plan_tally_add(plan_tally *t, const char *msg);
/* Adds count occurrences of an already folded rule (merging tallies). */
void plan_tally_count(plan_tally *t, const char *rule, long count);
/* Counts a layout over the GPU's memory under its largest state (the lever to pull). */
void plan_oom_reason(const run_memory *m, plan_tally *t);
/* Short label of a layout for tables and charts: "TP4 PP8 DP32 V4 SP Z1 mb1 sel". */
void plan_layout_label(const plan_layout *l, char *buf, size_t n);
/* Total exposed communication of a layout's step (s). */
double plan_exposed_comm_s(const plan_layout *l);
/* Orders layouts by step time (qsort comparator). */
int plan_compare(const void *a, const void *b);
#endif
