/* dtsim faults SCENARIO.json [--runs N] [--json FILE|-] [--plot DIR] [--set PATH=VALUE]... */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "faults.h"

#ifndef DTSIM_SOURCE_DIR
#define DTSIM_SOURCE_DIR "."
#endif

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
            "exit: 0 ok, 2 bad input, 1 runtime failure\n");
}

static json_t *stat_json(faults_stat s)
{
    return json_pack("{s:f,s:f,s:f,s:f}", "mean", s.mean, "p5", s.p5, "p50", s.p50, "p95", s.p95);
}

static int plot_curve(const faults_report *r, const char *dir, const char *title)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "dtsim faults: --plot %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char data[4200], cmd[9000];
    snprintf(data, sizeof data, "%s/goodput_vs_interval.dat", dir);
    FILE *f = fopen(data, "w");
    if (!f)
        return -1;
    fprintf(f, "# checkpoint_interval_s mean_goodput\n");
    for (int i = 0; i < r->curve_points; i++)
        fprintf(f, "%.6g %.6g\n", r->curve_interval_s[i], r->curve_goodput[i]);
    fclose(f);
    const char *root = getenv("DTSIM_ROOT");
    const char *fmts[] = {"png", "svg"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd,
                 "gnuplot -e \"datafile='%s'; out='%s/goodput_vs_interval.%s'; fmt='%s'; plottitle='%s'; "
                 "optimum=%g; youngdaly=%g\" '%s/plots/faults_goodput.gp'",
                 data, dir, fmts[i], fmts[i], title, r->optimal_checkpoint_interval_s, r->young_daly_interval_s,
                 root && *root ? root : DTSIM_SOURCE_DIR);
        if (system(cmd) != 0) {
            fprintf(stderr, "dtsim faults: --plot: gnuplot failed\n");
            return -1;
        }
    }
    return 0;
}

int cli_faults(int argc, char **argv)
{
    const char *path = NULL, *json_path = NULL, *plot_dir = NULL;
    const char **sets = calloc((size_t)argc + 1, sizeof *sets);
    int n_sets = 0, runs = 100, rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(a, "--runs") && v) {
            char *end;
            long n = strtol(v, &end, 10);
            if (!*v || *end || n < 1 || n > 100000) {
                fprintf(stderr, "dtsim faults: --runs: '%s' is not a whole number in 1..100000\n", v);
                goto out;
            }
            runs = (int)n;
            i++;
        } else if (!strcmp(a, "--json") && v) {
            json_path = argv[++i];
        } else if (!strcmp(a, "--plot") && v) {
            plot_dir = argv[++i];
        } else if (!strcmp(a, "--set") && v) {
            sets[n_sets++] = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "dtsim faults: unknown option or missing value: %s (see dtsim faults --help)\n", a);
            goto out;
        } else if (!path) {
            path = a;
        } else {
            fprintf(stderr, "dtsim faults: one scenario file expected\n");
            goto out;
        }
    }
    if (!path) {
        usage(stderr);
        goto out;
    }
    scenario_config s;
    config_error err;
    if (scenario_load(path, sets, n_sets, &s, &err) != 0) {
        fprintf(stderr, "dtsim: %s\n", err.msg);
        goto out;
    }
    if (s.faults.failure_trace[0]) {
        fprintf(stderr, "dtsim faults: %s: faults.failure_trace: replaying failure traces is not implemented yet\n",
                path);
        scenario_free(&s);
        goto out;
    }
    faults_report r;
    if (faults_run(&s, runs, &r, &err) != 0) {
        fprintf(stderr, "dtsim faults: %s\n", err.msg);
        scenario_free(&s);
        rc = 1;
        goto out;
    }
    FILE *h = json_path && !strcmp(json_path, "-") ? stderr : stdout;
    fprintf(h, "dtsim faults: %s, %d GPUs, %d runs\n", s.name, scenario_gpus(&s), runs);
    fprintf(h, "  step %.3f s (%.0f tokens/s); checkpoint %.2f TB: blocks %.2f s (%s), written in %.1f s, restored in "
               "%.1f s\n",
            r.step_time_s, r.tokens_per_s, r.checkpoint_bytes / 1e12, r.checkpoint_block_s,
            s.faults.checkpoint_async ? "async" : "sync", r.checkpoint_write_s, r.restore_s);
    fprintf(h, "  system MTBF %.2f h; expected failures over %.0f days N x T / MTBF = %.1f\n", r.system_mtbf_hours,
            s.faults.horizon_days, r.expected_failures);
    fprintf(h, "  %-22s %10s %10s %10s %10s\n", "", "mean", "p5", "p50", "p95");
    fprintf(h, "  %-22s %10.1f %10.1f %10.1f %10.1f\n", "interruptions", r.interruptions.mean, r.interruptions.p5,
            r.interruptions.p50, r.interruptions.p95);
    fprintf(h, "  %-22s %9.2f%% %9.2f%% %9.2f%% %9.2f%%\n", "goodput", 100 * r.goodput.mean, 100 * r.goodput.p5,
            100 * r.goodput.p50, 100 * r.goodput.p95);
    for (int c = 0; c < LOSS_COUNT; c++)
        fprintf(h, "  lost h: %-14s %10.1f %10.1f %10.1f %10.1f\n", faults_loss_name(c), r.lost_hours[c].mean,
                r.lost_hours[c].p5, r.lost_hours[c].p50, r.lost_hours[c].p95);
    if (r.target_train_s > 0)
        fprintf(h, "  %-22s %10.1f %10.1f %10.1f %10.1f   (%.3g tokens; %.1f days without failures)\n",
                "days to train", r.days_to_train.mean, r.days_to_train.p5, r.days_to_train.p50, r.days_to_train.p95,
                s.training.tokens, r.target_train_s / 86400);
    fprintf(h, "  checkpoint interval: scenario %.0f s (goodput %.2f%%), optimum %.0f s (%.2f%%), Young/Daly %.0f s\n",
            s.faults.checkpoint_interval_s, 100 * r.goodput_at_scenario_interval, r.optimal_checkpoint_interval_s,
            100 * r.optimal_goodput, r.young_daly_interval_s);
    rc = 0;
    if (json_path) {
        json_t *lost = json_object();
        for (int c = 0; c < LOSS_COUNT; c++)
            json_object_set_new(lost, faults_loss_name(c), stat_json(r.lost_hours[c]));
        json_t *doc = json_pack("{s:s,s:i,s:i,s:o,s:o,s:o,s:o,s:f,s:f,s:f,s:f,s:f}", "scenario", s.name, "gpus",
                                scenario_gpus(&s), "runs", runs, "interruptions", stat_json(r.interruptions), "goodput",
                                stat_json(r.goodput), "lost_hours", lost, "days_to_train", stat_json(r.days_to_train),
                                "optimal_checkpoint_interval_s", r.optimal_checkpoint_interval_s,
                                "young_daly_interval_s", r.young_daly_interval_s, "expected_failures",
                                r.expected_failures, "system_mtbf_hours", r.system_mtbf_hours, "step_time_s",
                                r.step_time_s);
        if (cli_write_json(doc, json_path) != 0)
            rc = 1;
        json_decref(doc);
    }
    if (plot_dir && plot_curve(&r, plot_dir, s.name) != 0)
        rc = 1;
    scenario_free(&s);
out:
    free(sets);
    return rc;
}
