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
/* Ops whose events are read later, in one go: reading an event's time waits for the GPU to
 * reach it, and waiting after every op would leave the GPU idle while the host launches the
 * next one (measured on an H100, 2026-11-26: 30 us between GPT-2 124M's backward ops under
 * --profile, 2.2 ms of a 110 ms step). Read at each step's start (the step before ended with a
 * synchronize), when the table fills, and before writing. */
#define PROFILE_PENDING 1024

/* What an op is: its name, layer, step, shape and work. */
typedef struct {
    const char *op;
    int layer, step;
    int inside; /* recorded within a begun op, whose time holds it too */
    char shape[48];
    double flops, bytes;
} prof_op;

typedef struct {
    prof_op what;
    double start_s, dur_s;
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
    int inside; /* some call was recorded within another op */
} prof_row;

/* An op recorded but not yet read: its two events, or (timed elsewhere) its end and duration. */
typedef struct {
    kernels_event *start, *end;
    prof_op what;
    double dur_s; /* < 0: from the events */
} prof_pending;

struct profiler {
    const kernels_backend *k;
    kernels_event *origin;
    prof_pending *pending; /* PROFILE_PENDING slots, their events created on first use */
    int n_pending, n_pending_events;
    int open; /* profiler_begin recorded the start of slot n_pending; its end is to come */
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
    p->pending = calloc(PROFILE_PENDING + 1, sizeof *p->pending); /* + 1: see profiler_record */
    p->events = calloc(PROFILE_MAX_EVENTS, sizeof *p->events);
    k->event_record(p->origin);
    return p;
}

void profiler_free(profiler *p)
{
    if (!p)
        return;
    p->k->event_destroy(p->origin);
    for (int i = 0; i < p->n_pending_events; i++) {
        p->k->event_destroy(p->pending[i].start);
        p->k->event_destroy(p->pending[i].end);
    }
    free(p->pending);
    free(p->events);
    free(p->rows);
    free(p);
}

static void add_event(profiler *p, const prof_pending *q, double start_s, double dur);

/* Slot i, its events created the first time it is used. */
static prof_pending *slot_at(profiler *p, int i)
{
    while (p->n_pending_events <= i) {
        p->pending[p->n_pending_events].start = p->k->event_create();
        p->pending[p->n_pending_events].end = p->k->event_create();
        p->n_pending_events++;
    }
    return &p->pending[i];
}

static void swap_starts(prof_pending *a, prof_pending *b)
{
    kernels_event *t = a->start;
    a->start = b->start;
    b->start = t;
}

/* Reads every pending op's times (waiting for the last of them) into the trace and the table. */
static void flush(profiler *p)
{
    for (int i = 0; i < p->n_pending; i++) {
        prof_pending *q = &p->pending[i];
        if (q->dur_s < 0) {
            add_event(p, q, p->k->event_elapsed_s(p->origin, q->start), p->k->event_elapsed_s(q->start, q->end));
        } else {
            double end = p->k->event_elapsed_s(p->origin, q->end);
            add_event(p, q, end > q->dur_s ? end - q->dur_s : 0, q->dur_s);
        }
    }
    if (p->open && p->n_pending > 0) /* an op begun and not ended keeps its start, now in slot 0 */
        swap_starts(slot_at(p, 0), slot_at(p, p->n_pending));
    p->n_pending = 0;
}

void profiler_set_step(profiler *p, int step)
{
    if (!p)
        return;
    flush(p);
    if (!p->stepped) {
        p->first_step = step;
        p->stepped = 1;
    }
    p->step = step;
}

void profiler_begin(profiler *p)
{
    if (!p)
        return;
    p->k->event_record(slot_at(p, p->n_pending)->start);
    p->open = 1;
}

/* Fills and queues the slot profiler_begin (or profiler_record) opened. */
static void queue(profiler *p, const char *op, int layer, const char *shape, double flops, double bytes, double dur)
{
    prof_pending *q = slot_at(p, p->n_pending);
    p->k->event_record(q->end);
    q->what = (prof_op){.op = op, .layer = layer, .step = p->step, .inside = dur >= 0 && p->open, .flops = flops,
                        .bytes = bytes};
    snprintf(q->what.shape, sizeof q->what.shape, "%s", shape);
    q->dur_s = dur;
    if (++p->n_pending == PROFILE_PENDING)
        flush(p);
}

void profiler_end(profiler *p, const char *op, int layer, const char *shape, double flops, double bytes)
{
    if (!p)
        return;
    p->open = 0;
    queue(p, op, layer, shape, flops, bytes, -1);
}

/* An op timed elsewhere may be recorded inside a begun op (a ZeRO-3 gather waited for within
 * a layer's forward): that op's start moves on to the next slot, where its end will land. */
void profiler_record(profiler *p, const char *op, int layer, const char *shape, double dur_s, double bytes)
{
    if (!p)
        return;
    if (p->open)
        swap_starts(slot_at(p, p->n_pending), slot_at(p, p->n_pending + 1));
    queue(p, op, layer, shape, 0, bytes, dur_s > 0 ? dur_s : 0);
}

static void add_event(profiler *p, const prof_pending *q, double start_s, double dur)
{
    const char *op = q->what.op, *shape = q->what.shape;
    int layer = q->what.layer;
    double flops = q->what.flops, bytes = q->what.bytes;
    if (p->n_events < PROFILE_MAX_EVENTS) {
        prof_event *e = &p->events[p->n_events++];
        e->what = q->what;
        e->start_s = start_s;
        e->dur_s = dur;
    } else {
        p->dropped++;
    }
    int warm = p->stepped && q->what.step != p->first_step;
    for (int i = 0; i < p->n_rows; i++) {
        prof_row *r = &p->rows[i];
        if (r->op == op && r->layer == layer && !strcmp(r->shape, shape)) { /* shape: ZeRO's windows differ */
            r->total_s += dur;
            r->count++;
            r->inside |= q->what.inside;
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
    r->inside = q->what.inside;
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
    flush(p);
    json_t *ops = json_array();
    for (int i = 0; i < p->n_rows; i++) {
        prof_row *r = &p->rows[i];
        /* a run of one step (or an op only its first step ran) has only the cold calls */
        double mean = r->warm_count ? r->warm_s / r->warm_count : r->total_s / r->count;
        json_t *row = json_pack("{s:s,s:i,s:s,s:s,s:f,s:f,s:f,s:i,s:f}", "op", r->op, "layer", r->layer, "shape",
                                r->shape, "dtype", dtype, "flops", r->flops, "bytes", r->bytes, "mean_s", mean,
                                "count", (int)r->count, "total_s", r->total_s);
        if (r->inside) /* its time is also in the op it was recorded within */
            json_object_set_new(row, "inside", json_true());
        json_array_append_new(ops, row);
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
                              json_pack("{s:s,s:s,s:f,s:f,s:i,s:i,s:{s:i,s:i,s:s,s:f,s:f}}", "name", e->what.op, "ph", "X",
                                        "ts", e->start_s * 1e6, "dur", e->dur_s * 1e6, "pid", 0, "tid", 0, "args",
                                        "layer", e->what.layer, "step", e->what.step, "shape", e->what.shape, "flops", e->what.flops,
                                        "bytes", e->what.bytes));
    }
    json_t *trace = json_pack("{s:o,s:s}", "traceEvents", events, "displayTimeUnit", "ms");
    char tpath[4200];
    snprintf(tpath, sizeof tpath, "%s.trace.json", path);
    rc = write_atomic(trace, tpath, err, errlen);
    json_decref(trace);
    return rc;
}
