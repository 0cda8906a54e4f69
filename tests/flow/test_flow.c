/* The SimGrid flow replay: without contention it agrees with the analytic replay (<= 2%); a NIC
 * at half bandwidth slows the ring through it to half speed; two DP rings sharing a leaf uplink
 * slow down by the oversubscription factor. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "fixture.h"
#include "flow/flow.h"
#include "run.h"

static void flow_agrees_with_analytic_without_contention(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    s.parallel.tp = 4;
    s.parallel.pp = 2;
    s.parallel.dp = 4;
    s.training.global_batch_size = 16;
    s.parallel.overlap_grad_reduce = 1;
    run_result a, f;
    config_error err;
    assert_int_equal(run_scenario(&s, &a, &err), 0);
    s.run.fidelity_flow = 1;
    if (run_scenario(&s, &f, &err) != 0)
        fail_msg("%s", err.msg);
    print_message("analytic %.6f s, flow %.6f s (%ld flows)\n", a.step_time_s, f.step_time_s, f.flows);
    assert_true(f.flows > 0);
    assert_true(fabs(f.step_time_s - a.step_time_s) <= 0.02 * a.step_time_s);
    fixture_free(&s);
}

/* A step made of one DP all-reduce per stage (hand-built), replayed on flows. */
static double collectives_only(scenario_config *s, double bytes)
{
    step_workload w;
    memset(&w, 0, sizeof w);
    w.stages = s->parallel.pp;
    for (int p = 0; p < s->parallel.pp; p++) {
        sim_task t;
        memset(&t, 0, sizeof t);
        t.kind = TASK_COLLECTIVE;
        t.lane = LANE_COMM;
        t.stage = p;
        t.peer_stage = -1;
        t.name = "dp_grad_allreduce";
        t.comm = COMM_DP;
        t.coll = COLL_ALL_REDUCE;
        t.group = s->parallel.dp;
        t.span_nodes = s->parallel.dp;
        t.bytes = bytes;
        workload_add_task(&w, &t);
    }
    replay_times t;
    replay_times_alloc(&t, w.n_tasks);
    config_error err;
    if (replay_flow(s, &w, &t, NULL, &err) != 0)
        fail_msg("%s", err.msg);
    double end = 0;
    for (int i = 0; i < w.n_tasks; i++)
        end = fmax(end, t.finish[i]);
    replay_times_free(&t);
    workload_free(&w);
    return end;
}

static void half_bandwidth_nic_halves_its_ring(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    s.parallel.tp = 8; /* one node per replica: each DP ring runs on one rail */
    s.parallel.dp = 4;
    s.training.global_batch_size = 4;
    double bytes = 4e9;
    double healthy = collectives_only(&s, bytes);
    /* closed form: ring of 4 over 25 GB/s NICs */
    double expect = 2.0 * 3 / 4 * bytes / 25e9;
    assert_true(healthy > expect && healthy < 1.02 * expect);
    degraded_link d = {2, 3, 0.5};
    s.faults.degraded = &d;
    s.faults.degraded_count = 1;
    double degraded = collectives_only(&s, bytes);
    s.faults.degraded = NULL;
    s.faults.degraded_count = 0;
    print_message("ring: healthy %.4f s, NIC n2g3 at 0.5: %.4f s (ratio %.3f)\n", healthy, degraded, degraded / healthy);
    assert_true(fabs(degraded / healthy - 2.0) < 0.05);
    fixture_free(&s);
}

static void oversubscribed_spine_slows_rings_that_share_it(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    s.parallel.tp = 8;
    s.parallel.pp = 2; /* two DP groups: stage 0 on even nodes, stage 1 on odd nodes */
    s.parallel.dp = 4;
    s.training.global_batch_size = 4;
    s.platform.network.leaf_radix = 2; /* nodes {0,1} {2,3} ... share a leaf: both rings leave it */
    double bytes = 4e9;
    s.platform.network.oversubscription = 1;
    double full = collectives_only(&s, bytes);
    s.platform.network.oversubscription = 2;
    double half = collectives_only(&s, bytes);
    print_message("two rings across leaves: 1:1 %.4f s, 2:1 %.4f s (ratio %.3f)\n", full, half, half / full);
    assert_true(fabs(half / full - 2.0) < 0.05);
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(flow_agrees_with_analytic_without_contention),
        cmocka_unit_test(half_bandwidth_nic_halves_its_ring),
        cmocka_unit_test(oversubscribed_spine_slows_rings_that_share_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
