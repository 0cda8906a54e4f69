/* Sweeps: the cartesian product of --vary values (or, zipped, their i-th values together),
 * each point loaded through the scenario loader (so invalid combinations are reported with the
 * loader's reason) and simulated; rows with the varied values and every metric of
 * `dtsim run --json`, flattened with dots. */
#ifndef DTSIM_SIM_SWEEP_H
#define DTSIM_SIM_SWEEP_H

#include <stdio.h>
#include <jansson.h>
#include "config.h"
#include "progress.h"
#include "budget.h"

#define SWEEP_MAX_DIMS 8
#define SWEEP_MAX_VALUES 256

typedef struct {
    char path[256];
    int count;
    char *values[SWEEP_MAX_VALUES]; /* owned; each a JSON text or a bare string */
} sweep_dim;

typedef struct {
    int dims;
    int zip; /* 1: point i takes the i-th value of every dimension (equal counts), not the product */
    int full; /* 1: every point replays every micro-batch (dtsim run --full), not the fold */
    const budget_limits *limits; /* each point's replays held to them as dtsim run holds its step's
                                    (budget_gate_allow, from 0 s at every point, so a point's result
                                    does not depend on the points before it or the shard); NULL:
                                    none. A point refused gets the refusal as its error */
    sweep_dim dim[SWEEP_MAX_DIMS];
} sweep_spec;

/* Parses "PATH=V1,V2,..." (commas inside [], {} or quotes do not split) into spec. */
int sweep_add_vary(sweep_spec *spec, const char *arg, config_error *err);
void sweep_spec_free(sweep_spec *spec);
long sweep_points(const sweep_spec *spec);
/* With zip set: 0 when every dimension has as many values as the first, else -1 with err. */
int sweep_check_zip(const sweep_spec *spec, config_error *err);
/* 0 when no point repeats another (a value given twice in a dimension, or, zipped, a point's
 * values all those of an earlier point), else -1 with err naming the --vary and the values. */
int sweep_check_repeats(const sweep_spec *spec, config_error *err);
/* Point `point`'s value index in each dimension: of the product in odometer order (the last
 * --vary fastest), or, zipped, the point-th of each. */
void sweep_point_values(const sweep_spec *spec, long point, int idx[SWEEP_MAX_DIMS]);

/* Runs the points of the scenario file with base overrides whose index i has i % shard_n ==
 * shard_k (0 and 1: all); rows is a JSON array of flat objects (varied paths first, then the
 * metrics, "error" last: "" when the point ran), and points (when not NULL) their indices;
 * the points passed are counted on progress (NULL: none). */
int sweep_run(const char *scenario_path, const char *const *base_sets, int n_base, const sweep_spec *spec,
              int shard_k, int shard_n, json_t **rows, json_t **points, config_error *err,
              progress_meter *progress);

/* What sweep_run would take: its points' runs estimated one by one (budget_estimate_step: what
 * each runs first, the fold's first short replays where it folds), from
 * SWEEP_ESTIMATE_SAMPLE of them spread over the sweep when there are more, scaled to all; the
 * memory is the largest point's. 0, or -1 with err. */
#define SWEEP_ESTIMATE_SAMPLE 32
int sweep_estimate(const char *scenario_path, const char *const *base_sets, int n_base, const sweep_spec *spec,
                   work_estimate *e, config_error *err);

/* Gives every row every key of the fullest row, in its order (failed points lack metrics). */
json_t *sweep_align_rows(json_t *rows);

/* Merges DIR/part-*.json (from --shard runs) into rows in point order; checks every point of the
 * sweep is there exactly once. */
/* What a sweep is, as 8 hex digits: zlib's CRC32 of the scenario file's JSON (keys sorted), the
 * --set overrides and the --vary dimensions. Every part of a sharded sweep carries it. 0, or -1. */
int sweep_identity(const char *scenario_path, const char *const *base_sets, int n_base, const sweep_spec *spec,
                   char out[9], config_error *err);
/* One shard's part file: {total, points, rows, sweep_id, rows_crc32}, rows_crc32 sealing points
 * and rows (sweep_merge_parts checks both). Takes the references to points and rows. */
json_t *sweep_part(long total, json_t *points, json_t *rows, const char *sweep_id);
/* Gathers dir's part-K-of-N.json files into rows: every point exactly once, every part sealed,
 * of one sweep, and of the sweep `expect_id` when not NULL. 0, or -1 with err naming the file. */
int sweep_merge_parts(const char *dir, const char *expect_id, json_t **rows, config_error *err);

/* Prints rows as a table: the varied values, step time, tokens/s, MFU and memory per GPU (or
 * the reason a point was skipped), the first max_rows of them and how many more there are. */
void sweep_print_table(FILE *f, json_t *rows, size_t max_rows);

/* Writes rows as CSV (columns = the first row's keys, in order) to path (temp + rename). */
int sweep_write_csv(json_t *rows, const char *path, config_error *err);
#endif
