/* Sweeps; see sweep.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "run.h"
#include "sweep.h"
#include "config_json.h"
#include "json_seal.h"
#include "atomic_file.h"

int sweep_add_vary(sweep_spec *spec, const char *arg, config_error *err)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1]) {
        snprintf(err->msg, sizeof err->msg, "--vary '%s': expected PATH=V1,V2,...", arg);
        return -1;
    }
    if (spec->dims == SWEEP_MAX_DIMS) {
        snprintf(err->msg, sizeof err->msg, "--vary: at most %d dimensions", SWEEP_MAX_DIMS);
        return -1;
    }
    sweep_dim *d = &spec->dim[spec->dims];
    memset(d, 0, sizeof *d);
    if ((size_t)(eq - arg) >= sizeof d->path) {
        snprintf(err->msg, sizeof err->msg, "--vary: path too long");
        return -1;
    }
    memcpy(d->path, arg, (size_t)(eq - arg));
    for (int i = 0; i < spec->dims; i++)
        if (!strcmp(spec->dim[i].path, d->path)) {
            snprintf(err->msg, sizeof err->msg, "--vary %s: given twice (give all its values in one --vary)", d->path);
            return -1;
        }
    const char *p = eq + 1, *start = p;
    int depth = 0, quoted = 0;
    for (;; p++) {
        if (*p == '"' && (p == start || p[-1] != '\\'))
            quoted = !quoted;
        else if (!quoted && (*p == '[' || *p == '{'))
            depth++;
        else if (!quoted && (*p == ']' || *p == '}'))
            depth--;
        if (*p == 0 || (*p == ',' && depth == 0 && !quoted)) {
            size_t len = (size_t)(p - start);
            if (len == 0) {
                snprintf(err->msg, sizeof err->msg, "--vary %s: empty value in '%s'", d->path, eq + 1);
                sweep_spec_free(spec);
                return -1;
            }
            if (d->count == SWEEP_MAX_VALUES) {
                snprintf(err->msg, sizeof err->msg, "--vary %s: more than %d values", d->path, SWEEP_MAX_VALUES);
                return -1;
            }
            d->values[d->count] = strndup(start, len);
            d->count++;
            if (*p == 0)
                break;
            start = p + 1;
        }
    }
    spec->dims++;
    return 0;
}

void sweep_spec_free(sweep_spec *spec)
{
    for (int i = 0; i <= spec->dims && i < SWEEP_MAX_DIMS; i++)
        for (int j = 0; j < spec->dim[i].count; j++) {
            free(spec->dim[i].values[j]);
            spec->dim[i].values[j] = NULL;
        }
}

int sweep_check_zip(const sweep_spec *spec, config_error *err)
{
    for (int d = 1; spec->zip && d < spec->dims; d++)
        if (spec->dim[d].count != spec->dim[0].count) {
            snprintf(err->msg, sizeof err->msg,
                     "--zip: --vary %s has %d values and --vary %s has %d: zipped dimensions take as many each",
                     spec->dim[0].path, spec->dim[0].count, spec->dim[d].path, spec->dim[d].count);
            return -1;
        }
    return 0;
}

static json_t *value_json(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
    return v ? v : json_string(text);
}

int sweep_check_repeats(const sweep_spec *spec, config_error *err)
{
    /* each value as the scenario takes it ("1" and " 1" alike); zipped, whole points repeat */
    for (int d = 0; d < spec->dims; d++) {
        const sweep_dim *dim = &spec->dim[d];
        for (int i = 0; i < dim->count; i++)
            for (int j = i + 1; j < dim->count; j++) {
                int same = 1;
                for (int e = spec->zip ? 0 : d; same && e < (spec->zip ? spec->dims : d + 1); e++) {
                    json_t *a = value_json(spec->dim[e].values[i]), *b = value_json(spec->dim[e].values[j]);
                    same = json_equal(a, b);
                    json_decref(a);
                    json_decref(b);
                }
                if (same) {
                    config_fail(err, "--vary %s: value %d (%s) repeats value %d: the same point%s would run twice",
                                dim->path, j + 1, dim->values[j], i + 1, spec->zip ? ", with every --zip value," : "");
                    return -1;
                }
            }
        if (spec->zip) /* every dimension's pairs compared whole above */
            break;
    }
    return 0;
}

void sweep_point_values(const sweep_spec *spec, long point, int idx[SWEEP_MAX_DIMS])
{
    for (int d = spec->dims - 1; d >= 0; d--) { /* the product's odometer: the last --vary fastest */
        idx[d] = spec->zip ? (int)point : (int)(point % spec->dim[d].count);
        if (!spec->zip)
            point /= spec->dim[d].count;
    }
}

/* The point's overrides "PATH=VALUE" into sets (owned copies in assign, which free_assign frees).
 * 0, or -1 out of memory (none left allocated). */
static int point_sets(const sweep_spec *spec, const int idx[SWEEP_MAX_DIMS], const char **sets,
                      char *assign[SWEEP_MAX_DIMS])
{
    for (int d = 0; d < spec->dims; d++) {
        const char *v = spec->dim[d].values[idx[d]];
        size_t len = strlen(spec->dim[d].path) + strlen(v) + 2;
        assign[d] = malloc(len);
        if (!assign[d]) {
            while (d-- > 0)
                free(assign[d]);
            return -1;
        }
        snprintf(assign[d], len, "%s=%s", spec->dim[d].path, v);
        sets[d] = assign[d];
    }
    return 0;
}

static void free_assign(const sweep_spec *spec, char *assign[SWEEP_MAX_DIMS])
{
    for (int d = 0; d < spec->dims; d++)
        free(assign[d]);
}

long sweep_points(const sweep_spec *spec)
{
    if (spec->zip && spec->dims > 0)
        return spec->dim[0].count;
    long n = 1;
    for (int i = 0; i < spec->dims; i++) {
        n *= spec->dim[i].count;
        if (n > 1000000000L) /* far over any limit: stop before the product overflows */
            return 1000000001L;
    }
    return n;
}

/* Flattens nested objects into "a.b.c" keys of out. */
static void flatten(json_t *obj, const char *prefix, json_t *out)
{
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val) {
        char name[256];
        snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "", key);
        if (json_is_object(val))
            flatten(val, name, out);
        else
            json_object_set(out, name, val);
    }
}

int sweep_estimate(const char *scenario_path, const char *const *base_sets, int n_base, const sweep_spec *spec,
                   work_estimate *e, config_error *err)
{
    long total = sweep_points(spec);
    long sample = total < SWEEP_ESTIMATE_SAMPLE ? total : SWEEP_ESTIMATE_SAMPLE;
    const char **sets = calloc((size_t)n_base + SWEEP_MAX_DIMS + 1, sizeof *sets);
    if (!sets) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return -1;
    }
    for (int i = 0; i < n_base; i++)
        sets[i] = base_sets[i];
    double seconds = 0, bytes = 0;
    long counted = 0;
    for (long k = 0; k < sample; k++) {
        int idx[SWEEP_MAX_DIMS];
        char *assign[SWEEP_MAX_DIMS];
        sweep_point_values(spec, sample > 1 ? k * (total - 1) / (sample - 1) : 0, idx);
        if (point_sets(spec, idx, sets + n_base, assign) != 0) {
            free(sets);
            snprintf(err->msg, sizeof err->msg, "out of memory");
            return -1;
        }
        scenario_config s;
        config_error e2;
        if (scenario_load(scenario_path, sets, n_base + spec->dims, &s, &e2) == 0) { /* invalid points cost nothing */
            work_estimate one;
            budget_estimate_step(&s, spec->full, &one);
            seconds += one.seconds;
            bytes = one.bytes > bytes ? one.bytes : bytes;
            counted++;
            scenario_free(&s);
        }
        free_assign(spec, assign);
    }
    free(sets);
    double scale = sample > 0 ? (double)total / sample : 0;
    if (sample == total)
        snprintf(e->work, sizeof e->work, "%ld points (%ld valid)", total, counted);
    else
        snprintf(e->work, sizeof e->work, "%ld points (from %ld spread over them, %ld valid)", total, sample, counted);
    e->seconds = seconds * scale;
    e->bytes = bytes;
    budget_add_sweep_points((double)total, e); /* loading each point and keeping its row */
    return 0;
}

int sweep_run(const char *scenario_path, const char *const *base_sets, int n_base, const sweep_spec *spec,
              int shard_k, int shard_n, json_t **rows_out, json_t **points_out, config_error *err,
              progress_meter *progress)
{
    if (shard_n < 1)
        shard_n = 1;
    if (sweep_check_zip(spec, err) != 0)
        return -1;
    long total = sweep_points(spec);
    const char **sets = calloc((size_t)n_base + SWEEP_MAX_DIMS + 1, sizeof *sets);
    char *assign[SWEEP_MAX_DIMS];
    for (int i = 0; i < n_base; i++)
        sets[i] = base_sets[i];

    /* Unknown paths and bad syntax stop the sweep before any run: probe each dimension alone. */
    for (int d = 0; d < spec->dims; d++) {
        size_t plen = strlen(spec->dim[d].path) + strlen(spec->dim[d].values[0]) + 2;
        char *probe = malloc(plen);
        if (!probe) {
            snprintf(err->msg, sizeof err->msg, "out of memory");
            free(sets);
            return -1;
        }
        snprintf(probe, plen, "%s=%s", spec->dim[d].path, spec->dim[d].values[0]);
        sets[n_base] = probe;
        scenario_config s;
        config_error e;
        int loaded = scenario_load(scenario_path, sets, n_base + 1, &s, &e);
        free(probe);
        if (loaded == 0) {
            scenario_free(&s);
        } else if (strstr(e.msg, "unknown key") || strstr(e.msg, "--set") || strstr(e.msg, "not an object") ||
                   strstr(e.msg, "cannot read") || strstr(e.msg, ":1:")) {
            /* the loader's message already names the path */
            config_fail(err, "--vary: %s", e.msg);
            free(sets);
            return -1;
        }
    }

    json_t *rows = json_array(), *points = json_array();
    for (long point = shard_k; point < total; point += shard_n) {
        int idx[SWEEP_MAX_DIMS];
        sweep_point_values(spec, point, idx);
        if (point_sets(spec, idx, sets + n_base, assign) != 0) {
            snprintf(err->msg, sizeof err->msg, "out of memory at point %ld", point + 1);
            json_decref(rows);
            json_decref(points);
            free(sets);
            return -1;
        }
        json_array_append_new(points, json_integer(point));
        json_t *row = json_object();
        for (int d = 0; d < spec->dims; d++)
            json_object_set_new(row, spec->dim[d].path, value_json(spec->dim[d].values[idx[d]]));
        scenario_config s;
        config_error e;
        const char *error = "";
        if (scenario_load(scenario_path, sets, n_base + spec->dims, &s, &e) != 0) {
            error = e.msg;
        } else {
            run_result r;
            budget_gate spend = {spec->limits ? *spec->limits : (budget_limits){0, 0}, 0};
            run_gate gate = {budget_gate_allow, &spend};
            if ((spec->full ? run_scenario(&s, &r, &e)
                            : run_scenario_folded_gated(&s, &r, spec->limits ? &gate : NULL, &e)) != 0) {
                error = e.msg;
            } else {
                json_t *res = run_result_to_json(&r);
                json_object_del(res, "scenario");
                json_object_del(res, "folded_from_micro_batches"); /* every row the same columns */
                /* the simulator's own time, not a figure of the step: without it a sweep's files are
                 * the same from run to run and a merge of its shards is its local run's */
                json_object_del(res, "wall_s");
                flatten(res, "", row);
                json_decref(res);
            }
            scenario_free(&s);
        }
        json_object_set_new(row, "error", json_string(error));
        json_array_append_new(rows, row);
        free_assign(spec, assign);
        progress_note(progress, point + 1, total);
    }
    progress_end(progress);
    free(sets);
    *rows_out = sweep_align_rows(rows);
    json_decref(rows);
    if (points_out)
        *points_out = points;
    else
        json_decref(points);
    return 0;
}

json_t *sweep_align_rows(json_t *rows)
{
    /* Rows that failed lack the metric columns: give every row every key (null where absent),
     * in the order of the fullest row, so CSV columns and JSON keys agree. */
    json_t *full = NULL;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) if (!full || json_object_size(row) > json_object_size(full)) full = row;
    json_t *ordered = json_array();
    json_array_foreach(rows, i, row) {
        json_t *o = json_object();
        const char *key;
        json_t *val;
        json_object_foreach(full, key, val) {
            if (!strcmp(key, "error"))
                continue;
            json_t *v = json_object_get(row, key);
            json_object_set(o, key, v ? v : json_null());
        }
        json_t *e = json_object_get(row, "error");
        json_object_set(o, "error", e ? e : json_string(""));
        json_array_append_new(ordered, o);
    }
    return ordered;
}

/* The seal of v at the precision dtsim writes JSON with (the same before the write and after
 * the read back). */
static void json_crc32(json_t *v, char out[9])
{
    json_seal_hex(v, NULL, DTSIM_JSON_REAL_DIGITS, out);
}

int sweep_identity(const char *scenario_path, const char *const *base_sets, int n_base, const sweep_spec *spec,
                   char out[9], config_error *err)
{
    json_error_t je;
    json_t *scenario = json_load_file(scenario_path, 0, &je);
    if (!scenario) {
        config_fail(err, "%s: %s", scenario_path, je.text);
        return -1;
    }
    json_t *sets = json_array(), *vary = json_array();
    for (int i = 0; i < n_base; i++)
        json_array_append_new(sets, json_string(base_sets[i]));
    for (int d = 0; d < spec->dims; d++) {
        json_t *values = json_array();
        for (int v = 0; v < spec->dim[d].count; v++)
            json_array_append_new(values, json_string(spec->dim[d].values[v]));
        json_array_append_new(vary, json_pack("{s:s,s:o}", "path", spec->dim[d].path, "values", values));
    }
    json_t *id = json_pack("{s:o,s:o,s:o}", "scenario", scenario, "set", sets, "vary", vary);
    if (spec->zip) /* only then: the identity of every product sweep stays what it was */
        json_object_set_new(id, "zip", json_true());
    if (spec->full) /* the same figures to float rounding, but a merge keeps one kind of run */
        json_object_set_new(id, "full", json_true());
    json_crc32(id, out);
    json_decref(id);
    return 0;
}

/* A part's rows_crc32: the seal of its points and rows. */
static void part_seal(json_t *points, json_t *rows, char out[9])
{
    json_t *sealed = json_pack("{s:O,s:O}", "points", points, "rows", rows);
    json_crc32(sealed, out);
    json_decref(sealed);
}

json_t *sweep_part(long total, json_t *points, json_t *rows, const char *sweep_id)
{
    char crc[9];
    part_seal(points, rows, crc);
    return json_pack("{s:I,s:o,s:o,s:s,s:s}", "total", (json_int_t)total, "points", points, "rows", rows, "sweep_id",
                     sweep_id, "rows_crc32", crc);
}

/* Checks one part: parsed, sealed, of the sweep in *id (set by the first part). 0, or -1. */
static int check_part(const char *path, json_t *part, char id[9], config_error *err)
{
    const char *pid = json_string_value(json_object_get(part, "sweep_id"));
    const char *seal = json_string_value(json_object_get(part, "rows_crc32"));
    json_t *pts = json_object_get(part, "points"), *prow = json_object_get(part, "rows");
    if (!pid || !seal || !json_is_array(pts) || !json_is_array(prow) || json_array_size(pts) != json_array_size(prow) ||
        !json_is_integer(json_object_get(part, "total"))) {
        config_fail(err, "%s: not a sealed sweep part (total, points, rows, sweep_id, rows_crc32; parts written before "
                         "2026-11-26 lack the last two: rerun its shard)", path);
        return -1;
    }
    char crc[9];
    part_seal(pts, prow, crc);
    if (strcmp(crc, seal)) {
        config_fail(err, "%s: its points and rows do not match its rows_crc32 (%s, read %s): edited or damaged; rerun "
                         "its shard", path, seal, crc);
        return -1;
    }
    if (!id[0])
        snprintf(id, 9, "%s", pid);
    else if (strcmp(id, pid)) {
        config_fail(err, "%s: of another sweep (sweep_id %s, the parts before it %s): another scenario, --set or --vary",
                    path, pid, id);
        return -1;
    }
    return 0;
}

int sweep_merge_parts(const char *dir, const char *expect_id, json_t **rows_out, config_error *err)
{
    json_t *all = NULL, *rows = json_array();
    long total = -1, found = 0;
    char id[9] = "";
    int rc = -1;
    for (int k = 0; k < 4096; k++) {
        char path[4200];
        json_error_t je;
        json_t *part = NULL;
        /* parts are named part-K-of-N.json; find this K with any N */
        for (int n = k + 1; n <= 4096 && !part; n++) {
            snprintf(path, sizeof path, "%s/part-%d-of-%d.json", dir, k, n);
            if (access(path, F_OK) != 0)
                continue;
            part = json_load_file(path, 0, &je);
            if (!part) {
                config_fail(err, "%s: line %d: %s", path, je.line, je.text);
                goto done;
            }
        }
        if (!part)
            break;
        if (check_part(path, part, id, err) != 0) {
            json_decref(part);
            goto done;
        }
        if (expect_id && strcmp(id, expect_id)) {
            config_fail(err, "%s: of the sweep %s, not of this --merge's %s (its scenario, --set and --vary)", path, id,
                        expect_id);
            json_decref(part);
            goto done;
        }
        long t = (long)json_integer_value(json_object_get(part, "total"));
        if (total < 0) {
            total = t;
            all = json_array();
            for (long i = 0; i < total; i++)
                json_array_append_new(all, json_null());
        } else if (t != total) {
            config_fail(err, "%s: %ld points, other parts say %ld (different sweeps?)", path, t, total);
            json_decref(part);
            goto done;
        }
        json_t *pts = json_object_get(part, "points"), *prow = json_object_get(part, "rows");
        for (size_t i = 0; i < json_array_size(pts); i++) {
            long idx = (long)json_integer_value(json_array_get(pts, i));
            if (idx < 0 || idx >= total || !json_is_null(json_array_get(all, (size_t)idx))) {
                config_fail(err, "%s: point %ld out of range or given twice", path, idx);
                json_decref(part);
                goto done;
            }
            json_array_set(all, (size_t)idx, json_array_get(prow, i));
            found++;
        }
        json_decref(part);
    }
    if (total < 0 || found != total) {
        snprintf(err->msg, sizeof err->msg, "%s: %ld of %ld points found in part-K-of-N.json files", dir, found,
                 total < 0 ? 0 : total);
        goto done;
    }
    json_array_extend(rows, all);
    *rows_out = sweep_align_rows(rows);
    rc = 0;
done:
    json_decref(all);
    json_decref(rows);
    return rc;
}

static void csv_cell(FILE *f, json_t *v)
{
    if (!v || json_is_null(v))
        return;
    if (json_is_string(v)) {
        fputc('"', f);
        for (const char *p = json_string_value(v); *p; p++) {
            if (*p == '"')
                fputc('"', f);
            fputc(*p, f);
        }
        fputc('"', f);
    } else if (json_is_true(v) || json_is_false(v)) {
        fputs(json_is_true(v) ? "1" : "0", f);
    } else if (json_is_number(v)) {
        fprintf(f, "%.10g", json_number_value(v));
    } else {
        char *s = json_dumps(v, JSON_COMPACT);
        json_t *str = json_string(s);
        csv_cell(f, str);
        json_decref(str);
        free(s);
    }
}

int sweep_write_csv(json_t *rows, const char *path, config_error *err)
{
    atomic_file a;
    char why[4400];
    if (atomic_file_open(&a, path, why, sizeof why) != 0) {
        snprintf(err->msg, sizeof err->msg, "%s", why);
        return -1;
    }
    FILE *f = a.f;
    json_t *first = json_array_get(rows, 0);
    const char *key;
    json_t *val;
    int col = 0;
    json_object_foreach(first, key, val) fprintf(f, "%s%s", col++ ? "," : "", key);
    fputc('\n', f);
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        col = 0;
        json_object_foreach(first, key, val) {
            if (col++)
                fputc(',', f);
            csv_cell(f, json_object_get(row, key));
        }
        fputc('\n', f);
    }
    if (atomic_file_commit(&a, 0, why, sizeof why) != 0) {
        snprintf(err->msg, sizeof err->msg, "%s", why);
        return -1;
    }
    return 0;
}
