/* The long-run failure Monte Carlo against closed forms: the mean number of failures equals
 * N x T / MTBF (exponential lifetimes) and the renewal rate T / mean lifetime (Weibull); the
 * goodput-optimal checkpoint interval is within 15% of Young/Daly sqrt(2 C M) when C << M,
 * and departs from it when the checkpoint cost is comparable to the MTBF. */
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
#include "faults.h"
#include "checkpoint_cost.h"
#include "fixture.h"

#ifndef DTSIM_SOURCE_DIR
#define DTSIM_SOURCE_DIR "."
#endif

/* 64 GPUs, free restarts and checkpoints: only failures are counted. */
static void base(scenario_config *s, faults_report *p)
{
    fixture_scenario(s, 8);
    s->parallel.dp = 64;
    s->training.global_batch_size = 64;
    s->faults.detect_s = s->faults.restart_s = 0;
    s->faults.checkpoint_interval_s = 3600;
    s->faults.checkpoint_async = 0;
    s->faults.weibull_shape = 1;
    s->faults.repair_hours = 0;
    s->faults.seed = 7;
    memset(p, 0, sizeof *p);
    p->horizon_s = 1000 * 3600.0;
}

static void exponential_failures_match_n_t_over_mtbf(void **state)
{
    scenario_config s;
    faults_report p;
    base(&s, &p);
    s.faults.gpu_mtbf_hours = 160; /* 64 GPUs: system MTBF 2.5 h, 400 failures in 1000 h */
    int runs = 200;
    double sum = 0;
    for (int r = 0; r < runs; r++) {
        faults_timeline tl;
        faults_simulate_one(&s, &p, 3600, 1000 + r, &tl);
        sum += tl.interruptions;
    }
    double mean = sum / runs, expect = 64 * 1000.0 / 160;
    double se = sqrt(expect / runs); /* Poisson standard error of the mean */
    print_message("mean %.2f expected %.2f (3 se = %.2f)\n", mean, expect, 3 * se);
    assert_true(fabs(mean - expect) < 3 * se);
    fixture_free(&s);
}

static void weibull_renewals_match_t_over_mean_lifetime(void **state)
{
    scenario_config s;
    faults_report p;
    base(&s, &p);
    s.faults.weibull_shape = 2.0; /* wear-out */
    s.faults.gpu_mtbf_hours = 20; /* each of 64 GPUs renews ~50 times in 1000 h */
    int runs = 40;
    double sum = 0;
    for (int r = 0; r < runs; r++) {
        faults_timeline tl;
        faults_simulate_one(&s, &p, 3600, 5000 + r, &tl);
        sum += tl.interruptions;
    }
    /* Renewal theory: E N(T) = T/mu + (sigma^2 - mu^2) / (2 mu^2) + o(1) per component. For
     * shape 2, sigma^2/mu^2 = 4/pi - 1. */
    double cv2 = 4 / M_PI - 1, expect = 64 * (1000.0 / 20 + (cv2 - 1) / 2);
    double mean = sum / runs;
    print_message("weibull mean %.1f expected %.1f\n", mean, expect);
    assert_true(fabs(mean - expect) < 0.02 * expect);
    fixture_free(&s);
}

static double optimum_vs_young_daly(double cost_s, double system_mtbf_h, int runs, double *yd)
{
    scenario_config s;
    faults_report p;
    base(&s, &p);
    s.faults.gpu_mtbf_hours = system_mtbf_h * 64;
    s.faults.restart_s = 0;
    /* A sync checkpoint of `cost_s`: write bandwidth chosen so the fixture's checkpoint takes it. */
    faults_report r;
    config_error err;
    memset(&r, 0, sizeof r);
    r.step_time_s = 1;
    r.tokens_per_s = 1;
    s.faults.horizon_days = 200;
    s.training.tokens = 0;
    assert_int_equal(faults_run(&s, 1, &r, &err), 0); /* to learn the checkpoint size */
    s.platform.storage.checkpoint_write_gbs = r.checkpoint_bytes / cost_s / 1e9;
    memset(&r, 0, sizeof r);
    r.step_time_s = 1;
    r.tokens_per_s = 1;
    assert_int_equal(faults_run(&s, runs, &r, &err), 0);
    *yd = r.young_daly_interval_s;
    print_message("cost %.0f s, MTBF %.1f h: optimum %.0f s, Young/Daly %.0f s\n", cost_s, system_mtbf_h,
                  r.optimal_checkpoint_interval_s, r.young_daly_interval_s);
    fixture_free(&s);
    return r.optimal_checkpoint_interval_s;
}

static void optimum_near_young_daly_when_checkpoints_are_cheap(void **state)
{
    double yd;
    double opt = optimum_vs_young_daly(60, 10, 50, &yd); /* C = 1 min << M = 10 h */
    assert_true(fabs(yd - sqrt(2 * 60 * 36000.0)) < 1e-6 * yd);
    assert_true(fabs(opt - yd) < 0.15 * yd);
}

static void optimum_departs_from_young_daly_when_checkpoints_are_dear(void **state)
{
    double yd;
    /* C = 1 h against M = 2 h: Young/Daly's first-order assumptions (C << M) fail; the second-
     * order optimum (Daly 2006) is about 30% shorter, and so is the simulated one. */
    double opt = optimum_vs_young_daly(3600, 2, 50, &yd);
    assert_true(opt < 0.85 * yd);
}

/* Closed form for exponential failures, sync checkpoints of cost C every tau of work, no
 * restart cost (Daly 2006, with R = 0): a segment of tau + C takes M (e^((tau+C)/M) - 1) of
 * wall time on average, so goodput = tau / (M (e^((tau+C)/M) - 1)). */
static void goodput_matches_dalys_exact_expectation(void **state)
{
    scenario_config s;
    faults_report p;
    base(&s, &p);
    const double M = 5 * 3600.0, tau = 3600, C = 360;
    s.faults.gpu_mtbf_hours = 64 * M / 3600;
    p.horizon_s = 5000 * 3600.0;
    p.checkpoint_write_s = p.checkpoint_block_s = C;
    int runs = 40;
    double sum = 0, sum2 = 0, lost_ckpt = 0;
    for (int r = 0; r < runs; r++) {
        faults_timeline tl;
        faults_simulate_one(&s, &p, tau, faults_run_seed(3, r), &tl);
        double g = tl.train_s / tl.wall_s;
        sum += g;
        sum2 += g * g;
        lost_ckpt += tl.lost_s[LOSS_CHECKPOINT] / runs;
    }
    double mean = sum / runs, sd = sqrt(fmax(0, sum2 / runs - mean * mean)), se = sd / sqrt(runs);
    double expect = tau / (M * (exp((tau + C) / M) - 1));
    print_message("goodput %.4f (se %.4f) expected %.4f\n", mean, se, expect);
    assert_true(fabs(mean - expect) < 3 * se + 1e-3); /* 1e-3: the horizon cuts the last segment */
    assert_true(lost_ckpt > 0);
    fixture_free(&s);
}

/* Without failures the timeline is checkpoint cycles only, in closed form: train interval I, then
 * block for the copy c, and (async) for the previous write W when it outlasts I. Every second is
 * training or blocked; the blocked part is (max(I, W) - I + c) a cycle, to within the last cycle
 * the horizon cuts. (The timeline takes such cycles many at a time: this holds it to them.) */
static void checkpoint_cycles_without_failures(void **state)
{
    (void)state;
    const double I = 3600, c = 60, H = 1000 * 3600.0;
    const double W[] = {1800, 5400}; /* a write shorter than the interval, and one longer */
    for (int async = 0; async <= 1; async++)
        for (int w = 0; w < 2; w++) {
            scenario_config s;
            faults_report p;
            base(&s, &p);
            s.faults.gpu_mtbf_hours = 0; /* no failures */
            s.faults.checkpoint_async = async;
            p.horizon_s = H;
            p.checkpoint_write_s = async ? W[w] : c;
            p.checkpoint_block_s = c;
            faults_timeline tl;
            faults_simulate_one(&s, &p, I, 5, &tl);
            double cycle = (async ? fmax(I, W[w]) : I) + c, blocked = cycle - I;
            double expect = floor(H / cycle) * blocked, lost = tl.lost_s[LOSS_CHECKPOINT];
            print_message("async %d write %.0f: blocked %.0f s, closed form %.0f (+ one cycle's %.0f)\n", async,
                          p.checkpoint_write_s, lost, expect, blocked);
            assert_int_equal(tl.interruptions, 0);
            assert_true(fabs(tl.train_s + lost - tl.wall_s) <= 1e-6 * H);
            assert_true(lost >= expect - 1e-6 * H && lost <= expect + blocked + 1e-6 * H);
            fixture_free(&s);
        }
}

/* A trace replays exactly: one interruption per line inside the horizon, each with its costs;
 * malformed lines are refused with the file and line. */
static const char *write_file(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "/tmp/dtsim_test_faults_%d_%s", (int)getpid(), name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void trace_replays_each_failure(void **state)
{
    scenario_config s;
    faults_report p;
    base(&s, &p);
    s.faults.detect_s = 60;
    s.faults.restart_s = 240;
    p.restore_s = 30;
    p.horizon_s = 100 * 3600.0;
    faults_trace t;
    config_error err;
    const char *path = write_file("ok.txt", "# time_hours kind index\n1.5 gpu 3\n\n2.25 node 7  # a comment\n"
                                            "40 gpu 63\n250 gpu 0\n");
    assert_int_equal(faults_trace_load(path, 64, 8, &t, &err), 0);
    assert_int_equal(t.count, 4);
    assert_true(fabs(t.events[1].t_s - 2.25 * 3600) < 1e-9 && t.events[1].node == 1 && t.events[1].index == 7);
    faults_timeline tl;
    faults_simulate_trace(&s, &p, &t, 3600, 1, &tl);
    assert_int_equal((int)tl.interruptions, 3); /* the failure at 250 h is past the horizon */
    assert_true(fabs(tl.lost_s[LOSS_DETECTION] - 180) < 1e-6);
    assert_true(fabs(tl.lost_s[LOSS_RESTART] - 720) < 1e-6);
    assert_true(fabs(tl.lost_s[LOSS_RESTORE] - 90) < 1e-6);
    /* Lost work: 1.5 h -> 0.5 h since the 1 h checkpoint; 2.25 h: the job restarted at
     * 1.5 h + 330 s from the 1 h checkpoint and redid 0.25 h + 330 s... of which the part since
     * the last checkpoint is lost; the sum is bounded by an interval per failure. */
    assert_true(tl.lost_s[LOSS_LOST_WORK] > 0.5 * 3600 - 1e-6 && tl.lost_s[LOSS_LOST_WORK] <= 3 * 3600);
    /* a restart that grows with the job: + 1.5 s per node, 8 nodes, 3 interruptions */
    s.faults.restart_per_node_s = 1.5;
    faults_simulate_trace(&s, &p, &t, 3600, 1, &tl);
    assert_true(fabs(tl.lost_s[LOSS_RESTART] - 3 * (240 + 1.5 * 8)) < 1e-6);
    s.faults.restart_per_node_s = 0;
    faults_trace_free(&t);
    unlink(path);

    const char *bad[][2] = {{"1 gpu 3\n2 cpu 1\n", ":2: kind 'cpu'"},
                            {"1 gpu 3\n0.5 gpu 1\n", ":2: time_hours 0.5 is before"},
                            {"1 gpu 64\n", ":1: index '64'"},
                            {"# x\n\n1 node\n", ":3: expected"},
                            {"-1 gpu 0\n", ":1: time_hours '-1'"},
                            {"abc gpu 0\n", ":1: time_hours 'abc'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        path = write_file("bad.txt", bad[i][0]);
        assert_int_equal(faults_trace_load(path, 64, 8, &t, &err), -1);
        print_message("%s\n", err.msg);
        assert_non_null(strstr(err.msg, bad[i][1]));
        unlink(path);
    }
    assert_int_equal(faults_trace_load("/nonexistent/trace.txt", 64, 8, &t, &err), -1);
    fixture_free(&s);
}

/* No free node: the job waits for the repair, or (elastic) drops the replica and runs at
 * (dp - 1) / dp until the node returns. One node failure at 10.5 h, checkpoints every hour
 * (free), repair 20 h, horizon 100 h:
 *   wait:    training = 10 + (100 - 10.5 - 20) = 79.5 h, 20 h waiting;
 *   elastic: training = 10 + 20 x 3/4 + (100 - 30.5) = 94.5 h. */
static void no_spare_waits_or_shrinks(void **state)
{
    scenario_config s;
    faults_report p;
    base(&s, &p);
    s.parallel.tp = 8; /* a replica per node: 4 replicas on 4 nodes */
    s.parallel.dp = 4;
    s.platform.network.nodes = 4;
    s.faults.spare_nodes = 0;
    s.faults.repair_hours = 20;
    p.horizon_s = 100 * 3600.0;
    faults_trace t = {1, (faults_event[]){{10.5 * 3600, 1, 2}}};
    faults_timeline tl;
    faults_simulate_trace(&s, &p, &t, 3600, 1, &tl);
    print_message("wait: trained %.3f h, waited %.3f h\n", tl.train_s / 3600, tl.lost_s[LOSS_WAIT_REPAIR] / 3600);
    assert_true(fabs(tl.train_s / 3600 - 79.5) < 1e-6);
    assert_true(fabs(tl.lost_s[LOSS_WAIT_REPAIR] / 3600 - 20) < 1e-6);
    s.faults.elastic = 1;
    faults_simulate_trace(&s, &p, &t, 3600, 1, &tl);
    print_message("elastic: trained %.3f h\n", tl.train_s / 3600);
    assert_true(fabs(tl.train_s / 3600 - 94.5) < 1e-6);
    assert_true(tl.lost_s[LOSS_WAIT_REPAIR] == 0);
    s.faults.elastic = 0;
    s.faults.spare_nodes = 1; /* a spare: no wait, full speed */
    faults_simulate_trace(&s, &p, &t, 3600, 1, &tl);
    assert_true(fabs(tl.train_s / 3600 - 99.5) < 1e-6);
    fixture_free(&s);
}

/* The figure: Llama 3 405B on 16,384 H100 for 54 days (Dubey et al. 2024, 3.3.4: 419
 * unexpected interruptions, > 90% effective training time). */
static void llama3_54_days(void **state)
{
    scenario_config s;
    config_error err;
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/llama3-405b-54d-faults.json", NULL, 0, &s, &err) != 0) {
        print_error("%s\n", err.msg);
        fail();
    }
    faults_report r;
    memset(&r, 0, sizeof r);
    assert_int_equal(faults_run(&s, 100, &r, &err), 0);
    print_message("interruptions %.1f (p5 %.0f, p95 %.0f), goodput %.2f%% (p5 %.2f%%)\n", r.interruptions.mean,
                  r.interruptions.p5, r.interruptions.p95, 100 * r.goodput.mean, 100 * r.goodput.p5);
    assert_true(fabs(r.expected_failures - 419) < 0.5);
    assert_true(r.interruptions.p5 <= 419 && 419 <= r.interruptions.p95);
    assert_true(r.goodput.mean > 0.90);
    /* dtsim run's time_to_train with failures takes the closed form (step/checkpoint_cost.c): with
     * exponential failures, spares and async checkpoints it agrees with this Monte Carlo within
     * its spread (recovery = detection + restart + restore here, unlike the test above) */
    checkpoint_cost c;
    checkpoint_cost_of(&s, &c);
    assert_true(fabs(c.recovery_s - (s.faults.detect_s + s.faults.restart_s + r.restore_s)) < 1e-9);
    double closed = checkpoint_expected_goodput(&c, s.faults.checkpoint_interval_s);
    print_message("goodput closed form %.4f, Monte Carlo %.4f (p5 %.4f, p95 %.4f)\n", closed, r.goodput.mean,
                  r.goodput.p5, r.goodput.p95);
    assert_true(closed >= r.goodput.p5 && closed <= r.goodput.p95);
    assert_true(fabs(closed - r.goodput.mean) < 0.005);
    scenario_free(&s);
}

/* The closed form itself: Daly's expectation (test above, R = 0) with a recovery cost R on top
 * (each failure's wall time grows by e^(R/M)); without failures, interval / (interval + block). */
static void closed_form_goodput(void **state)
{
    (void)state;
    checkpoint_cost c = {.block_s = 360, .failure_rate = 1 / (5 * 3600.0)};
    const double M = 5 * 3600.0, tau = 3600, C = 360;
    assert_true(fabs(checkpoint_expected_goodput(&c, tau) - tau / (M * (exp((tau + C) / M) - 1))) < 1e-12);
    c.recovery_s = 600;
    assert_true(fabs(checkpoint_expected_goodput(&c, tau) - tau / (M * exp(600 / M) * (exp((tau + C) / M) - 1))) <
                1e-12);
    c.failure_rate = 0;
    assert_true(fabs(checkpoint_expected_goodput(&c, tau) - tau / (tau + C)) < 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exponential_failures_match_n_t_over_mtbf),
        cmocka_unit_test(weibull_renewals_match_t_over_mean_lifetime),
        cmocka_unit_test(optimum_near_young_daly_when_checkpoints_are_cheap),
        cmocka_unit_test(optimum_departs_from_young_daly_when_checkpoints_are_dear),
        cmocka_unit_test(goodput_matches_dalys_exact_expectation),
        cmocka_unit_test(checkpoint_cycles_without_failures),
        cmocka_unit_test(closed_form_goodput),
        cmocka_unit_test(trace_replays_each_failure),
        cmocka_unit_test(no_spare_waits_or_shrinks),
        cmocka_unit_test(llama3_54_days),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
