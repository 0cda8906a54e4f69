/* dtrain's command line: the --log-json format, determinism, fp16 loss scaling under an
 * injected overflow, clear errors for bad input, exit 1 for a log it cannot write, exit 3 for a
 * diverged (NaN) loss. argv[1] is the dtrain binary. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>
#include "run_dtrain.h"

static const char *DTRAIN;
static json_t *L[64];
static char ERR[16384];

static const char *crc_of(json_t *line)
{
    return json_string_value(json_object_get(line, "params_crc32"));
}

static void log_lines_have_exactly_the_design_keys(void **state)
{
    int n;
    assert_int_equal(run_dtrain(DTRAIN, "--steps 3 --micro-batch 2 --seed 5", L, 64, &n, ERR, sizeof ERR), 0);
    assert_int_equal(n, 4);
    static const char *keys[] = {"step", "loss", "grad_norm", "loss_scale", "lr", "step_time_s", "tokens_per_s"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(json_object_size(L[i]), 7);
        for (int k = 0; k < 7; k++)
            assert_non_null(json_object_get(L[i], keys[k]));
        assert_int_equal(json_integer_value(json_object_get(L[i], "step")), i + 1);
        assert_true(json_number_value(json_object_get(L[i], "loss")) > 0);
    }
    assert_int_equal(json_object_size(L[3]), 4);
    assert_true(json_is_true(json_object_get(L[3], "final")));
    const char *crc = crc_of(L[3]);
    assert_non_null(crc);
    assert_int_equal(strlen(crc), 8);
    assert_int_equal(strspn(crc, "0123456789abcdef"), 8);
    free_lines(L, n);
}

static void same_seed_same_crc_other_seed_differs(void **state)
{
    int n;
    char a[16], b[16], c[16];
    assert_int_equal(run_dtrain(DTRAIN, "--steps 3 --micro-batch 2 --seed 5", L, 64, &n, ERR, sizeof ERR), 0);
    snprintf(a, sizeof a, "%s", crc_of(L[n - 1]));
    free_lines(L, n);
    assert_int_equal(run_dtrain(DTRAIN, "--steps 3 --micro-batch 2 --seed 5", L, 64, &n, ERR, sizeof ERR), 0);
    snprintf(b, sizeof b, "%s", crc_of(L[n - 1]));
    free_lines(L, n);
    assert_int_equal(run_dtrain(DTRAIN, "--steps 3 --micro-batch 2 --seed 6", L, 64, &n, ERR, sizeof ERR), 0);
    snprintf(c, sizeof c, "%s", crc_of(L[n - 1]));
    free_lines(L, n);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
}

/* Megatron-LM's flag names train the same run as dtrain's own. */
static void megatron_names_are_aliases(void **state)
{
    (void)state;
    int n;
    char a[16], b[16];
    assert_int_equal(run_dtrain(DTRAIN, "--steps 3 --micro-batch 2 --global-batch 4 --warmup 1 --grad-clip 0.5 "
                                        "--precision bf16 --seed 5", L, 64, &n, ERR, sizeof ERR), 0);
    snprintf(a, sizeof a, "%s", crc_of(L[n - 1]));
    free_lines(L, n);
    assert_int_equal(run_dtrain(DTRAIN, "--train-iters 3 --micro-batch-size 2 --global-batch-size 4 "
                                        "--lr-warmup-iters 1 --clip-grad 0.5 --bf16 --seed 5", L, 64, &n, ERR,
                                sizeof ERR), 0);
    snprintf(b, sizeof b, "%s", crc_of(L[n - 1]));
    free_lines(L, n);
    assert_string_equal(a, b);
    /* and a value-less alias does not swallow the next flag */
    assert_int_equal(run_dtrain(DTRAIN, "--bf16 --train-iters 2 --micro-batch-size 2", L, 64, &n, ERR, sizeof ERR), 0);
    free_lines(L, n);
}

static void fp16_overflow_skips_the_step_and_halves_the_scale(void **state)
{
    int n;
    assert_int_equal(run_dtrain(DTRAIN, "--steps 5 --micro-batch 2 --precision fp16 --inject-overflow 3 --log-crc",
                                L, 64, &n, ERR, sizeof ERR), 0);
    assert_int_equal(n, 6);
    double s2 = json_number_value(json_object_get(L[1], "loss_scale"));
    double s3 = json_number_value(json_object_get(L[2], "loss_scale"));
    assert_true(s2 == 65536 && s3 == s2 / 2);
    /* The skipped step left every weight as it was: same CRC after step 2 and step 3. */
    assert_string_equal(crc_of(L[1]), crc_of(L[2]));
    assert_string_not_equal(crc_of(L[2]), crc_of(L[3])); /* training continues */
    for (int i = 3; i < 5; i++)
        assert_true(isfinite(json_number_value(json_object_get(L[i], "loss"))));
    assert_non_null(strstr(ERR, "overflow"));
    free_lines(L, n);
}

/* bf16 has no loss scaler: the gradient norm is the check, and a non-finite one skips the step
 * (no separate overflow pass), leaving the scale at 1. */
static void bf16_nonfinite_norm_skips_the_step(void **state)
{
    int n;
    assert_int_equal(run_dtrain(DTRAIN, "--steps 4 --micro-batch 2 --precision bf16 --inject-overflow 2 --log-crc", L,
                                64, &n, ERR, sizeof ERR), 0);
    assert_int_equal(n, 5);
    assert_true(json_number_value(json_object_get(L[1], "grad_norm")) == -1.0); /* logged as not finite */
    assert_true(json_number_value(json_object_get(L[0], "grad_norm")) > 0);
    assert_true(json_number_value(json_object_get(L[1], "loss_scale")) == 1.0);
    assert_string_equal(crc_of(L[0]), crc_of(L[1]));     /* step 2 changed no weight */
    assert_string_not_equal(crc_of(L[1]), crc_of(L[2])); /* step 3 trains */
    assert_non_null(strstr(ERR, "overflow"));
    free_lines(L, n);
}

static void fp16_scale_doubles_after_a_window_of_good_steps(void **state)
{
    int n;
    assert_int_equal(run_dtrain(DTRAIN, "--steps 5 --micro-batch 1 --precision fp16 --loss-scale-window 2", L, 64, &n,
                                ERR, sizeof ERR), 0);
    assert_int_equal(n, 6);
    const double expect[5] = {65536, 131072, 131072, 262144, 262144}; /* logged after each update */
    for (int i = 0; i < 5; i++)
        assert_true(json_number_value(json_object_get(L[i], "loss_scale")) == expect[i]);
    free_lines(L, n);
    /* fp32 and bf16 do not scale: the logged scale is 1 */
    assert_int_equal(run_dtrain(DTRAIN, "--steps 1 --micro-batch 1 --precision bf16", L, 64, &n, ERR, sizeof ERR), 0);
    assert_true(json_number_value(json_object_get(L[0], "loss_scale")) == 1.0);
    free_lines(L, n);
}

static void lr_warms_up_linearly_then_decays_by_cosine_to_a_tenth(void **state)
{
    int n;
    assert_int_equal(run_dtrain(DTRAIN, "--steps 10 --warmup 2 --lr 0.01 --micro-batch 1", L, 64, &n, ERR, sizeof ERR),
                     0);
    assert_int_equal(n, 11);
    /* closed form: step s <= w: lr s/w; then 0.1 lr + 0.45 lr (1 + cos(pi (s - w) / (steps - w))) */
    for (int s = 1; s <= 10; s++) {
        double expect = s <= 2 ? 0.01 * s / 2 : 0.001 + 0.0045 * (1 + cos(M_PI * (s - 2) / 8.0));
        double got = json_number_value(json_object_get(L[s - 1], "lr"));
        if (fabs(got - expect) > 1e-9)
            fail_msg("step %d: lr %.9g, expected %.9g", s, got, expect);
    }
    free_lines(L, n);
}

/* Accumulating 4 micro-batches of 2 is the same step as one micro-batch of 8 (the same 8
 * sequences, the same mean loss); only the order of floating-point sums differs. */
static void gradient_accumulation_equals_the_full_batch(void **state)
{
    static json_t *A[64];
    int na, nb;
    assert_int_equal(run_dtrain(DTRAIN, "--steps 3 --micro-batch 2 --global-batch 8", A, 64, &na, ERR, sizeof ERR), 0);
    assert_int_equal(run_dtrain(DTRAIN, "--steps 3 --micro-batch 8 --global-batch 8", L, 64, &nb, ERR, sizeof ERR), 0);
    assert_int_equal(na, 4);
    assert_int_equal(nb, 4);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++) {
            const char *key = k ? "grad_norm" : "loss";
            double a = json_number_value(json_object_get(A[i], key)), b = json_number_value(json_object_get(L[i], key));
            if (!(fabs(a - b) <= 1e-4 * fabs(b)))
                fail_msg("step %d %s: %.8g accumulated vs %.8g in one micro-batch", i + 1, key, a, b);
        }
    free_lines(A, na);
    free_lines(L, nb);
}

/* A diverged run (a NaN put into layer 0's norm weight before step 3, so the loss is NaN): the
 * step is still logged, its loss null (JSON has no NaN), and the run stops with exit 3, no final
 * line and no checkpoint after the last good one, its run folder's metrics and summary saying
 * the same; --no-check-for-nan-in-loss-and-grad (Megatron-LM's flag) trains on to the end. */
static void a_nan_loss_is_logged_and_stops_the_run(void **state)
{
    int n;
    (void)system("rm -rf dtrain_nan_ckpt dtrain_nan_run");
    assert_int_equal(run_dtrain(DTRAIN, "--steps 6 --micro-batch 2 --inject-nan 3 --ckpt-dir dtrain_nan_ckpt "
                                "--ckpt-every 2 --ckpt-sync --run-dir dtrain_nan_run", L, 64, &n, ERR, sizeof ERR), 3);
    if (!strstr(ERR, "step 3: the loss is NaN; stopping (exit 3)"))
        fail_msg("stderr was: %s", ERR);
    assert_int_equal(n, 3); /* steps 1..3, no final line */
    assert_true(json_is_real(json_object_get(L[1], "loss")));
    assert_true(json_is_null(json_object_get(L[2], "loss")));
    assert_int_equal(json_integer_value(json_object_get(L[2], "step")), 3);
    free_lines(L, n);
    assert_int_equal(access("dtrain_nan_ckpt/step-00000002/manifest.json", F_OK), 0);
    assert_int_equal(access("dtrain_nan_ckpt/step-00000003", F_OK), -1);
    json_error_t je;
    json_t *summary = json_load_file("dtrain_nan_run/summary.json", 0, &je);
    assert_non_null(summary);
    assert_true(json_is_null(json_object_get(summary, "final_loss")));
    assert_true(json_is_false(json_object_get(summary, "completed")));
    json_decref(summary);
    FILE *f = fopen("dtrain_nan_run/metrics.jsonl", "r");
    assert_non_null(f);
    char line[4096], last[4096] = "";
    while (fgets(line, sizeof line, f))
        snprintf(last, sizeof last, "%s", line);
    fclose(f);
    assert_non_null(strstr(last, "\"step\":3,\"loss\":null"));
    assert_int_equal(run_dtrain(DTRAIN, "--steps 5 --micro-batch 2 --inject-nan 3 --no-check-for-nan-in-loss-and-grad",
                                L, 64, &n, ERR, sizeof ERR), 0);
    assert_int_equal(n, 6);
    assert_true(json_is_true(json_object_get(L[5], "final")));
    assert_true(json_is_null(json_object_get(L[5], "loss")));
    free_lines(L, n);
    (void)system("rm -rf dtrain_nan_ckpt dtrain_nan_run");
}

/* A log that cannot be written (a full disk: /dev/full) is exit 1 with the reason, the errno of
 * the failed write; so is standard output as the log ("-"). */
static void a_log_that_cannot_be_written_exits_1(void **state)
{
    const char *how[2] = {"--log-json /dev/full", "--log-json - >/dev/full"};
    const char *name[2] = {"--log-json /dev/full: cannot write: No space left on device",
                           "--log-json -: cannot write: No space left on device"};
    for (int k = 0; k < 2; k++) {
        char args[256];
        snprintf(args, sizeof args, "--steps 2 --micro-batch 2 %s", how[k]);
        assert_int_equal(run_dtrain_sh("", DTRAIN, args, ERR, sizeof ERR), 1);
        if (!strstr(ERR, name[k]))
            fail_msg("%s: stderr was: %s", how[k], ERR);
    }
}

static void write_file(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(bytes, 1, n, f);
    fclose(f);
}

static void bad_data_files_exit_2_naming_the_file(void **state)
{
    const char *path = "dtrain_bad_data.tok";
    unsigned char good[24 + 200] = {'D', 'T', 'O', 'K', 1, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0};
    char args[256];
    snprintf(args, sizeof args, "--steps 1 --micro-batch 1 --data %s", path);
    int n;
    unsigned char bad[sizeof good];

    memcpy(bad, good, sizeof good);
    bad[0] = 'X';
    write_file(path, bad, sizeof bad);
    assert_int_equal(run_dtrain(DTRAIN, args, L, 64, &n, ERR, sizeof ERR), 2);
    assert_non_null(strstr(ERR, path));
    assert_non_null(strstr(ERR, "magic"));

    write_file(path, good, sizeof good - 7); /* truncated */
    assert_int_equal(run_dtrain(DTRAIN, args, L, 64, &n, ERR, sizeof ERR), 2);
    assert_non_null(strstr(ERR, "truncated"));

    memcpy(bad, good, sizeof good);
    bad[24 + 2 * 17] = 0x10; bad[24 + 2 * 17 + 1] = 0x01; /* token 17 = 272 >= vocab 256 */
    write_file(path, bad, sizeof bad);
    assert_int_equal(run_dtrain(DTRAIN, args, L, 64, &n, ERR, sizeof ERR), 2);
    assert_non_null(strstr(ERR, "token 17"));

    assert_int_equal(run_dtrain(DTRAIN, "--steps 1 --data /nonexistent/x.tok", L, 64, &n, ERR, sizeof ERR), 2);
    assert_non_null(strstr(ERR, "/nonexistent/x.tok"));
    remove(path);
}

/* One model file for both programs: dtsim's `model` keys (Megatron-LM's names), or a whole dtsim
 * scenario, train the same model as dtrain's short form (same CRC); what GPT-2 blocks cannot be
 * is refused naming the key; a size given twice or missing is refused. */
static void dtsim_model_keys_describe_the_same_model(void **state)
{
    (void)state;
    write_file("m_short.json", "{\"num_layers\": 2, \"hidden\": 64, \"heads\": 4, \"seq_len\": 32}", 58);
    const char *lng = "{\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, \"seq_length\": 32, "
                      "\"vocab_size\": 256, \"ffn_hidden_size\": 256, \"num_query_groups\": 4, \"swiglu\": false, "
                      "\"attention\": \"flash\", \"cross_entropy_loss_fusion\": true}";
    write_file("m_long.json", lng, strlen(lng));
    char scen[1024];
    snprintf(scen, sizeof scen, "{\"name\": \"x\", \"platform\": \"p.json\", \"model\": %s, \"training\": {}}", lng);
    write_file("m_scenario.json", scen, strlen(scen));
    char crc[3][16];
    const char *files[] = {"m_short.json", "m_long.json", "m_scenario.json"};
    for (int i = 0; i < 3; i++) {
        char args[256];
        int n;
        snprintf(args, sizeof args, "--model %s --steps 2 --micro-batch 2 --seed 5", files[i]);
        if (run_dtrain(DTRAIN, args, L, 64, &n, ERR, sizeof ERR) != 0)
            fail_msg("%s: %s", files[i], ERR);
        snprintf(crc[i], sizeof crc[i], "%s", crc_of(L[n - 1]));
        free_lines(L, n);
    }
    assert_string_equal(crc[0], crc[1]);
    assert_string_equal(crc[0], crc[2]);
    static const char *const bad[][2] = {
        {"{\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, \"seq_length\": 32, \"swiglu\": 1}",
         "swiglu"},
        {"{\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, \"seq_length\": 32, \"num_query_groups\": 3}",
         "num_query_groups"},
        {"{\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, \"seq_length\": 32, \"ffn_hidden_size\": 0}",
         "ffn_hidden_size"},
        {"{\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, \"seq_length\": 32, \"normalization\": "
         "\"BatchNorm\"}", "normalization"},
        {"{\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, \"seq_length\": 32, "
         "\"position_embedding_type\": \"alibi\"}", "position_embedding_type"},
        {"{\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, \"seq_length\": 32, \"attention\": \"unfused\"}",
         "attention"},
        {"{\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, \"seq_length\": 32, \"num_experts\": 8}",
         "num_experts"},
        {"{\"num_layers\": 2, \"hidden\": 64, \"hidden_size\": 64, \"num_attention_heads\": 4, \"seq_length\": 32}",
         "both give"},
        {"{\"num_layers\": 2, \"hidden_size\": 64, \"seq_length\": 32}", "num_attention_heads"},
        {"{\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, \"seq_length\": 32, \"rope\": 1}", "rope"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file("m_bad.json", bad[i][0], strlen(bad[i][0]));
        int n;
        int rc = run_dtrain(DTRAIN, "--model m_bad.json --steps 1", L, 64, &n, ERR, sizeof ERR);
        free_lines(L, n);
        if (rc != 2 || !strstr(ERR, bad[i][1]) || !strstr(ERR, "m_bad.json"))
            fail_msg("%s: exit %d, stderr: %s", bad[i][0], rc, ERR);
    }
    remove("m_short.json");
    remove("m_long.json");
    remove("m_scenario.json");
    remove("m_bad.json");
}

static void bad_flags_exit_2(void **state)
{
    int n;
    const char *bad[] = {"--steps 0", "--precision fp8", "--micro-batch 3 --global-batch 8", "--tp 2",
                         "--device tpu", "--model nosuchmodel", "--lr abc", "--bogus 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run_dtrain(DTRAIN, bad[i], L, 64, &n, ERR, sizeof ERR);
        if (rc != 2)
            fail_msg("'%s' exited %d, expected 2 (stderr: %s)", bad[i], rc, ERR);
        assert_true(strlen(ERR) > 10);
        free_lines(L, n);
    }
}

/* --expert-model-parallel-size: the options expert parallelism does not take yet, and a degree
 * not dividing DP (one rank here), exit 2 naming the flag and the other one. */
static void expert_parallel_refusals_exit_2_naming_the_flags(void **state)
{
    (void)state;
    const char *bad[][2] = {
        {"--ep 2", "must divide --dp (1)"},
        {"--ep 0", "--ep: '0' is not a whole number"},
        {"--ep 2 --grad-compress powersgd:1", "not with --grad-compress"},
        {"--ep 2 --offload-optimizer", "not with --offload-optimizer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int n, rc = run_dtrain(DTRAIN, bad[i][0], L, 64, &n, ERR, sizeof ERR);
        free_lines(L, n);
        if (rc != 2 || !strstr(ERR, bad[i][1]) || (i != 1 && !strstr(ERR, "--expert-model-parallel-size")))
            fail_msg("'%s': exit %d (want 2), stderr: %s", bad[i][0], rc, ERR);
    }
}

static void profile_lists_every_op_per_layer_and_a_chrome_trace(void **state)
{
    const char *prof = "dtrain_test_profile.json";
    char args[256];
    snprintf(args, sizeof args, "--steps 2 --micro-batch 2 --profile %s", prof);
    int n;
    assert_int_equal(run_dtrain(DTRAIN, args, L, 64, &n, ERR, sizeof ERR), 0);
    free_lines(L, n);
    json_error_t je;
    json_t *doc = json_load_file(prof, 0, &je);
    assert_non_null(doc);
    json_t *ops = json_object_get(doc, "ops");
    assert_true(json_array_size(ops) > 0);
    /* tiny has 4 layers: every layer has a timed qkv forward and backward with FLOPs */
    int qkv[4] = {0}, qkv_bwd[4] = {0}, optimizer = 0, grad_norm = 0;
    for (size_t i = 0; i < json_array_size(ops); i++) {
        json_t *o = json_array_get(ops, i);
        const char *name = json_string_value(json_object_get(o, "op"));
        int layer = (int)json_integer_value(json_object_get(o, "layer"));
        assert_true(json_number_value(json_object_get(o, "mean_s")) >= 0);
        /* micro-batch 2 x seq 64 = 128 rows; hidden 128: qkv is a (128 x 128) @ (128 x 384) GEMM */
        if (!strcmp(name, "qkv") && layer >= 0 && layer < 4) {
            assert_string_equal(json_string_value(json_object_get(o, "shape")), "m=128 n=384 k=128");
            assert_true(json_number_value(json_object_get(o, "flops")) == 2.0 * 128 * 384 * 128);
            assert_true(json_number_value(json_object_get(o, "bytes")) == 4.0 * (128 * 128 + 384 * 128 + 128 * 384));
            assert_string_equal(json_string_value(json_object_get(o, "dtype")), "fp32");
            qkv[layer] = 1;
        }
        if (!strcmp(name, "attention")) /* 4 B T^2 C, DESIGN.md's convention (no causal halving) */
            assert_true(json_number_value(json_object_get(o, "flops")) == 4.0 * 2 * 64 * 64 * 128);
        if (!strcmp(name, "qkv_bwd") && layer >= 0 && layer < 4)
            qkv_bwd[layer] = 1;
        optimizer |= !strcmp(name, "optimizer");
        grad_norm |= !strcmp(name, "grad_norm") && layer == -1; /* the simulator's grad_norm task */
    }
    for (int l = 0; l < 4; l++)
        assert_true(qkv[l] && qkv_bwd[l]);
    assert_true(optimizer && grad_norm);
    json_decref(doc);
    char trace[300];
    snprintf(trace, sizeof trace, "%s.trace.json", prof);
    doc = json_load_file(trace, 0, &je);
    assert_non_null(doc);
    json_t *ev = json_object_get(doc, "traceEvents");
    assert_true(json_array_size(ev) > 100);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 0), "ph")), "X");
    json_decref(doc);
    remove(prof);
    remove(trace);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    DTRAIN = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(log_lines_have_exactly_the_design_keys),
        cmocka_unit_test(same_seed_same_crc_other_seed_differs),
        cmocka_unit_test(megatron_names_are_aliases),
        cmocka_unit_test(fp16_overflow_skips_the_step_and_halves_the_scale),
        cmocka_unit_test(bf16_nonfinite_norm_skips_the_step),
        cmocka_unit_test(gradient_accumulation_equals_the_full_batch),
        cmocka_unit_test(fp16_scale_doubles_after_a_window_of_good_steps),
        cmocka_unit_test(lr_warms_up_linearly_then_decays_by_cosine_to_a_tenth),
        cmocka_unit_test(bad_data_files_exit_2_naming_the_file),
        cmocka_unit_test(bad_flags_exit_2),
        cmocka_unit_test(expert_parallel_refusals_exit_2_naming_the_flags),
        cmocka_unit_test(a_log_that_cannot_be_written_exits_1),
        cmocka_unit_test(a_nan_loss_is_logged_and_stops_the_run),
        cmocka_unit_test(dtsim_model_keys_describe_the_same_model),
        cmocka_unit_test(profile_lists_every_op_per_layer_and_a_chrome_trace),
    };
    char dir[] = "/tmp/test_dtrain_cli_XXXXXX";
    if (enter_private_dir(dir) != 0)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    leave_private_dir(dir);
    return rc;
}
