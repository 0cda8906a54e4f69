/* Data-loader stalls (training.data_loader): how long the forward passes that need input wait
 * for it, per step, once prefetching has hidden what it can. See docs/model.md, "Input".
 *
 * Who reads (Megatron-LM's get_batch): the first pipeline stage needs the tokens, the last
 * stage the labels; with PP = 1 one stage needs both. Inside a TP group only TP rank 0 reads and
 * broadcasts over NVLink (cost neglected: a micro-batch of token ids is kilobytes). Every CP
 * rank of a DP replica loads the full sequences and keeps its slice (get_batch_on_this_cp_rank
 * slices after loading), so it is a reader of the whole micro-batch. Hence DP x CP readers per
 * reading stage, and 2 x DP x CP readers when PP > 1 (first and last stage: labels are the same
 * samples shifted, so the last stage reads the same bytes). All readers read concurrently and
 * share the cluster's dataset bandwidth equally (conservative: a reader alone would go faster).
 *
 * One reader: its `workers` decode the samples of a micro-batch in parallel, after reading them
 * at its bandwidth share, so a micro-batch takes L = mb x sample_bytes / (dataset_read / R)
 * + mb x decode / workers, times a lognormal factor of mean 1 and the scenario's cv. It loads
 * micro-batches in order, at most prefetch_batches ahead of use (a load may start only once
 * micro-batch j - prefetch has been consumed; prefetch 0: on demand). The step demands
 * micro-batch i when the reading stage's forward of i starts in the replay; a wait shifts the
 * reader's later demands of the step by as much (conservative: no pipeline slack absorbs it). */
#ifndef DTSIM_SIM_DATA_LOADER_H
#define DTSIM_SIM_DATA_LOADER_H

#include "config.h"
#include "replay.h"
#include "workload.h"

/* One kind of reader: identical readers with the same demand times. */
typedef struct {
    int m;                 /* micro-batches per step */
    const double *demand;  /* when the step needs micro-batch i, seconds from step start (m) */
    double step_s;         /* step time without input stalls */
    double load_s;         /* mean load time of one micro-batch on one reader */
    double cv;             /* coefficient of variation of a load time (lognormal) */
    int prefetch;          /* queue depth: micro-batches loaded ahead of use */
    long long readers;     /* readers of this kind */
} dl_reader_kind;

typedef struct {
    long long readers;       /* all readers, every kind */
    int kinds;               /* 1 (PP = 1) or 2 (first and last stage) */
    double load_s;           /* mean load time of one micro-batch on one reader */
    double exposed_s;        /* mean exposed input time per step: E[max over readers of its stall] */
    double input_s;          /* the input time it is hidden from: E[max over readers of the time its
                                loader spends on a step's micro-batches]; exposed_s <= input_s
                                (reader_step), and with cv 0, micro-batches x load_s */
    double hidden_fraction;  /* 1 - exposed / input_s: input time hidden by prefetch */
    long long simulated_readers; /* readers simulated (fewer than readers: order statistics) */
    int steps;               /* steps simulated per reader, after the warm-up */
} data_loader_result;

#define DL_WARMUP_STEPS 8
#define DL_STEPS 256
#define DL_BUDGET (1L << 20)  /* micro-batch loads simulated per evaluation, at most (about) */

/* Readers of the scenario (all kinds) and the number of kinds. */
long long data_loader_readers(const scenario_config *s, int *kinds);
/* Mean load time of one micro-batch on one of `readers` concurrent readers, seconds. */
double data_loader_load_s(const scenario_config *s, long long readers);

/* Simulates one reader for warmup + steps steps (random stream `seed`) and writes the stall of
 * each step after the warm-up to stall[steps], and (loaded not NULL) the time its loader spent on
 * the step's micro-batches to loaded[steps]. 0, or -1 out of memory. */
int data_loader_simulate_reader(const dl_reader_kind *k, int warmup, int steps, unsigned long long seed,
                                double *stall, double *loaded);

/* E[max of independent draws]: readers[g] draws from the distribution of which samples[g]
 * (n[g] of them, sorted ascending on return) are iid draws, for each group g. Uses the unbiased
 * order-statistics estimate C(#{x_i <= x}, R) / C(n, R) of F(x)^R (the plug-in (k/n)^R when
 * n < R). Negative samples count as 0; NaN when out of memory. */
double data_loader_expected_max(double *const *samples, const long long *n, const long long *readers, int groups);

/* Monte Carlo over readers and steps with seed `seed`. 0, or -1 out of memory. */
int data_loader_evaluate(const dl_reader_kind *kinds, int n_kinds, unsigned long long seed,
                         data_loader_result *out);

/* When the step needs each micro-batch on a reading stage: the start of the forward of
 * (stage, chunk, micro-batch i) in the replay. out has m entries. 0, or -1 if one is missing. */
int data_loader_demand_times(const step_workload *w, const replay_times *t, int stage, int chunk, int m,
                             double *out);

/* The scenario's input stalls on top of a replayed step of step_s seconds. 0, or -1 with err. */
int data_loader_run(const scenario_config *s, const step_workload *w, const replay_times *t, double step_s,
                    data_loader_result *out, config_error *err);

#endif
