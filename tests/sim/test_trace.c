/* The Chrome trace of a step: valid JSON, one slice per task with its replayed start and
 * duration, tracks per stage (each process named once), idle gaps on the compute lane as bubble
 * slices, and the TP communication inside compute tasks on its own track, as long as the
 * metrics book it. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <stdlib.h>
#include <cmocka.h>
#include "../private_dir.h"
#include "collective.h"
#include "fixture.h"
#include "replay.h"
#include "trace.h"

/* s's step built, replayed at analytic fidelity and written as a trace at path; the trace read
 * back (w and t hold the step and its times). */
static json_t *replayed_trace(scenario_config *s, const char *path, step_workload *w, replay_times *t)
{
    config_error err;
    assert_int_equal(workload_build(s, w, &err), 0);
    replay_times_alloc(t, w->n_tasks);
    replay_analytic(w, t);
    assert_int_equal(trace_write_chrome(path, w, t, s, &err), 0);
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    assert_non_null(doc);
    return doc;
}

static void trace_matches_the_replay(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    s.parallel.pp = 4;
    s.parallel.tp = 2; /* TP communication inside the compute tasks */
    s.training.global_batch_size = 8;
    step_workload w;
    replay_times t;
    const char *path = "dtsim_test_trace.json";
    json_t *doc = replayed_trace(&s, path, &w, &t);
    json_t *ev = json_object_get(doc, "traceEvents");
    int tasks = 0, bubbles = 0, named[4] = {0};
    double bubble_time = 0, inside_time = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        if (!strcmp(json_string_value(json_object_get(e, "name")), "process_name"))
            named[json_integer_value(json_object_get(e, "pid"))]++;
        if (strcmp(json_string_value(json_object_get(e, "ph")), "X"))
            continue;
        int pid = (int)json_integer_value(json_object_get(e, "pid"));
        assert_true(pid >= 0 && pid < 4);
        if (json_integer_value(json_object_get(e, "tid")) == TRACE_INSIDE_TID) {
            /* TP, and the step's small blocking reductions booked as DP */
            if (!strcmp(json_string_value(json_object_get(e, "cat")), "tp"))
                inside_time += json_number_value(json_object_get(e, "dur")) * 1e-6;
        } else if (!strcmp(json_string_value(json_object_get(e, "cat")), "idle")) {
            bubbles++;
            bubble_time += json_number_value(json_object_get(e, "dur"));
        } else {
            tasks++;
        }
    }
    int expect = 0;
    for (int i = 0; i < w.n_tasks; i++)
        expect += !(w.tasks[i].kind == TASK_COMPUTE && t.finish[i] - t.start[i] <= 0);
    assert_int_equal(tasks, expect);
    for (int st = 0; st < 4; st++)
        assert_int_equal(named[st], 1); /* one process_name per process */
    assert_true(bubbles > 0); /* a 4-stage pipeline waits at the start */
    /* The idle slices plus each stage's idle tail equal what the metrics charge to the bubble
     * and to exposed communication other than TP (TP runs inside compute tasks). */
    replay_metrics m;
    replay_metrics_compute(&w, &t, &m);
    double tails = 0, total_bubble = 0;
    for (int st = 0; st < 4; st++) {
        double last = 0;
        for (int i = 0; i < w.n_tasks; i++)
            if (w.tasks[i].stage == st && w.tasks[i].lane == LANE_COMPUTE)
                last = t.finish[i];
        tails += m.step_time_s - last;
        total_bubble += m.stage_bubble_s[st];
    }
    for (int c = 0; c < COMM_CLASS_COUNT; c++)
        if (c != COMM_TP)
            total_bubble += 4 * m.comm_exposed_s[c]; /* reported as a mean over the 4 stages */
    /* less what runs inside compute tasks (the step's blocking gradient-norm and embedding
     * all-reduces, booked as DP), which no idle slice shows */
    for (int i = 0; i < w.n_tasks; i++)
        for (int c = 0; c < COMM_CLASS_COUNT; c++)
            if (c != COMM_TP && w.tasks[i].kind == TASK_COMPUTE)
                total_bubble -= fmin(workload_task_parts(&w, &w.tasks[i])->inside[c], t.finish[i] - t.start[i]);
    assert_true(fabs(bubble_time * 1e-6 + tails - total_bubble) < 1e-6 * m.step_time_s + 1e-9);
    /* the TP track holds what the metrics book as exposed TP, over the 4 stages */
    assert_true(inside_time > 0);
    assert_true(fabs(inside_time - 4 * m.comm_exposed_s[COMM_TP]) < 1e-6 * m.step_time_s + 1e-9);
    replay_metrics_free(&m);
    json_decref(doc);
    remove(path);
    replay_times_free(&t);
    workload_free(&w);
    fixture_free(&s);
}

/* A collective's slice names the algorithm and protocol its calls were priced with: the model's
 * choice for one call of its share, here for the DP reductions of TP 8 x DP 4 (one GPU of the
 * group on each of 4 nodes). */
static void collectives_name_their_algorithm(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 4);
    fixture_layout(&s, 8, 1, 4, 8);
    step_workload w;
    replay_times t;
    const char *path = "dtsim_test_trace_algo.json";
    json_t *doc = replayed_trace(&s, path, &w, &t);
    json_t *ev = json_object_get(doc, "traceEvents");
    int named = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *args = json_object_get(json_array_get(ev, i), "args");
        json_t *coll = json_object_get(args, "collective");
        if (!coll || json_integer_value(json_object_get(args, "ranks")) != 4)
            continue;
        const char *algo = json_string_value(json_object_get(args, "algorithm"));
        const char *proto = json_string_value(json_object_get(args, "protocol"));
        assert_non_null(algo);
        assert_non_null(proto);
        int kind = -1;
        for (int k = 0; k < COLL_KIND_COUNT; k++)
            if (!strcmp(json_string_value(coll), coll_kind_name((coll_kind)k)))
                kind = k;
        assert_true(kind >= 0);
        coll_split x = collective_split(&s.platform, &s.calibration, (coll_kind)kind,
                                        json_number_value(json_object_get(args, "bytes")), coll_group_of(4, 8, 8));
        assert_string_equal(algo, coll_algo_name(x.algo));
        assert_string_equal(proto, coll_proto_name(x.proto));
        named++;
    }
    assert_true(named > 0);
    json_decref(doc);
    remove(path);
    replay_times_free(&t);
    workload_free(&w);
    fixture_free(&s);
}

/* A trace that cannot be written names its whole path, however long (here 3000 characters in a
 * folder that is not there), not the first thousand of it. */
static void a_long_path_is_named_whole(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 8);
    step_workload w;
    replay_times t;
    config_error err;
    assert_int_equal(workload_build(&s, &w, &err), 0);
    replay_times_alloc(&t, w.n_tasks);
    replay_analytic(&w, &t);
    static char path[3000];
    memset(path, 'p', sizeof path - 1);
    memcpy(path, "absent/", 7);
    assert_int_not_equal(trace_write_chrome(path, &w, &t, &s, &err), 0);
    assert_non_null(strstr(err.msg, path));
    replay_times_free(&t);
    workload_free(&w);
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(trace_matches_the_replay),
                                       cmocka_unit_test(collectives_name_their_algorithm),
                                       cmocka_unit_test(a_long_path_is_named_whole)};
    char dir[] = "/tmp/test_trace_XXXXXX";
    if (enter_private_dir(dir) != 0)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    leave_private_dir(dir);
    return rc;
}
