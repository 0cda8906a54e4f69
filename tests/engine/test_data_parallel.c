/* Data parallelism under mpirun on CPU: for the same seed, global batch and data, DP=2 and
 * DP=4 with each ZeRO stage log every step's loss equal to the single-rank run's within 1e-5
 * relative, and end with parameters equal to 1e-5 relative; a bad layout stops every rank with
 * a clear error and no hang. argv[1]: dtrain, argv[2]: mpirun. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>
#include "run_dtrain.h"

static const char *DTRAIN, *MPIRUN;
static json_t *S[64], *D[64];
static char ERR[65536];

static void equivalent_with(int dp, int zero, const char *extra)
{
    char dtrain_dp[1024], args[1024];
    int ns, nd;
    const char *common = "--steps 5 --micro-batch 2 --global-batch 8 --seed 3";
    snprintf(args, sizeof args, "%s --dump-params dtrain_dp_single.bin", common);
    assert_int_equal(run_dtrain(DTRAIN, args, S, 64, &ns, ERR, sizeof ERR), 0);
    /* run_dtrain quotes its first argument: launch mpirun through it */
    snprintf(dtrain_dp, sizeof dtrain_dp, "%s' --oversubscribe -np %d '%s", MPIRUN, dp, DTRAIN);
    snprintf(args, sizeof args, "--dp %d --zero %d %s %s --dump-params dtrain_dp_multi.bin", dp, zero, common, extra);
    int rc = run_dtrain(dtrain_dp, args, D, 64, &nd, ERR, sizeof ERR);
    if (rc != 0)
        fail_msg("dp %d zero %d exited %d: %s", dp, zero, rc, ERR);
    assert_int_equal(ns, nd);
    for (int i = 0; i < ns - 1; i++) {
        double a = json_number_value(json_object_get(S[i], "loss")), b = json_number_value(json_object_get(D[i], "loss"));
        if (fabs(a - b) > 1e-5 * fabs(a))
            fail_msg("dp %d zero %d step %d: loss %.9g vs single-rank %.9g", dp, zero, i + 1, b, a);
    }
    size_t n1 = 0, n2 = 0;
    float *p1 = load_params("dtrain_dp_single.bin", &n1), *p2 = load_params("dtrain_dp_multi.bin", &n2);
    assert_non_null(p1);
    assert_non_null(p2);
    assert_int_equal(n1, n2);
    /* Summation order differs (one rank accumulates 4 micro-batches, DP ranks 2 each and then
     * reduce), so gradients differ in their last float bits. AdamW divides by sqrt(v): where a
     * gradient is near zero, such noise moves that element by up to ~lr per step, so a single
     * element may differ by ~1e-5 while the parameters as a whole agree to ~1e-6. Hence two
     * bounds: the relative L2 difference (a real reduction error moves every element) and a
     * per-element bound of a few such AdamW steps. */
    double diff2 = 0, ref2 = 1e-30, worst = 0;
    for (size_t i = 0; i < n1; i++) {
        double d = fabs((double)p1[i] - p2[i]);
        diff2 += d * d;
        ref2 += (double)p1[i] * p1[i];
        worst = fmax(worst, d);
    }
    print_message("dp %d zero %d: parameters relative L2 difference %.2e, largest element difference %.2e\n", dp,
                  zero, sqrt(diff2 / ref2), worst);
    assert_true(sqrt(diff2 / ref2) <= 1e-5);
    assert_true(worst <= 1e-4);
    free(p1);
    free(p2);
    free_lines(S, ns);
    free_lines(D, nd);
}

static void equivalent(int dp, int zero)
{
    equivalent_with(dp, zero, "");
}

static void dp2_every_zero_stage(void **state)
{
    for (int z = 0; z <= 3; z++)
        equivalent(2, z);
}

static void dp4_zero1_and_zero3(void **state)
{
    equivalent(4, 1);
    equivalent(4, 3);
}

/* DP gradient bytes rank 0 sent, from a --rank-params file. */
static double dp_bytes(const char *path)
{
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    double b = j ? json_number_value(json_object_get(j, "dp_bytes_sent_rank0")) : -1;
    json_decref(j);
    return b;
}

/* Compression by precision: the gradients travel as bf16. The gradient bytes rank 0 sends halve
 * exactly (the same ring, 2 bytes per gradient instead of 4): ZeRO-0's all-reduce is all of its
 * DP traffic (ratio 1/2); ZeRO-1 also all-gathers the fp32 parameters, as many bytes as its
 * gradient reduce-scatter (ratio (1/2 + 1) / 2 = 3/4). Training goes on as in fp32: every step's
 * loss within 1e-3 of the single-rank run's, the loss falling as it does. */
static void bf16_gradient_reduction_halves_the_bytes(void **state)
{
    (void)state;
    const char *common = "--steps 5 --micro-batch 2 --global-batch 8 --seed 3";
    char launcher[1024], args[1024];
    int ns, nd;
    assert_int_equal(run_dtrain(DTRAIN, common, S, 64, &ns, ERR, sizeof ERR), 0);
    snprintf(launcher, sizeof launcher, "%s' --oversubscribe -np 2 '%s", MPIRUN, DTRAIN);
    for (int zero = 0; zero <= 1; zero++) {
        double bytes[2];
        for (int bf16 = 0; bf16 < 2; bf16++) {
            snprintf(args, sizeof args, "--dp 2 --zero %d --grad-reduce %s %s --rank-params dtrain_dp_rp.json", zero,
                     bf16 ? "bf16" : "fp32", common);
            if (run_dtrain(launcher, args, D, 64, &nd, ERR, sizeof ERR) != 0)
                fail_msg("%s: %s", args, ERR);
            bytes[bf16] = dp_bytes("dtrain_dp_rp.json");
            for (int i = 0; bf16 && i < ns - 1; i++) {
                double a = json_number_value(json_object_get(S[i], "loss"));
                double b = json_number_value(json_object_get(D[i], "loss"));
                if (fabs(a - b) > 1e-3 * fabs(a))
                    fail_msg("ZeRO-%d bf16 reduction, step %d: loss %.7g vs %.7g", zero, i + 1, b, a);
            }
            if (bf16)
                assert_true(json_number_value(json_object_get(D[ns - 2], "loss")) <
                            0.9 * json_number_value(json_object_get(D[0], "loss")));
            free_lines(D, nd);
        }
        print_message("ZeRO-%d: DP bytes sent by rank 0: fp32 %.0f, bf16 %.0f (ratio %.4f)\n", zero, bytes[0], bytes[1],
                      bytes[1] / bytes[0]);
        assert_true(bytes[0] > 0 && bytes[1] == bytes[0] * (zero == 0 ? 0.5 : 0.75));
    }
    remove("dtrain_dp_rp.json");
    free_lines(S, ns);
}

/* The DP traffic of each ZeRO stage, from the algorithm: at DP 2 a collective over a buffer of F
 * floats sends (2-1)/2 of it per pass of the ring, 2 bytes per float (an all-reduce: two passes,
 * 4). The tiny model (4 layers, hidden 128, seq 64, the bundled corpus's 256-token vocabulary) has
 * N = V C + T C + L (12 C^2 + 13 C) + 2 C parameters, of which the tied embedding (W = V C) is used
 * by two passes (the embedding's and the head's). Per step of A micro-batches:
 *   ZeRO-0: all-reduce of the gradients, 4 N;  ZeRO-1: reduce-scatter + all-gather, 2 N + 2 N;
 *   ZeRO-2: every backward pass reduce-scatters its window, A 2 (N + W), + the all-gather 2 N;
 *   ZeRO-3: as ZeRO-2 without the all-gather, and every forward and backward pass all-gathers
 *           its parameters, A 2 2 (N + W); the closing parameter gather adds 2 N once.
 * A gather done as an all-reduce of a zero-padded window, or a reduction per step instead of per
 * pass, misses these by whole multiples. */
static void zero_wire_bytes_follow_the_closed_form(void **state)
{
    (void)state;
    const double V = 256, C = 128, T = 64, L = 4, steps = 2, A = 2;
    const double N = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C, W = V * C;
    const double expect[4] = {steps * 4 * N, steps * (2 * N + 2 * N), steps * (A * 2 * (N + W) + 2 * N),
                              steps * A * (2 * (N + W) + 2 * 2 * (N + W)) + 2 * N};
    char launcher[1024], args[512];
    int nd;
    snprintf(launcher, sizeof launcher, "%s' --oversubscribe -np 2 '%s", MPIRUN, DTRAIN);
    for (int zero = 0; zero <= 3; zero++) {
        snprintf(args, sizeof args,
                 "--dp 2 --zero %d --steps 2 --micro-batch 2 --global-batch 8 --seed 3 --rank-params dtrain_dp_rp.json",
                 zero);
        if (run_dtrain(launcher, args, D, 64, &nd, ERR, sizeof ERR) != 0)
            fail_msg("%s: %s", args, ERR);
        free_lines(D, nd);
        double got = dp_bytes("dtrain_dp_rp.json");
        print_message("ZeRO-%d: DP bytes sent by rank 0 %.0f, closed form %.0f\n", zero, got, expect[zero]);
        if (got != expect[zero])
            fail_msg("ZeRO-%d: rank 0 sent %.0f DP bytes, the closed form says %.0f", zero, got, expect[zero]);
    }
    remove("dtrain_dp_rp.json");
}

/* --overlap-grad-reduce: the same losses and parameters as one rank, and the buckets really start
 * during the backward. Buckets of 0.5 MiB are smaller than one layer's gradients (198,272 floats,
 * 0.76 MiB), so each of the 4 layers' last backward pass starts one (the final norm's joins the
 * last layer's) before the step's last embedding backward; the tied embedding's (wte with wpe)
 * starts after it, at the step's end: 5 per step. Read from rank 0's profile trace. */
static void overlapped_buckets_start_during_the_backward(void **state)
{
    (void)state;
    for (int zero = 0; zero <= 1; zero++) {
        equivalent_with(2, zero, "--overlap-grad-reduce --bucket-mb 0.5 --profile dtrain_dp_prof.json");
        json_error_t je;
        json_t *doc = json_load_file("dtrain_dp_prof.json.trace.json", 0, &je);
        assert_non_null(doc);
        json_t *ev = json_is_array(doc) ? doc : json_object_get(doc, "traceEvents");
        for (int step = 1; step <= 5; step++) {
            double last_embedding_bwd = -1;
            size_t i;
            json_t *e;
            json_array_foreach(ev, i, e) {
                if (json_integer_value(json_object_get(json_object_get(e, "args"), "step")) == step &&
                    !strcmp(json_string_value(json_object_get(e, "name")), "embedding_bwd"))
                    last_embedding_bwd = fmax(last_embedding_bwd, json_number_value(json_object_get(e, "ts")));
            }
            int before = 0, after = 0;
            json_array_foreach(ev, i, e) {
                if (json_integer_value(json_object_get(json_object_get(e, "args"), "step")) == step &&
                    !strcmp(json_string_value(json_object_get(e, "name")), "dp_grad_bucket_start")) {
                    if (json_number_value(json_object_get(e, "ts")) < last_embedding_bwd)
                        before++;
                    else
                        after++;
                }
            }
            if (last_embedding_bwd < 0 || before != 4 || after != 1)
                fail_msg("ZeRO-%d step %d: %d buckets started before the last embedding backward, %d after (want 4, 1)",
                         zero, step, before, after);
        }
        json_decref(doc);
        print_message("ZeRO-%d --overlap-grad-reduce: 4 buckets a step start during the backward, 1 after\n", zero);
    }
    remove("dtrain_dp_prof.json");
    remove("dtrain_dp_prof.json.trace.json");
}

/* --overlap-param-gather: the updated parameters' all-gather starts in buckets after the
 * optimizer step; the next step's forward waits for each bucket when a pass first reads it. The
 * weights are those of the single-rank run, as without it; in steps 2 to 4 (those after an
 * optimizer step and before the last, whose own gathers land for the final dump), the forward
 * begins (the embedding) before the last bucket lands, and every bucket lands before the backward
 * begins. */
static void overlapped_param_gather_lands_during_the_forward(void **state)
{
    (void)state;
    equivalent_with(2, 1, "--overlap-grad-reduce --overlap-param-gather --bucket-mb 0.05 --profile dtrain_dp_prof.json");
    json_error_t je;
    json_t *doc = json_load_file("dtrain_dp_prof.json.trace.json", 0, &je);
    assert_non_null(doc);
    json_t *ev = json_is_array(doc) ? doc : json_object_get(doc, "traceEvents");
    for (int step = 2; step <= 4; step++) {
        double embedding = -1, first_bwd = INFINITY, last_wait = -1;
        int waits = 0;
        size_t i;
        json_t *e;
        json_array_foreach(ev, i, e) {
            if (json_integer_value(json_object_get(json_object_get(e, "args"), "step")) != step)
                continue;
            const char *name = json_string_value(json_object_get(e, "name"));
            double ts = json_number_value(json_object_get(e, "ts"));
            if (!strcmp(name, "embedding") && embedding < 0)
                embedding = ts;
            else if (strstr(name, "_bwd"))
                first_bwd = fmin(first_bwd, ts);
            else if (!strcmp(name, "dp_param_gather_wait")) {
                waits++;
                last_wait = fmax(last_wait, ts);
            }
        }
        print_message("step %d: %d buckets landed; forward began at %.0f us, last landed at %.0f us, backward at %.0f us\n",
                      step, waits, embedding, last_wait, first_bwd);
        if (waits < 2 || embedding < 0 || !(embedding < last_wait) || !(last_wait < first_bwd))
            fail_msg("step %d: the parameter buckets did not land during the forward", step);
    }
    json_decref(doc);
    remove("dtrain_dp_prof.json");
    remove("dtrain_dp_prof.json.trace.json");
}

/* Where the overlap does not apply, dtrain says so and stops (exit 2) before training. */
static void overlap_refused_where_it_does_not_apply(void **state)
{
    (void)state;
    const char *bad[] = {"--zero 2", "--zero 3", "--grad-reduce bf16", "--grad-compress powersgd:2"};
    for (int i = 0; i < 4; i++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "timeout 60 '%s' --oversubscribe -np 2 '%s' --dp 2 %s --overlap-grad-reduce --steps 1 "
                 "2>dtrain_dp_err >/dev/null",
                 MPIRUN, DTRAIN, bad[i]);
        int st = system(cmd);
        assert_true(WIFEXITED(st));
        FILE *f = fopen("dtrain_dp_err", "r");
        size_t got = fread(ERR, 1, sizeof ERR - 1, f);
        ERR[got] = 0;
        fclose(f);
        if (WEXITSTATUS(st) != 2 || !strstr(ERR, "--overlap-grad-reduce"))
            fail_msg("%s --overlap-grad-reduce: exit %d, %s", bad[i], WEXITSTATUS(st), ERR);
    }
    /* a bucket size without the overlap it sizes is a mistake, not a no-op */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' --bucket-mb 1 --steps 1 2>dtrain_dp_err >/dev/null", DTRAIN);
    int st = system(cmd);
    FILE *f = fopen("dtrain_dp_err", "r");
    size_t got = fread(ERR, 1, sizeof ERR - 1, f);
    ERR[got] = 0;
    fclose(f);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 2 || !strstr(ERR, "--bucket-mb"))
        fail_msg("--bucket-mb without --overlap-grad-reduce: status %d, %s", st, ERR);
    /* --overlap-param-gather needs the distributed optimizer (ZeRO-1) and the gradient overlap */
    const char *param_bad[] = {"--zero 1", "--zero 0 --overlap-grad-reduce", "--zero 2 --overlap-grad-reduce"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "timeout 60 '%s' --dp 1 %s --overlap-param-gather --steps 1 2>dtrain_dp_err >/dev/null",
                 DTRAIN, param_bad[i]);
        st = system(cmd);
        f = fopen("dtrain_dp_err", "r");
        got = fread(ERR, 1, sizeof ERR - 1, f);
        ERR[got] = 0;
        fclose(f);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 2 || !strstr(ERR, "--overlap-param-gather"))
            fail_msg("%s --overlap-param-gather: status %d, %s", param_bad[i], st, ERR);
    }
    remove("dtrain_dp_err");
}

static void bad_layout_stops_every_rank(void **state)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' --oversubscribe -np 3 '%s' --dp 2 --steps 2 2>dtrain_dp_err >/dev/null",
             MPIRUN, DTRAIN);
    int st = system(cmd);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    assert_int_not_equal(rc, 0);
    assert_int_not_equal(rc, 124); /* not a hang */
    FILE *f = fopen("dtrain_dp_err", "r");
    size_t got = fread(ERR, 1, sizeof ERR - 1, f);
    ERR[got] = 0;
    fclose(f);
    assert_non_null(strstr(ERR, "3 were launched"));
}

int main(int argc, char **argv)
{
    int begun = dtrain_suite_begin(argc, argv, 3, &DTRAIN, &MPIRUN);
    if (begun >= 0)
        return begun;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dp2_every_zero_stage),
        cmocka_unit_test(dp4_zero1_and_zero3),
        cmocka_unit_test(bf16_gradient_reduction_halves_the_bytes),
        cmocka_unit_test(zero_wire_bytes_follow_the_closed_form),
        cmocka_unit_test(overlapped_buckets_start_during_the_backward),
        cmocka_unit_test(overlapped_param_gather_lands_during_the_forward),
        cmocka_unit_test(overlap_refused_where_it_does_not_apply),
        cmocka_unit_test(bad_layout_stops_every_rank),
    };
    return dtrain_suite_run_private("test_data_parallel", tests);
}
