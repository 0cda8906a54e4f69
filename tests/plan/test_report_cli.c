/* dtsim report: a measured run folder (written here, with step times chosen by the test) beside
 * the simulation of a scenario.
 *  - measured values equal what the test computes from the folder's files: the median step time
 *    after the warm-up steps (odd and even counts), tokens/s, model TFLOP/s per GPU and MFU from
 *    it and config.json's tokens, FLOPs, world size and peak; a crash-cut last line is left out;
 *  - simulated values equal `dtsim run --json` on the same scenario, errors (sim - meas) / meas;
 *  - a scenario unlike the run is flagged (mismatches);
 *  - without a scenario, the run's own configuration simulated on the CPU box equals the same
 *    scenario written out by hand; a GPU run without --platform, or --set without a scenario, exits 2;
 *  - an expert-parallel run is simulated with its EP group and the median of its logged routing
 *    (moe_load_imbalance) in place of the balanced router's floor; a scenario with another EP is
 *    flagged;
 *  - bad input exits 2 naming the file (and line): missing folder, malformed metrics line, a
 *    routing figure under 1, no steps after the warm-up, a step time outside 1e-9..1e7 s, a step
 *    logged twice, out of order or after a gap, rates that are not finite; an existing --json
 *    file is left as it was;
 *  - a simulation over --max-seconds is refused before it runs (exit 2, nothing written).
 * argv[1]: dtsim, argv[2]: the repository root. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

static const char *DTSIM, *ROOT;
static char SCEN[600], RUN[512];

/* A run of 4 sequences of 64 tokens on 2 ranks, peak 0.2 TFLOP/s each (values the test picks). */
static const double TOKENS = 256, FLOPS = 1.3e9, PEAK = 0.2;
static const int WORLD = 2;

static int sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* config.json of a dtrain --run-dir folder (the keys the report reads) and metrics lines. */
static void write_run(int seq_len, const double *times, int n, const char *tail)
{
    sh("rm -rf '%s' && mkdir -p '%s'", RUN, RUN);
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"num_layers\": 4, \"hidden\": 128, \"heads\": 4, \"seq_len\": %d, \"vocab\": 256},"
             " \"options\": {\"global_batch\": 4, \"micro_batch\": 2},"
             " \"layout\": {\"world_size\": %d, \"tp\": 1, \"pp\": 1, \"dp\": 2},"
             " \"device\": {\"backend\": \"cpu\", \"peak_tflops\": %g}, \"precision\": \"fp32\","
             " \"tokens_per_step\": %g, \"model_flops_per_step\": %g}",
             seq_len, WORLD, PEAK, TOKENS, FLOPS);
    write_file(RUN, "config.json", cfg);
    char *lines = calloc(1, 65536);
    for (int i = 0; i < n; i++) {
        char l[256];
        snprintf(l, sizeof l, "{\"step\": %d, \"loss\": 5.0, \"step_time_s\": %.17g, \"mfu\": null}\n", i + 1, times[i]);
        strcat(lines, l);
    }
    strcat(lines, tail);
    write_file(RUN, "metrics.jsonl", lines);
    free(lines);
}

static json_t *run_json(const char *cmd_fmt, const char *extra)
{
    char out[600];
    snprintf(out, sizeof out, "%s.out.json", RUN);
    assert_int_equal(sh(cmd_fmt, DTSIM, SCEN, extra, out), 0);
    json_error_t je;
    json_t *j = json_load_file(out, 0, &je);
    assert_non_null(j);
    return j;
}

static double get(json_t *doc, const char *key, const char *field)
{
    json_t *v = json_object_get(json_object_get(doc, key), field);
    assert_true(json_is_number(v));
    return json_number_value(v);
}

static void close_to(double got, double want)
{
    if (!(fabs(got - want) <= 1e-9 * fabs(want))) {
        fprintf(stderr, "got %.17g, want %.17g\n", got, want);
        fail();
    }
}

static void check_against(json_t *rep, double median)
{
    json_t *sim = run_json("'%s' run '%s' %s --json '%s' >/dev/null", "");
    double meas[4] = {median, TOKENS / median, FLOPS / (median * WORLD) / 1e12, FLOPS / (median * WORLD) / 1e12 / PEAK};
    const char *keys[4] = {"step_time_s", "tokens_per_s", "model_tflops_per_gpu", "mfu"};
    for (int i = 0; i < 4; i++) {
        close_to(get(rep, keys[i], "measured"), meas[i]);
        double s = json_number_value(json_object_get(sim, keys[i]));
        close_to(get(rep, keys[i], "simulated"), s);
        close_to(get(rep, keys[i], "error"), (s - meas[i]) / meas[i]);
    }
    close_to(get(rep, "memory_gib", "simulated"),
             json_number_value(json_object_get(json_object_get(sim, "memory_gib"), "total")));
    assert_true(json_is_null(json_object_get(json_object_get(rep, "memory_gib"), "measured")));
    json_decref(sim);
}

static void measured_medians_and_simulated_values(void **state)
{
    (void)state;
    /* steps 1-2 are warm-up (slow); the rest, unordered: 0.30 0.10 0.50 0.20 0.40 -> median 0.30 */
    const double t[7] = {9.0, 3.0, 0.30, 0.10, 0.50, 0.20, 0.40};
    write_run(64, t, 7, "{\"step\": 8, \"loss\": 5.0, \"step_ti"); /* a crash-cut last line */
    json_t *rep = run_json("'%s' report '%s' --measured '" "%s' --json '%s' >/dev/null 2>&1", RUN);
    assert_int_equal(json_integer_value(json_object_get(rep, "steps")), 7);
    assert_int_equal(json_integer_value(json_object_get(rep, "steps_used")), 5);
    assert_int_equal(json_integer_value(json_object_get(rep, "warmup_steps")), 2);
    check_against(rep, 0.30);
    assert_int_equal(json_array_size(json_object_get(rep, "mismatches")), 0);
    json_decref(rep);
    /* --warmup 1: six steps, even: the mean of the middle two of 0.1 0.2 0.3 0.4 0.5 3.0 */
    char extra[600];
    snprintf(extra, sizeof extra, "%s' --warmup '1", RUN);
    rep = run_json("'%s' report '%s' --measured '%s' --json '%s' >/dev/null 2>&1", extra);
    assert_int_equal(json_integer_value(json_object_get(rep, "steps_used")), 6);
    close_to(get(rep, "step_time_s", "measured"), 0.35);
    json_decref(rep);
}

static void a_different_scenario_is_flagged(void **state)
{
    (void)state;
    const double t[3] = {1, 1, 0.5};
    write_run(32, t, 3, ""); /* the run's sequences are 32 tokens, the scenario's 64 */
    json_t *rep = run_json("'%s' report '%s' --measured '%s' --json '%s' 2>/dev/null >/dev/null", RUN);
    json_t *mm = json_object_get(rep, "mismatches");
    assert_int_equal(json_array_size(mm), 1);
    assert_non_null(strstr(json_string_value(json_array_get(mm, 0)), "model.seq_length"));
    json_decref(rep);
}

/* Without a SCENARIO the run's own configuration is simulated on the CPU box: the same figures
 * as a scenario written out here by hand (the run's model, batch, layout and fp32, ZeRO-0, flash
 * attention, the box's node holding both ranks, its measured calibration). */
static void without_a_scenario_the_run_itself_is_simulated(void **state)
{
    (void)state;
    const double t[5] = {1, 1, 0.4, 0.2, 0.3};
    write_run(64, t, 5, "");
    char path[1200], hand[700];
    snprintf(path, sizeof path, "%s/platforms/cpu-box.json", ROOT);
    json_error_t je;
    json_t *plat = json_load_file(path, 0, &je);
    assert_non_null(plat);
    json_object_set_new(json_object_get(plat, "node"), "gpus", json_integer(2));
    json_object_del(plat, "calibration");
    snprintf(path, sizeof path, "%s/calibrate/data/cpu-box-measured.json", ROOT);
    /* dtrain's loss: one pass over the logits each way (engine/gpt.c) */
    json_t *scen = json_pack("{s:s,s:o,s:s,s:{s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:b,s:s},s:{s:i,s:i,s:s},s:{s:i,s:i,s:i,s:i}}",
                             "name", "by-hand", "platform", plat, "calibration", path, "model", "num_layers", 4,
                             "hidden_size", 128, "num_attention_heads", 4, "ffn_hidden_size", 512, "seq_length", 64,
                             "vocab_size", 256, "attention", "flash", "cross_entropy_loss_fusion", 1,
                             "cross_entropy_fusion_impl", "te", "training", "global_batch_size", 4,
                             "micro_batch_size", 2, "precision", "fp32", "parallel", "tensor_model_parallel_size", 1,
                             "pipeline_model_parallel_size", 1, "data_parallel_size", 2, "zero_stage", 0);
    snprintf(hand, sizeof hand, "%s.hand.json", RUN);
    assert_int_equal(json_dump_file(scen, hand, 0), 0);
    json_decref(scen);
    char out[600];
    snprintf(out, sizeof out, "%s.out.json", RUN);
    assert_int_equal(sh("'%s' report '%s' --measured '%s' --json '%s' >/dev/null 2>&1", DTSIM, hand, RUN, out), 0);
    json_t *by_hand = json_load_file(out, 0, &je);
    assert_int_equal(sh("'%s' report --measured '%s' --json '%s' >/dev/null 2>&1", DTSIM, RUN, out), 0);
    json_t *own = json_load_file(out, 0, &je);
    assert_non_null(by_hand);
    assert_non_null(own);
    const char *keys[4] = {"step_time_s", "tokens_per_s", "model_tflops_per_gpu", "memory_gib"};
    for (int i = 0; i < 4; i++)
        close_to(get(own, keys[i], "simulated"), get(by_hand, keys[i], "simulated"));
    close_to(get(own, "step_time_s", "measured"), 0.3);
    json_decref(by_hand);
    json_decref(own);
    sh("rm -f '%s'", hand);
    /* a run on a GPU names no platform by itself; --set needs a scenario */
    char cfg[1100];
    snprintf(cfg, sizeof cfg, "sed -i 's/\"backend\": \"cpu\"/\"backend\": \"cuda\"/' '%s/config.json'", RUN);
    assert_int_equal(sh("%s", cfg), 0);
    assert_int_equal(sh("'%s' report --measured '%s' 2>/dev/null >/dev/null", DTSIM, RUN), 2);
    assert_int_equal(sh("'%s' report --measured '%s' --set training.micro_batch_size=1 2>/dev/null >/dev/null", DTSIM,
                        RUN), 2);
}

/* A run of 4 experts, top-2, EP 2 over DP 2; steps 3-5 logged routing 1.3, 1.5, 1.4 (median
 * 1.4) when `routing`, none otherwise. */
static void write_moe_run(int routing)
{
    sh("rm -rf '%s' && mkdir -p '%s'", RUN, RUN);
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"num_layers\": 4, \"hidden\": 128, \"heads\": 4, \"seq_len\": 64, \"vocab\": 256,"
             " \"num_experts\": 4, \"moe_router_topk\": 2}, \"options\": {\"global_batch\": 4, \"micro_batch\": 2},"
             " \"layout\": {\"world_size\": 2, \"tp\": 1, \"pp\": 1, \"dp\": 2, \"ep\": 2},"
             " \"device\": {\"backend\": \"cpu\", \"peak_tflops\": %g}, \"precision\": \"fp32\","
             " \"tokens_per_step\": %g, \"model_flops_per_step\": %g}",
             PEAK, TOKENS, FLOPS);
    write_file(RUN, "config.json", cfg);
    const double load[5] = {1.9, 1.8, 1.3, 1.5, 1.4};
    char lines[2048] = "", l[256];
    for (int i = 0; i < 5; i++) {
        snprintf(l, sizeof l, "{\"step\": %d, \"loss\": 5.0, \"step_time_s\": 0.5", i + 1);
        strcat(lines, l);
        if (routing) {
            snprintf(l, sizeof l, ", \"moe_load_imbalance\": %g", load[i]);
            strcat(lines, l);
        }
        strcat(lines, "}\n");
    }
    write_file(RUN, "metrics.jsonl", lines);
}

/* dtsim report --measured RUN --json (no scenario: the run's own configuration). */
static json_t *report_own(void)
{
    char out[600];
    snprintf(out, sizeof out, "%s.out.json", RUN);
    assert_int_equal(sh("'%s' report --measured '%s' --json '%s' >/dev/null 2>&1", DTSIM, RUN, out), 0);
    json_error_t je;
    json_t *j = json_load_file(out, 0, &je);
    assert_non_null(j);
    return j;
}

static void a_moe_run_is_simulated_with_its_routing(void **state)
{
    (void)state;
    write_moe_run(0);
    json_t *floor = report_own();
    write_moe_run(1);
    json_t *own = report_own();
    assert_true(json_is_null(json_object_get(json_object_get(floor, "moe_load_imbalance"), "measured")));
    double floor_load = get(floor, "moe_load_imbalance", "simulated");
    assert_true(floor_load > 1 && floor_load < 1.3); /* the balanced router's sampling floor */
    close_to(get(own, "moe_load_imbalance", "measured"), 1.4);
    close_to(get(own, "moe_load_imbalance", "simulated"), 1.4);
    /* the busiest rank's experts and all-to-alls take longer */
    assert_true(get(own, "step_time_s", "simulated") > get(floor, "step_time_s", "simulated"));
    assert_int_equal(json_array_size(json_object_get(own, "mismatches")), 0);
    json_decref(floor);
    json_decref(own);
    /* the dense scenario beside it: EP 1 and no experts, flagged */
    json_t *rep = run_json("'%s' report '%s' --measured '%s' --json '%s' >/dev/null 2>&1", RUN);
    json_t *mm = json_object_get(rep, "mismatches");
    int ep = 0;
    for (size_t i = 0; i < json_array_size(mm); i++)
        ep |= strstr(json_string_value(json_array_get(mm, i)), "expert_model_parallel_size: the run has 2") != NULL;
    assert_true(ep);
    json_decref(rep);
    /* a routing figure under 1 is refused naming the line */
    char err[600];
    snprintf(err, sizeof err, "%s.err", RUN);
    write_file(RUN, "metrics.jsonl", "{\"step\": 1, \"step_time_s\": 0.5}\n"
                                     "{\"step\": 2, \"step_time_s\": 0.5, \"moe_load_imbalance\": 0.5}\n");
    assert_int_equal(sh("'%s' report --measured '%s' 2>'%s' >/dev/null", DTSIM, RUN, err), 2);
    assert_int_equal(sh("grep -q 'metrics.jsonl:2' '%s'", err), 0);
}

static void bad_input_exits_2_naming_the_file(void **state)
{
    (void)state;
    char err[600];
    snprintf(err, sizeof err, "%s.err", RUN);
    assert_int_equal(sh("'%s' report --help >/dev/null", DTSIM), 0);
    assert_int_equal(sh("'%s' report '%s' --measured /nonexistent/run 2>'%s'", DTSIM, SCEN, err), 2);
    assert_int_equal(sh("grep -q '/nonexistent/run/config.json' '%s'", err), 0);
    const double t[4] = {1, 1, 0.5, 0.5};
    write_run(64, t, 2, "{\"step\": 3, \"step_time_s\": 0.5}\n{\"step\": 4, \"step_time_s\" 0.5}\n");
    assert_int_equal(sh("'%s' report '%s' --measured '%s' 2>'%s'", DTSIM, SCEN, RUN, err), 2);
    assert_int_equal(sh("grep -q 'metrics.jsonl:4' '%s'", err), 0);
    write_run(64, t, 4, "{\"step\": 5, \"step_time_s\": -1}\n");
    assert_int_equal(sh("'%s' report '%s' --measured '%s' 2>'%s'", DTSIM, SCEN, RUN, err), 2);
    assert_int_equal(sh("grep -q 'metrics.jsonl:5' '%s'", err), 0);
    write_run(64, t, 2, ""); /* two steps, both warm-up */
    assert_int_equal(sh("'%s' report '%s' --measured '%s' 2>'%s'", DTSIM, SCEN, RUN, err), 2);
    assert_int_equal(sh("grep -q 'warm-up' '%s'", err), 0);
    assert_int_equal(sh("'%s' report '%s' --measured '%s' --warmup x 2>/dev/null", DTSIM, SCEN, RUN), 2);
}

/* dtsim report on RUN with an existing --json file: exit 2, err holding `want`, the file as it was. */
static void refused(const char *want)
{
    char err[600], out[600];
    snprintf(err, sizeof err, "%s.err", RUN);
    snprintf(out, sizeof out, "%s.out.json", RUN);
    assert_int_equal(sh("echo kept >'%s'", out), 0);
    assert_int_equal(sh("'%s' report '%s' --measured '%s' --json '%s' 2>'%s' >/dev/null", DTSIM, SCEN, RUN, out, err),
                     2);
    if (sh("grep -qF -- '%s' '%s'", want, err) != 0) {
        sh("cat '%s' >&2", err);
        fprintf(stderr, "wanted: %s\n", want);
        fail();
    }
    assert_int_equal(sh("grep -qx kept '%s'", out), 0);
}

/* Step times that make the rates inf or nan, and a record whose steps repeat, go back or skip
 * (dtrain logs each step once, in order) are refused naming the line; the steps the median
 * takes are named. */
static void absurd_times_and_misnumbered_steps_exit_2(void **state)
{
    (void)state;
    const double t[3] = {1, 1, 0.5};
    write_run(64, t, 2, "{\"step\": 3, \"step_time_s\": 1e308}\n");
    refused("metrics.jsonl:3: \"step_time_s\" 1e+308 is not a step time (1e-09..1e+07 s)");
    write_run(64, t, 2, "{\"step\": 3, \"step_time_s\": 1e-300}\n");
    refused("metrics.jsonl:3: \"step_time_s\" 1e-300 is not a step time");
    write_run(64, t, 3, "{\"step\": 3, \"step_time_s\": 0.7}\n{\"step\": 4, \"step_time_s\": 0.6}\n");
    refused("metrics.jsonl:4: step 3 is logged twice (line 3 has it too)");
    write_run(64, t, 3, "{\"step\": 9, \"step_time_s\": 0.7}\n");
    refused("metrics.jsonl:4: step 9 after step 3 (line 3): steps 4..8 are missing");
    write_run(64, t, 3, "{\"step\": 2, \"step_time_s\": 0.7}\n");
    refused("metrics.jsonl:4: step 2 is logged twice (line 2 has it too)");
    write_run(64, t, 0, "{\"step\": 0, \"step_time_s\": 0.7}\n");
    refused("metrics.jsonl:1: step 0: dtrain counts steps from 1");
    /* config.json's tokens over a short step: no finite rate */
    write_run(64, t, 2, "{\"step\": 3, \"step_time_s\": 1e-6}\n");
    char cfg[1100];
    snprintf(cfg, sizeof cfg, "sed -i 's/\"tokens_per_step\": 256/\"tokens_per_step\": 1e305/' '%s/config.json'", RUN);
    assert_int_equal(sh("%s", cfg), 0);
    refused("config.json: tokens_per_step 1e+305, model_flops_per_step 1.3e+09 and device.peak_tflops 0.2 over the "
            "median step time 1e-06 s give no finite rate");
    /* a run that resumed into a folder without a record starts past step 1: its steps are named */
    write_run(64, t, 0, "{\"step\": 5, \"step_time_s\": 0.5}\n{\"step\": 6, \"step_time_s\": 0.7}\n");
    char out[600];
    snprintf(out, sizeof out, "%s.err", RUN);
    assert_int_equal(sh("'%s' report '%s' --measured '%s' >'%s' 2>&1", DTSIM, SCEN, RUN, out), 0);
    assert_int_equal(sh("grep -q 'median of 2 steps, 5..6, after 2 warm-up' '%s'", out), 0);
}

/* The simulation is priced before it runs, as dtsim run prices it: over --max-seconds, exit 2
 * with the estimate and nothing written. */
static void over_the_limits_exits_2(void **state)
{
    (void)state;
    char err[600], out[600];
    snprintf(err, sizeof err, "%s.err", RUN);
    snprintf(out, sizeof out, "%s.limits.json", RUN);
    const double t[4] = {1, 1, 0.5, 0.5};
    write_run(64, t, 4, "");
    assert_int_equal(sh("'%s' report '%s' --measured '%s' --max-seconds 1e-9 --json '%s' 2>'%s'", DTSIM, SCEN, RUN,
                        out, err), 2);
    assert_int_equal(sh("grep -q 'dtsim report: refused before starting: .*tasks of the step graph' '%s'", err), 0);
    assert_int_not_equal(access(out, F_OK), 0);
    assert_int_equal(sh("'%s' report '%s' --measured '%s' --max-seconds 60 --json '%s' >/dev/null 2>&1", DTSIM, SCEN,
                        RUN, out), 0);
    assert_int_equal(access(out, F_OK), 0);
    unlink(out);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_report_cli DTSIM REPO_ROOT\n");
        return 2;
    }
    DTSIM = argv[1];
    ROOT = argv[2];
    snprintf(RUN, sizeof RUN, "/tmp/dtsim_report_run_%d", (int)getpid());
    snprintf(SCEN, sizeof SCEN, "%s.scenario.json", RUN);
    /* the run's model on the CI CPU box, 2 "GPUs" of data parallelism */
    FILE *f = fopen(SCEN, "w");
    fprintf(f,
            "{\"name\": \"report-test\", \"platform\": \"%s/platforms/cpu-box.json\","
            " \"model\": {\"num_layers\": 4, \"hidden_size\": 128, \"num_attention_heads\": 4,"
            " \"ffn_hidden_size\": 512, \"seq_length\": 64, \"vocab_size\": 256},"
            " \"training\": {\"global_batch_size\": 4, \"micro_batch_size\": 2, \"precision\": \"fp32\"},"
            " \"parallel\": {\"tensor_model_parallel_size\": 1, \"pipeline_model_parallel_size\": 1,"
            " \"data_parallel_size\": 2}}\n",
            ROOT);
    fclose(f);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(measured_medians_and_simulated_values),
        cmocka_unit_test(a_different_scenario_is_flagged),
        cmocka_unit_test(without_a_scenario_the_run_itself_is_simulated),
        cmocka_unit_test(a_moe_run_is_simulated_with_its_routing),
        cmocka_unit_test(bad_input_exits_2_naming_the_file),
        cmocka_unit_test(absurd_times_and_misnumbered_steps_exit_2),
        cmocka_unit_test(over_the_limits_exits_2),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    sh("rm -rf '%s' '%s' '%s.out.json' '%s.err'", RUN, SCEN, RUN, RUN);
    return rc;
}
