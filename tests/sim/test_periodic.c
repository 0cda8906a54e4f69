/* The periodic-regime certificate (sim/replay/periodic.h) on hand-built steps of m micro-batches,
 * one stage, whose step times are known in closed form:
 *  - coupled: each micro-batch's compute (1 s) then its reduction (0.5 s) on the comm stream, the
 *    next compute waiting for it (DeepSpeed's backward epilogue): step(m) = 1.5 m from the first
 *    micro-batch; certified, a period of 1.5 s.
 *  - racing: a 10 s head start of compute, then computes of 1 s, and transfers of 1.1 s on the
 *    comm stream that wait for nothing but each other: step(m) = max(10 + m, 1.1 m), 10 + m up to
 *    m = 100 and 1.1 m after. Three steps at m = 4, 5, 6 lie on one line of slope 1, which
 *    extrapolated to m = 1,000 says 1,010 s for 1,100 s: the certificate refuses it, because the
 *    two lanes move by different times in a period.
 *  - the same with transfers of 1 s: both lanes move 1 s a period, certified. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "fixture.h"
#include "periodic.h"

/* head: a compute task before the first micro-batch (0: none); coupled: each compute waits for the
 * previous micro-batch's transfer. */
static void build(step_workload *w, int m, double head, double compute, double transfer, int coupled)
{
    fixture_graph(w, 1);
    int prev_transfer = -1;
    if (head > 0)
        fixture_add(w, fixture_compute(0, "head", head), -1);
    for (int i = 0; i < m; i++) {
        sim_task c = fixture_compute(0, "compute", compute);
        c.micro_batch = i;
        int ci = fixture_add(w, c, coupled ? prev_transfer : -1);
        sim_task t = fixture_collective(0, "reduce", COMM_DP, COLL_ALL_REDUCE, 2, 1e6, transfer);
        t.micro_batch = i;
        prev_transfer = fixture_add(w, t, coupled ? ci : -1);
    }
}

static replay_period certify(int m1, double head, double compute, double transfer, int coupled, double *step_b)
{
    step_workload a, b;
    build(&a, m1, head, compute, transfer, coupled);
    build(&b, m1 + 1, head, compute, transfer, coupled);
    replay_times tb;
    fixture_replay_analytic(&b, &tb);
    *step_b = fixture_end(&tb, b.n_tasks);
    replay_period p;
    assert_int_equal(replay_period_certify(&a, &b, &tb, 1, &p), 0);
    replay_times_free(&tb);
    workload_free(&a);
    workload_free(&b);
    return p;
}

static void coupled_streams_are_periodic_from_the_start(void **state)
{
    (void)state;
    double step;
    replay_period p = certify(4, 0, 1.0, 0.5, 1, &step);
    assert_true(p.certified);
    assert_true(fabs(p.period_s - 1.5) < 1e-12);
    assert_true(fabs(step - 1.5 * 5) < 1e-12);
    assert_true(p.window_tasks > 0);
}

static void racing_lanes_are_refused(void **state)
{
    (void)state;
    double s4, s5, s6;
    /* the three steps lie on one line (slope 1) though the step bends at m = 100 */
    certify(3, 10, 1.0, 1.1, 0, &s4);
    replay_period p5 = certify(4, 10, 1.0, 1.1, 0, &s5);
    certify(5, 10, 1.0, 1.1, 0, &s6);
    assert_true(fabs(s4 - 14) < 1e-12 && fabs(s5 - 15) < 1e-12 && fabs(s6 - 16) < 1e-12);
    assert_false(p5.certified);
    assert_non_null(strstr(p5.why, "not yet periodic"));
    /* transfers as long as the computes: both lanes move 1 s a period */
    replay_period even = certify(4, 10, 1.0, 1.0, 0, &s5);
    assert_true(even.certified);
    assert_true(fabs(even.period_s - 1.0) < 1e-12);
}

/* A lane with fewer tasks in the longer step is not one period inserted. */
static void mismatched_graphs_are_refused(void **state)
{
    (void)state;
    step_workload a, b;
    build(&a, 5, 0, 1.0, 0.5, 1);
    build(&b, 4, 0, 1.0, 0.5, 1);
    replay_times tb;
    fixture_replay_analytic(&b, &tb);
    replay_period p;
    assert_int_equal(replay_period_certify(&a, &b, &tb, 1, &p), 0);
    assert_false(p.certified);
    assert_true(strlen(p.why) > 0);
    replay_times_free(&tb);
    workload_free(&a);
    workload_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(coupled_streams_are_periodic_from_the_start),
        cmocka_unit_test(racing_lanes_are_refused),
        cmocka_unit_test(mismatched_graphs_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
