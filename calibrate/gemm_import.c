/* GEMM measurements from CSV; see gemm_import.h. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "csv.h"
#include "gemm_import.h"

const char *const gemm_precision_names[GEMM_PRECISIONS] = {"fp32", "tf32", "fp16", "bf16", "fp8"};
const char *const gemm_field_names[GF_FIELDS] = {"m", "n", "k", "tflops", "time", "unit", "dtype"};

int gemm_precision_parse(const char *name)
{
    static const struct {
        const char *alias;
        int precision;
    } aliases[] = {{"fp32", 0}, {"float32", 0}, {"float", 0}, {"f32", 0}, {"single", 0},
                   {"tf32", 1}, {"tensorfloat32", 1}, {"tensorfloat-32", 1},
                   {"fp16", 2}, {"float16", 2}, {"half", 2}, {"f16", 2},
                   {"bf16", 3}, {"bfloat16", 3},
                   {"fp8", 4}, {"float8", 4}, {"e4m3", 4}, {"e5m2", 4}, {"fp8_e4m3", 4}, {"fp8_e5m2", 4},
                   {"float8_e4m3fn", 4}, {"float8_e5m2", 4}, {"float8_e4m3fnuz", 4}, {"float8_e5m2fnuz", 4}};
    if (!strncasecmp(name, "torch.", 6))
        name += 6;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcasecmp(name, aliases[i].alias))
            return aliases[i].precision;
    return -1;
}

/* Seconds per unit named by s (ns, us, µs, ms, s; case ignored), or 0. */
static double unit_seconds(const char *s, size_t len)
{
    static const struct {
        const char *name;
        double seconds;
    } units[] = {{"ns", 1e-9}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6}, {"\xce\xbcs", 1e-6}, {"ms", 1e-3}, {"s", 1.0}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strlen(units[i].name) == len && !strncasecmp(s, units[i].name, len))
            return units[i].seconds;
    return 0;
}

/* The unit a header carries: "time_us", "p50_ms", "time (ms)", "time(ms)", "time [ms]"; or 0. */
static double header_unit(const char *h)
{
    size_t len = strlen(h);
    if (len >= 3 && (h[len - 1] == ')' || h[len - 1] == ']')) {
        const char *open = strrchr(h, h[len - 1] == ')' ? '(' : '[');
        if (open)
            return unit_seconds(open + 1, (size_t)(h + len - 1 - (open + 1)));
    }
    const char *us = strrchr(h, '_');
    return us ? unit_seconds(us + 1, strlen(us + 1)) : 0;
}

static int header_is(const char *h, const char *const *names)
{
    for (; *names; names++)
        if (!strcasecmp(h, *names))
            return 1;
    return 0;
}

static int sample_order(const void *a, const void *b)
{
    const gemm_sample *x = a, *y = b;
    if (x->precision != y->precision)
        return x->precision - y->precision;
    if (x->m != y->m)
        return x->m < y->m ? -1 : 1;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    if (x->k != y->k)
        return x->k < y->k ? -1 : 1;
    return (x->tflops > y->tflops) - (x->tflops < y->tflops);
}

void gemm_samples_free(gemm_samples *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}

json_t *gemm_import_tables(const gemm_samples *s, int shapes[GEMM_PRECISIONS])
{
    json_t *tables = json_object();
    for (int p = 0; p < GEMM_PRECISIONS; p++)
        shapes[p] = 0;
    if (s->n == 0)
        return tables;
    gemm_sample *v = malloc(s->n * sizeof *v);
    if (!v) {
        json_decref(tables);
        return NULL;
    }
    memcpy(v, s->v, s->n * sizeof *v);
    qsort(v, s->n, sizeof *v, sample_order);
    for (size_t i = 0; i < s->n;) {
        size_t j = i;
        while (j < s->n && v[j].precision == v[i].precision && v[j].m == v[i].m && v[j].n == v[i].n &&
               v[j].k == v[i].k)
            j++;
        /* v[i..j) is one shape, its rates in order: the median (of the middle two for an even
         * count) */
        size_t c = j - i;
        double median = c % 2 ? v[i + c / 2].tflops : 0.5 * (v[i + c / 2 - 1].tflops + v[i + c / 2].tflops);
        const char *key = gemm_precision_names[v[i].precision];
        json_t *list = json_object_get(tables, key);
        if (!list)
            json_object_set_new(tables, key, list = json_array());
        json_array_append_new(list, json_pack("{s:I,s:I,s:I,s:f}", "m", (json_int_t)v[i].m, "n", (json_int_t)v[i].n,
                                              "k", (json_int_t)v[i].k, "tflops", median));
        shapes[v[i].precision]++;
        i = j;
    }
    free(v);
    return tables;
}

typedef struct {
    int col[GF_FIELDS]; /* the field's column, or -1 */
    int batch, device;  /* the batch and gpu/device columns, or -1 */
    int where[GEMM_WHERE_MAX];
    double time_unit;   /* seconds per unit of the time column when its header says; 0: a unit column */
    char name[GF_FIELDS][64], batch_name[64]; /* the headers, for messages */
} columns;

/* Finds the columns in the header record. 0, or -1 with err. */
static int find_columns(const csv_reader *r, const char *path, long line, const gemm_import_options *o, columns *c,
                        char *err, size_t errlen)
{
    static const char *const m[] = {"m", NULL}, *const n[] = {"n", NULL}, *const k[] = {"k", NULL},
                             *const tflops[] = {"tflops", "tflop/s", NULL}, *const unit[] = {"unit", "time_unit", NULL},
                             *const dtype[] = {"dtype", "precision", NULL}, *const batch[] = {"batch", "b", NULL},
                             *const device[] = {"gpu", "device", NULL};
    static const char *const *const by_name[GF_FIELDS] = {m, n, k, tflops, NULL, unit, dtype};
    for (int f = 0; f < GF_FIELDS; f++)
        c->col[f] = -1;
    c->batch = c->device = -1;
    c->time_unit = 0;
    int times = 0;
    for (size_t i = 0; i < r->nfield; i++) {
        const char *h = csv_field(r, i);
        int f = -1;
        for (int g = 0; g < GF_FIELDS && f < 0; g++) /* a header named by --column first */
            if (o->column[g] && !strcasecmp(h, o->column[g]))
                f = g;
        for (int g = 0; g < GF_FIELDS && f < 0; g++)
            if (!o->column[g] && by_name[g] && header_is(h, by_name[g]))
                f = g;
        /* a time column found by its name: "time" or "time_<unit>", "time (<unit>)" */
        if (f < 0 && !o->column[GF_TIME] && (!strcasecmp(h, "time") || (!strncasecmp(h, "time", 4) && header_unit(h) > 0)))
            f = GF_TIME;
        if (f == GF_TIME && c->col[GF_TIME] >= 0 && !o->column[GF_TIME]) {
            times++;
            continue; /* several time columns: refused below unless the rate is given */
        }
        if (f >= 0) {
            if (c->col[f] >= 0) {
                snprintf(err, errlen, "%s:%ld: columns %d and %zu are both the '%s' column ('%s', '%s')", path, line,
                         c->col[f] + 1, i + 1, gemm_field_names[f], csv_field(r, (size_t)c->col[f]), h);
                return -1;
            }
            c->col[f] = (int)i;
            if (f == GF_TIME)
                times++;
        } else if (header_is(h, batch) && c->batch < 0) {
            c->batch = (int)i;
        } else if (header_is(h, device) && c->device < 0) {
            c->device = (int)i;
        }
    }
    for (int w = 0; w < o->nwhere; w++) {
        c->where[w] = -1;
        for (size_t i = 0; i < r->nfield && c->where[w] < 0; i++)
            if (!strcasecmp(csv_field(r, i), o->where_column[w]))
                c->where[w] = (int)i;
        if (c->where[w] < 0) {
            snprintf(err, errlen, "%s:%ld: --where %s=%s: the file has no column '%s'", path, line, o->where_column[w],
                     o->where_value[w], o->where_column[w]);
            return -1;
        }
    }
    for (int f = 0; f < GF_FIELDS; f++)
        if (o->column[f] && c->col[f] < 0) {
            snprintf(err, errlen, "%s:%ld: --column %s=%s: the file has no column '%s'", path, line,
                     gemm_field_names[f], o->column[f], o->column[f]);
            return -1;
        }
    for (int f = GF_M; f <= GF_K; f++)
        if (c->col[f] < 0) {
            snprintf(err, errlen, "%s:%ld: no column '%s' (a GEMM CSV needs m, n, k and tflops or time; "
                                  "--column %s=HEADER names another)", path, line, gemm_field_names[f],
                     gemm_field_names[f]);
            return -1;
        }
    if (c->col[GF_TFLOPS] >= 0 && !o->column[GF_TIME]) {
        c->col[GF_TIME] = -1; /* the rate as the file gives it */
    } else if (c->col[GF_TIME] < 0) {
        snprintf(err, errlen, "%s:%ld: no column 'tflops' and no time column (time_us, time_ms, time_s, or time "
                              "with a unit column; --column tflops=HEADER or --column time=HEADER names another)",
                 path, line);
        return -1;
    } else if (times > 1) {
        snprintf(err, errlen, "%s:%ld: several time columns; name the one to use with --column time=HEADER", path,
                 line);
        return -1;
    } else {
        const char *h = csv_field(r, (size_t)c->col[GF_TIME]);
        c->time_unit = header_unit(h);
        if (c->time_unit == 0 && c->col[GF_UNIT] < 0) {
            snprintf(err, errlen, "%s:%ld: column %d ('%s') gives times without a unit: add a 'unit' column or "
                                  "name the unit in the header (time_us, time_ms, time_s)", path, line,
                     c->col[GF_TIME] + 1, h);
            return -1;
        }
    }
    if (c->col[GF_DTYPE] < 0 && o->precision < 0) {
        snprintf(err, errlen, "%s:%ld: no dtype or precision column: give --precision fp32|tf32|fp16|bf16|fp8", path,
                 line);
        return -1;
    }
    for (int f = 0; f < GF_FIELDS; f++)
        snprintf(c->name[f], sizeof c->name[f], "'%s'", c->col[f] >= 0 ? csv_field(r, (size_t)c->col[f]) : "");
    snprintf(c->batch_name, sizeof c->batch_name, "'%s'", c->batch >= 0 ? csv_field(r, (size_t)c->batch) : "");
    return 0;
}

/* A whole number in 1..1e9 ("4096" or "4096.0"). */
static int parse_dim(const char *s, double *out)
{
    char *end;
    double x = strtod(s, &end);
    if (!*s || *end || !isfinite(x) || x < 1 || x > 1e9 || x != floor(x))
        return -1;
    *out = x;
    return 0;
}

static int parse_positive(const char *s, double *out)
{
    char *end;
    double x = strtod(s, &end);
    if (!*s || *end || !isfinite(x) || !(x > 0))
        return -1;
    *out = x;
    return 0;
}

static int push(gemm_samples *s, gemm_sample x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        gemm_sample *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
    return 0;
}

int gemm_import_csv(const char *path, const gemm_import_options *o, gemm_samples *out, gemm_file_stats *stats,
                    char *err, size_t errlen)
{
    csv_reader r;
    char why[512];
    if (csv_open(&r, path, err, errlen) != 0)
        return -1;
    gemm_samples before = *out; /* restored on failure: nothing appended */
    gemm_file_stats st = {0, 0, 0};
    columns c;
    long line;
    int rc = csv_next(&r, &line, why, sizeof why);
    if (rc == 0) {
        snprintf(err, errlen, "%s: no header line (the file is empty)", path);
        goto fail;
    }
    if (rc < 0)
        goto csv_fail;
    if (find_columns(&r, path, line, o, &c, err, errlen) != 0)
        goto fail;
    size_t header_fields = r.nfield;
    while ((rc = csv_next(&r, &line, why, sizeof why)) > 0) {
        st.rows++;
        if (r.nfield != header_fields) {
            snprintf(err, errlen, "%s:%ld: %zu fields, the header has %zu", path, line, r.nfield, header_fields);
            goto fail;
        }
        int keep = 1;
        for (int w = 0; w < o->nwhere; w++)
            keep &= !strcasecmp(csv_field(&r, (size_t)c.where[w]), o->where_value[w]);
        gemm_sample x = {o->precision, 0, 0, 0, 0};
        if (keep && c.col[GF_DTYPE] >= 0) {
            const char *d = csv_field(&r, (size_t)c.col[GF_DTYPE]);
            x.precision = gemm_precision_parse(d);
            if (x.precision < 0) {
                snprintf(err, errlen, "%s:%ld: column %d (%s): '%s' is not a precision dtsim has (fp32, tf32, "
                                      "fp16, bf16, fp8, or torch.float32, torch.float16, half, torch.bfloat16, "
                                      "float8_e4m3fn, ...); --where can leave such rows out", path, line,
                         c.col[GF_DTYPE] + 1, c.name[GF_DTYPE], d);
                goto fail;
            }
            keep = o->precision < 0 || x.precision == o->precision;
        }
        if (!keep) {
            st.left_out++;
            continue;
        }
        double *dims[3] = {&x.m, &x.n, &x.k};
        for (int f = GF_M; f <= GF_K; f++)
            if (parse_dim(csv_field(&r, (size_t)c.col[f]), dims[f]) != 0) {
                snprintf(err, errlen, "%s:%ld: column %d (%s): '%s' is not a whole number in 1..1e9", path, line,
                         c.col[f] + 1, c.name[f], csv_field(&r, (size_t)c.col[f]));
                goto fail;
            }
        if (c.batch >= 0) {
            double b;
            const char *s = csv_field(&r, (size_t)c.batch);
            if (parse_dim(s, &b) != 0 || b != 1) {
                snprintf(err, errlen, "%s:%ld: column %d (%s): '%s': only single GEMMs (batch 1) make a GEMM "
                                      "table; --where can keep the batch-1 rows", path, line, c.batch + 1,
                         c.batch_name, s);
                goto fail;
            }
        }
        if (c.col[GF_TIME] < 0) {
            const char *s = csv_field(&r, (size_t)c.col[GF_TFLOPS]);
            if (parse_positive(s, &x.tflops) != 0 || x.tflops > 1e6) {
                snprintf(err, errlen, "%s:%ld: column %d (%s): '%s' is not a rate in (0, 1e6] TFLOP/s", path, line,
                         c.col[GF_TFLOPS] + 1, c.name[GF_TFLOPS], s);
                goto fail;
            }
        } else {
            double t, unit = c.time_unit;
            const char *s = csv_field(&r, (size_t)c.col[GF_TIME]);
            if (parse_positive(s, &t) != 0) {
                snprintf(err, errlen, "%s:%ld: column %d (%s): '%s' is not a positive time", path, line,
                         c.col[GF_TIME] + 1, c.name[GF_TIME], s);
                goto fail;
            }
            if (unit == 0) {
                const char *u = csv_field(&r, (size_t)c.col[GF_UNIT]);
                unit = unit_seconds(u, strlen(u));
                if (unit == 0) {
                    snprintf(err, errlen, "%s:%ld: column %d (%s): '%s' is not ns, us, ms or s", path, line,
                             c.col[GF_UNIT] + 1, c.name[GF_UNIT], u);
                    goto fail;
                }
            }
            x.tflops = 2.0 * x.m * x.n * x.k / (t * unit) / 1e12;
            if (!(x.tflops <= 1e6)) {
                snprintf(err, errlen, "%s:%ld: column %d (%s): %s %s for %.0fx%.0fx%.0f is %.3g TFLOP/s, over 1e6: "
                                      "is the unit right?", path, line, c.col[GF_TIME] + 1, c.name[GF_TIME], s,
                         unit == 1e-9 ? "ns" : unit == 1e-6 ? "us" : unit == 1e-3 ? "ms" : "s", x.m, x.n, x.k,
                         x.tflops);
                goto fail;
            }
        }
        if (c.device >= 0) {
            const char *d = csv_field(&r, (size_t)c.device);
            if (out->device_seen == 0) {
                snprintf(out->device, sizeof out->device, "%s", d);
                out->device_seen = 1;
            } else if (strcmp(out->device, d)) {
                out->device_seen = 2;
            }
        }
        if (push(out, x) != 0) {
            snprintf(err, errlen, "%s:%ld: out of memory", path, line);
            goto fail;
        }
        st.kept++;
    }
    if (rc < 0)
        goto csv_fail;
    if (st.kept == 0) {
        snprintf(err, errlen, "%s: no rows to import (%ld data rows%s)", path, st.rows,
                 st.left_out ? ", all left out by --where or --precision" : "");
        goto fail;
    }
    csv_close(&r);
    if (stats)
        *stats = st;
    return 0;
csv_fail:
    snprintf(err, errlen, "%s:%s", path, why);
fail:
    csv_close(&r);
    out->n = before.n;
    out->device_seen = before.device_seen;
    memcpy(out->device, before.device, sizeof out->device);
    return -1;
}
