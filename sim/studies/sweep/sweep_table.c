/* The table a sweep prints: one line per point, its varied values, then what a user compares
 * points by (step time, tokens/s, MFU, memory per GPU) and why a point has no figures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sweep.h"

#define TABLE_MAX_COLS (SWEEP_MAX_DIMS + 5)
#define TABLE_CELL 96

typedef struct {
    char head[64];
    int width;
} table_col;

/* The varied paths are the keys ahead of the first metric ("gpus") or the error. */
static int varied_keys(json_t *row, const char **keys, int max)
{
    int n = 0;
    const char *key;
    json_t *v;
    json_object_foreach(row, key, v) {
        if (!strcmp(key, "gpus") || !strcmp(key, "error") || n == max)
            break;
        keys[n++] = key;
    }
    return n;
}

static void cell(json_t *row, const char *const *keys, int nv, int c, char out[TABLE_CELL])
{
    out[0] = 0;
    const char *error = json_string_value(json_object_get(row, "error"));
    if (c < nv) {
        json_t *v = json_object_get(row, keys[c]);
        if (json_is_string(v))
            snprintf(out, TABLE_CELL, "%s", json_string_value(v));
        else if (v) {
            char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            snprintf(out, TABLE_CELL, "%s", text ? text : "?");
            free(text);
        }
        return;
    }
    c -= nv;
    if (error && *error) {
        if (c == 0)
            snprintf(out, TABLE_CELL, "(skipped)");
        return;
    }
    json_t *mem = json_object_get(row, "memory_gib.total"), *cap = json_object_get(row, "memory_gib.capacity");
    switch (c) {
    case 0: snprintf(out, TABLE_CELL, "%.4f", json_number_value(json_object_get(row, "step_time_s"))); break;
    case 1: snprintf(out, TABLE_CELL, "%.0f", json_number_value(json_object_get(row, "tokens_per_s"))); break;
    case 2: snprintf(out, TABLE_CELL, "%.1f%%", 100 * json_number_value(json_object_get(row, "mfu"))); break;
    case 3:
        snprintf(out, TABLE_CELL, "%.1f of %.0f%s", json_number_value(mem), json_number_value(cap),
                 json_is_true(json_object_get(row, "memory_gib.oom")) ? " OOM" : "");
        break;
    }
}

void sweep_print_table(FILE *f, json_t *rows, size_t max_rows)
{
    json_t *first = json_array_get(rows, 0);
    if (!first)
        return;
    const char *keys[SWEEP_MAX_DIMS];
    int nv = varied_keys(first, keys, SWEEP_MAX_DIMS), nc = nv + 4;
    static const char *const metric_heads[] = {"step s", "tokens/s", "MFU", "GiB/GPU"};
    table_col cols[TABLE_MAX_COLS];
    for (int c = 0; c < nc; c++) {
        const char *dot = c < nv ? strrchr(keys[c], '.') : NULL;
        snprintf(cols[c].head, sizeof cols[c].head, "%s", c < nv ? (dot ? dot + 1 : keys[c]) : metric_heads[c - nv]);
        cols[c].width = (int)strlen(cols[c].head);
    }
    size_t i;
    json_t *row;
    char text[TABLE_CELL];
    json_array_foreach(rows, i, row) for (int c = 0; c < nc && i < max_rows; c++) {
        cell(row, keys, nv, c, text);
        if ((int)strlen(text) > cols[c].width)
            cols[c].width = (int)strlen(text);
    }
    fprintf(f, " ");
    for (int c = 0; c < nc; c++)
        fprintf(f, " %*s", cols[c].width, cols[c].head);
    fprintf(f, "\n");
    json_array_foreach(rows, i, row) {
        if (i == max_rows) {
            fprintf(f, "  ... %zu more points in sweep.csv\n", json_array_size(rows) - max_rows);
            break;
        }
        fprintf(f, " ");
        for (int c = 0; c < nc; c++) {
            cell(row, keys, nv, c, text);
            fprintf(f, " %*s", cols[c].width, text);
        }
        const char *error = json_string_value(json_object_get(row, "error"));
        if (error && *error)
            fprintf(f, "  %s", error);
        fprintf(f, "\n");
    }
}
