/* dtsim faults SCENARIO.json [--runs N] [--json FILE|-] [--plot DIR] [--set PATH=VALUE]... [--progress|--quiet] */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "cli_args.h"
#include "budget.h"
#include "run.h"
#include "faults.h"
#include "progress.h"
#include "sweep_plot.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtsim faults SCENARIO.json [options]\n"
            "Monte Carlo of a long run with the scenario's faults block: failures per GPU and node\n"
            "(exponential or Weibull), detection, restart, checkpoint restore, lost work, checkpoint\n"
            "cost (sync or async), spares, repairs, elastic shrink. Reports interruptions, goodput,\n"
            "lost hours by cause and days to train training.tokens, each as mean/p5/p50/p95, and\n"
            "the goodput-optimal checkpoint interval beside Young/Daly's sqrt(2 C MTBF).\n\n"
            "  --runs N          Monte Carlo runs (default 100), seeds from faults.seed\n"
            "  --json FILE|-     the figures as JSON\n"
            "  --plot DIR        goodput against checkpoint interval (PNG and SVG, gnuplot)\n"
            "  --set PATH=VALUE  override a scenario value first (repeatable)\n"
            "  --progress        the timelines simulated (the runs, then the interval search's) on\n"
            "                    stderr every 2 s, with the time left (default: only when stderr is\n"
            "                    a terminal); stdout is the same\n"
            "  --quiet           no progress, even on a terminal\n"
            BUDGET_HELP
            "exit: 0 ok, 2 bad input, 1 runtime failure\n");
}

/* JSON has no infinity: a figure that is not finite (no failures: MTBF infinite; the days to
 * train of a run that did not finish) is null. */
static json_t *num_json(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static json_t *stat_json(faults_stat s)
{
    json_t *o = json_object();
    json_object_set_new(o, "mean", num_json(s.mean));
    json_object_set_new(o, "p5", num_json(s.p5));
    json_object_set_new(o, "p50", num_json(s.p50));
    json_object_set_new(o, "p95", num_json(s.p95));
    return o;
}

/* A days-to-train cell: a run that hit FAULTS_RUN_CAP took longer than cap_days. */
static const char *days_cell(double days, double cap_days, char *buf, size_t n)
{
    char v[32];
    if (isfinite(days))
        snprintf(v, sizeof v, "%.1f", days);
    else
        snprintf(v, sizeof v, ">%.1f", cap_days);
    snprintf(buf, n, "%10s", v);
    return buf;
}

/* A figure as precise as a reader needs, never shown as 0 when it is not: whole above 100,
 * two decimals above 0.1, two significant digits under that (a 0.0004 h system MTBF) */
static const char *amount_text(double v, char *buf, size_t n)
{
    if (!isfinite(v) || fabs(v) >= 100)
        snprintf(buf, n, "%.0f", v);
    else if (fabs(v) >= 0.1 || v == 0)
        snprintf(buf, n, "%.2f", v);
    else
        snprintf(buf, n, "%.2g", v);
    return buf;
}

/* The scenario's name as a gnuplot string: inside '...' a quote is written twice, and a line
 * break would end the -e program (the name is the user's text: never a shell's or gnuplot's code). */
static void gnuplot_quoted(const char *in, char *out, size_t n)
{
    size_t k = 0;
    for (; *in && k + 3 < n; in++) {
        if (*in == '\'')
            out[k++] = '\'';
        out[k++] = (unsigned char)*in < ' ' ? ' ' : *in;
    }
    out[k] = 0;
}

static int plot_curve(const faults_report *r, const char *dir, const char *title)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "dtsim faults: --plot %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char data[4200], prefix[4200], name[2 * CFG_NAME_MAX + 2], vars[9000];
    snprintf(data, sizeof data, "%s/goodput_vs_interval.dat", dir);
    snprintf(prefix, sizeof prefix, "%s/goodput_vs_interval", dir);
    FILE *f = fopen(data, "w");
    if (!f) {
        fprintf(stderr, "dtsim faults: --plot: cannot write %s: %s\n", data, strerror(errno));
        return -1;
    }
    fprintf(f, "# checkpoint_interval_s mean_goodput\n");
    for (int i = 0; i < r->curve_points; i++)
        fprintf(f, "%.6g %.6g\n", r->curve_interval_s[i], r->curve_goodput[i]);
    if (fclose(f) != 0) {
        fprintf(stderr, "dtsim faults: --plot: cannot write %s: %s\n", data, strerror(errno));
        return -1;
    }
    /* gnuplot started without a shell (sweep_gnuplot), the name quoted for gnuplot alone */
    gnuplot_quoted(title, name, sizeof name);
    snprintf(vars, sizeof vars, "datafile='%s'; plottitle='%s'; optimum=%g; youngdaly=%g", data, name,
             r->optimal_checkpoint_interval_s, r->young_daly_interval_s);
    config_error err;
    if (sweep_gnuplot("faults_goodput.gp", vars, prefix, &err) != 0) {
        fprintf(stderr, "dtsim faults: --plot: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* Spares that keep node failures from waiting on repairs: every failure sends a node to repair
 * for repair_hours, so the nodes away at once are Poisson with mean (failures per hour: 1 / the
 * report's system MTBF) x repair_hours; the smallest k whose Poisson CDF reaches 99.9% (the job
 * waits on a repair in about one failure in a thousand). */
static int spares_needed(const scenario_config *s, const faults_report *r, double *away)
{
    double per_hour = r->system_mtbf_hours > 0 && isfinite(r->system_mtbf_hours) ? 1 / r->system_mtbf_hours : 0;
    double mu = per_hour * s->faults.repair_hours, term = exp(-mu), cdf = term;
    int k = 0;
    while (cdf < 0.999 && k < 1000000) {
        k++;
        term *= mu / k;
        cdf += term;
    }
    *away = mu;
    return k;
}

/* The step (its analytic replay), then the Monte Carlo: runs x the events of one run, as long
 * as the horizon or, when the scenario says what is trained, as training it takes (the step is
 * simulated for that only when it is itself within the limits). One check of both: 0, or 2. */
static int faults_within_budget(const scenario_config *s, int runs, const budget_limits *limits)
{
    scenario_config step = *s;
    step.run.fidelity_flow = 0;
    work_estimate e, mc;
    budget_estimate_run(&step, &e);
    double days = s->faults.horizon_days;
    run_result r;
    config_error err;
    if (s->training.tokens > 0 && budget_within(&e, limits) && run_scenario(&step, &r, &err) == 0) {
        time_to_train t;
        run_time_to_train(&step, r.step_time_s, r.gpus, &t);
        days = FAULTS_RUN_CAP * t.days; /* a run goes on until its tokens are trained, or this cap */
    }
    budget_estimate_faults(s, runs, days, &mc);
    mc.seconds += e.seconds;
    mc.bytes = mc.bytes > e.bytes ? mc.bytes : e.bytes;
    return budget_check("faults", &mc, limits);
}

int cli_faults(int argc, char **argv)
{
    const char *path = NULL, *json_path = NULL, *plot_dir = NULL;
    cli_list sets = {0};
    int runs = 100, progress = 0, quiet = 0;
    budget_limits limits = {0, 0};
    const cli_option options[] = {
        BUDGET_OPTIONS(&limits),
        CLI_OPT_INT("runs", &runs, 1, 100000),
        CLI_OPT_STRING("json", &json_path),
        CLI_OPT_STRING("plot", &plot_dir),
        CLI_OPT_APPEND("set", &sets),
        CLI_OPT_FLAG("progress", &progress),
        CLI_OPT_FLAG("quiet", &quiet),
        CLI_OPT_END,
    };
    const cli_output outs[] = {CLI_OUT_FILE_OR_STDOUT("--json", &json_path), CLI_OUT_FOLDER("--plot", &plot_dir),
                               CLI_OUT_END};
    const cli_spec spec = {"faults", usage, options, &path, "scenario file", outs};
    scenario_config s;
    int rc = cli_parse_and_load(&spec, argc, argv, &sets, &s);
    if (rc != CLI_GO_ON)
        goto out;
    rc = 2;
    config_error err;
    /* gnuplot's strings end at a quote: a folder with one could not be drawn into, said now and
     * not after the runs */
    if (plot_dir && strchr(plot_dir, '\'')) {
        fprintf(stderr, "dtsim faults: --plot: folder '%s' contains a quote ('), which gnuplot cannot take\n",
                plot_dir);
        scenario_free(&s);
        goto out;
    }
    if (faults_within_budget(&s, runs, &limits) != 0) {
        scenario_free(&s);
        goto out;
    }
    /* A trace is input: a malformed one is the user's to fix (exit 2), named with its line. */
    faults_trace trace = {0};
    int gpus = scenario_gpus(&s), gpn = s.platform.node.gpus > 0 ? s.platform.node.gpus : 1;
    if (s.faults.failure_trace[0]) {
        char tpath[CFG_PATH_MAX];
        faults_trace_path(&s, tpath, sizeof tpath);
        if (faults_trace_load(tpath, gpus, (gpus + gpn - 1) / gpn, &trace, &err) != 0) {
            fprintf(stderr, "dtsim faults: %s: %s\n", path, err.msg);
            scenario_free(&s);
            goto out;
        }
        fprintf(stderr, "dtsim faults: replaying %d failures from %s (every run sees the same failures)\n",
                trace.count, tpath);
    }
    /* What the model cannot say unless asked, said before the figures that would hide it. */
    int modelled = s.faults.gpu_mtbf_hours > 0 || s.faults.node_mtbf_hours > 0 || s.faults.failure_trace[0];
    if (!modelled)
        fprintf(stderr, "dtsim faults: %s: failures are not modelled (no faults.gpu_mtbf_hours, node_mtbf_hours or "
                        "failure_trace): the goodput loses only the checkpoints' own time, and the longest interval is "
                        "best\n", path);
    int gpn_ = s.platform.node.gpus > 0 ? s.platform.node.gpus : 1, used = (gpus + gpn_ - 1) / gpn_;
    int free_nodes = s.platform.network.nodes - used + s.faults.spare_nodes;
    if (free_nodes < 0)
        free_nodes = s.faults.spare_nodes;
    int starved = modelled && free_nodes == 0 && !s.faults.elastic && s.faults.repair_hours > 0;
    faults_report r;
    memset(&r, 0, sizeof r);
    fprintf(stderr, "dtsim faults: %s: %d runs and the checkpoint-interval search...\n", s.name, runs);
    progress_meter meter;
    progress_start(&meter, "dtsim faults", "timeline", progress_mode_of(progress, quiet));
    if (faults_run_trace(&s, s.faults.failure_trace[0] ? &trace : NULL, runs, &meter, &r, &err) != 0) {
        fprintf(stderr, "dtsim faults: %s\n", err.msg);
        faults_trace_free(&trace);
        scenario_free(&s);
        rc = 1;
        goto out;
    }
    faults_trace_free(&trace);
    FILE *h = json_path && !strcmp(json_path, "-") ? stderr : stdout;
    fprintf(h, "dtsim faults: %s, %d GPUs, %d runs\n", s.name, scenario_gpus(&s), runs);
    fprintf(h, "  step %.3f s (%.0f tokens/s); checkpoint %.2f TB: blocks %.2f s (%s), written in %.1f s at %.0f GB/s "
               "and restored in %.1f s at %.0f GB/s (platform.storage)\n",
            r.step_time_s, r.tokens_per_s, r.checkpoint_bytes / 1e12, r.checkpoint_block_s,
            s.faults.checkpoint_async ? "async: each GPU's shard copied to host memory over PCIe, written behind"
                                      : "sync: the whole write",
            r.checkpoint_write_s, s.platform.storage.checkpoint_write_gbs, r.restore_s,
            s.platform.storage.checkpoint_read_gbs);
    if (!modelled)
        fprintf(h, "  NOTE         failures are not modelled (no MTBF, no trace): goodput loses only the checkpoints' "
                   "own time\n");
    if (r.replayed)
        fprintf(h, "  failures replayed from %s (every run the same); MTBF and Young/Daly below from the "
                   "scenario's MTBFs\n", s.faults.failure_trace);
    char mtbf[32];
    if (r.target_train_s > 0) {
        fprintf(h, "  system MTBF %s h; expected failures while training %.3g tokens (%.1f days of training) N x T / "
                   "MTBF = %.1f\n",
                amount_text(r.system_mtbf_hours, mtbf, sizeof mtbf), s.training.tokens, r.target_train_s / 86400,
                r.expected_failures);
        if (s.faults.horizon_days > 0) /* the run's own length decides, not the horizon */
            fprintf(h, "  horizon      faults.horizon_days %g not used: each run goes on until %.3g tokens are trained "
                       "(%.1f days without failures)\n", s.faults.horizon_days, s.training.tokens,
                    r.target_train_s / 86400);
    }
    else
        fprintf(h, "  system MTBF %s h; expected failures over %g days N x T / MTBF = %.1f\n",
                amount_text(r.system_mtbf_hours, mtbf, sizeof mtbf), s.faults.horizon_days, r.expected_failures);
    fprintf(h, "  %-22s %10s %10s %10s %10s\n", "", "mean", "p5", "p50", "p95");
    fprintf(h, "  %-22s %10.1f %10.1f %10.1f %10.1f\n", "interruptions", r.interruptions.mean, r.interruptions.p5,
            r.interruptions.p50, r.interruptions.p95);
    fprintf(h, "  %-22s %9.2f%% %9.2f%% %9.2f%% %9.2f%%\n", "goodput", 100 * r.goodput.mean, 100 * r.goodput.p5,
            100 * r.goodput.p50, 100 * r.goodput.p95);
    for (int c = 0; c < LOSS_COUNT; c++)
        fprintf(h, "  lost h: %-14s %10.1f %10.1f %10.1f %10.1f\n", faults_loss_name(c), r.lost_hours[c].mean,
                r.lost_hours[c].p5, r.lost_hours[c].p50, r.lost_hours[c].p95);
    if (r.target_train_s > 0) {
        double cap = FAULTS_RUN_CAP * r.target_train_s / 86400;
        char c[4][32];
        fprintf(h, "  %-22s %s %s %s %s   (%.3g tokens; %.1f days without failures)\n", "days to train",
                days_cell(r.days_to_train.mean, cap, c[0], sizeof c[0]), days_cell(r.days_to_train.p5, cap, c[1], 32),
                days_cell(r.days_to_train.p50, cap, c[2], 32), days_cell(r.days_to_train.p95, cap, c[3], 32),
                s.training.tokens, r.target_train_s / 86400);
        if (r.unfinished_runs > 0)
            fprintf(h, "  WARNING      %d of %d runs did not train %.3g tokens within %g times the failure-free "
                       "%.1f days (%.1f days of wall time): failures come faster than the job can keep its "
                       "work; their days to train are only known to exceed that (null in --json)\n",
                    r.unfinished_runs, runs, s.training.tokens, FAULTS_RUN_CAP, r.target_train_s / 86400, cap);
    }
    char yd[32];
    fprintf(h, "  checkpoint interval: scenario %.0f s (goodput %.2f%%), optimum %.0f s (%.2f%%), Young/Daly %s s\n",
            s.faults.checkpoint_interval_s, 100 * r.goodput_at_scenario_interval, r.optimal_checkpoint_interval_s,
            100 * r.optimal_goodput, amount_text(r.young_daly_interval_s, yd, sizeof yd));
    if (s.faults.checkpoint_interval_s < r.step_time_s)
        fprintf(h, "               (checkpoints are taken between steps: faults.checkpoint_interval_s %g s, under one "
                   "step, is a checkpoint every step, %.3f s)\n", s.faults.checkpoint_interval_s, r.step_time_s);
    if (s.faults.checkpoint_async && modelled && r.optimal_checkpoint_interval_s < 2 * r.checkpoint_write_s)
        fprintf(h, "               (asynchronous checkpoints block the step %.2f s each, so the optimum is about as "
                   "often as the storage finishes writing one, %.1f s: a checkpoint counts once written; Young/Daly "
                   "weighs only the %.2f s)\n", r.checkpoint_block_s, r.checkpoint_write_s, r.checkpoint_block_s);
    if (starved) { /* every failure waits a repair: say so, and what spares would restore */
        double away;
        int k = spares_needed(&s, &r, &away);
        scenario_config spared = s;
        spared.faults.spare_nodes = s.faults.spare_nodes + k;
        faults_report with;
        memset(&with, 0, sizeof with);
        with.step_time_s = r.step_time_s;
        with.tokens_per_s = r.tokens_per_s;
        int ok = !s.faults.failure_trace[0] && faults_run(&spared, runs, &with, &err) == 0;
        char restored[160] = "";
        if (ok)
            snprintf(restored, sizeof restored, ": goodput %.2f%% with them", 100 * with.goodput.mean);
        fprintf(h, "  WARNING      every node of the platform is in use and there are no spares: each failure waits "
                   "faults.repair_hours (%g h) for its node; %.1f nodes are away at a time on average, %d spare nodes "
                   "(faults.spare_nodes) cover 99.9%% of the time%s\n",
                s.faults.repair_hours, away, k, restored);
        fprintf(stderr, "dtsim faults: %s: no spare nodes: every failure waits %g h for a repair (goodput %.2f%%); "
                        "%d spares (faults.spare_nodes) would restore it%s\n",
                path, s.faults.repair_hours, 100 * r.goodput.mean, k, restored);
    }
    rc = 0;
    if (json_path) {
        json_t *lost = json_object();
        for (int c = 0; c < LOSS_COUNT; c++)
            json_object_set_new(lost, faults_loss_name(c), stat_json(r.lost_hours[c]));
        json_t *doc = json_object();
        json_object_set_new(doc, "scenario", json_string(s.name));
        json_object_set_new(doc, "gpus", json_integer(scenario_gpus(&s)));
        json_object_set_new(doc, "runs", json_integer(runs));
        json_object_set_new(doc, "replayed_trace", json_boolean(r.replayed));
        json_object_set_new(doc, "interruptions", stat_json(r.interruptions));
        json_object_set_new(doc, "goodput", stat_json(r.goodput));
        json_object_set_new(doc, "lost_hours", lost);
        /* No token budget: nothing to finish, so no days to train (null, not 0). */
        json_object_set_new(doc, "days_to_train", r.target_train_s > 0 ? stat_json(r.days_to_train) : json_null());
        json_object_set_new(doc, "unfinished_runs", json_integer(r.unfinished_runs));
        json_object_set_new(doc, "optimal_checkpoint_interval_s", num_json(r.optimal_checkpoint_interval_s));
        json_object_set_new(doc, "young_daly_interval_s", num_json(r.young_daly_interval_s));
        json_object_set_new(doc, "expected_failures", num_json(r.expected_failures));
        json_object_set_new(doc, "system_mtbf_hours", num_json(r.system_mtbf_hours)); /* null: no failures */
        json_object_set_new(doc, "step_time_s", num_json(r.step_time_s));
        json_object_set_new(doc, "checkpoint_bytes", num_json(r.checkpoint_bytes));
        json_object_set_new(doc, "checkpoint_block_s", num_json(r.checkpoint_block_s));
        if (cli_write_json(doc, json_path) != 0)
            rc = 1;
        json_decref(doc);
    }
    if (plot_dir && plot_curve(&r, plot_dir, s.name) != 0)
        rc = 1;
    scenario_free(&s);
out:
    cli_list_free(&sets);
    return rc;
}
