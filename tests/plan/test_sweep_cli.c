/* dtsim sweep and plan from the command line. Without gnuplot ("cli"): bad --vary syntax and
 * unknown paths stop before any run (exit 2); invalid combinations are skipped with the
 * loader's reason; CSV columns equal the JSON keys; shards merge to the local result; plan
 * --json is ranked, never worse than the scenario's own layout, with its exit codes; --plot
 * without gnuplot is refused before any run; every command parses its flags alike. With
 * gnuplot ("plots", else exit 77): every picture is a real PNG and SVG, and the plan report has
 * its sections and pictures.
 * argv[1]: dtsim, argv[2]: the scenario, argv[3]: cli | plots. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "../private_dir.h"

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
    assert_int_equal(sh("'%s' sweep '%s' --vary parallel.schedul=1f1b --out dtsim_sw_bad 2>dtsim_sw_err",
                        DTSIM, SCENARIO), 2);
    assert_int_equal(sh("grep -q \"did you mean 'schedule'\" dtsim_sw_err"), 0);
    struct stat st;
    assert_int_not_equal(stat("dtsim_sw_bad/sweep.csv", &st), 0); /* nothing ran, nothing written */
    assert_int_equal(sh("'%s' sweep '%s' --vary noequals --out dtsim_sw_bad 2>/dev/null", DTSIM, SCENARIO), 2);
    assert_int_equal(sh("'%s' sweep '%s' --vary training.micro_batch_size=1,,2 2>/dev/null", DTSIM, SCENARIO), 2);
    assert_int_equal(sh("'%s' sweep '%s' --vary training.micro_batch_size=1 --vary training.micro_batch_size=2 "
                        "2>/dev/null", DTSIM, SCENARIO), 2);
    /* a value given twice would run its point twice: refused naming both, nothing written ("1"
     * and " 1" are one value); zipped, only a whole point repeated is */
    assert_int_equal(sh("'%s' sweep '%s' --vary 'training.micro_batch_size=1,2, 1' --out dtsim_sw_bad "
                        "2>dtsim_sw_err", DTSIM, SCENARIO), 2);
    assert_int_equal(sh("grep -q 'training.micro_batch_size: value 3 ( 1) repeats value 1' dtsim_sw_err"), 0);
    assert_int_not_equal(stat("dtsim_sw_bad/sweep.csv", &st), 0);
    assert_int_equal(sh("'%s' sweep '%s' --zip --vary training.micro_batch_size=1,2,1 --vary parallel.zero_stage=0,1,0 "
                        "--out dtsim_sw_bad 2>/dev/null", DTSIM, SCENARIO), 2);
    /* --merge gathers every shard's part: with --shard it was run, then failed to write (exit 1) */
    assert_int_equal(sh("'%s' sweep '%s' --vary training.micro_batch_size=1,2 --merge --shard 0/2 --out dtsim_sw_bad "
                        "2>dtsim_sw_err", DTSIM, SCENARIO), 2);
    assert_int_equal(sh("grep -q -- '--merge and --shard 0/2' dtsim_sw_err"), 0);
}

static void rows_and_csv(void **state)
{
    sh("rm -rf dtsim_sw");
    assert_int_equal(sh("'%s' sweep '%s' --vary parallel.tensor_model_parallel_size=4,3,8 --vary "
                        "training.micro_batch_size=1,2 --out dtsim_sw >/dev/null 2>dtsim_sw_err",
                        DTSIM, SCENARIO), 0);
    json_error_t je;
    json_t *doc = json_load_file("dtsim_sw/sweep.json", 0, &je);
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
    FILE *f = fopen("dtsim_sw/sweep.csv", "r");
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
    /* every CSV line has as many cells as the header (the error text is quoted) */
    f = fopen("dtsim_sw/sweep.csv", "r");
    char line[16384];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        int cells = 1, quoted = 0;
        for (char *c = line; *c; c++)
            if (*c == '"')
                quoted = !quoted;
            else if (*c == ',' && !quoted)
                cells++;
        assert_int_equal(cells, (int)json_object_size(first));
        lines++;
    }
    fclose(f);
    assert_int_equal(lines, 7); /* header + 6 points */
    assert_int_equal(sh("grep -q 'skipped point' dtsim_sw_err"), 0);
    json_decref(doc);
}

static void shards_merge_to_the_local_result(void **state)
{
    const char *vary = "--vary parallel.tensor_model_parallel_size=4,3,8 --vary training.micro_batch_size=1,2";
    sh("rm -rf dtsim_sw_local dtsim_sw_shards");
    assert_int_equal(sh("'%s' sweep '%s' %s --out dtsim_sw_local >/dev/null 2>&1", DTSIM, SCENARIO, vary), 0);
    for (int k = 0; k < 3; k++)
        assert_int_equal(sh("'%s' sweep '%s' %s --shard %d/3 --out dtsim_sw_shards >/dev/null 2>&1", DTSIM,
                            SCENARIO, vary, k), 0);
    assert_int_equal(sh("'%s' sweep '%s' %s --merge --out dtsim_sw_shards >/dev/null 2>&1", DTSIM, SCENARIO,
                        vary), 0);
    json_error_t je;
    json_t *a = json_load_file("dtsim_sw_local/sweep.json", 0, &je);
    json_t *b = json_load_file("dtsim_sw_shards/sweep.json", 0, &je);
    assert_non_null(a);
    assert_non_null(b);
    json_t *ra = json_object_get(a, "rows"), *rb = json_object_get(b, "rows");
    assert_int_equal(json_array_size(ra), json_array_size(rb));
    for (size_t i = 0; i < json_array_size(ra); i++) {
        json_t *x = json_array_get(ra, i), *y = json_array_get(rb, i);
        assert_true(json_equal(x, y));
    }
    /* byte for byte: no figure of the simulator's own time (wall_s) makes a run differ from the
     * next or from the merge of its shards */
    assert_int_equal(sh("cmp -s dtsim_sw_local/sweep.json dtsim_sw_shards/sweep.json && "
                        "cmp -s dtsim_sw_local/sweep.csv dtsim_sw_shards/sweep.csv"), 0);
    assert_int_equal(sh("'%s' sweep '%s' %s --out dtsim_sw_again >/dev/null 2>&1 && cmp -s dtsim_sw_local/sweep.json "
                        "dtsim_sw_again/sweep.json && cmp -s dtsim_sw_local/sweep.csv dtsim_sw_again/sweep.csv",
                        DTSIM, SCENARIO, vary), 0);
    sh("rm -rf dtsim_sw_again");
    /* every part is sealed and names its sweep: a merge with another --vary, a part edited after
     * it was written, and a part of another sweep among them are each refused, naming the file */
    assert_int_equal(sh("'%s' sweep '%s' --vary parallel.tensor_model_parallel_size=4,3,8 --vary "
                        "training.micro_batch_size=1,4 --merge --out dtsim_sw_shards 2>dtsim_sw_err >/dev/null",
                        DTSIM, SCENARIO), 2);
    assert_int_equal(sh("grep -q \"part-0-of-3.json: of the sweep [0-9a-f]*, not of this --merge's\" dtsim_sw_err"), 0);
    sh("cp dtsim_sw_shards/part-1-of-3.json dtsim_sw_part1");
    sh("sed -i '0,/\"tokens_per_s\": [0-9.e+]*/s//\"tokens_per_s\": 1.5/' dtsim_sw_shards/part-1-of-3.json");
    assert_int_equal(sh("'%s' sweep '%s' --merge --out dtsim_sw_shards 2>dtsim_sw_err >/dev/null", DTSIM, SCENARIO), 2);
    assert_int_equal(sh("grep -q 'part-1-of-3.json: its points and rows do not match its rows_crc32' dtsim_sw_err"), 0);
    assert_int_equal(sh("'%s' sweep '%s' --vary training.micro_batch_size=1,2 --shard 1/3 --out dtsim_sw_shards "
                        ">/dev/null 2>&1", DTSIM, SCENARIO), 0);
    assert_int_equal(sh("'%s' sweep '%s' --merge --out dtsim_sw_shards 2>dtsim_sw_err >/dev/null", DTSIM, SCENARIO), 2);
    assert_int_equal(sh("grep -q 'part-1-of-3.json: of another sweep' dtsim_sw_err"), 0);
    sh("cp dtsim_sw_part1 dtsim_sw_shards/part-1-of-3.json");
    assert_int_equal(sh("'%s' sweep '%s' %s --merge --out dtsim_sw_shards >/dev/null 2>&1", DTSIM, SCENARIO,
                        vary), 0);
    /* a missing shard is reported, not silently dropped */
    sh("rm -f dtsim_sw_shards/part-1-of-3.json");
    assert_int_not_equal(sh("'%s' sweep '%s' %s --merge --out dtsim_sw_shards >/dev/null 2>&1", DTSIM, SCENARIO,
                            vary), 0);
    json_decref(a);
    json_decref(b);
}

/* A part that is refused is named whole, however deep its folder (here past 1000 characters),
 * not by its first 900 characters. */
static void a_refused_part_is_named_whole(void **state)
{
    (void)state;
    char dir[1200] = "dtsim_sw_deep", seg[201];
    memset(seg, 'd', sizeof seg - 1);
    seg[sizeof seg - 1] = 0;
    for (int i = 0; i < 5; i++)
        snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/%s", seg);
    sh("rm -rf dtsim_sw_deep");
    assert_int_equal(sh("mkdir -p '%s' && echo '{}' >'%s/part-0-of-1.json'", dir, dir), 0);
    assert_int_equal(sh("'%s' sweep '%s' --merge --out '%s' 2>dtsim_sw_err >/dev/null", DTSIM, SCENARIO, dir), 2);
    assert_int_equal(sh("grep -qF '%s/part-0-of-1.json: not a sealed sweep part' dtsim_sw_err", dir), 0);
    sh("rm -rf dtsim_sw_deep");
}

/* --zip pairs the i-th values of every --vary (the sweep a user makes to grow GPUs and batch
 * together); its points are those of single runs with the same overrides; unequal counts stop
 * before any run; the printed table has a line per point with that point's figures. */
static void zip_pairs_values_and_the_table_shows_each_point(void **state)
{
    sh("rm -rf dtsim_sw_zip");
    assert_int_equal(sh("'%s' sweep '%s' --zip --vary parallel.data_parallel_size=16,4,8 --vary "
                        "training.global_batch_size=1536,384,777 --out dtsim_sw_zip >dtsim_sw_out 2>/dev/null",
                        DTSIM, SCENARIO), 0);
    json_error_t je;
    json_t *doc = json_load_file("dtsim_sw_zip/sweep.json", 0, &je);
    assert_non_null(doc);
    json_t *rows = json_object_get(doc, "rows");
    assert_int_equal(json_array_size(rows), 3);
    const long dp[] = {16, 4, 8}, gb[] = {1536, 384, 777};
    for (size_t i = 0; i < 3; i++) {
        json_t *r = json_array_get(rows, i);
        assert_int_equal(json_integer_value(json_object_get(r, "parallel.data_parallel_size")), dp[i]);
        assert_int_equal(json_integer_value(json_object_get(r, "training.global_batch_size")), gb[i]);
    }
    /* point 2 equals dtsim run with its two overrides */
    assert_int_equal(sh("'%s' run '%s' --set parallel.data_parallel_size=4 --set training.global_batch_size=384 "
                        "--json dtsim_sw_zip_run.json >/dev/null 2>&1", DTSIM, SCENARIO), 0);
    json_t *run = json_load_file("dtsim_sw_zip_run.json", 0, &je);
    assert_non_null(run);
    assert_true(json_number_value(json_object_get(run, "step_time_s")) ==
                json_number_value(json_object_get(json_array_get(rows, 1), "step_time_s")));
    /* the table: a header, the two points that ran with their step times, the skipped one (777
     * sequences over 8 replicas) with its reason */
    char line[512];
    snprintf(line, sizeof line, "grep -Eq '^ +16 +1536 +%.4f ' dtsim_sw_out",
             json_number_value(json_object_get(json_array_get(rows, 0), "step_time_s")));
    assert_int_equal(sh("grep -Eq 'data_parallel_size +global_batch_size +step s +tokens/s +MFU +GiB/GPU' dtsim_sw_out"), 0);
    assert_int_equal(sh("%s", line), 0);
    assert_int_equal(sh("grep -Eq '^ +8 +777 +\\(skipped\\) .*global_batch_size' dtsim_sw_out"), 0);
    /* unequal counts: exit 2 before any run, nothing written */
    sh("rm -rf dtsim_sw_zip2");
    assert_int_equal(sh("'%s' sweep '%s' --zip --vary parallel.data_parallel_size=16,4 --vary "
                        "training.global_batch_size=1536 --out dtsim_sw_zip2 >/dev/null 2>dtsim_sw_err",
                        DTSIM, SCENARIO), 2);
    assert_int_equal(sh("grep -q -- '--zip: --vary parallel.data_parallel_size has 2 values' dtsim_sw_err"), 0);
    struct stat st;
    assert_int_not_equal(stat("dtsim_sw_zip2", &st), 0);
    json_decref(run);
    json_decref(doc);
}

static int is_png(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char magic[8];
    int ok = f && fread(magic, 1, 8, f) == 8 && !memcmp(magic, "\x89PNG\r\n\x1a\n", 8);
    if (f)
        fclose(f);
    return ok;
}

static int is_svg(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && st.st_size > 200 && sh("grep -q '<svg' '%s'", path) == 0;
}

static void plan_json_is_ranked_and_never_worse_than_the_scenario(void **state)
{
    assert_int_equal(sh("'%s' plan '%s' --top 100000 --json - >dtsim_plan.json 2>dtsim_plan_err", DTSIM,
                        SCENARIO), 0);
    json_error_t je;
    json_t *doc = json_load_file("dtsim_plan.json", 0, &je); /* stdout holds the JSON and nothing else */
    assert_non_null(doc);
    json_t *ls = json_object_get(doc, "layouts");
    assert_true(json_array_size(ls) > 100);
    double prev = 0, own = -1;
    size_t i;
    json_t *l;
    json_array_foreach(ls, i, l) {
        double t = json_number_value(json_object_get(l, "step_time_s"));
        assert_true(t >= prev);
        prev = t;
        assert_false(json_is_true(json_object_get(json_object_get(l, "memory_gib"), "oom")));
        assert_non_null(json_object_get(json_object_get(l, "training"), "recompute_granularity"));
        /* the run at this layout's step time (the scenario states its tokens): the same steps for
         * every layout, days = steps x step / 86,400, GPU-hours = days x 24 x GPUs */
        json_t *tt = json_object_get(l, "time_to_train"), *par = json_object_get(l, "parallel");
        assert_true(json_is_object(tt));
        double steps = json_number_value(json_object_get(tt, "steps"));
        double days = json_number_value(json_object_get(tt, "days"));
        assert_true(steps > 0 && fabs(days - steps * t / 86400) <= 1e-9 * days);
        double gpus = 1;
        const char *dims[] = {"tensor_model_parallel_size", "pipeline_model_parallel_size", "data_parallel_size",
                              "context_parallel_size"};
        for (int d = 0; d < 4; d++)
            if (json_is_integer(json_object_get(par, dims[d])))
                gpus *= (double)json_integer_value(json_object_get(par, dims[d]));
        assert_true(fabs(json_number_value(json_object_get(tt, "gpu_hours")) - days * 24 * gpus) <= 1e-9 * days * 24 * gpus);
        if (json_is_true(json_object_get(l, "scenario_own_layout")))
            own = t;
    }
    assert_true(own > 0);
    assert_true(json_number_value(json_object_get(json_array_get(ls, 0), "step_time_s")) <= own);
    /* the counts add up, reason by reason */
    long inv = 0, oom = 0;
    const char *key;
    json_t *val;
    json_object_foreach(json_object_get(doc, "invalid_by_reason"), key, val) inv += (long)json_integer_value(val);
    json_object_foreach(json_object_get(doc, "out_of_memory_by_reason"), key, val) oom += (long)json_integer_value(val);
    assert_int_equal(inv, json_integer_value(json_object_get(doc, "invalid")));
    assert_int_equal(oom, json_integer_value(json_object_get(doc, "out_of_memory")));
    assert_int_equal(json_integer_value(json_object_get(doc, "enumerated")),
                     inv + oom + json_integer_value(json_object_get(doc, "fitting")));
    json_decref(doc);
    assert_int_equal(sh("grep -q 'out of memory' dtsim_plan_err"), 0); /* the summary went to stderr */
    /* --top K: K layouts, the same as --exhaustive's best K, the fitting ones simulated or bounded */
    assert_int_equal(sh("'%s' plan '%s' --top 3 --json dtsim_plan3.json >/dev/null 2>&1", DTSIM, SCENARIO), 0);
    assert_int_equal(sh("'%s' plan '%s' --top 3 --exhaustive --json dtsim_plan3x.json >/dev/null 2>&1", DTSIM,
                        SCENARIO), 0);
    doc = json_load_file("dtsim_plan3.json", 0, &je);
    json_t *all = json_load_file("dtsim_plan3x.json", 0, &je);
    assert_non_null(doc);
    assert_non_null(all);
    assert_int_equal(json_array_size(json_object_get(doc, "layouts")), 3);
    assert_true(json_equal(json_object_get(doc, "layouts"), json_object_get(all, "layouts")));
    json_int_t fit = json_integer_value(json_object_get(doc, "fitting"));
    assert_int_equal(fit, json_integer_value(json_object_get(all, "fitting")));
    assert_int_equal(fit, json_integer_value(json_object_get(doc, "simulated")) +
                              json_integer_value(json_object_get(doc, "bounded")));
    assert_true(json_integer_value(json_object_get(doc, "bounded")) > 0);
    assert_int_equal(json_integer_value(json_object_get(all, "bounded")), 0);
    assert_int_equal(json_integer_value(json_object_get(all, "simulated")), fit);
    json_decref(all);
    json_decref(doc);
}

static void plan_exit_codes(void **state)
{
    assert_int_equal(sh("'%s' plan '%s' --gpus abc 2>/dev/null", DTSIM, SCENARIO), 2);
    assert_int_equal(sh("'%s' plan '%s' --top 0 2>/dev/null", DTSIM, SCENARIO), 2);
    assert_int_equal(sh("'%s' plan /nonexistent.json 2>/dev/null", DTSIM), 2);
    assert_int_equal(sh("'%s' plan '%s' --frobnicate 2>/dev/null", DTSIM, SCENARIO), 2);
    assert_int_equal(sh("'%s' plan --help >/dev/null", DTSIM), 0);
    assert_int_equal(sh("'%s' plan '%s' --deadline-days 30 --exhaustive 2>/dev/null", DTSIM, SCENARIO), 2);
    /* 8 GPUs cannot hold 175B parameters: nothing fits, exit 1, and the reason is given */
    assert_int_equal(sh("'%s' plan '%s' --gpus 8 >/dev/null 2>dtsim_plan_err8", DTSIM, SCENARIO), 1);
    assert_int_equal(sh("grep -q 'fits' dtsim_plan_err8"), 0);
}

/* Every scenario-taking command refuses an unknown flag and a second scenario file, naming
 * the command and the word, with exit 2 and nothing on stdout. */
static void every_command_refuses_stray_arguments(void **state)
{
    const char *commands[] = {"run", "plan", "sweep", "faults", "async", "report"};
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        const char *c = commands[i];
        assert_int_equal(sh("'%s' %s '%s' --frobnicate >dtsim_stray_out 2>dtsim_stray_err", DTSIM, c,
                            SCENARIO), 2);
        assert_int_equal(sh("grep -q 'dtsim %s: unknown option or missing value: --frobnicate' dtsim_stray_err",
                            c), 0);
        assert_int_equal(sh("test ! -s dtsim_stray_out"), 0);
        assert_int_equal(sh("'%s' %s '%s' second.json >dtsim_stray_out 2>dtsim_stray_err", DTSIM, c,
                            SCENARIO), 2);
        assert_int_equal(sh("grep -q \"dtsim %s: one scenario file expected, got 'second.json' as well\" "
                            "dtsim_stray_err", c), 0);
        assert_int_equal(sh("test ! -s dtsim_stray_out"), 0);
    }
}

/* One parser for every command (sim/commands/cli_args.c): --help on stdout, exit 0; a flag
 * without its value, an abbreviated flag and a bad number refused with exit 2, naming the flag;
 * a value after '=' as after a space; --fidelity/--steps and --set applied in their order. */
static void every_command_parses_flags_alike(void **state)
{
    const char *commands[] = {"run", "plan", "sweep", "faults", "async", "report", "validate"};
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        const char *c = commands[i];
        assert_int_equal(sh("'%s' %s --help >dtsim_flag_out 2>dtsim_flag_err", DTSIM, c), 0);
        assert_int_equal(sh("head -1 dtsim_flag_out | grep -q '^usage: dtsim %s '", c), 0);
        assert_int_equal(sh("test ! -s dtsim_flag_err"), 0);
        assert_int_equal(sh("'%s' %s '%s' --set >dtsim_flag_out 2>dtsim_flag_err", DTSIM, c, SCENARIO), 2);
        assert_int_equal(sh("grep -q 'dtsim %s: missing value for --set' dtsim_flag_err", c), 0);
        assert_int_equal(sh("test ! -s dtsim_flag_out"), 0);
        assert_int_equal(sh("'%s' %s '%s' --jso x >/dev/null 2>dtsim_flag_err", DTSIM, c, SCENARIO), 2);
        assert_int_equal(sh("grep -q 'dtsim %s: unknown option or missing value: --jso' dtsim_flag_err", c), 0);
        /* an option given twice is refused, not kept last-wins; --set repeats */
        const char *out = strcmp(c, "sweep") == 0 ? "out" : "json"; /* sweep writes --out */
        assert_int_equal(sh("'%s' %s '%s' --%s a.json --%s=b.json >dtsim_flag_out 2>dtsim_flag_err", DTSIM, c,
                            SCENARIO, out, out), 2);
        assert_int_equal(sh("grep -q 'dtsim %s: --%s given twice' dtsim_flag_err", c, out), 0);
        assert_int_equal(sh("test ! -e a.json && test ! -e b.json"), 0);
    }
    assert_int_equal(sh("'%s' validate '%s' --max-error=x 2>dtsim_flag_err", DTSIM, SCENARIO), 2);
    assert_int_equal(sh("grep -q \"dtsim validate: --max-error: 'x' is not a non-negative number\" dtsim_flag_err"), 0);
    assert_int_equal(sh("'%s' run '%s' --steps=0 2>dtsim_flag_err", DTSIM, SCENARIO), 2);
    assert_int_equal(sh("grep -q \"dtsim run: --steps: '0' is not a whole number in 1..1000000\" dtsim_flag_err"), 0);
    assert_int_equal(sh("'%s' sweep '%s' --plot=yes --vary training.micro_batch_size=1 2>dtsim_flag_err", DTSIM,
                        SCENARIO), 2);
    assert_int_equal(sh("grep -q 'dtsim sweep: --plot takes no value' dtsim_flag_err"), 0);
    /* --steps=2 as --steps 2; the last of --steps and --set run.steps wins */
    assert_int_equal(sh("'%s' run '%s' --steps=2 --json=dtsim_flag_a.json >/dev/null", DTSIM, SCENARIO), 0);
    assert_int_equal(sh("grep -q '\"steps\": 2,' dtsim_flag_a.json"), 0);
    assert_int_equal(sh("'%s' run '%s' --set run.steps=3 --steps 2 --json - 2>/dev/null | grep -q '\"steps\": 2,'",
                        DTSIM, SCENARIO), 0);
    assert_int_equal(sh("'%s' run '%s' --steps 2 --set run.steps=3 --json - 2>/dev/null | grep -q '\"steps\": 3,'",
                        DTSIM, SCENARIO), 0);
    /* "--" ends the options: what follows is the scenario even when it starts with '-' */
    assert_int_equal(sh("'%s' run -- -no-such.json 2>dtsim_flag_err", DTSIM), 2);
    assert_int_equal(sh("grep -q 'cannot read -no-such.json' dtsim_flag_err"), 0);
}

static void plot_without_gnuplot_is_refused_before_any_run(void **state)
{
    sh("rm -rf dtsim_sw_nognu");
    assert_int_equal(sh("env PATH=/nonexistent '%s' sweep '%s' --vary training.micro_batch_size=1,2 --plot --out "
                        "dtsim_sw_nognu >/dev/null 2>dtsim_sw_nognu_err", DTSIM, SCENARIO), 2);
    assert_int_equal(sh("grep -q gnuplot dtsim_sw_nognu_err"), 0);
    struct stat st;
    assert_int_not_equal(stat("dtsim_sw_nognu/sweep.csv", &st), 0);
    /* the report is still written, and says why it has no pictures */
    sh("rm -f dtsim_plan_nognu.md*");
    assert_int_equal(sh("env PATH=/nonexistent '%s' plan '%s' --top 3 --report dtsim_plan_nognu.md >/dev/null "
                        "2>&1", DTSIM, SCENARIO), 0);
    assert_int_equal(sh("grep -q 'Not drawn: gnuplot' dtsim_plan_nognu.md"), 0);
}

/* Pictures of a sweep: the three every sweep gets, scaling when the GPU count changes, and the
 * bubble against (p-1)/(m+p-1) when the micro-batch size changes m. */
static void sweep_pictures_are_real_png_and_svg(void **state)
{
    sh("rm -rf dtsim_swp dtsim_swg");
    assert_int_equal(sh("'%s' sweep '%s' --vary training.micro_batch_size=1,2,4 --vary parallel.zero_stage=1,3 "
                        "--out dtsim_swp --plot >/dev/null 2>&1", DTSIM, SCENARIO), 0);
    const char *names[] = {"throughput", "breakdown", "memory", "bubble"};
    for (int i = 0; i < 4; i++) {
        char png[128], svg[128];
        snprintf(png, sizeof png, "dtsim_swp/%s.png", names[i]);
        snprintf(svg, sizeof svg, "dtsim_swp/%s.svg", names[i]);
        if (!is_png(png) || !is_svg(svg))
            fail_msg("%s or %s is not a picture", png, svg);
    }
    assert_int_equal(sh("'%s' sweep '%s' --vary parallel.data_parallel_size=2,4,8 --out dtsim_swg --plot "
                        ">/dev/null 2>&1", DTSIM, SCENARIO), 0);
    assert_true(is_png("dtsim_swg/scaling.png"));
    assert_true(is_svg("dtsim_swg/scaling.svg"));
    assert_false(is_png("dtsim_swg/bubble.png")); /* m does not change with DP here */
}

static void plan_report_has_the_sections_and_pictures(void **state)
{
    sh("rm -f dtsim_plan_report.*");
    assert_int_equal(sh("'%s' plan '%s' --top 4 --set faults.gpu_mtbf_hours=50000 --report dtsim_plan_report.md "
                        ">/dev/null 2>&1", DTSIM, SCENARIO), 0);
    const char *sections[] = {"^# Capacity plan", "^\\*\\*Question", "^\\*\\*Cluster", "^## Best layouts",
                              "^## Why the best one wins", "^### The effect of each choice", "^## Pictures",
                              "^## What failures cost", "^## Why candidates were dropped", "^## Assumptions",
                              "^- Calibration: .*nccl-tests", "^- Platform: gpu:",
                              /* the plan's 1,024 GPUs fill 128 of the platform's 1,536 nodes; counts in words */
                              "^\\*\\*Cluster.*1024 GPUs on 128 nodes of 8 x", "how long do 300B tokens take",
                              "^- \\*\\*Time to train\\*\\* 300B tokens:"};
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
        if (sh("grep -q '%s' dtsim_plan_report.md", sections[i]) != 0)
            fail_msg("the report lacks %s", sections[i]);
    /* "The effect of each choice" changes one choice at a time: the micro-batch row's alternative
     * is the fitting layout (of the whole search, --top 10000 in JSON) with the best's every
     * other choice and the fastest step among them; "none" where the search has no such layout */
    assert_int_equal(sh("'%s' plan '%s' --top 10000 --json dtsim_plan_all.json >/dev/null 2>&1", DTSIM, SCENARIO), 0);
    assert_int_equal(sh("python3 - <<'PY'\n"
                        "import json, re\n"
                        "L = json.load(open('dtsim_plan_all.json'))['layouts']\n"
                        "row = [l for l in open('dtsim_plan_report.md') if l.startswith('| micro-batch size |')][0]\n"
                        "cells = [c.strip() for c in row.split('|')]\n"
                        "key = lambda l: {k: v for k, v in l['parallel'].items() if k != 'data_parallel_size'} | "
                        "{'r': l['training']['recompute_granularity']}\n"
                        "best = L[0]\n"
                        "same = [l for l in L if key(l) == key(best) and "
                        "l['training']['micro_batch_size'] != best['training']['micro_batch_size']]\n"
                        "if cells[3] == 'none':\n"
                        "    assert not same, (row, len(same))\n"
                        "else:\n"
                        "    assert same and abs(min(l['step_time_s'] for l in same) - float(cells[4])) < 1e-3, (row, len(same))\n"
                        "PY"), 0);
    const char *pics[] = {"breakdown", "memory", "best-step"};
    for (int i = 0; i < 3; i++) {
        char png[128];
        snprintf(png, sizeof png, "dtsim_plan_report.md.%s.png", pics[i]);
        assert_true(is_png(png));
        assert_int_equal(sh("grep -q '](dtsim_plan_report.md.%s.png)' dtsim_plan_report.md", pics[i]), 0);
    }
    assert_true(is_svg("dtsim_plan_report.md.breakdown.svg"));
    assert_true(is_svg("dtsim_plan_report.md.memory.svg"));
    assert_int_equal(sh("grep -c '^| [0-9]' dtsim_plan_report.md | grep -qx 4"), 0); /* --top 4 rows */
    /* HTML: the same report as a page */
    assert_int_equal(sh("'%s' plan '%s' --top 3 --report dtsim_plan_report.html >/dev/null 2>&1", DTSIM,
                        SCENARIO), 0);
    assert_int_equal(sh("grep -q '<html>' dtsim_plan_report.html"), 0);
    assert_int_equal(sh("grep -q '<h2>Best layouts</h2>' dtsim_plan_report.html"), 0);
    assert_int_equal(sh("grep -q '<table>' dtsim_plan_report.html"), 0);
    assert_int_equal(sh("grep -q '<img alt=' dtsim_plan_report.html"), 0);
    assert_true(is_png("dtsim_plan_report.html.best-step.png"));
    /* self-contained: every picture embedded, none left as a link to a file beside it; the
     * first, decoded, is the PNG on disk byte for byte */
    assert_int_equal(sh("grep -q 'src=\"data:image/png;base64,' dtsim_plan_report.html"), 0);
    assert_int_not_equal(sh("grep -q 'src=\"dtsim_plan_report' dtsim_plan_report.html"), 0);
    assert_int_equal(sh("grep -o 'src=\"data:image/png;base64,[^\"]*' dtsim_plan_report.html | head -1 | sed 's/.*base64,//'"
                        " | base64 -d > dtsim_first.png && cmp -s dtsim_first.png dtsim_plan_report.html.breakdown.png"),
                     0); /* the report's first picture */
}

static int run_suite(const char *which);

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    DTSIM = argv[1];
    SCENARIO = argv[2];
    /* Every file the tests write is relative to a folder of this run's own, so two builds'
     * suites (or the cli and plots halves) running at once never share one. */
    char dir[] = "/tmp/dtsim_sweep_cli_XXXXXX";
    if (enter_private_dir(dir) != 0)
        return 1;
    int rc = run_suite(argv[3]);
    leave_private_dir(dir);
    return rc;
}

static int run_suite(const char *which)
{
    if (!strcmp(which, "cli")) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(bad_vary_stops_before_any_run),
            cmocka_unit_test(rows_and_csv),
            cmocka_unit_test(shards_merge_to_the_local_result),
            cmocka_unit_test(a_refused_part_is_named_whole),
            cmocka_unit_test(zip_pairs_values_and_the_table_shows_each_point),
            cmocka_unit_test(plan_json_is_ranked_and_never_worse_than_the_scenario),
            cmocka_unit_test(plan_exit_codes),
            cmocka_unit_test(every_command_refuses_stray_arguments),
            cmocka_unit_test(every_command_parses_flags_alike),
            cmocka_unit_test(plot_without_gnuplot_is_refused_before_any_run),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
    }
    if (sh("command -v gnuplot >/dev/null") != 0) {
        printf("skipped: gnuplot is not installed\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sweep_pictures_are_real_png_and_svg),
        cmocka_unit_test(plan_report_has_the_sections_and_pictures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
