/* The per-op profiler (engine/profiler.c) reads its events in batches, not after every op: here,
 * with the CPU backend's clock events, every op's duration and step must come out as if read at
 * once, across more ops than one batch holds, with an op timed elsewhere recorded inside a begun
 * op (at a batch's end, too), and the first step's calls kept out of the mean. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include "profiler.h"

static void sleep_s(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&t, &t) != 0) {
    }
}

/* The row of op in the written profile, or NULL. */
static json_t *row(json_t *doc, const char *op)
{
    json_t *ops = json_object_get(doc, "ops");
    for (size_t i = 0; i < json_array_size(ops); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(ops, i), "op")), op))
            return json_array_get(ops, i);
    return NULL;
}

static void batched_reads_give_each_op_its_own_time(void **state)
{
    (void)state;
    profiler *p = profiler_create(kernels_cpu());
    profiler_set_step(p, 1);
    /* step 1 (cold): one slow call of "warm_only", then 1,023 quick ops, then a begun op within
     * which an op timed elsewhere lands as the batch's 1,024th entry (the batch is read there) */
    profiler_begin(p);
    sleep_s(0.02);
    profiler_end(p, "warm_only", -1, "x", 0, 0);
    for (int i = 0; i < 1022; i++) {
        profiler_begin(p);
        profiler_end(p, "quick", 0, "x", 1, 1);
    }
    profiler_begin(p);
    sleep_s(0.002);
    profiler_record(p, "elsewhere", -1, "x", 0.5, 0); /* 0.5 s, ending now */
    sleep_s(0.003);
    profiler_end(p, "outer", -1, "x", 0, 0);
    /* step 2 (warm): a quick "warm_only" and more quick ops */
    profiler_set_step(p, 2);
    profiler_begin(p);
    profiler_end(p, "warm_only", -1, "x", 0, 0);
    for (int i = 0; i < 100; i++) {
        profiler_begin(p);
        profiler_end(p, "quick", 0, "x", 1, 1);
    }
    const char *path = "test_profiler_out.json";
    char err[256] = "";
    assert_int_equal(profiler_write(p, path, "fp32", "cpu", err, sizeof err), 0);
    profiler_free(p);

    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    assert_non_null(doc);
    json_t *q = row(doc, "quick"), *o = row(doc, "outer"), *e = row(doc, "elsewhere"), *w = row(doc, "warm_only");
    assert_non_null(q);
    assert_non_null(o);
    assert_non_null(e);
    assert_non_null(w);
    assert_int_equal(json_integer_value(json_object_get(q, "count")), 1122);
    assert_true(json_number_value(json_object_get(q, "mean_s")) < 0.001);
    /* the begun op kept its start across the record and the batch read: 5 ms, not 3 ms or less */
    double outer = json_number_value(json_object_get(o, "mean_s"));
    assert_true(outer >= 0.005 && outer < 0.5);
    assert_true(json_number_value(json_object_get(e, "mean_s")) == 0.5);
    /* recorded within "outer": marked, so that a sum over ops does not count it twice */
    assert_true(json_is_true(json_object_get(e, "inside")));
    assert_null(json_object_get(o, "inside"));
    assert_null(json_object_get(q, "inside"));
    /* the mean is the warm step's; the total has the cold call too */
    assert_true(json_number_value(json_object_get(w, "mean_s")) < 0.01);
    assert_true(json_number_value(json_object_get(w, "total_s")) >= 0.02);
    json_decref(doc);

    char trace[300];
    snprintf(trace, sizeof trace, "%s.trace.json", path);
    doc = json_load_file(trace, 0, &je);
    assert_non_null(doc);
    json_t *ev = json_object_get(doc, "traceEvents");
    assert_int_equal(json_array_size(ev), 1 + 1022 + 2 + 1 + 100);
    /* events keep their step and their order in time */
    int steps[3] = {0};
    double last = -1;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *x = json_array_get(ev, i);
        int s = (int)json_integer_value(json_object_get(json_object_get(x, "args"), "step"));
        assert_true(s == 1 || s == 2);
        steps[s]++;
        if (strcmp(json_string_value(json_object_get(x, "name")), "elsewhere")) { /* its start is back-dated */
            double ts = json_number_value(json_object_get(x, "ts"));
            assert_true(ts >= last);
            last = ts;
        }
    }
    assert_int_equal(steps[1], 1 + 1022 + 2);
    assert_int_equal(steps[2], 101);
    json_decref(doc);
    remove(path);
    remove(trace);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batched_reads_give_each_op_its_own_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
