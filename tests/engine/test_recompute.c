/* Activation recomputation in dtrain (--recompute-granularity full|selective, --recompute-method
 * uniform|block, --recompute-num-layers), against the same run without it:
 *  - the losses and the final parameters are bit for bit the same, on one rank and under TP x PP,
 *    interleaved PP and ZeRO-3 data parallelism (recomputation reruns the same kernels on the
 *    same inputs; a rerun that read another layer's buffers would change them);
 *  - the activation floats a rank holds (--rank-params) are the closed form of what each setting
 *    keeps, counted here from the model's shape;
 *  - the profile shows the rerun: full doubles every forward op of a layer, selective only its
 *    attention;
 *  - bad values and method flags without full recomputation exit 2.
 * argv[1]: dtrain, argv[2]: mpirun. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "run_dtrain.h"

static const char *DTRAIN, *MPIRUN;
static char ERR[65536];

enum { L = 8, C = 64, NH = 4, T = 32, V = 256, B = 2 };
static const char *MODEL = "rc_model.json";
static const char *COMMON = "--steps 3 --micro-batch 2 --global-batch 8 --seed 5 --lr 3e-3 --warmup 1";

/* Runs dtrain (under mpirun with `ranks` > 1) with LAYOUT and EXTRA; the losses of its steps and
 * its final CRC; the --rank-params document when `params` is given. */
typedef struct {
    double loss[8];
    int steps;
    char crc[16];
} run_out;

static run_out run(int ranks, const char *layout, const char *extra, json_t **params)
{
    char launcher[2048], args[4096];
    snprintf(launcher, sizeof launcher, "%s' --oversubscribe -np %d '%s", MPIRUN, ranks, DTRAIN);
    snprintf(args, sizeof args, "--model %s %s %s %s --rank-params rc_params.json", MODEL, COMMON, layout, extra);
    json_t *lines[16];
    int n;
    int rc = run_dtrain(ranks > 1 ? launcher : DTRAIN, args, lines, 16, &n, ERR, sizeof ERR);
    if (rc != 0)
        fail_msg("%s exited %d: %s", args, rc, ERR);
    run_out o = {.steps = 0};
    for (int i = 0; i < n; i++) {
        json_t *crc = json_object_get(lines[i], "params_crc32");
        if (json_is_true(json_object_get(lines[i], "final")) && crc)
            snprintf(o.crc, sizeof o.crc, "%s", json_string_value(crc));
        else if (o.steps < 8 && json_object_get(lines[i], "loss"))
            o.loss[o.steps++] = json_number_value(json_object_get(lines[i], "loss"));
    }
    free_lines(lines, n);
    assert_int_equal(o.steps, 3);
    assert_true(strlen(o.crc) == 8);
    if (params) {
        json_error_t je;
        *params = json_load_file("rc_params.json", 0, &je);
        assert_non_null(*params);
    }
    remove("rc_params.json");
    return o;
}

static void same_run(const run_out *a, const run_out *b, const char *what)
{
    for (int i = 0; i < a->steps; i++)
        if (a->loss[i] != b->loss[i])
            fail_msg("%s: step %d loss %.9g, without recomputation %.9g", what, i + 1, b->loss[i], a->loss[i]);
    if (strcmp(a->crc, b->crc))
        fail_msg("%s: final params_crc32 %s, without recomputation %s", what, b->crc, a->crc);
}

static double act_floats(json_t *params)
{
    return (double)json_integer_value(json_array_get(json_object_get(params, "activation_floats_per_rank"), 0));
}

/* One rank, one micro-batch in flight, N = B T tokens. A layer keeps per token: ln1, qkv (3),
 * attention output, projection, res2, ln2, fc1 (4), GELU (4), fc2, its output res3: 18 C, the two
 * norms' mean and rstd (4) and the attention's log-sum-exp rows (one a head). The embedding
 * output, the final norm (C + 2), the logits (V) and the losses (1) come once. */
static void one_rank_keeps_the_closed_form_and_the_same_weights(void **state)
{
    (void)state;
    const double N = B * T, inner = N * (17.0 * C + 4 + NH), output = N * C;
    const double common = N * C + N * (C + 2) + N * V + N;
    json_t *p;
    run_out none = run(1, "", "", &p);
    assert_true(act_floats(p) == L * (inner + output) + common);
    json_decref(p);
    const struct {
        const char *flags;
        double floats; /* the closed form */
    } cases[] = {
        /* each layer's output kept; one layer's intermediates shared by every recomputed layer */
        {"--recompute-granularity full", L * output + inner + common},
        /* groups of 3: three layers' intermediates shared */
        {"--recompute-granularity full --recompute-num-layers 3", L * output + 3 * inner + common},
        /* block 2: the first two layers share one set, the other six keep their own */
        {"--recompute-granularity full --recompute-method block --recompute-num-layers 2",
         L * output + (1 + 6) * inner + common},
        /* selective: the attention output kept, its rows shared with a rerun output buffer */
        {"--recompute-granularity selective", L * (inner + output - N * NH) + N * C + N * NH + common},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_out r = run(1, "", cases[i].flags, &p);
        print_message("  %s: %.0f activation floats (closed form %.0f; none %.0f)\n", cases[i].flags, act_floats(p),
                      cases[i].floats, L * (inner + output) + common);
        same_run(&none, &r, cases[i].flags);
        if (act_floats(p) != cases[i].floats)
            fail_msg("%s: %.0f activation floats, the closed form %.0f", cases[i].flags, act_floats(p), cases[i].floats);
        json_decref(p);
    }
}

/* Layouts where the rerun meets the TP all-reduces, pipeline chunks (a group never crosses a
 * chunk) and ZeRO-3's per-layer parameter gathers. */
static void layouts_keep_the_same_weights(void **state)
{
    (void)state;
    static const struct {
        int ranks;
        const char *layout, *recompute;
    } cases[] = {
        {4, "--tp 2 --pp 2", "--recompute-granularity full"},
        {4, "--tp 2 --pp 2", "--recompute-granularity selective"},
        {2, "--pp 2 --schedule interleaved --vpp 2", "--recompute-granularity full --recompute-num-layers 2"},
        {2, "--pp 2 --schedule interleaved --vpp 2",
         "--recompute-granularity full --recompute-method block --recompute-num-layers 1"},
        {2, "--dp 2 --zero 3", "--recompute-granularity full --recompute-num-layers 3"},
        /* all 8 layers one group: ZeRO-3 keeps 8 layers' gathered parameters mapped at once */
        {2, "--dp 2 --zero 3", "--recompute-granularity full --recompute-num-layers 8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_out base = run(cases[i].ranks, cases[i].layout, "", NULL);
        run_out r = run(cases[i].ranks, cases[i].layout, cases[i].recompute, NULL);
        char what[256];
        snprintf(what, sizeof what, "%s %s", cases[i].layout, cases[i].recompute);
        print_message("  %s: params_crc32 %s (without: %s)\n", what, r.crc, base.crc);
        same_run(&base, &r, what);
    }
}

/* The profile's count of `op` in layer 0. */
static long op_count(const char *profile, const char *op)
{
    json_error_t je;
    json_t *doc = json_load_file(profile, 0, &je), *e;
    assert_non_null(doc);
    size_t k;
    long count = -1;
    json_array_foreach(json_object_get(doc, "ops"), k, e) {
        if (json_integer_value(json_object_get(e, "layer")) == 0 &&
            !strcmp(json_string_value(json_object_get(e, "op")), op))
            count = (long)json_integer_value(json_object_get(e, "count"));
    }
    json_decref(doc);
    return count;
}

static void profile_shows_the_rerun(void **state)
{
    (void)state;
    static const char *const flags[] = {"--profile rc_prof.json", "--profile rc_prof.json --recompute-granularity full",
                                        "--profile rc_prof.json --recompute-granularity selective"};
    long qkv[3], attention[3], fc2_bwd[3];
    for (int i = 0; i < 3; i++) {
        run(1, "", flags[i], NULL);
        qkv[i] = op_count("rc_prof.json", "qkv");
        attention[i] = op_count("rc_prof.json", "attention");
        fc2_bwd[i] = op_count("rc_prof.json", "fc2_bwd");
        print_message("  %s: qkv x%ld, attention x%ld, fc2_bwd x%ld\n", flags[i], qkv[i], attention[i], fc2_bwd[i]);
    }
    remove("rc_prof.json");
    remove("rc_prof.json.trace.json");
    assert_true(qkv[0] > 0 && fc2_bwd[0] == qkv[0]);
    assert_true(qkv[1] == 2 * qkv[0] && attention[1] == 2 * attention[0] && fc2_bwd[1] == fc2_bwd[0]);
    assert_true(qkv[2] == qkv[0] && attention[2] == 2 * attention[0] && fc2_bwd[2] == fc2_bwd[0]);
}

static void bad_values_exit_2(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"--recompute-granularity partial", "not full or selective"},
        {"--recompute-method block", "full only"},
        {"--recompute-granularity selective --recompute-num-layers 2", "full only"},
        {"--recompute-granularity full --recompute-method blocks", "not uniform or block"},
        {"--recompute-granularity full --recompute-num-layers 0", "--recompute-num-layers"},
        /* ZeRO-3 holds a recomputed group's gathered layers until their backward: 16 at most */
        {"--dp 2 --zero 3 --recompute-granularity full --recompute-num-layers 17", "more than the 16"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, "--model %s --steps 1 %s", MODEL, bad[i][0]);
        json_t *lines[4];
        int n;
        int rc = run_dtrain(DTRAIN, args, lines, 4, &n, ERR, sizeof ERR);
        free_lines(lines, n);
        if (rc != 2 || !strstr(ERR, bad[i][1]))
            fail_msg("%s: exit %d, stderr: %s", bad[i][0], rc, ERR);
    }
}

static int write_model(void **state)
{
    (void)state;
    FILE *f = fopen(MODEL, "w");
    if (!f)
        return -1;
    fprintf(f, "{\"num_layers\": %d, \"hidden\": %d, \"heads\": %d, \"seq_len\": %d}\n", L, C, NH, T);
    return fclose(f);
}

int main(int argc, char **argv)
{
    int begun = dtrain_suite_begin(argc, argv, 3, &DTRAIN, &MPIRUN);
    if (begun >= 0)
        return begun;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(one_rank_keeps_the_closed_form_and_the_same_weights, write_model),
        cmocka_unit_test_setup(layouts_keep_the_same_weights, write_model),
        cmocka_unit_test_setup(profile_shows_the_rerun, write_model),
        cmocka_unit_test_setup(bad_values_exit_2, write_model),
    };
    return dtrain_suite_run_private("test_recompute", tests);
}
