/* Strict, typed access to JSON objects for the three loaders: every error names the JSON path,
 * the value and the rule; unknown keys are errors with a "did you mean" for near misses. */
#ifndef DTSIM_SIM_CONFIG_JSON_H
#define DTSIM_SIM_CONFIG_JSON_H

#include <jansson.h>
#include "config.h"

#define CONFIG_MAX_FILE_BYTES (64L * 1024 * 1024)
/* The significant digits dtsim writes its JSON outputs' reals with (commands/cli_io.c); a seal
 * over such an output (a sweep part's rows_crc32) is computed at the same precision, so that it
 * survives the write and the read back. */
#define DTSIM_JSON_REAL_DIGITS 10
/* The same for the calibration files dtcal writes (calibrate/cal_writer.c) and their seal,
 * calibration_crc32, which dtsim and dtcal check when they read one. */
#define DTCAL_JSON_REAL_DIGITS 6

/* Formats a message into err and returns -1, so loaders can `return config_fail(...)`; with err
 * NULL (a caller that asks only whether a rule holds: scenario_validate_batch) it only returns -1.
 * A message past err->msg ends with CONFIG_CUT where it was cut. */
#define CONFIG_CUT "... (message cut)"
int config_fail(config_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Loads a JSON file (object at the top), refusing files over CONFIG_MAX_FILE_BYTES. */
json_t *config_load_file(const char *path, const char *label, config_error *err);

/* Every key of obj must be in allowed (NULL-terminated); "sources" and "notes" are always
 * allowed (free-form provenance). */
int config_check_keys(json_t *obj, const char *path, const char *const *allowed, config_error *err);

/* Typed getters. A missing key takes the default unless required. Numbers must lie in
 * [lo, hi]; with positive set, they must also be > 0. */
int config_int(json_t *obj, const char *path, const char *key, int required, long long def, long long lo,
               long long hi, long long *out, config_error *err);
int config_num(json_t *obj, const char *path, const char *key, int required, double def, double lo, double hi,
               int positive, double *out, config_error *err);
int config_bool(json_t *obj, const char *path, const char *key, int def, int *out, config_error *err);
int config_str(json_t *obj, const char *path, const char *key, int required, const char *def, char *out,
               size_t n, config_error *err);
/* A string that must be one of names (NULL-terminated); *out is its index. */
int config_enum(json_t *obj, const char *path, const char *key, const char *const *names, int def, int *out,
                config_error *err);
/* An optional object member: NULL when absent, error when present but not an object. */
int config_object(json_t *obj, const char *path, const char *key, json_t **out, config_error *err);

/* Applies one "--set" assignment "a.b.c=VALUE" to root (VALUE is JSON where it parses, else a
 * string); missing objects along the path are created. */
int config_apply_override(json_t *root, const char *assignment, config_error *err);

/* Resolves a path named in a file: relative to base_dir first, then to the repository root
 * (env DTSIM_ROOT, else the source tree dtsim was built from). 0 if found. */
int config_resolve_path(const char *name, const char *base_dir, char *out, size_t n);

/* The folder of a file path ("." when none). */
void config_dirname(const char *path, char *out, size_t n);

#endif
