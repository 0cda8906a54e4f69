/* Chrome trace of a replayed step; see trace.h. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "trace.h"
#include "atomic_file.h"

static const char *lane_name(task_lane l)
{
    return l == LANE_COMPUTE ? "compute" : l == LANE_COMM ? "DP/ZeRO comm" : l == LANE_HOST ? "host (offload)"
                                                                                     : "pipeline send";
}

/* The TP, CP and EP communication a compute task holds (it blocks the compute stream between its
 * GEMMs) on a track of its own, by kind, drawn at the task's end: the replay knows how long it
 * is, not where between the GEMMs it falls. The parts the metrics book (replay_inside_parts). */
static void inside_events(json_t *ev, const step_workload *w, const sim_task *k, double start, double dur)
{
    double part[COMM_CLASS_COUNT];
    double at = start + dur - replay_inside_parts(w, k, dur, part);
    for (int c = 0; c < COMM_CLASS_COUNT; c++) {
        if (part[c] <= 0)
            continue;
        char name[96];
        snprintf(name, sizeof name, "%s comm in %s", comm_class_name((comm_class)c), k->name);
        json_array_append_new(ev, json_pack("{s:s,s:s,s:s,s:f,s:f,s:i,s:i,s:{s:i,s:i}}", "name", name, "cat",
                                            comm_class_name((comm_class)c), "ph", "X", "ts", at * 1e6, "dur",
                                            part[c] * 1e6, "pid", k->stage, "tid", TRACE_INSIDE_TID, "args",
                                            "micro_batch", k->micro_batch, "chunk", k->chunk));
        at += part[c];
    }
}

int trace_write_chrome(const char *path, const step_workload *w, const replay_times *t, const scenario_config *sc,
                       config_error *err)
{
    const char *scenario_name = sc->name;
    json_t *ev = json_array();
    for (int s = 0; s < w->stages; s++) {
        char name[64];
        snprintf(name, sizeof name, "pipeline stage %d", s);
        json_array_append_new(ev, json_pack("{s:s,s:s,s:i,s:{s:s}}", "name", "process_name", "ph", "M", "pid", s,
                                            "args", "name", name));
        for (int l = 0; l < LANE_COUNT; l++)
            json_array_append_new(ev, json_pack("{s:s,s:s,s:i,s:i,s:{s:s}}", "name", "thread_name", "ph", "M", "pid",
                                                s, "tid", l, "args", "name", lane_name((task_lane)l)));
        json_array_append_new(ev, json_pack("{s:s,s:s,s:i,s:i,s:{s:s}}", "name", "thread_name", "ph", "M", "pid", s,
                                            "tid", TRACE_INSIDE_TID, "args", "name",
                                            "TP/CP/EP comm (inside compute)"));
    }
    double *last = calloc((size_t)w->stages, sizeof(double));
    for (int i = 0; i < w->n_tasks; i++) {
        const sim_task *k = &w->tasks[i];
        double start = t->start[i], dur = t->finish[i] - t->start[i];
        if (k->lane == LANE_COMPUTE && start > last[k->stage] + 1e-12)
            json_array_append_new(ev, json_pack("{s:s,s:s,s:s,s:f,s:f,s:i,s:i}", "name", "bubble / wait", "cat",
                                                "idle", "ph", "X", "ts", last[k->stage] * 1e6, "dur",
                                                (start - last[k->stage]) * 1e6, "pid", k->stage, "tid", LANE_COMPUTE));
        if (k->lane == LANE_COMPUTE)
            last[k->stage] = t->finish[i];
        if (dur <= 0 && k->kind == TASK_COMPUTE)
            continue;
        json_t *args = json_pack("{s:s,s:i,s:i}", "name", k->name, "micro_batch", k->micro_batch, "chunk", k->chunk);
        if (k->kind == TASK_COMPUTE) {
            json_object_set_new(args, "flops", json_real(k->flops));
            json_object_set_new(args, "tp_comm_inside_s", json_real(k->comm_inside_s));
        } else {
            json_object_set_new(args, "bytes", json_real(k->bytes));
            json_object_set_new(args, "collective", json_string(coll_kind_name(k->coll)));
            json_object_set_new(args, "ranks", json_integer(k->group));
            json_object_set_new(args, "nodes", json_integer(k->span_nodes));
            if (k->kind == TASK_COLLECTIVE && k->lane != LANE_HOST && k->group > 1) { /* one call, as priced */
                coll_split x = workload_task_call_split(sc, k);
                json_object_set_new(args, "algorithm", json_string(coll_algo_name(x.algo)));
                json_object_set_new(args, "protocol", json_string(coll_proto_name(x.proto)));
            }
            if (k->peer_stage >= 0)
                json_object_set_new(args, "to_stage", json_integer(k->peer_stage));
        }
        if (k->kind == TASK_COMPUTE && k->comm_inside_s > 0)
            inside_events(ev, w, k, start, dur);
        const char *cat = k->kind == TASK_COMPUTE ? "compute" : comm_class_name(k->comm);
        json_array_append_new(ev, json_pack("{s:s,s:s,s:s,s:f,s:f,s:i,s:i,s:o}", "name", k->name, "cat", cat,
                                            "ph", "X", "ts", start * 1e6, "dur", dur * 1e6, "pid", k->stage, "tid",
                                            k->lane, "args", args));
    }
    free(last);
    json_t *doc = json_pack("{s:o,s:s,s:{s:s}}", "traceEvents", ev, "displayTimeUnit", "ms", "metadata", "scenario",
                            scenario_name);
    int rc = 0;
    atomic_file a;
    char why[4400];
    if (atomic_file_open(&a, path, why, sizeof why) != 0) {
        snprintf(err->msg, sizeof err->msg, "--trace %s", why);
        rc = -1;
    } else if (json_dumpf(doc, a.f, JSON_COMPACT) != 0) {
        atomic_file_abort(&a);
        snprintf(err->msg, sizeof err->msg, "--trace %s: cannot write", path);
        rc = -1;
    } else if (atomic_file_commit(&a, 0, why, sizeof why) != 0) {
        snprintf(err->msg, sizeof err->msg, "--trace %s", why);
        rc = -1;
    }
    json_decref(doc);
    return rc;
}
