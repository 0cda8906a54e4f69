/* dtsim sweep SCENARIO.json --vary PATH=V1,V2,... [--vary ...] [--out DIR] [--plot] [--set P=V]... */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "sweep.h"

#ifndef DTSIM_SOURCE_DIR
#define DTSIM_SOURCE_DIR "."
#endif

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtsim sweep SCENARIO.json --vary PATH=V1,V2,... [--vary ...] [options]\n"
            "Simulates every combination of the varied values (the last --vary changes fastest),\n"
            "skipping invalid combinations with the reason, and writes DIR/sweep.json and\n"
            "DIR/sweep.csv: one row per point, the varied values then every metric of\n"
            "'dtsim run --json' (nested keys joined with dots), and \"error\".\n\n"
            "  --vary PATH=V1,...  a scenario path and its values (JSON where they parse)\n"
            "  --out DIR           output folder (default sweep-out)\n"
            "  --plot              PNG and SVG pictures from plots/*.gp (gnuplot)\n"
            "  --set PATH=VALUE    a fixed override for every point (repeatable)\n"
            "  --shard K/N         compute only the points i with i %% N == K, into DIR/part-K-of-N.json\n"
            "                      (a distributed sweep: scripts/sweep_mpirun.sh deals them to MPI ranks)\n"
            "  --merge             gather DIR/part-*.json into DIR/sweep.json and .csv (same as a local run)\n"
            "exit: 0 ok, 2 bad input (before any run), 1 runtime failure\n");
}

static void progress(long done, long total)
{
    if (!isatty(2))
        return;
    int width = 40, fill = (int)(width * done / (total ? total : 1));
    fprintf(stderr, "\r  [%.*s%*s] %ld/%ld points", fill, "########################################", width - fill, "",
            done, total);
    if (done == total)
        fputc('\n', stderr);
}

static int plot(const char *script, const char *csv, const char *xcol, const char *out_prefix, const char *title,
                const char *extra)
{
    const char *root = getenv("DTSIM_ROOT");
    char cmd[8192];
    const char *fmts[] = {"png", "svg"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd,
                 "gnuplot -e \"datafile='%s'; xcol='%s'; out='%s.%s'; fmt='%s'; plottitle='%s'%s\" '%s/plots/%s'", csv,
                 xcol, out_prefix, fmts[i], fmts[i], title, extra, root && *root ? root : DTSIM_SOURCE_DIR, script);
        if (system(cmd) != 0) {
            fprintf(stderr, "dtsim sweep: --plot: gnuplot failed on %s (is gnuplot installed?)\n", script);
            return -1;
        }
    }
    return 0;
}

int cli_sweep(int argc, char **argv)
{
    const char *path = NULL, *out = "sweep-out";
    const char **sets = calloc((size_t)argc + 1, sizeof *sets);
    int n_sets = 0, want_plot = 0, rc = 2, shard_k = 0, shard_n = 1, merge = 0;
    sweep_spec spec;
    memset(&spec, 0, sizeof spec);
    config_error err;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(a, "--vary") && v) {
            if (sweep_add_vary(&spec, v, &err) != 0) {
                fprintf(stderr, "dtsim sweep: %s\n", err.msg);
                goto out;
            }
            i++;
        } else if (!strcmp(a, "--out") && v) {
            out = argv[++i];
        } else if (!strcmp(a, "--set") && v) {
            sets[n_sets++] = argv[++i];
        } else if (!strcmp(a, "--plot")) {
            want_plot = 1;
        } else if (!strcmp(a, "--merge")) {
            merge = 1;
        } else if (!strcmp(a, "--shard") && v) {
            if (sscanf(v, "%d/%d", &shard_k, &shard_n) != 2 || shard_n < 1 || shard_k < 0 || shard_k >= shard_n) {
                fprintf(stderr, "dtsim sweep: --shard '%s': expected K/N with 0 <= K < N\n", v);
                goto out;
            }
            i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "dtsim sweep: unknown option or missing value: %s (see dtsim sweep --help)\n", a);
            goto out;
        } else if (!path) {
            path = a;
        } else {
            fprintf(stderr, "dtsim sweep: one scenario file expected\n");
            goto out;
        }
    }
    if (!path || (spec.dims == 0 && !merge)) {
        usage(stderr);
        goto out;
    }
    if (sweep_points(&spec) > 1000000) {
        fprintf(stderr, "dtsim sweep: %ld points is over the limit of 1,000,000\n", sweep_points(&spec));
        goto out;
    }
    scenario_config probe;
    if (scenario_load(path, sets, n_sets, &probe, &err) != 0) {
        fprintf(stderr, "dtsim: %s\n", err.msg);
        goto out;
    }
    char title[160];
    snprintf(title, sizeof title, "%s", probe.name);
    int probe_pp = probe.parallel.pp;
    long long probe_per = probe.training.micro_batch_size * probe.parallel.dp;
    scenario_free(&probe);
    json_t *rows, *points = NULL;
    if (merge) {
        if (sweep_merge_parts(out, &rows, &err) != 0) {
            fprintf(stderr, "dtsim sweep: --merge: %s\n", err.msg);
            goto out;
        }
    } else if (sweep_run(path, sets, n_sets, &spec, shard_k, shard_n, &rows, &points, &err, progress) != 0) {
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
    if (shard_n > 1) {
        char part[4300];
        snprintf(part, sizeof part, "%s/part-%d-of-%d.json", out, shard_k, shard_n);
        json_t *doc = json_pack("{s:I,s:o,s:O}", "total", (json_int_t)sweep_points(&spec), "points", points, "rows",
                                rows);
        rc = cli_write_json(doc, part) ? 1 : 0;
        if (rc == 0)
            printf("dtsim sweep: shard %d/%d: %zu points -> %s\n", shard_k, shard_n, json_array_size(rows), part);
        json_decref(doc);
        json_decref(rows);
        goto out;
    }
    json_decref(points);
    char jpath[4200], cpath[4200], prefix[4200];
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
        printf("dtsim sweep: %zu points (%ld skipped as invalid) -> %s, %s\n", json_array_size(rows), failed, jpath,
               cpath);
        rc = 0;
    } else {
        fprintf(stderr, "dtsim sweep: %s\n", err.msg);
    }
    json_decref(doc);
    if (rc == 0 && want_plot && spec.dims == 0) {
        fprintf(stderr, "dtsim sweep: --plot with --merge needs the --vary of the sweep (for the x axis)\n");
        rc = 2;
    }
    if (rc == 0 && want_plot) {
        static const char *scripts[][2] = {{"sweep_throughput.gp", "throughput"},
                                           {"sweep_breakdown.gp", "breakdown"},
                                           {"sweep_memory.gp", "memory"}};
        for (int s = 0; s < 3 && rc == 0; s++) {
            snprintf(prefix, sizeof prefix, "%s/%s", out, scripts[s][1]);
            if (plot(scripts[s][0], cpath, spec.dim[0].path, prefix, title, "") != 0)
                rc = 1;
        }
        /* Scaling when the sweep changes the GPU count; the bubble against its closed form when
         * it changes the micro-batches per pipeline through the global batch. */
        double g0 = -1;
        int gpus_vary = 0;
        json_array_foreach(rows, i, row) {
            json_t *g = json_object_get(row, "gpus");
            if (json_is_number(g)) {
                if (g0 >= 0 && json_number_value(g) != g0)
                    gpus_vary = 1;
                g0 = json_number_value(g);
            }
        }
        if (rc == 0 && gpus_vary) {
            snprintf(prefix, sizeof prefix, "%s/scaling", out);
            rc = plot("sweep_scaling.gp", cpath, spec.dim[0].path, prefix, title, "") ? 1 : 0;
            if (rc == 0)
                printf("dtsim sweep: scaling with the ideal line in %s/scaling.{png,svg}\n", out);
        }
        if (rc == 0 && !strcmp(spec.dim[0].path, "training.global_batch_size") && probe_pp > 1) {
            char extra[96];
            snprintf(extra, sizeof extra, "; stages=%d; per=%lld", probe_pp, probe_per);
            snprintf(prefix, sizeof prefix, "%s/bubble", out);
            rc = plot("sweep_bubble.gp", cpath, spec.dim[0].path, prefix, title, extra) ? 1 : 0;
            if (rc == 0)
                printf("dtsim sweep: bubble against (p-1)/(m+p-1) in %s/bubble.{png,svg}\n", out);
        }
        if (rc == 0)
            printf("dtsim sweep: pictures in %s/{throughput,breakdown,memory}.{png,svg}\n", out);
    }
    json_decref(rows);
out:
    sweep_spec_free(&spec);
    free(sets);
    return rc;
}
