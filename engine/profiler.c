/* Per-op profiler; see profiler.h. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "profiler.h"
#include "atomic_file.h"

#define PROFILE_MAX_EVENTS 200000 /* trace entries kept; the per-op table counts them all */

typedef struct {
    const char *op;
    int layer, step;
    char shape[48];
    double flops, bytes, start_s, dur_s;
} prof_event;

/* An op's row: every call (total_s, count) and the calls after the first profiled step
 * (warm_s, warm_count), whose mean is the one reported. The first step carries one-off costs
 * that a long run never sees again: on a GPU, CUDA's lazy loading of each kernel at its first
 * launch and cuBLAS's first call (measured on an H200, 2026-11-26: GPT-2 124M's first GEMM,
 * layer 0's qkv, averaged 6.4 ms over 20 steps where the GEMM itself takes 0.7 ms). */
typedef struct {
    const char *op;
    int layer;
    char shape[48];
    double flops, bytes, total_s, warm_s;
    long count, warm_count;
} prof_row;

struct profiler {
    const kernels_backend *k;
    kernels_event *origin, *start, *end;
    int step, first_step, stepped; /* first_step: the first step set (stepped: one was) */
    prof_event *events;
    long n_events, dropped;
    prof_row *rows;
    int n_rows, cap_rows;
};

profiler *profiler_create(const kernels_backend *k)
{
    profiler *p = calloc(1, sizeof *p);
    p->k = k;
    p->origin = k->event_create();
    p->start = k->event_create();
    p->end = k->event_create();
    p->events = calloc(PROFILE_MAX_EVENTS, sizeof *p->events);
    k->event_record(p->origin);
    return p;
}

void profiler_free(profiler *p)
{
    if (!p)
        return;
    p->k->event_destroy(p->origin);
    p->k->event_destroy(p->start);
    p->k->event_destroy(p->end);
    free(p->events);
    free(p->rows);
    free(p);
}

void profiler_set_step(profiler *p, int step)
{
    if (!p)
        return;
    if (!p->stepped) {
        p->first_step = step;
        p->stepped = 1;
    }
    p->step = step;
}

void profiler_begin(profiler *p)
{
    if (p)
        p->k->event_record(p->start);
}

static void add_event(profiler *p, const char *op, int layer, const char *shape, double flops, double bytes,
                      double start_s, double dur);

void profiler_end(profiler *p, const char *op, int layer, const char *shape, double flops, double bytes)
{
    if (!p)
        return;
    p->k->event_record(p->end);
    double dur = p->k->event_elapsed_s(p->start, p->end);
    add_event(p, op, layer, shape, flops, bytes, p->k->event_elapsed_s(p->origin, p->start), dur);
}

void profiler_record(profiler *p, const char *op, int layer, const char *shape, double dur_s, double bytes)
{
    if (!p)
        return;
    p->k->event_record(p->end);
    double end = p->k->event_elapsed_s(p->origin, p->end);
    add_event(p, op, layer, shape, 0, bytes, end > dur_s ? end - dur_s : 0, dur_s);
}

static void add_event(profiler *p, const char *op, int layer, const char *shape, double flops, double bytes,
                      double start_s, double dur)
{
    if (p->n_events < PROFILE_MAX_EVENTS) {
        prof_event *e = &p->events[p->n_events++];
        e->op = op;
        e->layer = layer;
        e->step = p->step;
        snprintf(e->shape, sizeof e->shape, "%s", shape);
        e->flops = flops;
        e->bytes = bytes;
        e->start_s = start_s;
        e->dur_s = dur;
    } else {
        p->dropped++;
    }
    int warm = p->stepped && p->step != p->first_step;
    for (int i = 0; i < p->n_rows; i++) {
        prof_row *r = &p->rows[i];
        if (r->op == op && r->layer == layer && !strcmp(r->shape, shape)) { /* shape: ZeRO's windows differ */
            r->total_s += dur;
            r->count++;
            if (warm) {
                r->warm_s += dur;
                r->warm_count++;
            }
            return;
        }
    }
    if (p->n_rows == p->cap_rows) {
        p->cap_rows = p->cap_rows ? 2 * p->cap_rows : 64;
        p->rows = realloc(p->rows, (size_t)p->cap_rows * sizeof *p->rows);
    }
    prof_row *r = &p->rows[p->n_rows++];
    memset(r, 0, sizeof *r);
    r->op = op;
    r->layer = layer;
    snprintf(r->shape, sizeof r->shape, "%s", shape);
    r->flops = flops;
    r->bytes = bytes;
    r->total_s = dur;
    r->count = 1;
    r->warm_s = warm ? dur : 0;
    r->warm_count = warm;
}

static int write_atomic(json_t *doc, const char *path, char *err, size_t errlen)
{
    atomic_file a;
    if (atomic_file_open(&a, path, err, errlen) != 0)
        return -1;
    errno = 0;
    if (json_dumpf(doc, a.f, JSON_COMPACT) != 0) {
        int e = errno ? errno : EIO; /* the failed fwrite's, before abort's calls change it */
        atomic_file_abort(&a);
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
        return -1;
    }
    return atomic_file_commit(&a, 0, err, errlen);
}

int profiler_write(profiler *p, const char *path, const char *dtype, const char *device, char *err, size_t errlen)
{
    json_t *ops = json_array();
    for (int i = 0; i < p->n_rows; i++) {
        prof_row *r = &p->rows[i];
        /* a run of one step (or an op only its first step ran) has only the cold calls */
        double mean = r->warm_count ? r->warm_s / r->warm_count : r->total_s / r->count;
        json_array_append_new(ops, json_pack("{s:s,s:i,s:s,s:s,s:f,s:f,s:f,s:i,s:f}", "op", r->op, "layer", r->layer,
                                             "shape", r->shape, "dtype", dtype, "flops", r->flops, "bytes",
                                             r->bytes, "mean_s", mean, "count", (int)r->count, "total_s",
                                             r->total_s));
    }
    json_t *doc = json_pack("{s:s,s:s,s:o,s:i}", "device", device, "dtype", dtype, "ops", ops, "trace_events_dropped",
                            (int)p->dropped);
    int rc = write_atomic(doc, path, err, errlen);
    json_decref(doc);
    if (rc)
        return rc;

    json_t *events = json_array();
    for (long i = 0; i < p->n_events; i++) {
        prof_event *e = &p->events[i];
        json_array_append_new(events,
                              json_pack("{s:s,s:s,s:f,s:f,s:i,s:i,s:{s:i,s:i,s:s,s:f,s:f}}", "name", e->op, "ph", "X",
                                        "ts", e->start_s * 1e6, "dur", e->dur_s * 1e6, "pid", 0, "tid", 0, "args",
                                        "layer", e->layer, "step", e->step, "shape", e->shape, "flops", e->flops,
                                        "bytes", e->bytes));
    }
    json_t *trace = json_pack("{s:o,s:s}", "traceEvents", events, "displayTimeUnit", "ms");
    char tpath[4200];
    snprintf(tpath, sizeof tpath, "%s.trace.json", path);
    rc = write_atomic(trace, tpath, err, errlen);
    json_decref(trace);
    return rc;
}
