/* dtsim sweep SCENARIO.json --vary PATH=V1,V2,... [--vary ...] [--zip] [--full] [--out DIR] [--plot]
 *             [--set P=V]... [--progress|--quiet] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli.h"
#include "cli_args.h"
#include "sweep.h"
#include "progress.h"
#include "sweep_plot.h"

#define SWEEP_TABLE_ROWS 200 /* points the printed table shows */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtsim sweep SCENARIO.json --vary PATH=V1,V2,... [--vary ...] [options]\n"
            "Simulates every combination of the varied values (the last --vary changes fastest),\n"
            "skipping invalid combinations with the reason, and writes DIR/sweep.json and\n"
            "DIR/sweep.csv: one row per point, the varied values then every metric of\n"
            "'dtsim run --json' (nested keys joined with dots), and \"error\". Prints the points\n"
            "as a table (the first %d; the files hold all).\n\n"
            "  --vary PATH=V1,...  a scenario path and its values (JSON where they parse)\n"
            "  --zip               point i takes the i-th value of every --vary (as many values\n"
            "                      each), not every combination: e.g. GPUs and batch grown together\n"
            "  --out DIR           output folder (default sweep-out)\n"
            "  --plot              PNG and SVG pictures from plots/*.gp (gnuplot)\n"
            "  --set PATH=VALUE    a fixed override for every point (repeatable)\n"
            "  --full              replay every micro-batch of every point (dtsim run --full); by\n"
            "                      default a step shown periodic is replayed short and extended\n"
            "  --shard K/N         compute only the points i with i %% N == K, into DIR/part-K-of-N.json\n"
            "                      (a distributed sweep: scripts/sweep_mpirun.sh deals them to MPI ranks)\n"
            "  --merge             gather DIR/part-*.json into DIR/sweep.json and .csv (same as a local run)\n"
            "  --progress          the points done on stderr every 2 s, with the time left (default:\n"
            "                      only when stderr is a terminal)\n"
            "  --quiet             no progress, even on a terminal\n"
            BUDGET_HELP
            "exit: 0 ok, 2 bad input (before any run), 1 runtime failure\n",
            SWEEP_TABLE_ROWS);
}

static int add_vary(const char *command, const char *flag, const char *value, void *spec)
{
    config_error err;
    if (sweep_add_vary(spec, value, &err) != 0) {
        fprintf(stderr, "dtsim %s: %s\n", command, err.msg);
        return -1;
    }
    return 0;
}

typedef struct {
    int k, n; /* --shard K/N */
} shard_arg;

static int take_shard(const char *command, const char *flag, const char *value, void *shard)
{
    shard_arg *a = shard;
    if (sscanf(value, "%d/%d", &a->k, &a->n) != 2 || a->n < 1 || a->k < 0 || a->k >= a->n) {
        fprintf(stderr, "dtsim %s: %s '%s': expected K/N with 0 <= K < N\n", command, flag, value);
        return -1;
    }
    return 0;
}

int cli_sweep(int argc, char **argv)
{
    const char *path = NULL, *out = "sweep-out";
    cli_list sets = {0};
    int want_plot = 0, merge = 0, progress = 0, quiet = 0;
    shard_arg shard = {0, 1};
    sweep_spec spec;
    memset(&spec, 0, sizeof spec);
    budget_limits limits = {0, 0};
    const cli_option options[] = {
        BUDGET_OPTIONS(&limits),
        CLI_OPT_CALL_REPEATABLE("vary", add_vary, &spec),
        CLI_OPT_STRING("out", &out),
        CLI_OPT_APPEND("set", &sets),
        CLI_OPT_FLAG("plot", &want_plot),
        CLI_OPT_FLAG("zip", &spec.zip),
        CLI_OPT_FLAG("full", &spec.full),
        CLI_OPT_FLAG("merge", &merge),
        CLI_OPT_CALL("shard", take_shard, &shard),
        CLI_OPT_FLAG("progress", &progress),
        CLI_OPT_FLAG("quiet", &quiet),
        CLI_OPT_END,
    };
    const cli_output outs[] = {CLI_OUT_FOLDER("--out", &out), CLI_OUT_END};
    const cli_spec cli = {"sweep", usage, options, &path, "scenario file", outs};
    config_error err;
    int rc = cli_parse_args(&cli, argc, argv);
    if (rc != CLI_GO_ON)
        goto out;
    rc = 2;
    if (!path || (spec.dims == 0 && !merge)) {
        usage(stderr);
        goto out;
    }
    if (merge && shard.n > 1) { /* a merge gathers every shard's part; it computes none */
        fprintf(stderr, "dtsim sweep: --merge and --shard %d/%d: a merge gathers the parts of every shard; "
                        "give --shard to the runs that compute them\n", shard.k, shard.n);
        goto out;
    }
    if (sweep_check_zip(&spec, &err) != 0 || sweep_check_repeats(&spec, &err) != 0) {
        fprintf(stderr, "dtsim sweep: %s\n", err.msg);
        goto out;
    }
    if (sweep_points(&spec) > 1000000) {
        fprintf(stderr, "dtsim sweep: %ld points is over the limit of 1,000,000\n", sweep_points(&spec));
        goto out;
    }
    scenario_config probe;
    if (scenario_load(path, sets.items, sets.count, &probe, &err) != 0) {
        fprintf(stderr, "dtsim: %s\n", err.msg);
        goto out;
    }
    char title[160];
    snprintf(title, sizeof title, "%s", probe.name);
    sweep_plot_spec ps = {.dir = out, .title = title, .vary = &spec, .stages = probe.parallel.pp,
                          .vpp = probe.parallel.vpp, .micro_batch = probe.training.micro_batch_size,
                          .dp = probe.parallel.dp, .global_batch = probe.training.global_batch_size};
    scenario_free(&probe);
    if (!merge) { /* this process's share of the points */
        work_estimate est;
        if (sweep_estimate(path, (const char *const *)sets.items, sets.count, &spec, &est, &err) != 0) {
            fprintf(stderr, "dtsim sweep: %s\n", err.msg);
            goto out;
        }
        est.seconds /= shard.n;
        if (budget_check("sweep", &est, &limits) != 0)
            goto out;
        spec.limits = &limits; /* and again before each replay of a point (sweep.h) */
    }
    if (want_plot && !sweep_gnuplot_available()) {
        fprintf(stderr, "dtsim sweep: --plot needs gnuplot, which cannot be started (install gnuplot-nox)\n");
        goto out;
    }
    json_t *rows, *points = NULL;
    progress_meter meter;
    progress_start(&meter, "dtsim sweep", "point", progress_mode_of(progress, quiet));
    /* what a shard's part names and a merge with its --vary checks the parts against */
    char sweep_id[9] = "";
    if ((shard.n > 1 || (merge && spec.dims > 0)) &&
        sweep_identity(path, (const char *const *)sets.items, sets.count, &spec, sweep_id, &err) != 0) {
        fprintf(stderr, "dtsim sweep: %s\n", err.msg);
        goto out;
    }
    if (merge) {
        /* with its --vary, the merge checks the parts are of this very sweep; without, of one sweep */
        if (sweep_merge_parts(out, spec.dims > 0 ? sweep_id : NULL, &rows, &err) != 0) {
            fprintf(stderr, "dtsim sweep: --merge: %s\n", err.msg);
            goto out;
        }
    } else if (sweep_run(path, sets.items, sets.count, &spec, shard.k, shard.n, &rows, &points, &err,
                         &meter) != 0) {
        fprintf(stderr, "dtsim sweep: %s\n", err.msg);
        goto out;
    }
    rc = 1;
    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "dtsim sweep: --out %s: %s\n", out, strerror(errno));
        json_decref(rows);
        json_decref(points);
        goto out;
    }
    if (shard.n > 1) {
        char part[4300];
        snprintf(part, sizeof part, "%s/part-%d-of-%d.json", out, shard.k, shard.n);
        json_t *doc = sweep_part(sweep_points(&spec), points, json_incref(rows), sweep_id);
        rc = cli_write_json(doc, part) ? 1 : 0;
        if (rc == 0)
            printf("dtsim sweep: shard %d/%d: %zu points -> %s\n", shard.k, shard.n, json_array_size(rows), part);
        json_decref(doc);
        json_decref(rows);
        goto out;
    }
    json_decref(points);
    char jpath[4200], cpath[4200];
    snprintf(jpath, sizeof jpath, "%s/sweep.json", out);
    snprintf(cpath, sizeof cpath, "%s/sweep.csv", out);
    long failed = 0;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) if (*json_string_value(json_object_get(row, "error"))) {
        failed++;
        fprintf(stderr, "  skipped point %zu: %s\n", i + 1, json_string_value(json_object_get(row, "error")));
    }
    json_t *doc = json_pack("{s:O}", "rows", rows);
    if (cli_write_json(doc, jpath) == 0 && sweep_write_csv(rows, cpath, &err) == 0) {
        printf("dtsim sweep: %zu points (%ld skipped: invalid or over the limits) -> %s, %s\n", json_array_size(rows),
               failed, jpath, cpath);
        sweep_print_table(stdout, rows, SWEEP_TABLE_ROWS);
        rc = 0;
    } else {
        fprintf(stderr, "dtsim sweep: %s\n", err.msg);
    }
    json_decref(doc);
    if (rc == 0 && want_plot && spec.dims == 0) {
        fprintf(stderr, "dtsim sweep: --plot with --merge needs the --vary of the sweep (for the x axis)\n");
        rc = 2;
    }
    if (rc == 0 && want_plot && sweep_plot_all(&ps, rows, &err) != 0) {
        fprintf(stderr, "dtsim sweep: --plot: %s\n", err.msg);
        rc = 1;
    }
    json_decref(rows);
out:
    sweep_spec_free(&spec);
    cli_list_free(&sets);
    return rc;
}
