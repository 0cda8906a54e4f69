/* Collective models against their closed forms on an idle fabric. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "collective.h"
#include "fixture.h"

static void ring_allreduce_inside_node_matches_closed_form(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 1);
    double B = s.platform.node.nvlink_bandwidth_gbs * 1e9, a = s.platform.node.nvlink_latency_us * 1e-6;
    for (int n = 2; n <= 8; n++) {
        for (double S = 1e3; S <= 1e10; S *= 37) {
            coll_group g = coll_group_of(n, 1, 8);
            assert_int_equal(g.nodes, 1);
            double t = collective_time_algo(&s.platform, &s.calibration, COLL_ALL_REDUCE, S, g, ALGO_RING);
            double expect = 2.0 * (n - 1) / n * S / B + 2.0 * (n - 1) * a;
            assert_true(fabs(t - expect) <= 1e-9 * expect);
        }
    }
    fixture_free(&s);
}

static void ring_across_nodes_is_paced_by_the_nic(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 1);
    /* One GPU per node (stride 8): every ring edge is a NIC at 200 Gb/s = 25 GB/s. */
    coll_group g = coll_group_of(16, 8, 8);
    assert_int_equal(g.nodes, 16);
    assert_int_equal(g.per_node, 1);
    double S = 1e9;
    double t = collective_time_algo(&s.platform, &s.calibration, COLL_ALL_REDUCE, S, g, ALGO_RING);
    double bw_term = 2.0 * 15 / 16 * S / 25e9;
    assert_true(t > bw_term && t < bw_term * 1.01);
    /* Eight GPUs per node use eight rails in parallel: eight times the bandwidth, capped by
     * NVLink (300 GB/s > 8 x 25 GB/s). */
    coll_group g8 = coll_group_of(128, 1, 8);
    assert_int_equal(g8.nodes, 16);
    S = 1e10; /* large enough that the 254 ring steps' latency is under 1% */
    double t8 = collective_time_algo(&s.platform, &s.calibration, COLL_ALL_REDUCE, S, g8, ALGO_RING);
    double bw8 = 2.0 * 127 / 128 * S / 200e9;
    assert_true(t8 > bw8 && t8 < bw8 * 1.02);
    fixture_free(&s);
}

static void allgather_and_reduce_scatter_move_half_an_allreduce(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 1);
    s.platform.node.nvlink_latency_us = 0;
    coll_group g = coll_group_of(8, 1, 8);
    double S = 3e8;
    double ar = collective_time_algo(&s.platform, &s.calibration, COLL_ALL_REDUCE, S, g, ALGO_RING);
    double ag = collective_time_algo(&s.platform, &s.calibration, COLL_ALL_GATHER, S, g, ALGO_RING);
    double rs = collective_time_algo(&s.platform, &s.calibration, COLL_REDUCE_SCATTER, S, g, ALGO_RING);
    assert_true(fabs(ag + rs - ar) < 1e-12 * ar + 1e-15);
    fixture_free(&s);
}

static void selection_prefers_low_latency_for_small_messages(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 1);
    coll_group g = coll_group_of(1024, 1, 8); /* 128 nodes x 8 GPUs */
    coll_cost small = collective_time(&s.platform, &s.calibration, COLL_ALL_REDUCE, 1024, g);
    coll_cost ring = {collective_time_algo(&s.platform, &s.calibration, COLL_ALL_REDUCE, 1024, g, ALGO_RING), ALGO_RING};
    assert_true(small.algo != ALGO_RING);
    assert_true(small.time_s < ring.time_s);
    /* and the choice is never slower than any of NCCL's algorithms */
    for (double S = 1; S < 1e11; S *= 10)
        for (int a = 0; a < ALGO_COUNT; a++) {
            if (a != ALGO_AUTO && !coll_algo_is_nccl((coll_algo)a))
                continue;
            coll_cost best = collective_time(&s.platform, &s.calibration, COLL_ALL_REDUCE, S, g);
            assert_true(best.time_s <= collective_time_algo(&s.platform, &s.calibration, COLL_ALL_REDUCE, S, g, a));
        }
    fixture_free(&s);
}

static void calibrated_busbw_and_alpha_replace_the_datasheet(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 1);
    s.platform.node.nvlink_latency_us = 0;
    coll_fit *f = &s.calibration.collectives[LINK_NVLINK][COLL_ALL_REDUCE];
    f->present = 1;
    f->alpha_us = 10;
    f->busbw_gbs = 150;
    coll_group g = coll_group_of(8, 1, 8);
    double S = 1e9;
    double t = collective_time_algo(&s.platform, &s.calibration, COLL_ALL_REDUCE, S, g, ALGO_RING);
    double expect = 10e-6 + 2.0 * 7 / 8 * S / 150e9;
    assert_true(fabs(t - expect) < 1e-9 * expect);
    fixture_free(&s);
}

/* PAT: all-gather and reduce-scatter at one GPU per node take log2(nodes) latency steps instead
 * of the ring's nodes - 1, and move the same bytes; it does not apply with several GPUs of a
 * group per node, nor to all-reduce. */
static void pat_cuts_the_latency_of_one_gpu_per_node_gathers(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 1);
    coll_group g = coll_group_of(256, 8, 8); /* one GPU on each of 256 nodes */
    const platform_config *p = &s.platform;
    const calibration_config *c = &s.calibration;
    double ring0 = collective_time_algo(p, c, COLL_ALL_GATHER, 0, g, ALGO_RING);
    double pat0 = collective_time_algo(p, c, COLL_ALL_GATHER, 0, g, ALGO_PAT);
    double ringS = collective_time_algo(p, c, COLL_ALL_GATHER, 1e9, g, ALGO_RING);
    double patS = collective_time_algo(p, c, COLL_ALL_GATHER, 1e9, g, ALGO_PAT);
    double alpha = collective_alpha_s(c, LINK_NETWORK, COLL_ALL_GATHER);
    /* latency: 255 ring steps against log2(256) = 8 */
    assert_true(fabs((ring0 - alpha) * 8 - (pat0 - alpha) * 255) < 1e-9 * ring0);
    assert_true(fabs((ringS - patS) - (ring0 - pat0)) < 1e-9 * ringS); /* same bandwidth term */
    assert_true(collective_time(p, c, COLL_ALL_GATHER, 1024, g).algo == ALGO_PAT);
    assert_true(isinf(collective_time_algo(p, c, COLL_ALL_REDUCE, 1e6, g, ALGO_PAT)));
    assert_true(isinf(collective_time_algo(p, c, COLL_ALL_GATHER, 1e6, coll_group_of(256, 1, 8), ALGO_PAT)));
    fixture_free(&s);
}

/* parallel.nccl_algo forces an algorithm as NCCL_ALGO does; one that cannot run the call falls
 * back to NCCL's choice. */
static void a_forced_algorithm_is_used(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 1);
    coll_group g = coll_group_of(1024, 1, 8);
    const platform_config *p = &s.platform;
    const calibration_config *c = &s.calibration;
    assert_true(collective_time(p, c, COLL_ALL_REDUCE, 1024, g).algo != ALGO_RING);
    s.platform.nccl_algo[COLL_ALL_REDUCE] = ALGO_RING;
    coll_cost forced = collective_time(p, c, COLL_ALL_REDUCE, 1024, g);
    assert_int_equal(forced.algo, ALGO_RING);
    assert_true(forced.time_s == collective_time_algo(p, c, COLL_ALL_REDUCE, 1024, g, ALGO_RING));
    s.platform.nccl_algo[COLL_ALL_GATHER] = ALGO_TREE; /* tree has no all-gather: NCCL's choice */
    assert_true(collective_time(p, c, COLL_ALL_GATHER, 1024, g).algo != ALGO_TREE);
    fixture_free(&s);
}

/* Recursive halving-doubling (MPICH, Thakur et al. 2005) on n = 2^k ranks, one node: 2 log2(n)
 * latency steps and 2 (n-1)/n S over NVLink for an all-reduce, as the ring's bytes; across N
 * nodes of g GPUs, 2 (1 - 1/N) S through each GPU's NIC. Not a power of two: it does not run. */
static void halving_doubling_closed_form(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 1);
    const platform_config *p = &s.platform;
    const calibration_config *c = &s.calibration;
    double S = 1e9;
    coll_group one = coll_group_of(8, 1, 8);
    double t = collective_time_algo(p, c, COLL_ALL_REDUCE, S, one, ALGO_HALVING_DOUBLING);
    double expect = collective_alpha_s(c, LINK_NVLINK, COLL_ALL_REDUCE) + 2 * 3 * p->node.nvlink_latency_us * 1e-6 +
                    2.0 * 7 / 8 * S / (p->node.nvlink_bandwidth_gbs * 1e9);
    assert_true(fabs(t - expect) < 1e-9 * expect);
    coll_group four = coll_group_of(32, 1, 8); /* 4 nodes x 8 */
    coll_split x = collective_split_algo(p, c, COLL_ALL_REDUCE, S, four, ALGO_HALVING_DOUBLING);
    assert_true(fabs(x.net_bytes - 2 * 0.75 * S) < 1e-6);
    assert_true(fabs(x.time_s - (x.fixed_s + x.nvlink_s + x.net_s)) < 1e-15);
    assert_true(isinf(collective_time_algo(p, c, COLL_ALL_REDUCE, S, coll_group_of(6, 1, 8), ALGO_HALVING_DOUBLING)));
    fixture_free(&s);
}

/* Broadcast: a pipelined ring (NCCL's), every rank receives S once: alpha + (n-1) a + S / B. */
static void broadcast_is_a_pipelined_chain(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 1);
    const platform_config *p = &s.platform;
    const calibration_config *c = &s.calibration;
    double S = 1e9;
    coll_cost b = collective_time(p, c, COLL_BROADCAST, S, coll_group_of(8, 1, 8));
    double expect = collective_alpha_s(c, LINK_NVLINK, COLL_BROADCAST) + 7 * p->node.nvlink_latency_us * 1e-6 +
                    S / (p->node.nvlink_bandwidth_gbs * 1e9);
    assert_int_equal(b.algo, ALGO_RING);
    assert_true(fabs(b.time_s - expect) < 1e-9 * expect);
    fixture_free(&s);
}

/* The split the flow replay uses adds up to the analytic time for every algorithm, kind and
 * geometry where the algorithm runs. */
static void splits_add_up_to_the_time(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 1);
    int sizes[][2] = {{8, 1}, {64, 1}, {64, 8}, {1024, 1}, {4096, 8}, {96, 4}};
    for (size_t q = 0; q < sizeof sizes / sizeof *sizes; q++) {
        coll_group g = coll_group_of(sizes[q][0], sizes[q][1], 8);
        for (int k = 0; k < COLL_KIND_COUNT; k++)
            for (int a = 1; a < ALGO_COUNT; a++) {
                coll_split x = collective_split_algo(&s.platform, &s.calibration, (coll_kind)k, 3e8, g, (coll_algo)a);
                if (!isfinite(x.time_s))
                    continue;
                assert_true(x.fixed_s >= 0 && x.nvlink_s >= -1e-15 && x.net_s >= 0 && x.net_bytes >= 0);
                assert_true(fabs(x.time_s - (x.fixed_s + x.nvlink_s + x.net_s)) <= 1e-12 * x.time_s);
                assert_true(g.nodes > 1 || x.net_bytes == 0);
            }
    }
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ring_allreduce_inside_node_matches_closed_form),
        cmocka_unit_test(ring_across_nodes_is_paced_by_the_nic),
        cmocka_unit_test(allgather_and_reduce_scatter_move_half_an_allreduce),
        cmocka_unit_test(selection_prefers_low_latency_for_small_messages),
        cmocka_unit_test(calibrated_busbw_and_alpha_replace_the_datasheet),
        cmocka_unit_test(pat_cuts_the_latency_of_one_gpu_per_node_gathers),
        cmocka_unit_test(a_forced_algorithm_is_used),
        cmocka_unit_test(halving_doubling_closed_form),
        cmocka_unit_test(broadcast_is_a_pipelined_chain),
        cmocka_unit_test(splits_add_up_to_the_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
