/* The data-loader model (sim/step/data_loader.*): closed forms of the deterministic queue, an
 * independent Lindley recursion for one reader with random load times, the expected maximum
 * over readers against order-statistics closed forms, the run integration and the rules. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "data_loader.h"
#include "fixture.h"
#include "run.h"

/* ---- the test's own random numbers: xorshift64*, Marsaglia's polar method -------------- */
static uint64_t xs_state = 88172645463325252ull;
static double t_uniform(void)
{
    xs_state ^= xs_state >> 12;
    xs_state ^= xs_state << 25;
    xs_state ^= xs_state >> 27;
    return ((double)((xs_state * 2685821657736338717ull) >> 11) + 0.5) / 9007199254740992.0;
}
static double t_normal(void)
{
    double u, v, q;
    do {
        u = 2 * t_uniform() - 1;
        v = 2 * t_uniform() - 1;
        q = u * u + v * v;
    } while (q >= 1 || q == 0);
    return u * sqrt(-2 * log(q) / q);
}
static double t_lognormal_mean1(double cv)
{
    double s2 = log(1 + cv * cv);
    return exp(-0.5 * s2 + sqrt(s2) * t_normal());
}

/* A reader kind consuming m micro-batches at i * gap seconds into a step of step_s. */
static dl_reader_kind uniform_kind(int m, const double *demand, double step_s, double load_s, int prefetch)
{
    dl_reader_kind k = {.m = m, .demand = demand, .step_s = step_s, .load_s = load_s, .cv = 0,
                        .prefetch = prefetch, .readers = 1};
    return k;
}

static double deterministic_exposed(dl_reader_kind k)
{
    data_loader_result r;
    assert_int_equal(data_loader_evaluate(&k, 1, 1, &r), 0);
    return r.exposed_s;
}

static void readers_and_load_time(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 2);
    s.parallel.dp = 4;
    s.parallel.cp = 2;
    int kinds;
    assert_int_equal(data_loader_readers(&s, &kinds), 8); /* DP x CP, one reading stage */
    assert_int_equal(kinds, 1);
    s.parallel.pp = 2;
    assert_int_equal(data_loader_readers(&s, &kinds), 16); /* first and last stage read */
    assert_int_equal(kinds, 2);

    /* L = mb x bytes / (GB/s / R) + mb x decode / workers */
    s.training.micro_batch_size = 2;
    s.training.data_loader.sample_bytes = 4096;
    s.training.data_loader.decode_ms_per_sample = 3;
    s.training.data_loader.workers = 4;
    s.platform.storage.dataset_read_gbs = 1;
    double want = 2 * 4096 / (1e9 / 100) + 2 * 3e-3 / 4;
    assert_true(fabs(data_loader_load_s(&s, 100) - want) < 1e-15);
    /* twice the readers: each gets half the bandwidth, the read part doubles */
    s.training.data_loader.decode_ms_per_sample = 0;
    double one = data_loader_load_s(&s, 100), two = data_loader_load_s(&s, 200);
    assert_true(fabs(two - 2 * one) < 1e-15 * two);
    /* dataset_read_gbs not given (0 in memory): the checkpoint read bandwidth (100 GB/s) */
    s.platform.storage.dataset_read_gbs = 0;
    assert_true(fabs(data_loader_load_s(&s, 1) - 2 * 4096 / 100e9) < 1e-18);
    fixture_free(&s);
}

/* Consumption every gap seconds; a load of L <= gap with one batch of prefetch is ready before
 * each use: (i - P + 1) L <= i gap for every i >= P >= 1. */
static void hidden_when_a_load_fits_the_interval(void **state)
{
    (void)state;
    double d[8];
    for (int i = 0; i < 8; i++)
        d[i] = i * 1.0;
    assert_true(deterministic_exposed(uniform_kind(8, d, 10, 0.9, 1)) == 0);
    assert_true(deterministic_exposed(uniform_kind(8, d, 10, 1.0, 1)) == 0);
    assert_true(deterministic_exposed(uniform_kind(8, d, 10, 1.0, 5)) == 0);
    assert_true(deterministic_exposed(uniform_kind(8, d, 10, 0.5, 0)) == 8 * 0.5); /* on demand: every load waits */
}

/* Steady-state deficit: the queue starts the step full (P ready; the gap T - (m-1) gap >= P L
 * refills it), the loader then finishes batch i >= P at (i - P + 1) L; with L > gap and
 * L >= P gap it is behind from batch P on, so the last batch is consumed at (m - P) L instead
 * of (m - 1) gap: exposed = (m - P) L - (m - 1) gap. Without prefetch: m L. */
static void deficit_matches_the_closed_form(void **state)
{
    (void)state;
    double d[8];
    for (int i = 0; i < 8; i++)
        d[i] = i * 1.0;
    struct { double L; int P; } c[] = {{1.5, 1}, {2.5, 2}, {4.0, 3}, {1.5, 0}};
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        double want = c[k].P ? (8 - c[k].P) * c[k].L - 7 * 1.0 : 8 * c[k].L;
        double got = deterministic_exposed(uniform_kind(8, d, 20, c[k].L, c[k].P));
        assert_true(fabs(got - want) < 1e-9);
    }
}

/* A burst: 8 forwards 0.1 s apart (GPipe-like), then a long backward phase. Loads of 1 s: with
 * a queue of 8 the whole step is loaded during the previous step's tail; with P = 1 or 4 the
 * closed form above applies (L >= P x 0.1). */
static void deep_prefetch_hides_a_burst(void **state)
{
    (void)state;
    double d[8];
    for (int i = 0; i < 8; i++)
        d[i] = i * 0.1;
    assert_true(deterministic_exposed(uniform_kind(8, d, 20, 1, 8)) == 0);
    assert_true(fabs(deterministic_exposed(uniform_kind(8, d, 20, 1, 4)) - (4 * 1 - 0.7)) < 1e-9);
    assert_true(fabs(deterministic_exposed(uniform_kind(8, d, 20, 1, 1)) - (7 * 1 - 0.7)) < 1e-9);
}

/* Mean and standard error (batch means, steps are correlated) of per-step values. */
static void mean_se(const double *x, int n, double *mean, double *se)
{
    const int batch = 100;
    int nb = n / batch;
    double sum = 0, sum2 = 0;
    for (int b = 0; b < nb; b++) {
        double bm = 0;
        for (int i = 0; i < batch; i++)
            bm += x[b * batch + i];
        bm /= batch;
        sum += bm;
        sum2 += bm * bm;
    }
    *mean = sum / nb;
    *se = sqrt(fmax(0, sum2 / nb - *mean * *mean) / (nb - 1));
}

/* One reader, random loads, a queue that in practice never fills (the loader is the bottleneck,
 * its lead drifts to zero; the model starts with a full queue of 50, drained in the warm-up):
 * the time a loaded batch waits before use follows Lindley's recursion U' = max(0, U + a - L)
 * with a the interval between uses, and the forward waits max(0, L - a - U). */
static void one_reader_matches_a_lindley_recursion(void **state)
{
    (void)state;
    enum { M = 4, STEPS = 100000, WARMUP = 2000 };
    const double gap = 1, step_s = 4.5, mean_load = 1.2, cv = 0.6;
    double d[M];
    for (int i = 0; i < M; i++)
        d[i] = i * gap;
    dl_reader_kind k = uniform_kind(M, d, step_s, mean_load, 50);
    k.cv = cv;
    double *model = malloc(STEPS * sizeof *model), *ref = malloc(STEPS * sizeof *ref);
    assert_int_equal(data_loader_simulate_reader(&k, WARMUP, STEPS, 12345, model, NULL), 0);

    double U = 0;
    for (int s = -WARMUP; s < STEPS; s++) {
        double stall = 0;
        for (int i = 0; i < M; i++) {
            double a = i ? gap : step_s - (M - 1) * gap; /* across the step boundary: the tail */
            double L = mean_load * t_lognormal_mean1(cv);
            stall += fmax(0, L - a - U);
            U = fmax(0, U + a - L);
        }
        if (s >= 0)
            ref[s] = stall;
    }
    double m1, se1, m2, se2;
    mean_se(model, STEPS, &m1, &se1);
    mean_se(ref, STEPS, &m2, &se2);
    assert_true(m2 > 0.1); /* a case with real stalls */
    assert_true(fabs(m1 - m2) < 4 * sqrt(se1 * se1 + se2 * se2));
    free(model);
    free(ref);
}

static double harmonic(long long n)
{
    double h = 0;
    for (long long i = 1; i <= n; i++)
        h += 1.0 / i;
    return h;
}

/* E[max of R iid Exp(lambda)] = H_R / lambda; two groups of R1 and R2: H_(R1+R2) / lambda.
 * With R = N / 2 the plug-in estimate (k/n)^R of F^R would be biased low: the order-statistics
 * estimate must not be. */
static void expected_max_matches_exponential_order_statistics(void **state)
{
    (void)state;
    enum { N = 2000, K = 2000 };
    const double lambda = 2;
    double *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    static double one[K], two[K];
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++) {
            a[i] = -log(t_uniform()) / lambda;
            b[i] = -log(t_uniform()) / lambda;
        }
        long long n1 = N, R1 = 1000;
        one[k] = data_loader_expected_max(&a, &n1, &R1, 1);
        double *g[2] = {a, b};
        long long n[2] = {N, N}, R[2] = {300, 700};
        two[k] = data_loader_expected_max(g, n, R, 2);
    }
    double want = harmonic(1000) / lambda;
    for (int t = 0; t < 2; t++) {
        double *x = t ? two : one, mean = 0, var = 0;
        for (int k = 0; k < K; k++)
            mean += x[k] / K;
        for (int k = 0; k < K; k++)
            var += (x[k] - mean) * (x[k] - mean) / (K - 1);
        print_message("E[max]: %.4f, H_R/lambda %.4f, se %.4f\n", mean, want, sqrt(var / K));
        assert_true(fabs(mean - want) < 4 * sqrt(var / K));
    }
    free(a);
    free(b);
}

/* E[max of R lognormals] = integral of 1 - Phi((ln x - mu) / sigma)^R, by Simpson's rule. */
static double lognormal_expected_max(double scale, double cv, long long R)
{
    double s2 = log(1 + cv * cv), sg = sqrt(s2), mu = log(scale) - 0.5 * s2;
    double hi = exp(mu + 10 * sg), sum = 0;
    const int n = 200000;
    for (int i = 0; i <= n; i++) {
        double x = hi * i / n;
        double F = x > 0 ? 0.5 * erfc(-(log(x) - mu) / (sg * sqrt(2))) : 0;
        double f = 1 - pow(F, (double)R);
        sum += (i == 0 || i == n ? 1 : i % 2 ? 4 : 2) * f;
    }
    return sum * hi / n / 3;
}

/* No prefetch, one micro-batch per step: each step's stall is one lognormal load, so the step's
 * exposed input time is the maximum of R lognormals. R = 2000: every reader simulated;
 * R = 50000: readers sampled and the maximum taken from order statistics. */
static void max_over_readers_matches_the_lognormal_maximum(void **state)
{
    (void)state;
    const double d[1] = {0};
    long long Rs[2] = {2000, 50000};
    for (int t = 0; t < 2; t++) {
        enum { K = 8 };
        double x[K], mean = 0, var = 0;
        data_loader_result r;
        for (int k = 0; k < K; k++) {
            dl_reader_kind kind = uniform_kind(1, d, 10, 1.0, 0);
            kind.cv = 0.5;
            kind.readers = Rs[t];
            assert_int_equal(data_loader_evaluate(&kind, 1, 1000 + k, &r), 0);
            x[k] = r.exposed_s;
            mean += x[k] / K;
        }
        assert_true(t == 0 ? r.simulated_readers == Rs[t] : r.simulated_readers < Rs[t]);
        for (int k = 0; k < K; k++)
            var += (x[k] - mean) * (x[k] - mean) / (K - 1);
        double want = lognormal_expected_max(1.0, 0.5, Rs[t]);
        assert_true(fabs(mean - want) < 4 * sqrt(var / K) + 1e-3 * want);
        /* on demand, one micro-batch: every reader's stall is its load, so the slowest reader's
         * input time is its exposed time, and nothing is hidden */
        assert_true(fabs(r.input_s - r.exposed_s) <= 1e-12 * r.exposed_s);
        assert_true(r.hidden_fraction < 1e-12);
    }
}

static void hidden_input_leaves_the_step_unchanged(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 2);
    run_result base = fixture_run(&s);
    s.training.data_loader.present = 1;
    s.training.data_loader.sample_bytes = 4096;
    s.training.data_loader.workers = 2;
    s.training.data_loader.prefetch_batches = 2;
    run_result with = fixture_run(&s);
    assert_true(with.step_time_s == base.step_time_s);
    assert_true(with.tokens_per_s == base.tokens_per_s);
    assert_true(with.input_present && with.input_exposed_s == 0 && with.input_hidden_fraction == 1);
    double v;
    assert_int_equal(run_result_lookup(&with, "input.exposed_s", &v), 0);
    assert_true(v == 0);
    assert_int_equal(run_result_lookup(&base, "input.exposed_s", &v), -1); /* absent without a loader */

    /* decoding slower than the step: on demand (no prefetch) every load is exposed, m x L */
    s.training.data_loader.decode_ms_per_sample = 1000 * base.step_time_s;
    s.training.data_loader.workers = 1;
    s.training.data_loader.prefetch_batches = 0;
    run_result slow = fixture_run(&s);
    double m = (double)scenario_micro_batches(&s), L = data_loader_load_s(&s, 1);
    assert_true(fabs(slow.input_exposed_s - m * L) < 1e-9 * m * L);
    assert_true(fabs(slow.step_time_s - (base.step_time_s + m * L)) < 1e-9 * slow.step_time_s);
    assert_true(fabs(slow.tokens_per_s * slow.step_time_s - base.tokens_per_s * base.step_time_s) <
                1e-6 * base.tokens_per_s * base.step_time_s);
    assert_true(fabs(slow.mfu * slow.step_time_s - base.mfu * base.step_time_s) < 1e-9);
    fixture_free(&s);
}

/* The input time a step's exposed time is hidden from is the slowest reader's too: with
 * noisy loads (cv 2) over 32 readers, on demand and with prefetch, the exposed time never passes
 * it (it did when the total was the mean reader's: 14.9 s exposed of 9.6 s for GPT-3 175B). */
static void exposed_input_within_the_slowest_readers_input(void **state)
{
    (void)state;
    const char *path = DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json";
    const char *loaders[] = {"training.data_loader={\"decode_ms_per_sample\": 100, \"cv\": 2, \"prefetch_batches\": 0}",
                             "training.data_loader={\"decode_ms_per_sample\": 300, \"cv\": 2, \"prefetch_batches\": 2}"};
    for (int k = 0; k < 2; k++) {
        scenario_config s;
        config_error err;
        assert_int_equal(scenario_load(path, &loaders[k], 1, &s, &err), 0);
        run_result with = fixture_run(&s);
        assert_true(with.input_exposed_s > 0);
        assert_true(with.input_exposed_s <= with.input_total_s * (1 + 1e-12));
        assert_true(fabs(with.input_hidden_fraction - (1 - with.input_exposed_s / with.input_total_s)) < 1e-12);
        scenario_free(&s);
    }
}

static void bad_values_name_the_path(void **state)
{
    (void)state;
    const char *path = DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json";
    struct { const char *set, *path; } c[] = {
        {"training.data_loader={\"cv\": -0.1}", "scenario.training.data_loader.cv"},
        {"training.data_loader={\"workers\": 0}", "scenario.training.data_loader.workers"},
        {"training.data_loader={\"prefetch_batches\": -1}", "scenario.training.data_loader.prefetch_batches"},
        {"training.data_loader={\"speed\": 1}", "scenario.training.data_loader"},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        scenario_config s;
        config_error err;
        const char *sets[1] = {c[k].set};
        assert_int_equal(scenario_load(path, sets, 1, &s, &err), -1);
        assert_non_null(strstr(err.msg, c[k].path));
    }
    scenario_config s;
    config_error err;
    const char *ok[1] = {"training.data_loader={\"cv\": 0.3, \"workers\": 4}"};
    assert_int_equal(scenario_load(path, ok, 1, &s, &err), 0);
    assert_true(s.training.data_loader.present && s.training.data_loader.prefetch_batches == 2 &&
                s.training.data_loader.sample_bytes == 2048 * 4);
    scenario_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(readers_and_load_time),
        cmocka_unit_test(hidden_when_a_load_fits_the_interval),
        cmocka_unit_test(deficit_matches_the_closed_form),
        cmocka_unit_test(deep_prefetch_hides_a_burst),
        cmocka_unit_test(one_reader_matches_a_lindley_recursion),
        cmocka_unit_test(expected_max_matches_exponential_order_statistics),
        cmocka_unit_test(max_over_readers_matches_the_lognormal_maximum),
        cmocka_unit_test(hidden_input_leaves_the_step_unchanged),
        cmocka_unit_test(exposed_input_within_the_slowest_readers_input),
        cmocka_unit_test(bad_values_name_the_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
