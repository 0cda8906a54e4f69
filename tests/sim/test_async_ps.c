/* Asynchronous data parallelism with parameter servers (sim/studies/async/async_ps.*, docs/async.md):
 * throughput, link load and staleness against closed forms derived here, the stale-synchronous
 * bound, and the command's input checks and exit codes. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "async_ps.h"
#include "cli.h"
#include "config.h"

/* A small system whose communication is (nearly) free: 1 MB per step over 1 TB/s links. */
static ps_model fast_system(int workers, int servers, int steps)
{
    ps_model m;
    memset(&m, 0, sizeof m);
    m.workers = workers;
    m.servers = servers;
    m.steps = steps;
    m.compute_s = 1;
    m.seed = 7;
    m.push_bytes = m.pull_bytes = 1e6;
    m.update_s = 1e-6;
    m.worker_Bps = m.server_Bps = m.backbone_Bps = 1e12;
    return m;
}

/* Simulates m; a failure fails the test (ps_result_free after). */
static ps_result simulate(const ps_model *m)
{
    ps_result r;
    config_error err;
    if (ps_simulate(m, &r, &err) != 0)
        fail_msg("%s", err.msg);
    return r;
}

static void near(double got, double want, double rel)
{
    if (!(fabs(got - want) <= rel * fabs(want)))
        fail_msg("got %.12g, want %.12g (relative tolerance %g)", got, want, rel);
}

/* (a) Compute-bound: each worker does a step every c plus a few microseconds of communication,
 * so throughput = W / c (from below). Staleness: the W pushes of a round reach a server
 * together and are applied in some order; the one applied at position p waits p updates
 * longer, so it starts its next step later and keeps position p in every round. Its first
 * update (pulled at version 0) is p behind; each later one has the W - 1 - p updates after it
 * in the previous round and the p before it in this one between its pull and its push: W - 1.
 * Per server: one update each at 0..W-1, then W (N - 1) at W - 1. */
static void compute_bound_throughput_and_staleness(void **state)
{
    (void)state;
    const int W = 4, S = 2, N = 20;
    ps_model m = fast_system(W, S, N);
    ps_result r = simulate(&m);
    assert_true(r.steps_per_s <= W / m.compute_s);
    near(r.steps_per_s, W / m.compute_s, 1e-4);
    ps_staleness st;
    ps_staleness_stats(&r, &st);
    assert_int_equal(r.updates, (long)W * S * N);
    assert_int_equal(st.hist_len, W);
    for (int k = 0; k < W - 1; k++)
        assert_int_equal(st.hist[k], S);
    assert_int_equal(st.hist[W - 1], (long)S * W * (N - 1) + S);
    assert_int_equal(st.max, W - 1);
    assert_int_equal(st.p50, W - 1);
    free(st.hist);
    ps_result_free(&r);
}

/* (b) Server-link-bound (update and latency zero, workers' links 1000x faster): identical
 * workers push together, each server's inbound direction carries W x P/S bytes at B_s, then
 * all pull together, W x Q/S bytes outbound. Period c + W (P + Q) / (S B_s) per round of W
 * steps: throughput = W / (c + W (P + Q) / (S B_s)), which tends to S B_s / (P + Q) (server
 * bandwidth over the bytes a step moves per server) as c -> 0. */
static void server_link_bound_throughput(void **state)
{
    (void)state;
    const int W = 4, S = 2, N = 10;
    ps_model m = fast_system(W, S, N);
    m.compute_s = 0.01;
    m.push_bytes = 1e9;
    m.pull_bytes = 0.5e9;
    m.update_s = 0;
    m.server_Bps = 1e9;
    m.worker_Bps = 1e12;
    m.backbone_Bps = 1e13;
    ps_result r = simulate(&m);
    double period = m.compute_s + W * (m.push_bytes + m.pull_bytes) / (S * m.server_Bps);
    near(r.steps_per_s, W / period, 1e-6);
    near(r.makespan_s, N * period, 1e-6);
    for (int j = 0; j < S; j++) {
        near(r.server_in_bytes[j], (double)W * N * m.push_bytes / S, 1e-12);
        near(r.server_out_bytes[j], (double)W * N * m.pull_bytes / S, 1e-12);
    }
    /* the backbone binds instead when it is the narrowest: W (P + Q) per round through it */
    m.backbone_Bps = 0.5e9;
    ps_result_free(&r);
    r = simulate(&m);
    near(r.steps_per_s, W / (m.compute_s + W * (m.push_bytes + m.pull_bytes) / m.backbone_Bps), 1e-6);
    ps_result_free(&r);
}

/* Server-CPU-bound (update u, c <= (W - 1) u): the server is never idle after the first
 * pushes arrive at c; worker p (applied at position p) has its k-th update applied at
 * c + (k - 1) W u + (p + 1) u, pushes its next at most c later, which is before its turn comes
 * again. So worker p finishes at c + (N - 1) W u + (p + 1) u (communication ~ 0), and the
 * throughput is the sum over p of N / that. */
static void server_cpu_bound_throughput(void **state)
{
    (void)state;
    const int W = 3, S = 2, N = 10;
    ps_model m = fast_system(W, S, N);
    m.compute_s = 0.5;
    m.update_s = 1;
    ps_result r = simulate(&m);
    double want = 0;
    for (int p = 0; p < W; p++)
        want += N / (m.compute_s + (N - 1) * W * m.update_s + (p + 1) * m.update_s);
    near(r.steps_per_s, want, 1e-5);
    ps_result_free(&r);
}

/* (c) Stale-synchronous bound s: a worker starts step t only when every worker has finished
 * step t - s. Between worker w's pull (its step t-1 update applied) and its step t push,
 * another worker had finished at least step t-1-s (w started t-1) and can start at most step
 * t-1+s (w has not finished t, so the slowest is at most at t-1): at most 2s of its updates
 * fall in between, so staleness <= 2 s (W - 1); and no worker starts a step more than s - 1
 * ahead of the slowest one's current step. Without the bound a 3x straggler falls far behind. */
static void stale_synchronous_bound_holds(void **state)
{
    (void)state;
    const int W = 4, S = 2, N = 30, s = 2;
    double slow[4] = {1, 1, 1, 3};
    ps_model m = fast_system(W, S, N);
    m.compute_cv = 0.5;
    m.worker_slowdown = slow;
    m.max_staleness = s;
    ps_result r = simulate(&m);
    ps_staleness st;
    ps_staleness_stats(&r, &st);
    assert_true(st.max <= 2 * s * (W - 1));
    assert_true(r.max_steps_ahead <= s - 1);
    free(st.hist);
    ps_result_free(&r);

    m.max_staleness = 0; /* fully asynchronous: the bound is exceeded */
    r = simulate(&m);
    ps_staleness_stats(&r, &st);
    assert_true(st.max > 2 * s * (W - 1));
    assert_true(r.max_steps_ahead > s - 1);
    free(st.hist);
    ps_result_free(&r);
}

/* (d) max_staleness 1 is synchronous-like: with one worker k times slower (compute k c), every
 * worker starts step t when the slow one has finished t-1, at (t-1) k c; a fast worker finishes
 * its last step at (N-1) k c + c, the slow one at N k c. Throughput
 * (W-1) N / ((N-1) k c + c) + 1 / (k c), against (W-1)/c + 1/(k c) fully asynchronous (each
 * worker at its own pace). In lockstep every update is W - 1 behind after the first round. */
static void staleness_one_is_synchronous_like(void **state)
{
    (void)state;
    const int W = 3, S = 1, N = 10;
    const double k = 2, c = 1;
    double slow[3] = {1, 1, k};
    ps_model m = fast_system(W, S, N);
    m.worker_slowdown = slow;
    m.max_staleness = 1;
    ps_result r = simulate(&m);
    near(r.steps_per_s, (W - 1) * N / ((N - 1) * k * c + c) + 1 / (k * c), 1e-4);
    assert_int_equal(r.max_steps_ahead, 0);
    ps_staleness st;
    ps_staleness_stats(&r, &st);
    assert_int_equal(st.max, W - 1);
    assert_int_equal(st.hist[W - 1], (long)S * W * (N - 1) + S);
    free(st.hist);
    ps_result_free(&r);

    m.max_staleness = 0;
    r = simulate(&m);
    near(r.steps_per_s, (W - 1) / c + 1 / (k * c), 1e-4);
    ps_result_free(&r);
}

static const char *shipped(void)
{
    return DTSIM_SOURCE_DIR "/scenarios/gpt3-2.7b-32-a100-ps.json";
}

/* (e) Bad input names the JSON path; the model's bytes are the replica's parameters in the
 * gradient and training dtypes. */
static void bad_input_names_the_path(void **state)
{
    (void)state;
    scenario_config s;
    config_error err;
    const char *zero[] = {"parameter_server.servers=0"};
    assert_int_not_equal(scenario_load(shipped(), zero, 1, &s, &err), 0);
    assert_non_null(strstr(err.msg, "parameter_server.servers"));
    const char *unknown[] = {"parameter_server.shards=2"};
    assert_int_not_equal(scenario_load(shipped(), unknown, 1, &s, &err), 0);
    assert_non_null(strstr(err.msg, "parameter_server"));
    assert_non_null(strstr(err.msg, "shards"));

    assert_int_equal(scenario_load(shipped(), NULL, 0, &s, &err), 0);
    s.parameter_server.present = 0;
    async_report a;
    assert_int_equal(async_ps_run_scenario(&s, 1, NULL, &a, &err), -2);
    assert_non_null(strstr(err.msg, "parameter_server"));
    async_report_free(&a);
    scenario_free(&s);
}

/* The shipped scenario's model: GPT-3 2.7B's parameters (12 L d^2 + 13 L d + (V + s) d + 2 d
 * for a GPT-style model with learned positions and biases) pushed and pulled in bf16. */
static void scenario_model_bytes(void **state)
{
    (void)state;
    scenario_config s;
    config_error err;
    assert_int_equal(scenario_load(shipped(), NULL, 0, &s, &err), 0);
    async_report a;
    assert_int_equal(async_ps_run_scenario(&s, 2, NULL, &a, &err), 0);
    double L = 32, d = 2560, V = 51200, seq = 2048;
    double params = 12 * L * d * d + 13 * L * d + (V + seq) * d + 2 * d;
    near(a.replica_params, params, 2e-3);
    near(a.m.push_bytes, 2 * a.replica_params, 1e-12);
    near(a.m.pull_bytes, 2 * a.replica_params, 1e-12);
    assert_int_equal(a.m.workers, 32);
    assert_int_equal(a.r.updates, 32L * 4 * 2);
    async_report_free(&a);
    scenario_free(&s);
}

static int run_cli(int n, const char **args)
{
    char *argv[16];
    for (int i = 0; i < n; i++)
        argv[i] = (char *)args[i];
    return cli_async(n, argv);
}

static void command_exit_codes(void **state)
{
    (void)state;
    const char *help[] = {"async", "--help"};
    assert_int_equal(run_cli(2, help), 0);
    const char *none[] = {"async"};
    assert_int_equal(run_cli(1, none), 2);
    const char *bad_steps[] = {"async", shipped(), "--steps", "0"};
    assert_int_equal(run_cli(4, bad_steps), 2);
    const char *unknown[] = {"async", shipped(), "--frobnicate"};
    assert_int_equal(run_cli(3, unknown), 2);
    const char *zero[] = {"async", shipped(), "--set", "parameter_server.servers=0"};
    assert_int_equal(run_cli(4, zero), 2);
    const char *absent[] = {"async", DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json"};
    assert_int_equal(run_cli(2, absent), 2);
    /* 32 workers x 10 servers x 1,000,000 steps = 3.2e8 updates, over the 2e8 a simulation takes:
     * refused as input (2), not a runtime failure, even with the limits raised */
    const char *too_many[] = {"async", shipped(), "--steps", "1000000", "--set", "parameter_server.servers=10",
                              "--max-seconds", "1e9", "--max-memory-gib", "1e6"};
    assert_int_equal(run_cli(10, too_many), 2);

    char path[] = "/tmp/dtsim-async-test-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    const char *ok[] = {"async", shipped(), "--steps", "2", "--json", path};
    assert_int_equal(run_cli(6, ok), 0);
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    unlink(path);
    assert_non_null(doc);
    assert_int_equal(json_integer_value(json_object_get(doc, "steps_per_worker")), 2);
    assert_true(json_number_value(json_object_get(json_object_get(doc, "async"), "steps_per_s")) > 0);
    assert_true(json_number_value(json_object_get(json_object_get(doc, "sync"), "steps_per_s")) > 0);
    assert_non_null(json_object_get(json_object_get(doc, "staleness"), "histogram"));
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(compute_bound_throughput_and_staleness),
        cmocka_unit_test(server_link_bound_throughput),
        cmocka_unit_test(server_cpu_bound_throughput),
        cmocka_unit_test(stale_synchronous_bound_holds),
        cmocka_unit_test(staleness_one_is_synchronous_like),
        cmocka_unit_test(bad_input_names_the_path),
        cmocka_unit_test(scenario_model_bytes),
        cmocka_unit_test(command_exit_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
