/* The Monte Carlo of `dtsim faults`: the healthy step, the checkpoint's size and costs, the
 * runs, their statistics, and the goodput-optimal checkpoint interval. See faults.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "faults.h"
#include "checkpoint_cost.h"
#include "progress.h"
#include "run.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Mean and nearest-rank percentiles; sorts v. */
static faults_stat stat_of(double *v, int n)
{
    faults_stat st = {0, 0, 0, 0};
    if (n == 0)
        return st;
    for (int i = 0; i < n; i++)
        st.mean += v[i] / n;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    st.p5 = v[(int)(0.05 * (n - 1) + 0.5)];
    st.p50 = v[(int)(0.50 * (n - 1) + 0.5)];
    st.p95 = v[(int)(0.95 * (n - 1) + 0.5)];
    return st;
}

/* Timelines simulated so far, for the progress line: the runs, then the interval search. */
typedef struct {
    progress_meter *meter;
    double done, total;
} timeline_count;

static void count_timeline(timeline_count *c)
{
    progress_note(c->meter, ++c->done, c->total);
}

/* Mean goodput over `runs` runs at one interval. Every candidate interval sees the same seeds,
 * hence the same failure draws (common random numbers): the comparison between intervals is
 * not blurred by the Monte Carlo noise of the failures themselves. */
static double mean_goodput(const scenario_config *s, const faults_report *P, const faults_trace *trace,
                           double interval, int runs, timeline_count *count)
{
    double g = 0;
    for (int r = 0; r < runs; r++) {
        faults_timeline tl;
        faults_simulate_trace(s, P, trace, interval, faults_run_seed(s->faults.seed, r), &tl);
        g += (tl.wall_s > 0 ? tl.train_s / tl.wall_s : 0) / runs;
        count_timeline(count);
    }
    return g;
}

/* The checkpoint's size and times, as dtsim run's time_to_train takes them (step/checkpoint_cost.c);
 * returns the job's failure rate a second. */
static double checkpoint_costs(const scenario_config *s, faults_report *out)
{
    checkpoint_cost c;
    checkpoint_cost_of(s, &c);
    out->checkpoint_bytes = c.bytes;
    out->checkpoint_write_s = c.write_s;
    out->restore_s = c.read_s;
    out->checkpoint_block_s = c.block_s;
    return c.failure_rate;
}

static int search_runs_of(int runs, int replay)
{
    return replay ? 1 : runs < FAULTS_SEARCH_RUNS ? runs : FAULTS_SEARCH_RUNS;
}

double faults_timelines(int runs, int replay)
{
    return runs + (double)(FAULTS_GRID_POINTS + FAULTS_REFINE_POINTS) * search_runs_of(runs, replay);
}

static int check_inputs(const scenario_config *s, config_error *err)
{
    if (s->platform.storage.checkpoint_write_gbs <= 0 || s->platform.storage.checkpoint_read_gbs <= 0)
        return snprintf(err->msg, sizeof err->msg, "platform.storage: checkpoint_write_gbs and "
                                                   "checkpoint_read_gbs must be > 0 for dtsim faults"), -1;
    if (s->faults.checkpoint_async && s->platform.node.pcie_bandwidth_gbs <= 0)
        return snprintf(err->msg, sizeof err->msg, "platform.node.pcie_bandwidth_gbs must be > 0 for "
                                                   "asynchronous checkpoints"), -1;
    if (s->faults.checkpoint_interval_s <= 0)
        return snprintf(err->msg, sizeof err->msg, "faults.checkpoint_interval_s must be > 0"), -1;
    if (s->training.tokens <= 0 && s->faults.horizon_days <= 0)
        return snprintf(err->msg, sizeof err->msg, "faults.horizon_days must be > 0 (or set training.tokens)"), -1;
    return 0;
}

/* An elastic job that lost k replicas runs at DP - k with the same per-replica batch: its
 * throughput is simulated there (the step changes: fewer replicas in each gradient ring),
 * relative to the whole job's. */
static void elastic_rates(const scenario_config *s, faults_report *out)
{
    int dp = s->parallel.dp;
    for (int k = 1; k < dp && k <= FAULTS_ELASTIC_MAX; k++) {
        scenario_config shrunk = *s;
        shrunk.parallel.dp = dp - k;
        shrunk.training.global_batch_size = s->training.global_batch_size / dp * (dp - k);
        run_result r;
        config_error err;
        if (s->training.global_batch_size % dp == 0 && scenario_validate_layout(&shrunk, &err) == 0 &&
            run_scenario(&shrunk, &r, &err) == 0 && out->tokens_per_s > 0)
            out->elastic_rate[k] = r.tokens_per_s / out->tokens_per_s;
    }
}

int faults_run_trace(const scenario_config *s, const faults_trace *trace, int runs, progress_meter *progress,
                     faults_report *out, config_error *err)
{
    double step = out->step_time_s, tps = out->tokens_per_s; /* a step the caller simulated */
    memset(out, 0, sizeof *out);
    if (runs < 1)
        return snprintf(err->msg, sizeof err->msg, "runs must be >= 1 (got %d)", runs), -1;
    if (check_inputs(s, err) != 0)
        return -1;
    out->runs = runs;
    out->replayed = trace != NULL;
    if (step > 0 && tps > 0) {
        out->step_time_s = step;
        out->tokens_per_s = tps;
    } else {
        run_result r;
        if (run_scenario(s, &r, err) != 0)
            return -1;
        out->step_time_s = r.step_time_s;
        out->tokens_per_s = r.tokens_per_s;
    }
    double rate = checkpoint_costs(s, out);
    if (s->faults.elastic)
        elastic_rates(s, out);
    out->horizon_s = s->faults.horizon_days * 86400;
    out->target_train_s = s->training.tokens > 0 && out->tokens_per_s > 0 ? s->training.tokens / out->tokens_per_s : 0;
    out->system_mtbf_hours = rate > 0 ? 1.0 / rate / 3600 : INFINITY;
    out->expected_failures = rate * (out->target_train_s > 0 ? out->target_train_s : out->horizon_s);

    double *buf = malloc((size_t)runs * (3 + LOSS_COUNT) * sizeof *buf);
    if (!buf)
        return snprintf(err->msg, sizeof err->msg, "out of memory for %d runs", runs), -1;
    double *v = buf, *w = buf + runs, *d = buf + 2 * runs, *loss = buf + 3 * runs;
    int search_runs = search_runs_of(runs, trace != NULL);
    timeline_count count = {progress, 0, faults_timelines(runs, trace != NULL)};
    /* a checkpoint is taken between steps: an interval under one step is one every step */
    double interval = fmax(s->faults.checkpoint_interval_s, out->step_time_s);
    for (int r = 0; r < runs; r++) {
        faults_timeline tl;
        faults_simulate_trace(s, out, trace, interval, faults_run_seed(s->faults.seed, r), &tl);
        v[r] = tl.interruptions;
        w[r] = tl.wall_s > 0 ? tl.train_s / tl.wall_s : 0;
        d[r] = tl.unfinished ? INFINITY : tl.wall_s / 86400; /* not trained: no days to give */
        out->unfinished_runs += tl.unfinished;
        for (int c = 0; c < LOSS_COUNT; c++)
            loss[c * runs + r] = tl.lost_s[c] / 3600;
        count_timeline(&count);
    }
    out->interruptions = stat_of(v, runs);
    out->goodput = stat_of(w, runs);
    out->goodput_at_scenario_interval = out->goodput.mean;
    if (out->target_train_s > 0)
        out->days_to_train = stat_of(d, runs);
    for (int c = 0; c < LOSS_COUNT; c++)
        out->lost_hours[c] = stat_of(loss + c * runs, runs);
    free(buf);

    /* Young (1974) / Daly (2006) first order: sqrt(2 C M), C the checkpoint's blocking cost. */
    double cost = out->checkpoint_block_s;
    out->young_daly_interval_s = isfinite(out->system_mtbf_hours) ? sqrt(2 * cost * out->system_mtbf_hours * 3600) : 0;

    /* The goodput-optimal interval: a log grid from one step (or 10 s) to a week, then points
     * across the best cell (faults.h). */
    double lo = fmax(10.0, out->step_time_s), hi = 7 * 86400.0;
    double ratio = pow(hi / lo, 1.0 / (FAULTS_GRID_POINTS - 1)), best = interval, best_g = -1;
    for (int n = 0; n < FAULTS_GRID_POINTS; n++) {
        double iv = lo * pow(ratio, n);
        double g = mean_goodput(s, out, trace, iv, search_runs, &count);
        out->curve_interval_s[n] = iv;
        out->curve_goodput[n] = g;
        out->curve_points = n + 1;
        if (g > best_g) {
            best_g = g;
            best = iv;
        }
    }
    double centre = best;
    const int half = FAULTS_REFINE_POINTS / 2;
    for (int k = -half; k <= half; k++) {
        double iv = centre * pow(ratio, k / (double)half);
        if (k == 0 || iv < lo || iv > hi)
            continue;
        double g = mean_goodput(s, out, trace, iv, search_runs, &count);
        if (g > best_g) {
            best_g = g;
            best = iv;
        }
    }
    out->optimal_checkpoint_interval_s = best;
    out->optimal_goodput = best_g;
    progress_end(progress);
    return 0;
}

int faults_run(const scenario_config *s, int runs, faults_report *out, config_error *err)
{
    if (!s->faults.failure_trace[0])
        return faults_run_trace(s, NULL, runs, NULL, out, err);
    char path[CFG_PATH_MAX];
    faults_trace_path(s, path, sizeof path);
    int gpus = scenario_gpus(s), gpn = s->platform.node.gpus > 0 ? s->platform.node.gpus : 1;
    faults_trace trace;
    if (faults_trace_load(path, gpus, (gpus + gpn - 1) / gpn, &trace, err) != 0)
        return -1;
    int rc = faults_run_trace(s, &trace, runs, NULL, out, err);
    faults_trace_free(&trace);
    return rc;
}
