/* The SimGrid flow replay: without contention it agrees with the analytic replay (<= 2%) and, on
 * a hand-built step, with the closed form; a NIC at half bandwidth slows the ring through it to
 * half speed; two DP rings sharing a leaf uplink slow down by the oversubscription factor; a
 * pipeline transfer shares its NIC with a gradient bucket. */
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

/* The fixture's model made wide and short (h 4096, 32 heads, f 16384, 4 layers of 256 tokens)
 * at TP 8, its DP gradient all-reduce not overlapped: a DP-heavy step. */
static void dp_heavy_scenario(scenario_config *s, int pp, int dp, int global_batch_size)
{
    fixture_scenario(s, 4);
    fixture_model(s, 4, 4096, 32, 16384);
    s->model.seq_length = 256;
    fixture_layout(s, 8, pp, dp, global_batch_size);
    s->parallel.overlap_grad_reduce = 0;
    s->parallel.zero_stage = 0;
}

static void flow_agrees_with_analytic_without_contention(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 4, 2, 4, 16);
    s.parallel.overlap_grad_reduce = 1;
    run_result a, f;
    fixture_run_both(&s, &a, &f);
    print_message("analytic %.6f s, flow %.6f s (%ld flows)\n", a.step_time_s, f.step_time_s, f.flows);
    assert_true(f.flows > 0);
    assert_within(f.step_time_s, a.step_time_s, 0.02);
    fixture_free(&s);
}

/* Both replays take one collective model (sim/step/collective.h): a gradient all-reduce over 512
 * nodes, one GPU of each (TP 8 fills a node), not overlapped, runs NCCL's double binary tree,
 * whose latency is log-deep; the flow replay once charged the ring's 2 (n - 1) steps per call
 * (12x at 65,536 GPUs). Forcing the ring (parallel.nccl_algo, NCCL_ALGO=Ring) changes both. */
static void flow_uses_the_collective_the_analytic_replay_picks(void **state)
{
    (void)state;
    for (int forced = 0; forced < 2; forced++) {
        scenario_config s;
        fixture_scenario(&s, 2);
        s.platform.network.nodes = 512;
        fixture_layout(&s, 8, 1, 512, 512);
        s.parallel.overlap_grad_reduce = 0;
        if (forced)
            s.platform.nccl_algo[COLL_ALL_REDUCE] = ALGO_RING;
        run_result a, f;
        fixture_run_both(&s, &a, &f);
        print_message("DP 512 x TP 8, %s all-reduce: analytic %.6f s (dp %.6f), flow %.6f s (dp %.6f)\n",
                      forced ? "ring" : "NCCL's", a.step_time_s, a.comm_total_s[COMM_DP], f.step_time_s,
                      f.comm_total_s[COMM_DP]);
        assert_within(f.step_time_s, a.step_time_s, 0.02);
        assert_within(f.comm_total_s[COMM_DP], a.comm_total_s[COMM_DP], 0.02);
        fixture_free(&s);
    }
}

/* NVLink SHARP and SHARP on (platform.node.nvls, network.sharp), a DP 32 gradient all-reduce
 * over four nodes of eight, not overlapped: NCCL's choice is one of the in-network algorithms,
 * whose NIC bytes the flows move while the NVLink phase and latencies are charged as the
 * analytic replay has them; nothing contends, so the two replays agree. */
static void flow_agrees_with_analytic_with_nvls_and_sharp(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 2);
    s.platform.network.nodes = 4;
    s.platform.node.nvls = s.platform.network.sharp = 1;
    fixture_layout(&s, 1, 1, 32, 32);
    s.parallel.overlap_grad_reduce = 0;
    coll_cost pick = collective_time(&s.platform, &s.calibration, COLL_ALL_REDUCE, 40e6, coll_group_of(32, 1, 8));
    assert_true(pick.algo == ALGO_NVLS || pick.algo == ALGO_NVLS_TREE || pick.algo == ALGO_COLLNET_DIRECT ||
                pick.algo == ALGO_COLLNET_CHAIN);
    run_result a, f;
    fixture_run_both(&s, &a, &f);
    print_message("NVLS + SHARP, DP 32 (%s): analytic %.6f s (dp %.6f), flow %.6f s (dp %.6f)\n",
                  coll_algo_name(pick.algo), a.step_time_s, a.comm_total_s[COMM_DP], f.step_time_s,
                  f.comm_total_s[COMM_DP]);
    assert_true(f.flows > 0);
    assert_within(f.step_time_s, a.step_time_s, 0.02);
    assert_within(f.comm_total_s[COMM_DP], a.comm_total_s[COMM_DP], 0.02);
    fixture_free(&s);
}

/* ZeRO-3 over DP 32 on four nodes (one GPU of each TP-1 replica; hierarchical collectives): the
 * per-layer gathers and reduce-scatters of every micro-batch share the comm stream in the same
 * order in both replays, the flows carry only what crosses the NICs, and the two agree. */
static void flow_agrees_with_analytic_under_zero3(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 4);
    fixture_layout(&s, 1, 1, 32, 64);
    s.parallel.zero_stage = 3;
    run_result a, f;
    fixture_run_both(&s, &a, &f);
    print_message("ZeRO-3 DP 32: analytic %.6f s (zero %.6f, dp %.6f), flow %.6f s (zero %.6f, dp %.6f)\n",
                  a.step_time_s, a.comm_total_s[COMM_ZERO], a.comm_total_s[COMM_DP], f.step_time_s,
                  f.comm_total_s[COMM_ZERO], f.comm_total_s[COMM_DP]);
    assert_true(a.comm_total_s[COMM_ZERO] > 0);
    assert_within(f.step_time_s, a.step_time_s, 0.02);
    assert_within(f.comm_total_s[COMM_ZERO], a.comm_total_s[COMM_ZERO], 0.02);
    fixture_free(&s);
}

/* Context parallelism with TP filling each node: the CP ranks of a replica sit on different
 * nodes, so the gradient ring over DP x CP crosses one NIC per GPU. The analytic replay must
 * see the same geometry as the flows (it once assumed the CP ranks shared a node). */
static void flow_agrees_with_analytic_with_context_parallel(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 8, 2, 2, 8);
    s.parallel.cp = 2;
    run_result a, f;
    fixture_run_both(&s, &a, &f);
    print_message("CP 2: analytic %.6f s, flow %.6f s\n", a.step_time_s, f.step_time_s);
    assert_within(f.step_time_s, a.step_time_s, 0.02);
    fixture_free(&s);
}

/* A step made of one DP all-reduce per stage (hand-built), replayed on flows. */
static double collectives_only(scenario_config *s, double bytes)
{
    step_workload w;
    fixture_graph(&w, s->parallel.pp);
    int group = s->parallel.dp * s->parallel.cp; /* gradients are reduced over DP x CP */
    for (int p = 0; p < s->parallel.pp; p++)
        fixture_add(&w, fixture_collective(p, "dp_grad_allreduce", COMM_DP, COLL_ALL_REDUCE, group, bytes, 0), -1);
    return fixture_flow_finish(s, &w, NULL, -1);
}

/* A step built by hand: forward and backward on two stages joined by pipeline transfers, then
 * one DP ring all-reduce per stage (TP 8 x PP 2 x DP 4: each DP ring runs over 4 nodes on each
 * of the 8 rails, nothing shares a link). The flow replay must match the analytic replay of the
 * same graph and the chain's closed form. */
static void hand_built_step_agrees_with_analytic_and_closed_form(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 8, 2, 4, 4);
    const platform_config *p = &s.platform;
    double B = p->node.nic_bandwidth_gbps / 8 * 1e9; /* 25 GB/s per NIC, per direction */
    /* one NIC hop inside a leaf: NIC up, switch, NIC down */
    double hop = 2 * p->network.link_latency_us * 1e-6 + p->network.switch_latency_us * 1e-6;
    double act = 25e6, grad = 400e6;
    double p2p = act / B + hop;
    coll_group dp = {4, 4, 1};
    double ring = collective_time_algo(p, &s.calibration, COLL_ALL_REDUCE, grad, dp, ALGO_RING);
    /* NCCL's Simple ring across 4 nodes, one GPU each (tuning.cc): 8.4 us + 6 network steps at the
     * tree's 14 us, x1.4 (the ring's plateau) */
    double ring_closed = 2.0 * 3 / 4 * grad / B + (8.4 + 6 * 14) * 1.4e-6;
    assert_true(fabs(ring - ring_closed) < 1e-9);

    step_workload w;
    fixture_graph(&w, 2);
    int f0 = fixture_add(&w, fixture_compute(0, "fwd", 0.010), -1);
    int s01 = fixture_add(&w, fixture_transfer(0, 1, "pp_send_activation", act, p2p), f0);
    int f1 = fixture_add(&w, fixture_compute(1, "fwd", 0.010), s01);
    int b1 = fixture_add(&w, fixture_compute(1, "bwd", 0.020), f1);
    int s10 = fixture_add(&w, fixture_transfer(1, 0, "pp_send_grad", act, p2p), b1);
    int b0 = fixture_add(&w, fixture_compute(0, "bwd", 0.020), s10);
    /* stage 1's ring waits for its send, so the two never share node 1's NICs */
    int ar1 = fixture_add(&w, fixture_collective(1, "dp_grad_allreduce", COMM_DP, COLL_ALL_REDUCE, 4, grad, ring), s10);
    int ar0 = fixture_add(&w, fixture_collective(0, "dp_grad_allreduce", COMM_DP, COLL_ALL_REDUCE, 4, grad, ring), b0);

    replay_times a, f;
    fixture_replay_analytic(&w, &a);
    flow_report rep;
    fixture_replay_flow(&s, &w, NULL, &f, &rep);
    double closed = 0.010 + p2p + 0.010 + 0.020 + p2p + 0.020 + ring;
    print_message("closed form %.6f s, analytic %.6f s, flow %.6f s (%ld flows, %ld actors)\n", closed, a.finish[ar0],
                  f.finish[ar0], rep.flows, rep.actors);
    assert_true(fabs(a.finish[ar0] - closed) < 1e-9);
    for (int i = 0; i < w.n_tasks; i++)
        assert_within(f.finish[i], a.finish[i], 0.02);
    assert_within(f.finish[ar0], closed, 0.001); /* in fact within latencies */
    assert_true(f.finish[ar1] < f.finish[ar0]);
    /* per replica (4): 2 transfers x 8 rails, and 2 rings x 8 rails of one edge each; the
     * rails are independent and identical here, so rail 0 stands for the 8, and on one leaf
     * replicas 0 and 1 for the 4 (flow_replicas_of) */
    assert_int_equal(rep.flows_represented, 4 * (2 * 8 + 2 * 8));
    assert_int_equal(rep.rails_simulated, 1);
    assert_int_equal(rep.flows, 2 * (2 + 2));
    assert_string_equal(rep.slowest_comm, "dp_grad_allreduce");
    replay_times_free(&a);
    replay_times_free(&f);
    workload_free(&w);
    fixture_free(&s);
}

static void half_bandwidth_nic_halves_its_ring(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 8, 1, 4, 4); /* TP 8, one node per replica: each DP ring runs on one rail */
    double bytes = 4e9;
    double healthy = collectives_only(&s, bytes);
    /* closed form: ring of 4 over 25 GB/s NICs */
    double expect = 2.0 * 3 / 4 * bytes / 25e9;
    assert_true(healthy > expect && healthy < 1.02 * expect);
    degraded_link d = {2, 3, 0.5, 0, 0};
    fixture_degrade(&s, &d);
    double degraded = collectives_only(&s, bytes);
    fixture_degrade(&s, NULL);
    print_message("ring: healthy %.4f s, NIC n2g3 at 0.5: %.4f s (ratio %.3f)\n", healthy, degraded, degraded / healthy);
    assert_true(fabs(degraded / healthy - 2.0) < 0.05);
    fixture_free(&s);
}

/* A NIC flapping between full and half bandwidth, half of each 10 ms: over a ring much longer
 * than the period its edge averages 0.5 x 1 + 0.5 x 0.5 = 0.75 of the bandwidth, so the ring
 * (paced by that edge) takes 1/0.75 = 1.333 times as long. */
static void flapping_nic_slows_its_ring_by_its_mean_bandwidth(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 8, 1, 4, 4);
    double bytes = 4e9;
    double healthy = collectives_only(&s, bytes);
    degraded_link d = {2, 3, 0.5, 0.01, 0.005};
    fixture_degrade(&s, &d);
    double flapping = collectives_only(&s, bytes);
    fixture_degrade(&s, NULL);
    print_message("ring: healthy %.4f s, NIC n2g3 flapping to 0.5 half the time: %.4f s (ratio %.3f, mean-bandwidth "
                  "prediction 1.333)\n", healthy, flapping, flapping / healthy);
    assert_true(fabs(flapping / healthy - 1.0 / 0.75) < 0.02);
    fixture_free(&s);
}

/* A GPU that fails inside the step: every rank stalls, the watchdog fires detect_s later and the
 * step is lost; a failure due after the step ended changes nothing. */
static void failure_inside_a_step_is_lost_after_detection(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 4, 2, 4, 16);
    run_result healthy = fixture_run_at(&s, 1);
    s.faults.step_failure = 1;
    s.faults.step_failure_gpu = 13;
    s.faults.step_failure_at_s = healthy.step_time_s / 2;
    s.faults.detect_s = 7;
    run_result failed = fixture_run(&s);
    assert_int_equal(failed.step_failed, 1);
    assert_true(fabs(failed.failed_at_s - healthy.step_time_s / 2) < 1e-9);
    assert_true(fabs(failed.detected_at_s - (healthy.step_time_s / 2 + 7)) < 1e-9);
    assert_true(fabs(failed.step_time_s - failed.detected_at_s) < 1e-12);
    assert_true(failed.tokens_per_s == 0);
    s.faults.step_failure_at_s = 2 * healthy.step_time_s;
    run_result late = fixture_run(&s);
    assert_int_equal(late.step_failed, -1);
    assert_true(fabs(late.step_time_s - healthy.step_time_s) < 1e-9);
    print_message("healthy step %.4f s; GPU 13 off at %.4f s: lost, detected at %.4f s\n", healthy.step_time_s,
                  failed.failed_at_s, failed.detected_at_s);
    fixture_free(&s);
}

static void gradient_ring_runs_through_the_cp_ranks(void **state)
{
    /* TP 8 x CP 2 x DP 2: the gradient ring has 4 members (2 replicas x 2 CP ranks), one per
     * node, as a DP 4 ring has: 2(4-1)/4 of the bytes per edge over 25 GB/s NICs. */
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 8, 1, 2, 2);
    s.parallel.cp = 2;
    double bytes = 4e9;
    double with_cp = collectives_only(&s, bytes);
    double expect = 2.0 * 3 / 4 * bytes / 25e9;
    print_message("DP 2 x CP 2 gradient ring: %.6f s (closed form %.6f s)\n", with_cp, expect);
    assert_true(with_cp > expect && with_cp < 1.001 * expect);
    fixture_free(&s);
}

/* Two DP rings that leave one leaf for destinations equal mod its uplinks: TP 8 x PP 2 x DP 6 on
 * 12 nodes, four a leaf (4 uplinks a rail at 1:1). Stage 0's ring (nodes 0-5) goes 5 -> 0 and
 * stage 1's (6-11) 7 -> 8, both out of leaf {4-7}; 0 and 8 are equal mod 4, so static d-mod-k
 * routing puts both on one uplink and each crossing runs at half speed, which sets each ring's
 * pace. With adaptive routing the leaf's four uplinks carry them side by side: the rings run at
 * the NIC's rate, as with no spine at all (every node on one leaf). */
static void adaptive_routing_spreads_what_d_mod_k_collides(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 12);
    fixture_layout(&s, 8, 2, 6, 6);
    double bytes = 4e9, t[3];
    for (int k = 0; k < 3; k++) {
        s.platform.network.adaptive_routing = k == 1;
        s.platform.network.leaf_radix = k == 2 ? 12 : 4;
        t[k] = collectives_only(&s, bytes);
    }
    print_message("two rings out of one leaf: d-mod-k %.4f s, adaptive %.4f s, one leaf %.4f s\n", t[0], t[1], t[2]);
    assert_true(t[0] > 1.8 * t[1]);
    assert_true(fabs(t[1] / t[2] - 1) < 0.01);
    fixture_free(&s);
}

/* PP 2 x DP 4 of TP 8: stage 0 on nodes 0-3, stage 1 on nodes 4-7 (rank_grid.h), four nodes a
 * leaf. Every replica's stage 0 sends to its stage 1 at once: on each rail four flows leave leaf
 * {0-3} for leaf {4-7}. A rail's leaf has 4 down-links and ceil(4 / oversubscription) uplinks:
 * 4 at 1:1, 2 at 2:1, where the four sends share two links and take twice as long. */
static void oversubscribed_spine_slows_the_transfers_that_share_it(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 8, 2, 4, 4);
    s.platform.network.leaf_radix = 4;
    double bytes = 4e9, t[2];
    for (int k = 0; k < 2; k++) {
        s.platform.network.oversubscription = k + 1;
        step_workload w;
        fixture_graph(&w, 2);
        int send = fixture_add(&w, fixture_transfer(0, 1, "pp_send_activation", bytes, 0), -1);
        t[k] = fixture_flow_finish(&s, &w, NULL, send);
    }
    print_message("four sends across the spine: 1:1 %.4f s, 2:1 %.4f s (ratio %.3f)\n", t[0], t[1], t[1] / t[0]);
    assert_true(fabs(t[1] / t[0] - 2.0) < 0.05);
    fixture_free(&s);
}

/* Stage 0 of replica 0 sends `bytes` to stage 1 while (optionally) its DP ring of two replicas
 * moves the same bytes per edge: both leave through the same NICs of node 0. Returns the send's
 * finish time. */
static double pp_send_with_bucket(scenario_config *s, double bytes, int with_bucket)
{
    step_workload w;
    fixture_graph(&w, 2);
    int send = fixture_add(&w, fixture_transfer(0, 1, "pp_send_activation", bytes, 0), -1);
    if (with_bucket) /* ring of 2: each edge carries 2(2-1)/2 x bytes = bytes */
        fixture_add(&w, fixture_collective(0, "dp_grad_allreduce", COMM_DP, COLL_ALL_REDUCE, 2, bytes, 0), -1);
    return fixture_flow_finish(s, &w, NULL, send);
}

static void pp_transfer_shares_the_nic_with_a_gradient_bucket(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 8, 2, 2, 2); /* stage 0 of replica 0 on node 0, stage 1 on node 1, replica 1 on nodes 2-3 */
    double bytes = 2.5e9;
    double alone = pp_send_with_bucket(&s, bytes, 0), shared = pp_send_with_bucket(&s, bytes, 1);
    print_message("PP send alone %.4f s, beside a DP bucket on the same NIC %.4f s (ratio %.3f)\n", alone, shared,
                  shared / alone);
    assert_true(fabs(alone - bytes / 25e9) < 0.01 * alone);
    assert_true(fabs(shared / alone - 2.0) < 0.05);
    fixture_free(&s);
}

static void fat_tree_leaf_uplinks_are_shared_by_a_nodes_nics(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 8, 1, 4, 4);
    s.platform.network.topology = TOPO_FAT_TREE;
    s.platform.network.leaf_radix = 1; /* every node on its own leaf: every ring edge climbs */
    double bytes = 4e9;
    s.platform.network.oversubscription = 1;
    double full = collectives_only(&s, bytes);
    double expect = 2.0 * 3 / 4 * bytes / 25e9;
    /* 8 rings leave each node through 8 NICs and 8 uplinks: no contention at 1:1 */
    assert_true(full > expect && full < 1.02 * expect);
    s.platform.network.oversubscription = 4; /* 2 uplinks for 8 NICs */
    double over = collectives_only(&s, bytes);
    print_message("fat tree: 1:1 %.4f s, 4:1 %.4f s (ratio %.3f)\n", full, over, over / full);
    assert_true(fabs(over / full - 4.0) < 0.1);
    fixture_free(&s);
}

static double step_of(const scenario_config *s, int fine)
{
    step_workload w;
    fixture_build(s, &w);
    flow_options o = {.fine = fine}; /* fine: replay_flow_fine */
    return fixture_flow_finish(s, &w, &o, -1);
}

static void lockstep_tp_granularity_costs_little(void **state)
{
    /* The finer replay (TP rings as NVLink flows per GPU) against the default (TP folded into
     * lockstep compute): on TP 8 x PP 2 x DP 2 of the fixture, within 2%. */
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 8, 2, 2, 8);
    double coarse = step_of(&s, 0), fine = step_of(&s, 1);
    print_message("lockstep %.6f s, fine %.6f s (%+.2f%%)\n", coarse, fine, 100 * (fine - coarse) / coarse);
    assert_within(fine, coarse, 0.02);
    fixture_free(&s);
}

/* The flow replay coarsens gradient buckets to at most 16 a stage (run.c), each standing for as
 * many of the scenario's calls as it holds: each pays a call's fixed cost and takes its algorithm
 * for one call's size (collective_split), as the analytic replay prices the scenario's own
 * buckets. DP 128 of TP 8, ZeRO-1, 4 MB buckets of a 200 MB gradient: 3.1 calls to a coarse bucket.
 * Counted up to whole calls, the coarse buckets had paid 28% more fixed costs than the scenario
 * makes (bench/fidelity_scale.sh: DP time +1.2% at 1,024 GPUs, +2.1% at 65,536); now both
 * fidelities' DP time agree to 0.3%. */
static void coarse_buckets_pay_the_calls_they_stand_for(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 128);
    fixture_model(&s, 4, 4096, 32, 16384);
    s.model.seq_length = 256;
    fixture_layout(&s, 8, 1, 128, 128);
    s.parallel.overlap_grad_reduce = 0;
    s.parallel.zero_stage = 1;
    s.parallel.bucket_size_mb = 4;
    run_result a, f;
    fixture_run_both(&s, &a, &f);
    double da = a.comm_total_s[COMM_DP] + a.comm_total_s[COMM_ZERO];
    double df = f.comm_total_s[COMM_DP] + f.comm_total_s[COMM_ZERO];
    print_message("DP 128, 4 MB buckets: DP and ZeRO communication analytic %.6f s, flow %.6f s (%+.2f%%); step "
                  "%.6f and %.6f s\n",
                  da, df, 100 * (df / da - 1), a.step_time_s, f.step_time_s);
    assert_true(fabs(df / da - 1) < 0.003);
    assert_true(fabs(f.step_time_s / a.step_time_s - 1) < 0.003);
    fixture_free(&s);
}

static void degraded_nic_slows_a_dp_heavy_step_as_the_ring_predicts(void **state)
{
    /* A step whose DP all-reduce is exposed (no overlap): halving one NIC doubles every ring
     * through it, so the step grows by the all-reduce's time. */
    scenario_config s;
    dp_heavy_scenario(&s, 1, 4, 4);
    run_result healthy = fixture_run_at(&s, 1);
    degraded_link d = {1, 5, 0.5, 0, 0};
    fixture_degrade(&s, &d);
    run_result slow = fixture_run(&s);
    fixture_degrade(&s, NULL);
    double dp = healthy.comm_total_s[COMM_DP];
    double predicted = healthy.step_time_s + dp; /* the ring's bandwidth term doubles */
    print_message("DP-heavy step: healthy %.4f s (DP %.4f s exposed %.4f), NIC at 0.5: %.4f s, ring predicts %.4f s\n",
                  healthy.step_time_s, dp, healthy.comm_exposed_s[COMM_DP], slow.step_time_s, predicted);
    assert_true(dp > 0.3 * healthy.step_time_s); /* DP-heavy indeed */
    assert_true(fabs(slow.step_time_s - predicted) < 0.05 * predicted);
    assert_non_null(strstr(slow.slowest_link, "nic_n1g5_")); /* either direction: both are degraded */
    fixture_free(&s);
}

/* One node, every overlap on (TP 2 with SP and tp_comm_overlap, DP 4 with the distributed
 * optimizer, overlapped gradient reduction and parameter gather): both replays agree. */
static void flow_agrees_with_analytic_with_overlaps_on_one_node(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 4);
    fixture_layout(&s, 2, 1, 4, 16);
    fixture_tp_comm_overlap(&s, 4, 1.1);
    s.parallel.zero_stage = 1;
    s.parallel.overlap_grad_reduce = 1;
    s.parallel.overlap_param_gather = 1;
    run_result a, f;
    fixture_run_both(&s, &a, &f);
    print_message("overlaps on, one node: analytic %.6f s, flow %.6f s (%+.2f%%); overlap cost %.6f s\n", a.step_time_s,
                  f.step_time_s, 100 * (f.step_time_s / a.step_time_s - 1), a.overlap_cost_s);
    assert_true(a.overlap_cost_s > 0);
    assert_within(f.step_time_s, a.step_time_s, 0.02);
    fixture_free(&s);
}

/* The analytic replay sees the same faults (sim/step/step_faults.h): a NIC at half bandwidth (and one
 * flapping, at several periods), and a straggler on one pipeline stage, give the same step at
 * both fidelities, and each a slower step than the healthy one. */
static void analytic_sees_degraded_links_and_stragglers(void **state)
{
    (void)state;
    scenario_config s;
    dp_heavy_scenario(&s, 2, 4, 8);
    degraded_link d[2] = {{1, 5, 0.5, 0, 0}, {4, 2, 0.25, 0.002, 0.0005}}; /* stage 1's ring; stage 0's, flapping */
    straggler g = {8 * 2 * 3 + 3, 1.25};                             /* replica 3, stage 0 */
    const char *what[3] = {"NIC at 0.5", "flapping NIC", "straggler 1.25"};
    run_result healthy = fixture_run(&s);
    for (int c = 0; c < 3; c++) {
        fixture_degrade(&s, c < 2 ? &d[c] : NULL);
        s.faults.stragglers = c == 2 ? &g : NULL;
        s.faults.straggler_count = c == 2;
        run_result a, f;
        fixture_run_both(&s, &a, &f);
        print_message("%s: healthy %.5f s; analytic %.5f s, flow %.5f s (%+.2f%%)\n", what[c], healthy.step_time_s,
                      a.step_time_s, f.step_time_s, 100 * (a.step_time_s / f.step_time_s - 1));
        assert_true(a.step_time_s > 1.01 * healthy.step_time_s);
        assert_within(a.step_time_s, f.step_time_s, 0.02);
    }
    /* Whatever the flapping's phase against the step: a flow that starts while the link is down
     * must not keep the degraded rate after it comes back up (SimGrid caps a flow at its route's
     * bandwidth when it starts; run_flows restarts it), so the step stays at the mean-bandwidth
     * prediction for every period. */
    s.faults.stragglers = NULL;
    s.faults.straggler_count = 0;
    fixture_degrade(&s, &d[1]);
    const double periods[] = {0.0017, 0.0019, 0.0021, 0.0023, 0.0029, 0.0031};
    for (size_t i = 0; i < sizeof periods / sizeof *periods; i++) {
        d[1].flap_period_s = periods[i];
        run_result a, f;
        fixture_run_both(&s, &a, &f);
        print_message("flapping every %.4f s: analytic %.5f s, flow %.5f s (%+.2f%%)\n", periods[i], a.step_time_s,
                      f.step_time_s, 100 * (a.step_time_s / f.step_time_s - 1));
        assert_within(a.step_time_s, f.step_time_s, 0.03);
    }
    fixture_degrade(&s, NULL);
    fixture_free(&s);
}

static void third_tier_carries_traffic_between_pods(void **state)
{
    /* 8 nodes, 2 per leaf, 2 leaves per pod: pods {0-3} and {4-7}. The DP rings over nodes 0, 2,
     * 4, 6 cross pods twice. The cores are non-blocking: 3 tiers add the extra hops' latency
     * and take no bandwidth. */
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 8, 2, 4, 4); /* PP 2: the DP group of stage 0 is nodes 0, 2, 4, 6 */
    s.platform.network.leaf_radix = 2;
    s.platform.network.tiers = 2;
    double two = collectives_only(&s, 4e9);
    s.platform.network.tiers = 3;
    double three = collectives_only(&s, 4e9);
    print_message("ring across pods: 2 tiers %.6f s, 3 tiers %.6f s\n", two, three);
    assert_true(three >= two);                 /* more hops: more latency */
    assert_true(three < two * 1.001);          /* non-blocking: no less bandwidth */
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(flow_agrees_with_analytic_without_contention),
        cmocka_unit_test(flow_agrees_with_analytic_with_context_parallel),
        cmocka_unit_test(hand_built_step_agrees_with_analytic_and_closed_form),
        cmocka_unit_test(half_bandwidth_nic_halves_its_ring),
        cmocka_unit_test(flapping_nic_slows_its_ring_by_its_mean_bandwidth),
        cmocka_unit_test(failure_inside_a_step_is_lost_after_detection),
        cmocka_unit_test(gradient_ring_runs_through_the_cp_ranks),
        cmocka_unit_test(oversubscribed_spine_slows_the_transfers_that_share_it),
        cmocka_unit_test(adaptive_routing_spreads_what_d_mod_k_collides),
        cmocka_unit_test(pp_transfer_shares_the_nic_with_a_gradient_bucket),
        cmocka_unit_test(fat_tree_leaf_uplinks_are_shared_by_a_nodes_nics),
        cmocka_unit_test(lockstep_tp_granularity_costs_little),
        cmocka_unit_test(coarse_buckets_pay_the_calls_they_stand_for),
        cmocka_unit_test(degraded_nic_slows_a_dp_heavy_step_as_the_ring_predicts),
        cmocka_unit_test(third_tier_carries_traffic_between_pods),
        cmocka_unit_test(flow_uses_the_collective_the_analytic_replay_picks),
        cmocka_unit_test(flow_agrees_with_analytic_with_nvls_and_sharp),
        cmocka_unit_test(flow_agrees_with_analytic_under_zero3),
        cmocka_unit_test(analytic_sees_degraded_links_and_stragglers),
        cmocka_unit_test(flow_agrees_with_analytic_with_overlaps_on_one_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
