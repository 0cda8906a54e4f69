/* dtcal import-gemm: GEMM measurements made by another tool (cuBLAS sweeps, torch.matmul
 * benchmarks) read from CSV into the calibration's "gemm" tables (DESIGN.md, "Calibration").
 *
 * Columns are found by their header (any case, spaces around it dropped; others are ignored):
 *   m, n, k            required: the GEMM's shape (whole numbers, 1..1e9);
 *   tflops | tflop/s   its rate, or else
 *   time               with a unit column (unit | time_unit: ns, us, ms, s), or a header that
 *                      carries the unit: time_ns, time_us, time_ms, time_s, "time (ms)", ...;
 *                      TFLOP/s = 2 m n k / time;
 *   dtype | precision  optional: fp32, tf32, fp16, bf16, fp8 and aliases (torch.bfloat16,
 *                      bfloat16, float16, half, float32, float8_e4m3fn, ...); without it every
 *                      row has the --precision given;
 *   batch | b          optional: only single GEMMs (1) are accepted;
 *   gpu | device       optional: names the device when a new calibration is written.
 * Any column may be named explicitly (--column tflops=tflops_p50). Rows may be selected by other
 * columns (--where backend=torch). Repeated shapes (within a file or across files) keep the
 * median of their rates. */
#ifndef DTSIM_CALIBRATE_GEMM_IMPORT_H
#define DTSIM_CALIBRATE_GEMM_IMPORT_H
#include <jansson.h>
#include <stddef.h>

#define GEMM_PRECISIONS 5
/* The calibration's keys, in dtsim's order: fp32, tf32, fp16, bf16, fp8. */
extern const char *const gemm_precision_names[GEMM_PRECISIONS];
/* A precision name or alias (case ignored, "torch." prefix allowed) -> its index, or -1. */
int gemm_precision_parse(const char *name);

enum { GF_M, GF_N, GF_K, GF_TFLOPS, GF_TIME, GF_UNIT, GF_DTYPE, GF_FIELDS };
/* The names --column takes: m, n, k, tflops, time, unit, dtype. */
extern const char *const gemm_field_names[GF_FIELDS];

#define GEMM_WHERE_MAX 8
typedef struct {
    int precision;                    /* -1: none given */
    const char *column[GF_FIELDS];    /* headers named explicitly (NULL: found by name) */
    const char *where_column[GEMM_WHERE_MAX], *where_value[GEMM_WHERE_MAX];
    int nwhere;
} gemm_import_options;

typedef struct {
    int precision;
    double m, n, k, tflops;
} gemm_sample;

typedef struct {
    gemm_sample *v;
    size_t n, cap;
    char device[256];   /* the gpu/device column's value where every kept row agrees */
    int device_seen;    /* 0 none yet, 1 one value, 2 several */
} gemm_samples;

typedef struct {
    long rows, kept, left_out; /* data rows, rows kept, rows --where or --precision left out */
} gemm_file_stats;

/* Reads one CSV and appends its rows to out. 0, or -1 with err naming the file, the line and
 * the column. Nothing is appended on failure. */
int gemm_import_csv(const char *path, const gemm_import_options *o, gemm_samples *out, gemm_file_stats *stats,
                    char *err, size_t errlen);
/* {"bf16": [{"m", "n", "k", "tflops"}, ...], ...}: one point per shape and precision (the
 * median of its rates), sorted by m, n, k; shapes[p] the count per precision. */
json_t *gemm_import_tables(const gemm_samples *s, int shapes[GEMM_PRECISIONS]);
void gemm_samples_free(gemm_samples *s);
#endif
