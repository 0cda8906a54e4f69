/* dtsim sweep: bad --vary syntax and unknown paths stop before any run (exit 2); invalid
 * combinations are skipped with the loader's reason; CSV columns equal the JSON keys; --plot
 * writes real PNG and SVG files. argv[1]: dtsim, argv[2]: the scenario. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

static const char *DTSIM, *SCENARIO;

static int sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void bad_vary_stops_before_any_run(void **state)
{
    assert_int_equal(sh("'%s' sweep '%s' --vary parallel.schedul=1f1b --out /tmp/dtsim_sw_bad 2>/tmp/dtsim_sw_err",
                        DTSIM, SCENARIO), 2);
    assert_int_equal(sh("grep -q \"did you mean 'schedule'\" /tmp/dtsim_sw_err"), 0);
    struct stat st;
    assert_int_not_equal(stat("/tmp/dtsim_sw_bad/sweep.csv", &st), 0); /* nothing ran, nothing written */
    assert_int_equal(sh("'%s' sweep '%s' --vary noequals --out /tmp/dtsim_sw_bad 2>/dev/null", DTSIM, SCENARIO), 2);
    assert_int_equal(sh("'%s' sweep '%s' --vary training.micro_batch_size=1,,2 2>/dev/null", DTSIM, SCENARIO), 2);
}

static void rows_csv_and_plots(void **state)
{
    sh("rm -rf /tmp/dtsim_sw");
    assert_int_equal(sh("'%s' sweep '%s' --vary parallel.tensor_model_parallel_size=4,3,8 --vary "
                        "training.micro_batch_size=1,2 --out /tmp/dtsim_sw --plot >/dev/null 2>/tmp/dtsim_sw_err",
                        DTSIM, SCENARIO), 0);
    json_error_t je;
    json_t *doc = json_load_file("/tmp/dtsim_sw/sweep.json", 0, &je);
    assert_non_null(doc);
    json_t *rows = json_object_get(doc, "rows");
    assert_int_equal(json_array_size(rows), 6);
    /* TP=3 does not divide 96 heads: both of its points are skipped with the reason. */
    int skipped = 0;
    for (size_t i = 0; i < 6; i++) {
        json_t *r = json_array_get(rows, i);
        const char *e = json_string_value(json_object_get(r, "error"));
        if (json_integer_value(json_object_get(r, "parallel.tensor_model_parallel_size")) == 3) {
            assert_non_null(strstr(e, "does not divide"));
            skipped++;
        } else {
            assert_string_equal(e, "");
            assert_true(json_number_value(json_object_get(r, "step_time_s")) > 0);
        }
    }
    assert_int_equal(skipped, 2);
    /* CSV header = the JSON keys, in order. */
    FILE *f = fopen("/tmp/dtsim_sw/sweep.csv", "r");
    assert_non_null(f);
    char header[8192];
    assert_non_null(fgets(header, sizeof header, f));
    fclose(f);
    header[strcspn(header, "\n")] = 0;
    char expect[8192] = "";
    const char *key;
    json_t *val;
    json_t *first = json_array_get(rows, 0);
    json_object_foreach(first, key, val) snprintf(expect + strlen(expect), sizeof expect - strlen(expect), "%s%s",
                                                 *expect ? "," : "", key);
    assert_string_equal(header, expect);
    json_decref(doc);
    /* Pictures: PNG magic and SVG text, not empty. */
    const char *names[] = {"throughput", "breakdown", "memory"};
    for (int i = 0; i < 3; i++) {
        char path[256];
        unsigned char magic[8];
        snprintf(path, sizeof path, "/tmp/dtsim_sw/%s.png", names[i]);
        f = fopen(path, "rb");
        assert_non_null(f);
        assert_int_equal(fread(magic, 1, 8, f), 8);
        fclose(f);
        assert_memory_equal(magic, "\x89PNG\r\n\x1a\n", 8);
        snprintf(path, sizeof path, "/tmp/dtsim_sw/%s.svg", names[i]);
        assert_int_equal(sh("grep -q '<svg' %s", path), 0);
    }
}

static void shards_merge_to_the_local_result(void **state)
{
    const char *vary = "--vary parallel.tensor_model_parallel_size=4,3,8 --vary training.micro_batch_size=1,2";
    sh("rm -rf /tmp/dtsim_sw_local /tmp/dtsim_sw_shards");
    assert_int_equal(sh("'%s' sweep '%s' %s --out /tmp/dtsim_sw_local >/dev/null 2>&1", DTSIM, SCENARIO, vary), 0);
    for (int k = 0; k < 3; k++)
        assert_int_equal(sh("'%s' sweep '%s' %s --shard %d/3 --out /tmp/dtsim_sw_shards >/dev/null 2>&1", DTSIM,
                            SCENARIO, vary, k), 0);
    assert_int_equal(sh("'%s' sweep '%s' %s --merge --out /tmp/dtsim_sw_shards >/dev/null 2>&1", DTSIM, SCENARIO,
                        vary), 0);
    json_error_t je;
    json_t *a = json_load_file("/tmp/dtsim_sw_local/sweep.json", 0, &je);
    json_t *b = json_load_file("/tmp/dtsim_sw_shards/sweep.json", 0, &je);
    assert_non_null(a);
    assert_non_null(b);
    json_t *ra = json_object_get(a, "rows"), *rb = json_object_get(b, "rows");
    assert_int_equal(json_array_size(ra), json_array_size(rb));
    for (size_t i = 0; i < json_array_size(ra); i++) {
        json_t *x = json_array_get(ra, i), *y = json_array_get(rb, i);
        json_object_del(x, "wall_s"); /* the only figure that is not simulated */
        json_object_del(y, "wall_s");
        assert_true(json_equal(x, y));
    }
    /* a missing shard is reported, not silently dropped */
    sh("rm -f /tmp/dtsim_sw_shards/part-1-of-3.json");
    assert_int_not_equal(sh("'%s' sweep '%s' %s --merge --out /tmp/dtsim_sw_shards >/dev/null 2>&1", DTSIM, SCENARIO,
                            vary), 0);
    json_decref(a);
    json_decref(b);
}

static void plan_report_has_the_sections_and_pictures(void **state)
{
    sh("rm -f /tmp/dtsim_plan_report.*");
    assert_int_equal(sh("'%s' plan '%s' --top 3 --set faults.gpu_mtbf_hours=50000 --report /tmp/dtsim_plan_report.html "
                        ">/dev/null 2>&1", DTSIM, SCENARIO), 0);
    assert_int_equal(sh("grep -q '<html>' /tmp/dtsim_plan_report.html"), 0);
    assert_int_equal(sh("grep -q '<h2>Best layouts</h2>' /tmp/dtsim_plan_report.html"), 0);
    assert_int_equal(sh("grep -q 'What failures cost' /tmp/dtsim_plan_report.html"), 0);
    assert_int_equal(sh("grep -q '<img' /tmp/dtsim_plan_report.html"), 0);
    FILE *f = fopen("/tmp/dtsim_plan_report.html.best-step.png", "rb");
    assert_non_null(f);
    unsigned char magic[8];
    assert_int_equal(fread(magic, 1, 8, f), 8);
    fclose(f);
    assert_memory_equal(magic, "\x89PNG\r\n\x1a\n", 8);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    DTSIM = argv[1];
    SCENARIO = argv[2];
    if (sh("command -v gnuplot >/dev/null") != 0) {
        printf("skipped: gnuplot is not installed\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_vary_stops_before_any_run),
        cmocka_unit_test(rows_csv_and_plots),
        cmocka_unit_test(shards_merge_to_the_local_result),
        cmocka_unit_test(plan_report_has_the_sections_and_pictures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
