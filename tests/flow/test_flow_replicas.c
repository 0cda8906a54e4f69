/* What the flow replay simulates of the cluster, and that it stands for the rest exactly: rail 0
 * for identical rails, a lane actor for a group of identical DP replicas, a few folded replicas for
 * all where nothing above the NICs binds (with links shared alike, whatever the route's length),
 * faults that single replicas out; and what this machine cannot hold, refused before it runs
 * (docs/flow.md, Granularity). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "fixture.h"
#include "collective.h"
#include "wall_clock.h"

/* The last task's finish: the step's end. */
static double step_end(const replay_times *t, int n)
{
    double end = 0;
    for (int i = 0; i < n; i++)
        end = fmax(end, t->finish[i]);
    return end;
}

/* The largest difference between two replays' task finish times. */
static double largest_difference(const replay_times *x, const replay_times *y, int n)
{
    double diff = 0;
    for (int i = 0; i < n; i++)
        diff = fmax(diff, fabs(x->finish[i] - y->finish[i]));
    return diff;
}

/* Step finish times with every rail simulated, or with rail 0 (and faulty rails) for all. */
static void replay_both_ways(const scenario_config *s, replay_times *one, replay_times *all, flow_report *r1,
                             flow_report *ra, int *n)
{
    step_workload w;
    fixture_build(s, &w);
    flow_options every_rail = {.all_rails = 1};
    fixture_replay_flow(s, &w, NULL, one, r1);
    fixture_replay_flow(s, &w, &every_rail, all, ra);
    *n = w.n_tasks;
    workload_free(&w);
}

static void one_rail_stands_for_identical_rails(void **state)
{
    /* TP 8 x PP 2 x DP 4 with a pipeline and overlapped DP buckets: every flow stays on its
     * rail, so simulating rail 0 gives the same times as simulating the 8; with a degraded NIC
     * on rail 5, rails 0 and 5 give the same times as the 8. */
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 8, 2, 4, 16);
    s.platform.network.leaf_radix = 2; /* rings and transfers cross the spines */
    degraded_link d = {3, 5, 0.3, 0, 0};
    for (int faulty = 0; faulty < 2; faulty++) {
        fixture_degrade(&s, faulty ? &d : NULL);
        replay_times one, all;
        flow_report r1, ra;
        int n;
        replay_both_ways(&s, &one, &all, &r1, &ra, &n);
        double end = step_end(&all, n), diff = largest_difference(&one, &all, n);
        print_message("%s: step %.6f s; rails simulated %d (%ld flows) against 8 (%ld flows): largest task "
                      "difference %.3g s\n",
                      faulty ? "NIC n3g5 at 0.3" : "healthy", end, r1.rails_simulated, r1.flows, ra.flows, diff);
        assert_int_equal(r1.rails_simulated, 1 + faulty);
        assert_int_equal(ra.rails_simulated, 0);
        assert_int_equal(r1.flows_represented, ra.flows);
        assert_int_equal(r1.flows * 8, ra.flows * (1 + faulty));
        assert_true(diff <= 1e-9 * end);
        replay_times_free(&one);
        replay_times_free(&all);
    }
    fixture_degrade(&s, NULL);
    fixture_free(&s);
}

/* A lane actor replays a group of identical DP replicas in lockstep (flow_options.per_replica
 * off): the same flows, fewer actors. A straggler's replica and one on a degraded NIC's node go
 * alone, the others stay grouped (one leaf here: nothing above the NICs binds), and every task
 * ends as with an actor per replica; where an uplink can bind, faults put every replica alone
 * (flow_replicas_of). Where no flow meets one replica's and not another's, every
 * task ends when it ends with a replica an actor. Where flows collide unevenly (TP 8 x PP 2 x DP 6
 * on 12 nodes, four a leaf, two uplinks a leaf at 2:1, static d-mod-k routing: replicas 0-3's
 * pipeline sends share an uplink two by two, replicas 4-5's do not), a group waits for its slowest
 * replica at each transfer and its flows start together. A task's time is already the latest of
 * its replicas', and every replica waits for the slowest at each DP collective, so the step moves
 * little: here not at all (the same replicas are the slowest at every transfer); Llama 3 405B on
 * 16,384 H100 moved by -0.01% (docs/flow.md). */
static void replica_groups_replay_what_separate_replicas_do(void **state)
{
    (void)state;
    const char *what[4] = {"no uneven contention", "uneven collisions", "a straggler", "a degraded NIC"};
    straggler slow = {8 + 3, 1.3};            /* stage 0, replica 1 */
    degraded_link nic = {2, 0, 0.5, 0, 0};    /* node 2: stage 0, replica 2, rail 0 */
    for (int c = 0; c < 4; c++) {
        int uneven = c == 1;
        scenario_config s;
        fixture_scenario(&s, uneven ? 12 : 8);
        fixture_layout(&s, 8, 2, uneven ? 6 : 4, uneven ? 12 : 16);
        s.platform.network.leaf_radix = uneven ? 4 : 8;
        s.platform.network.oversubscription = uneven ? 2 : 1;
        s.platform.network.adaptive_routing = 0;
        s.parallel.overlap_grad_reduce = 1;
        s.faults.stragglers = c == 2 ? &slow : NULL;
        s.faults.straggler_count = c == 2;
        fixture_degrade(&s, c == 3 ? &nic : NULL);
        step_workload w;
        fixture_build(&s, &w);
        flow_options apart = {.per_replica = 1}, grouped = {.no_fold = 1};
        replay_times g, a;
        flow_report rg, ra;
        fixture_replay_flow(&s, &w, &grouped, &g, &rg);
        fixture_replay_flow(&s, &w, &apart, &a, &ra);
        double end_g = step_end(&g, w.n_tasks), end_a = step_end(&a, w.n_tasks);
        double diff = largest_difference(&g, &a, w.n_tasks);
        print_message("%s: step %.6f s in %ld actors, %.6f s a replica an actor (%ld actors); flows %ld and %ld; "
                      "largest task difference %.3g s\n",
                      what[c], end_g, rg.actors, end_a, ra.actors, rg.flows, ra.flows, diff);
        assert_int_equal(rg.flows, ra.flows);
        assert_true(rg.actors < ra.actors);
        if (c == 1) /* lockstep under uneven collisions: the step, not each task */
            assert_true(fabs(end_g / end_a - 1) < 0.01);
        else
            assert_true(diff <= 1e-9 * end_a);
        s.faults.stragglers = NULL;
        s.faults.straggler_count = 0;
        fixture_degrade(&s, NULL);
        replay_times_free(&g);
        replay_times_free(&a);
        workload_free(&w);
        fixture_free(&s);
    }
}

/* Folded replicas (flow_replicas_of): where nothing above the NICs binds, replicas 0 .. k-1 stand
 * for every replica congruent mod k. Each case replays a full step (a pipeline, overlapped
 * gradient buckets and parameter gathers) folded and with every replica simulated, and every task
 * must end at the same time: rings and transfers that cross the spines (adaptive routing, 1:1),
 * pods (3 tiers, so the folded routes are shorter than the slowest replica's and the replay charges
 * the longest), an odd DP (k = 3), the gradient ring through CP ranks, ZeRO-3 with virtual stages,
 * and a prime DP (k = DP: nothing folded). */
static void folded_replicas_stand_for_every_replica(void **state)
{
    (void)state;
    struct {
        const char *what;
        int nodes, tp, cp, pp, dp, radix, tiers, simulated, zero, vpp;
    } cases[] = {
        {"DP 6 across leaves", 12, 8, 1, 2, 6, 4, 2, 2, 1, 1},
        {"DP 8 across pods", 16, 8, 1, 2, 8, 2, 3, 2, 1, 1},
        {"DP 9 (k = 3)", 18, 8, 1, 2, 9, 4, 2, 3, 1, 1},
        {"DP 4 x CP 2", 16, 8, 2, 2, 4, 4, 2, 2, 1, 1},
        {"DP 5 (prime)", 10, 8, 1, 2, 5, 4, 2, 5, 1, 1},
        {"PP 4 x DP 8, ZeRO-3, interleaved, radix 3", 32, 8, 1, 4, 8, 3, 2, 2, 3, 2},
        {"PP 2 x DP 6, ZeRO-1, interleaved, radix 5", 12, 8, 1, 2, 6, 5, 2, 2, 1, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        scenario_config s;
        fixture_scenario(&s, cases[c].nodes);
        fixture_layout(&s, cases[c].tp, cases[c].pp, cases[c].dp, 4 * cases[c].dp);
        s.parallel.cp = cases[c].cp;
        s.parallel.overlap_grad_reduce = 1;
        s.parallel.overlap_param_gather = 1;
        s.parallel.zero_stage = cases[c].zero;
        s.parallel.vpp = cases[c].vpp;
        s.parallel.schedule = cases[c].vpp > 1 ? PIPELINE_INTERLEAVED : s.parallel.schedule;
        s.platform.network.leaf_radix = cases[c].radix;
        s.platform.network.tiers = cases[c].tiers;
        s.platform.network.adaptive_routing = 1;
        s.platform.network.oversubscription = 1;
        flow_options whole = {.no_fold = 1};
        assert_int_equal(flow_replicas_of(&s, NULL).simulated, cases[c].simulated);
        assert_int_equal(flow_replicas_of(&s, &whole).simulated, cases[c].dp);
        step_workload w;
        fixture_build(&s, &w);
        replay_times f, a;
        flow_report rf, ra;
        fixture_replay_flow(&s, &w, NULL, &f, &rf);
        fixture_replay_flow(&s, &w, &whole, &a, &ra);
        double end = step_end(&a, w.n_tasks), diff = largest_difference(&f, &a, w.n_tasks);
        print_message("%s: step %.9f s; %ld flows folded, %ld whole (%ld represented); largest task difference "
                      "%.3g s\n",
                      cases[c].what, end, rf.flows, ra.flows, rf.flows_represented, diff);
        assert_int_equal(rf.flows_represented, ra.flows_represented);
        assert_int_equal(rf.flows * cases[c].dp, ra.flows * cases[c].simulated);
        assert_true(diff <= 1e-9 * end);
        replay_times_free(&f);
        replay_times_free(&a);
        workload_free(&w);
        fixture_free(&s);
    }
    /* where the uplinks can bind, nothing is folded: static d-mod-k routing, or 2:1 */
    scenario_config s;
    fixture_scenario(&s, 12);
    fixture_layout(&s, 8, 2, 6, 24);
    s.platform.network.leaf_radix = 4;
    s.platform.network.adaptive_routing = 0;
    assert_int_equal(flow_replicas_of(&s, NULL).simulated, 6);
    s.platform.network.adaptive_routing = 1;
    s.platform.network.oversubscription = 2;
    assert_int_equal(flow_replicas_of(&s, NULL).simulated, 6);
    s.platform.network.leaf_radix = 12; /* one leaf: no uplink at all */
    assert_int_equal(flow_replicas_of(&s, NULL).simulated, 2);
    fixture_free(&s);
}

/* Flows of unequal route lengths share a NIC alike. SimGrid's CM02 would share it in inverse
 * proportion to the routes' latency (TCP's round-trip unfairness); InfiniBand's switches and NVLink
 * do not, and railzone.cpp tells SimGrid no latency (the replay charges it). TP 8 x PP 2 x DP 4, two
 * nodes a leaf: stage 0's DP ring (in-leaf and cross-leaf edges) runs while each replica's stage 0
 * sends 400 MB to stage 1, across the spines. Each ring edge shares its sender's NIC with that
 * replica's send: at equal shares a 20 MB all-reduce's edges (30 MB a NIC at 25 GB/s, half of it)
 * take 2.4 ms, whatever their route, and the folded replay (2 replicas) ends every task where the
 * whole one and the one with an actor per replica do. */
static void flows_of_unequal_routes_share_a_nic_alike(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 8, 2, 4, 32);
    s.platform.network.leaf_radix = 2;
    s.platform.network.adaptive_routing = 1;
    s.platform.network.oversubscription = 1;
    step_workload w;
    fixture_graph(&w, 2);
    int c0 = fixture_add(&w, fixture_compute(0, "c0", 1e-3), -1);
    int tx = fixture_add(&w, fixture_transfer(0, 1, "pp_send_activation", 400e6, 1e-3), c0);
    int ar = fixture_add(&w, fixture_collective(0, "dp_grad_allreduce", COMM_DP, COLL_ALL_REDUCE, 4, 20e6, 1e-3), c0);
    fixture_add(&w, fixture_compute(1, "c1", 1e-4), tx);
    flow_options whole = {.no_fold = 1}, apart = {.per_replica = 1};
    replay_times f, a, p;
    flow_report rf;
    fixture_replay_flow(&s, &w, NULL, &f, &rf);
    fixture_replay_flow(&s, &w, &whole, &a, NULL);
    fixture_replay_flow(&s, &w, &apart, &p, NULL);
    /* the call's latency (NCCL's, per call) and node time come on top of its flows */
    coll_split x = collective_split(&s.platform, &s.calibration, COLL_ALL_REDUCE, 20e6, (coll_group){4, 4, 1});
    double ring = f.finish[ar] - 1e-3 - x.fixed_s - x.node_s, B = s.platform.node.nic_bandwidth_gbps / 8 * 1e9;
    print_message("all-reduce beside the sends: %.6f s of flows (equal shares: %.6f s), folded from %ld flows\n",
                  ring, 2.0 * 3 / 4 * 20e6 / (B / 2), rf.flows);
    assert_true(fabs(ring / (2.0 * 3 / 4 * 20e6 / (B / 2)) - 1) < 0.01);
    assert_true(largest_difference(&f, &a, w.n_tasks) <= 1e-12);
    assert_true(largest_difference(&p, &a, w.n_tasks) <= 1e-12);
    replay_times_free(&f);
    replay_times_free(&a);
    replay_times_free(&p);
    workload_free(&w);
    fixture_free(&s);
}

/* A degraded NIC on a node the job does not use (the scenario may name any node of the
 * platform) carries none of its traffic: the flow replay skips it (SimGrid has no such link: the
 * job's nodes alone are built) and the step is the healthy one. Static routing at 2:1 with a fault
 * puts every replica alone. */
static void a_degraded_nic_the_job_does_not_use_changes_nothing(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 16);
    fixture_layout(&s, 8, 2, 4, 16); /* 8 of the 16 nodes */
    run_result healthy = fixture_run_at(&s, 1);
    degraded_link far = {12, 1, 0.25, 0, 0};
    fixture_degrade(&s, &far);
    run_result f = fixture_run_at(&s, 1);
    print_message("NIC of unused node 12 at 0.25: step %.6f s, healthy %.6f s\n", f.step_time_s, healthy.step_time_s);
    assert_true(fabs(f.step_time_s - healthy.step_time_s) <= 1e-12);
    s.platform.network.leaf_radix = 4;
    s.platform.network.adaptive_routing = 0;
    s.platform.network.oversubscription = 2;
    assert_int_equal(flow_replicas_of(&s, NULL).per_actor, 1);
    fixture_degrade(&s, NULL);
    assert_int_equal(flow_replicas_of(&s, NULL).per_actor, 4);
    fixture_free(&s);
}

/* What the machine cannot hold is refused before the replay starts (flow_fits): each lane actor
 * costs a memory map, against the kernel's vm.max_map_count. A fixture of 1 stage and DP 32 uses
 * its compute and comm lanes. Replayed a replica an actor (flow_options.per_replica, or a
 * failure inside the step) that is 2 x 32 actors and one failure slot: a limit of 200 maps
 * refuses it naming the count and the limit, one of a million passes. Otherwise one actor a lane
 * replays a group of replicas, a straggler's replica alone. The replay itself refuses (FLOW_REFUSED) without running SimGrid at
 * this machine's own limit when the replicas, replayed apart, outnumber it. */
static void flow_refuses_what_the_machine_cannot_hold(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 2);
    fixture_layout(&s, 1, 1, 32, 32);
    s.parallel.overlap_grad_reduce = 1;
    step_workload w;
    fixture_build(&s, &w);
    config_error err;
    flow_options apart = {.per_replica = 1};
    assert_int_equal(flow_fits(&s, &w, &apart, 1000000, &err), 0);
    assert_int_equal(flow_fits(&s, &w, &apart, 200, &err), FLOW_REFUSED);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "65 SimGrid actors (2 stage lanes with work x 32"));
    assert_non_null(strstr(err.msg, "vm.max_map_count of 200"));
    assert_non_null(strstr(err.msg, "--fidelity analytic"));
    /* identical replicas: an actor a lane replays 8 of them (each starts 8 ring channels, one
     * per NIC of its node: 64 flows an actor), 4 actors a lane (200 maps are still fewer than
     * SimGrid's own) */
    assert_int_equal(flow_fits(&s, &w, NULL, 200, &err), FLOW_REFUSED);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "9 SimGrid actors (2 stage lanes with work x 4 "));
    /* a straggler makes its replica (5) differ: it goes alone, the others in groups of 8 around
     * it (0-4, 6-13, 14-21, 22-29, 30-31) */
    straggler g = {5, 1.1};
    s.faults.stragglers = &g;
    s.faults.straggler_count = 1;
    assert_int_equal(flow_fits(&s, &w, NULL, 200, &err), FLOW_REFUSED);
    assert_non_null(strstr(err.msg, "13 SimGrid actors (2 stage lanes with work x 6 "));
    s.faults.stragglers = NULL;
    s.faults.straggler_count = 0;
    workload_free(&w);
    fixture_free(&s);

    long limit = 0;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (!f || fscanf(f, "%ld", &limit) != 1 || limit > 1000000) {
        if (f)
            fclose(f);
        print_message("no vm.max_map_count below a million here: the replay-level check is not exercised\n");
        return;
    }
    fclose(f);
    fixture_scenario(&s, 2);
    int dp = (int)(limit / 2 + 1); /* two lanes x dp actors x 1 map: over the limit */
    s.platform.network.nodes = dp / s.platform.node.gpus + 1;
    fixture_layout(&s, 1, 1, dp, dp);
    s.parallel.overlap_grad_reduce = 1;
    fixture_build(&s, &w);
    replay_times t;
    assert_int_equal(replay_times_alloc(&t, w.n_tasks), 0);
    double t0 = wall_clock_s();
    int rc = replay_flow_with(&s, &w, &apart, &t, NULL, &err);
    double took = wall_clock_s() - t0;
    print_message("DP %d at vm.max_map_count %ld: refused in %.3f s: %s\n", dp, limit, took, err.msg);
    assert_int_equal(rc, FLOW_REFUSED);
    assert_true(took < 2.0);
    replay_times_free(&t);
    workload_free(&w);
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_rail_stands_for_identical_rails),
        cmocka_unit_test(replica_groups_replay_what_separate_replicas_do),
        cmocka_unit_test(folded_replicas_stand_for_every_replica),
        cmocka_unit_test(flows_of_unequal_routes_share_a_nic_alike),
        cmocka_unit_test(a_degraded_nic_the_job_does_not_use_changes_nothing),
        cmocka_unit_test(flow_refuses_what_the_machine_cannot_hold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
