/* Pictures through gnuplot: the scripts live in plots/ (never as strings in C); this module
 * only finds them, passes their variables and checks that gnuplot drew something. Used by
 * `dtsim sweep --plot` and by the plan report. */
#ifndef DTSIM_SIM_SWEEP_PLOT_H
#define DTSIM_SIM_SWEEP_PLOT_H

#include <jansson.h>
#include "config.h"
#include "sweep.h"

/* 1 when a gnuplot executable can be started. */
int sweep_gnuplot_available(void);

/* Runs plots/SCRIPT twice, writing OUT_PREFIX.png and OUT_PREFIX.svg. vars: gnuplot
 * assignments for the script ("datafile='x.csv'; xcol='a.b'"), without out and fmt.
 * Paths must not contain a single quote (gnuplot's string delimiter). 0, or -1 with err. */
int sweep_gnuplot(const char *script, const char *vars, const char *out_prefix, config_error *err);

/* Folder of the plot scripts: $DTSIM_ROOT/plots, else the source tree's plots/. */
void sweep_plots_dir(char *buf, size_t n);

/* The sweep's pictures from DIR/sweep.csv: throughput and MFU, step-time breakdown and memory
 * against the first varied path (a line per value of the second); scaling with the ideal line
 * when the GPU count changes; the bubble against (p-1)/(m+p-1) when the first path changes the
 * micro-batches per pipeline (global or micro batch size). stages and per_replica (micro-batch
 * x DP of the base scenario) and global_batch describe the base scenario. Prints what it drew.
 * 0, or -1 with err. */
typedef struct {
    const char *dir, *title;
    const sweep_spec *vary;    /* the --vary dimensions, in order */
    int stages, vpp;           /* base pipeline stages p and chunks per stage v */
    long long micro_batch, dp, global_batch;
} sweep_plot_spec;
int sweep_plot_all(const sweep_plot_spec *spec, json_t *rows, config_error *err);

#endif
