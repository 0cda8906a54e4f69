/* gnuplot driver for sweeps and reports; see sweep_plot.h. */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "sweep_plot.h"
#include "config_json.h"

#ifndef DTSIM_SOURCE_DIR
#define DTSIM_SOURCE_DIR "."
#endif

extern char **environ;

#define SWEEP_PLOT_MAX_TICKS 24 /* more swept values than this: gnuplot's own ticks */

/* posix_spawnp with an argument vector: no shell, so no quoting of paths for one. */
static int spawn_wait(char *const argv[], int quiet)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (quiet) {
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    }
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return -1;
    int st;
    if (waitpid(pid, &st, 0) < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int sweep_gnuplot_available(void)
{
    char *argv[] = {"gnuplot", "--version", NULL};
    return spawn_wait(argv, 1) == 0;
}

void sweep_plots_dir(char *buf, size_t n)
{
    const char *root = getenv("DTSIM_ROOT");
    snprintf(buf, n, "%s/plots", root && *root ? root : DTSIM_SOURCE_DIR);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

int sweep_gnuplot(const char *script, const char *vars, const char *out_prefix, config_error *err)
{
    if (strchr(out_prefix, '\'') || strchr(vars, '\n')) {
        snprintf(err->msg, sizeof err->msg, "picture path '%s' contains a quote, which gnuplot cannot take",
                 out_prefix);
        return -1;
    }
    char dir[4096], script_path[4400];
    sweep_plots_dir(dir, sizeof dir);
    snprintf(script_path, sizeof script_path, "%s/%s", dir, script);
    if (file_size(script_path) < 0) {
        config_fail(err, "plot script %s not found (set DTSIM_ROOT to the dtsim source tree)",
                    script_path);
        return -1;
    }
    static const char *fmts[] = {"png", "svg"};
    for (int i = 0; i < 2; i++) {
        size_t len = strlen(vars) + 2 * strlen(out_prefix) + 64;
        char *e = malloc(len), out[4400];
        if (!e) {
            snprintf(err->msg, sizeof err->msg, "out of memory");
            return -1;
        }
        snprintf(out, sizeof out, "%s.%s", out_prefix, fmts[i]);
        snprintf(e, len, "%s; out='%s'; fmt='%s'", vars, out, fmts[i]);
        char *argv[] = {"gnuplot", "-e", e, script_path, NULL};
        remove(out); /* a stale picture must not pass for a new one */
        int rc = spawn_wait(argv, 0);
        free(e);
        if (rc != 0 || file_size(out) <= 0) {
            config_fail(err, "gnuplot %s did not write %s (%s)", script, out,
                        rc < 0 ? "gnuplot not found" : "see its message above");
            return -1;
        }
    }
    return 0;
}

/* A --vary value as a label word: JSON quotes dropped, spaces and quotes made '_' (gnuplot's
 * word() splits on spaces, and ' ends its strings). */
static void label_word(const char *v, char *buf, size_t n)
{
    size_t k = 0;
    for (; *v && k + 1 < n; v++)
        if (*v != '"')
            buf[k++] = (*v == ' ' || *v == '\'') ? '_' : *v;
    buf[k] = 0;
}

/* Series labels for the line plots: one per combination of the dimensions after the first,
 * in odometer order ("micro_batch_size=1,zero_stage=2"), space-separated. */
static int series_labels(const sweep_spec *v, char *out, size_t n)
{
    int nz = 1;
    for (int d = 1; d < v->dims; d++)
        nz *= v->dim[d].count;
    out[0] = 0;
    if (v->dims < 2 || v->zip) /* zipped: every dimension moves with the first, one line */
        return 1;
    for (int j = 0; j < nz; j++) {
        int rest = j;
        char one[1024] = "";
        for (int d = v->dims - 1; d >= 1; d--) { /* the last dimension changes fastest */
            int idx = rest % v->dim[d].count;
            rest /= v->dim[d].count;
            const char *name = strrchr(v->dim[d].path, '.');
            char w[256], item[sizeof one];
            label_word(v->dim[d].values[idx], w, sizeof w);
            if (snprintf(item, sizeof item, "%s=%s%s%s", name ? name + 1 : v->dim[d].path, w, one[0] ? "," : "",
                         one) >= (int)sizeof item)
                return -1; /* a label this long would be cut: the caller says so */
            memcpy(one, item, sizeof one);
        }
        if (strlen(out) + strlen(one) + 2 >= n)
            return -1; /* too many series to label: the caller says so */
        if (out[0])
            strcat(out, " ");
        strcat(out, one);
    }
    return nz;
}

/* 1 when every value of the first dimension is a JSON number (a numeric x axis). */
static int numeric_dim(const sweep_dim *d)
{
    for (int i = 0; i < d->count; i++) {
        char *end;
        strtod(d->values[i], &end);
        if (end == d->values[i] || *end)
            return 0;
    }
    return 1;
}

static int one(const char *script, const char *vars, const sweep_plot_spec *sp, const char *name,
               config_error *err)
{
    char prefix[4300];
    snprintf(prefix, sizeof prefix, "%s/%s", sp->dir, name);
    if (sweep_gnuplot(script, vars, prefix, err) != 0)
        return -1;
    printf("dtsim sweep: %s.{png,svg}\n", prefix);
    return 0;
}

int sweep_plot_all(const sweep_plot_spec *sp, json_t *rows, config_error *err)
{
    if (strchr(sp->dir, '\'') || strchr(sp->title, '\'')) {
        snprintf(err->msg, sizeof err->msg, "--plot: the output folder or scenario name contains a quote");
        return -1;
    }
    /* Common variables: the data, the x column, the bar labels (every varied path), the series. */
    const sweep_spec *v = sp->vary;
    char labels[2400] = "", series[8192], vars[12000];
    for (int d = 0; d < v->dims; d++)
        snprintf(labels + strlen(labels), sizeof labels - strlen(labels), "%s%s", d ? " " : "", v->dim[d].path);
    int nz = series_labels(v, series, sizeof series);
    if (nz < 0) {
        snprintf(err->msg, sizeof err->msg,
                 "--plot: too many or too long combinations after the first --vary to label as lines");
        return -1;
    }
    /* A numeric x gets a tick at each swept value (up to a readable count) and a log2 axis when
     * the values span 8x or more (GPU counts, batch sizes). */
    char ticks[2048] = "";
    int xnum = numeric_dim(&v->dim[0]), xlog = 0;
    if (xnum) {
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < v->dim[0].count; i++) {
            double x = strtod(v->dim[0].values[i], NULL);
            lo = x < lo ? x : lo;
            hi = x > hi ? x : hi;
            if (v->dim[0].count <= SWEEP_PLOT_MAX_TICKS && strlen(ticks) + strlen(v->dim[0].values[i]) + 2 < sizeof ticks)
                snprintf(ticks + strlen(ticks), sizeof ticks - strlen(ticks), "%s%s", i ? "," : "", v->dim[0].values[i]);
        }
        xlog = lo > 0 && hi >= 8 * lo;
    }
    /* gnuplot reads these as one line of settings: cut short, they would not parse */
    if ((size_t)snprintf(vars, sizeof vars,
                         "datafile='%s/sweep.csv'; xcol='%s'; labelcols='%s'; plottitle='%s'; nz=%d; zvals='%s'; "
                         "xnumeric=%d; xticks='%s'; xlog=%d",
                         sp->dir, v->dim[0].path, labels, sp->title, nz, series, xnum, ticks, xlog) >= sizeof vars) {
        snprintf(err->msg, sizeof err->msg, "--plot: the plots' settings (output folder, titles, series) pass %zu bytes: "
                 "not drawn (a shorter --plot folder or fewer series)", sizeof vars);
        return -1;
    }
    if (one("sweep_throughput.gp", vars, sp, "throughput", err) || one("sweep_breakdown.gp", vars, sp, "breakdown", err) ||
        one("sweep_memory.gp", vars, sp, "memory", err))
        return -1;

    /* Scaling when the GPU count changes from point to point. */
    double g0 = -1;
    int gpus_vary = 0;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        json_t *g = json_object_get(row, "gpus");
        if (json_is_number(g)) {
            if (g0 >= 0 && json_number_value(g) != g0)
                gpus_vary = 1;
            g0 = json_number_value(g);
        }
    }
    if (gpus_vary && one("sweep_scaling.gp", vars, sp, "scaling", err))
        return -1;

    /* The bubble against its closed form when the first path sets the micro-batches m. */
    if (sp->stages > 1 && sp->dp > 0 && sp->micro_batch > 0) {
        char extra[13000];
        int by_global = !strcmp(v->dim[0].path, "training.global_batch_size");
        int by_micro = !strcmp(v->dim[0].path, "training.micro_batch_size");
        if (by_global || by_micro) {
            /* m = global / (micro x DP): per is the fixed factor, inv says which side x is on. */
            long long per = by_global ? sp->micro_batch * sp->dp : sp->global_batch / sp->dp;
            snprintf(extra, sizeof extra, "%s; stages=%d; vpp=%d; per=%lld.0; inv=%d", vars, sp->stages,
                     sp->vpp > 1 ? sp->vpp : 1, per, by_micro);
            if (one("sweep_bubble.gp", extra, sp, "bubble", err))
                return -1;
        }
    }
    return 0;
}
