/* Collective models against their closed forms on an idle fabric. Each test gets its own
 * one-layer fixture scenario (fixture_setup), which it may change. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "collective.h"
#include "fixture.h"

#define TEST(f) cmocka_unit_test_setup_teardown(f, fixture_setup, fixture_teardown)

/* The split the flow replay uses adds up to the analytic time for algorithms first..last of
 * every kind on each of n group geometries {size, stride} where the algorithm runs. */
static void check_splits_add_up(const scenario_config *s, const int (*sizes)[2], size_t n, int first, int last)
{
    for (size_t q = 0; q < n; q++) {
        coll_group g = coll_group_of(sizes[q][0], sizes[q][1], 8);
        for (int k = 0; k < COLL_KIND_COUNT; k++)
            for (int a = first; a <= last; a++) {
                coll_split x = collective_split_algo(&s->platform, &s->calibration, (coll_kind)k, 3e8, g, (coll_algo)a);
                if (!isfinite(x.time_s))
                    continue;
                assert_true(x.fixed_s >= 0 && x.nvlink_s >= -1e-15 && x.net_s >= 0 && x.net_bytes >= 0);
                assert_true(fabs(x.time_s - (x.fixed_s + x.nvlink_s + x.net_s)) <= 1e-12 * x.time_s);
                assert_true(g.nodes > 1 || x.net_bytes == 0);
            }
    }
}

static void ring_allreduce_inside_node_matches_closed_form(void **state)
{
    scenario_config *s = *state;
    double B = s->platform.node.nvlink_bandwidth_gbs * 1e9, a = s->platform.node.nvlink_latency_us * 1e-6;
    for (int n = 2; n <= 8; n++) {
        for (double S = 1e3; S <= 1e10; S *= 37) {
            coll_group g = coll_group_of(n, 1, 8);
            assert_int_equal(g.nodes, 1);
            double t = collective_time_algo(&s->platform, &s->calibration, COLL_ALL_REDUCE, S, g, ALGO_RING);
            double expect = 2.0 * (n - 1) / n * S / B + 2.0 * (n - 1) * a;
            assert_within(t, expect, 1e-9);
        }
    }
}

static void ring_across_nodes_is_paced_by_the_nic(void **state)
{
    scenario_config *s = *state;
    /* One GPU per node (stride 8): every ring edge is a NIC at 200 Gb/s = 25 GB/s. */
    coll_group g = coll_group_of(16, 8, 8);
    assert_int_equal(g.nodes, 16);
    assert_int_equal(g.per_node, 1);
    double S = 1e9;
    double t = collective_time_algo(&s->platform, &s->calibration, COLL_ALL_REDUCE, S, g, ALGO_RING);
    double bw_term = 2.0 * 15 / 16 * S / 25e9;
    assert_true(t > bw_term && t < bw_term * 1.01);
    /* Eight GPUs per node use eight rails in parallel: eight times the bandwidth, capped by
     * NVLink (300 GB/s > 8 x 25 GB/s). */
    coll_group g8 = coll_group_of(128, 1, 8);
    assert_int_equal(g8.nodes, 16);
    S = 1e10; /* large enough that the 254 ring steps' latency is under 1% */
    double t8 = collective_time_algo(&s->platform, &s->calibration, COLL_ALL_REDUCE, S, g8, ALGO_RING);
    double bw8 = 2.0 * 127 / 128 * S / 200e9;
    assert_true(t8 > bw8 && t8 < bw8 * 1.02);
}

static void allgather_and_reduce_scatter_move_half_an_allreduce(void **state)
{
    scenario_config *s = *state;
    s->platform.node.nvlink_latency_us = 0;
    coll_group g = coll_group_of(8, 1, 8);
    double S = 3e8;
    double ar = collective_time_algo(&s->platform, &s->calibration, COLL_ALL_REDUCE, S, g, ALGO_RING);
    double ag = collective_time_algo(&s->platform, &s->calibration, COLL_ALL_GATHER, S, g, ALGO_RING);
    double rs = collective_time_algo(&s->platform, &s->calibration, COLL_REDUCE_SCATTER, S, g, ALGO_RING);
    assert_true(fabs(ag + rs - ar) < 1e-12 * ar + 1e-15);
}

static void selection_prefers_low_latency_for_small_messages(void **state)
{
    scenario_config *s = *state;
    coll_group g = coll_group_of(1024, 1, 8); /* 128 nodes x 8 GPUs */
    coll_cost small = collective_time(&s->platform, &s->calibration, COLL_ALL_REDUCE, 1024, g);
    coll_cost ring = {collective_time_algo(&s->platform, &s->calibration, COLL_ALL_REDUCE, 1024, g, ALGO_RING),
                      ALGO_RING};
    assert_true(small.algo != ALGO_RING);
    assert_true(small.time_s < ring.time_s);
    /* and the choice is never slower than any of NCCL's algorithms */
    for (double S = 1; S < 1e11; S *= 10)
        for (int a = 0; a < ALGO_COUNT; a++) {
            if (a != ALGO_AUTO && !coll_algo_is_nccl((coll_algo)a))
                continue;
            coll_cost best = collective_time(&s->platform, &s->calibration, COLL_ALL_REDUCE, S, g);
            assert_true(best.time_s <= collective_time_algo(&s->platform, &s->calibration, COLL_ALL_REDUCE, S, g, a));
        }
}

static void calibrated_busbw_and_alpha_replace_the_datasheet(void **state)
{
    scenario_config *s = *state;
    s->platform.node.nvlink_latency_us = 0;
    coll_fit *f = &s->calibration.collectives[LINK_NVLINK][COLL_ALL_REDUCE];
    f->present = 1;
    f->alpha_us = 10;
    f->busbw_gbs = 150;
    coll_group g = coll_group_of(8, 1, 8);
    double S = 1e9;
    double t = collective_time_algo(&s->platform, &s->calibration, COLL_ALL_REDUCE, S, g, ALGO_RING);
    double expect = 10e-6 + 2.0 * 7 / 8 * S / 150e9;
    assert_true(fabs(t - expect) < 1e-9 * expect);
}

/* PAT: all-gather and reduce-scatter at one GPU per node take log2(nodes) latency steps instead
 * of the ring's nodes - 1, and move the same bytes; it does not apply with several GPUs of a
 * group per node, nor to all-reduce. */
static void pat_cuts_the_latency_of_one_gpu_per_node_gathers(void **state)
{
    scenario_config *s = *state;
    coll_group g = coll_group_of(256, 8, 8); /* one GPU on each of 256 nodes */
    const platform_config *p = &s->platform;
    const calibration_config *c = &s->calibration;
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
}

/* parallel.nccl_algo forces an algorithm as NCCL_ALGO does; one that cannot run the call falls
 * back to NCCL's choice. */
static void a_forced_algorithm_is_used(void **state)
{
    scenario_config *s = *state;
    coll_group g = coll_group_of(1024, 1, 8);
    const platform_config *p = &s->platform;
    const calibration_config *c = &s->calibration;
    assert_true(collective_time(p, c, COLL_ALL_REDUCE, 1024, g).algo != ALGO_RING);
    s->platform.nccl_algo[COLL_ALL_REDUCE] = ALGO_RING;
    coll_cost forced = collective_time(p, c, COLL_ALL_REDUCE, 1024, g);
    assert_int_equal(forced.algo, ALGO_RING);
    assert_true(forced.time_s == collective_time_algo(p, c, COLL_ALL_REDUCE, 1024, g, ALGO_RING));
    s->platform.nccl_algo[COLL_ALL_GATHER] = ALGO_TREE; /* tree has no all-gather: NCCL's choice */
    assert_true(collective_time(p, c, COLL_ALL_GATHER, 1024, g).algo != ALGO_TREE);
}

/* Recursive halving-doubling (MPICH, Thakur et al. 2005) on n = 2^k ranks, one node: 2 log2(n)
 * latency steps and 2 (n-1)/n S over NVLink for an all-reduce, as the ring's bytes; across N
 * nodes of g GPUs, 2 (1 - 1/N) S through each GPU's NIC. Not a power of two: it does not run. */
static void halving_doubling_closed_form(void **state)
{
    scenario_config *s = *state;
    const platform_config *p = &s->platform;
    const calibration_config *c = &s->calibration;
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
}

/* Broadcast: a pipelined ring (NCCL's), every rank receives S once: alpha + (n-1) a + S / B. */
static void broadcast_is_a_pipelined_chain(void **state)
{
    scenario_config *s = *state;
    const platform_config *p = &s->platform;
    const calibration_config *c = &s->calibration;
    double S = 1e9;
    coll_cost b = collective_time(p, c, COLL_BROADCAST, S, coll_group_of(8, 1, 8));
    double expect = collective_alpha_s(c, LINK_NVLINK, COLL_BROADCAST) + 7 * p->node.nvlink_latency_us * 1e-6 +
                    S / (p->node.nvlink_bandwidth_gbs * 1e9);
    assert_int_equal(b.algo, ALGO_RING);
    assert_true(fabs(b.time_s - expect) < 1e-9 * expect);
}

/* The split the flow replay uses adds up to the analytic time for every algorithm, kind and
 * geometry where the algorithm runs. */
static void splits_add_up_to_the_time(void **state)
{
    scenario_config *s = *state;
    int sizes[][2] = {{8, 1}, {64, 1}, {64, 8}, {1024, 1}, {4096, 8}, {96, 4}};
    check_splits_add_up(s, sizes, sizeof sizes / sizeof *sizes, 1, ALGO_COUNT - 1);
}

/* ---- NVLink SHARP and SHARP: closed forms from NCCL's src/graph/tuning.cc, written out here
 * independently of sim/step/collective.c. Fixture: NVLink B = 300 GB/s, 8 NICs of 25 GB/s, no
 * calibration (alpha 0), NIC-to-NIC latency within a leaf 2 x 0.5 + 0.3 = 1.3 us. */
static int is_innet(coll_algo a)
{
    return a == ALGO_NVLS || a == ALGO_NVLS_TREE || a == ALGO_COLLNET_DIRECT || a == ALGO_COLLNET_CHAIN;
}

/* Off (the default), none of them runs and NCCL's choice is what it was. */
static void without_the_keys_nothing_changes(void **state)
{
    scenario_config *s = *state;
    int sizes[][2] = {{8, 1}, {64, 1}, {64, 8}, {1024, 1}, {16, 2}};
    for (size_t q = 0; q < sizeof sizes / sizeof *sizes; q++) {
        coll_group g = coll_group_of(sizes[q][0], sizes[q][1], 8);
        for (int k = 0; k < COLL_KIND_COUNT; k++)
            for (double S = 1; S < 1e11; S *= 100) {
                for (int a = ALGO_NVLS; a <= ALGO_COLLNET_CHAIN; a++)
                    assert_true(isinf(collective_time_algo(&s->platform, &s->calibration, (coll_kind)k, S, g, a)));
                assert_false(is_innet(collective_time(&s->platform, &s->calibration, (coll_kind)k, S, g).algo));
            }
    }
}

/* NVLS on one node of 8: 25 us (hwLatencies[NVLINK][NVLS][Simple]) and S / (0.85 B): the switch
 * reduces, each GPU sends its buffer once and receives the result once (the ring: 2 (n-1)/n S at
 * B). Large all-reduces pick it; small ones keep the ring (7 x 2 x 1 us < 25 us). */
static void nvls_allreduce_on_one_node_closed_form(void **state)
{
    scenario_config *s = *state;
    s->platform.node.nvls = 1;
    const platform_config *p = &s->platform;
    const calibration_config *c = &s->calibration;
    coll_group g = coll_group_of(8, 1, 8);
    double B = 300e9, S = 1e9;
    coll_split x = collective_split_algo(p, c, COLL_ALL_REDUCE, S, g, ALGO_NVLS);
    assert_true(fabs(x.fixed_s - 25e-6) < 1e-12);
    assert_true(fabs(x.nvlink_s * 0.85 * B - S) < 1e-6 * S); /* NVLink bytes per GPU: S */
    assert_true(x.net_bytes == 0 && x.net_s == 0);
    double ring = collective_time_algo(p, c, COLL_ALL_REDUCE, S, g, ALGO_RING);
    assert_true(fabs(ring - (2.0 * 7 / 8 * S / B + 14e-6)) < 1e-9 * ring);
    assert_true(x.time_s < 0.7 * ring); /* 1/0.85 against 1.75 */
    coll_cost best = collective_time(p, c, COLL_ALL_REDUCE, S, g);
    assert_int_equal(best.algo, ALGO_NVLS);
    assert_true(best.time_s == x.time_s);
    assert_int_equal(collective_time(p, c, COLL_ALL_REDUCE, 1024, g).algo, ALGO_RING);
    /* all-gather: NCCL's rate 0.85 B (7/8)^2, taken as the algorithm bandwidth, below the ring's
     * B x 8/7: the tuner keeps the ring, NVLS runs when forced */
    double ag = collective_time_algo(p, c, COLL_ALL_GATHER, S, g, ALGO_NVLS);
    assert_true(fabs(ag - (25e-6 + S / (0.85 * B * 49.0 / 64))) < 1e-9 * ag);
    assert_int_equal(collective_time(p, c, COLL_ALL_GATHER, S, g).algo, ALGO_RING);
    s->platform.nccl_algo[COLL_ALL_GATHER] = ALGO_NVLS;
    assert_int_equal(collective_time(p, c, COLL_ALL_GATHER, S, g).algo, ALGO_NVLS);
    /* not across nodes without SHARP; not with one GPU of the group per node */
    assert_true(isinf(collective_time_algo(p, c, COLL_ALL_REDUCE, S, coll_group_of(64, 1, 8), ALGO_NVLS)));
    assert_true(isinf(collective_time_algo(p, c, COLL_ALL_REDUCE, S, coll_group_of(16, 8, 8), ALGO_NVLS_TREE)));
}

/* NVLSTree across N nodes of g = 8: NVLS inside (S (n-1)/n x g/(g-1) / (0.85 B) over NVLink), a
 * tree among the heads (2 S / 8 through each NIC; S / 8 on two nodes), 25 us + 2 log2(N) x
 * (20.9 us + 2 x 1.3 us); the slower of the two phases sets the pace. */
static void nvls_tree_across_nodes_closed_form(void **state)
{
    scenario_config *s = *state;
    s->platform.node.nvls = 1;
    const platform_config *p = &s->platform;
    const calibration_config *c = &s->calibration;
    double S = 1e9, B = 300e9, Bn = 25e9;
    for (int N = 2; N <= 16; N *= 2) {
        int n = 8 * N;
        coll_split x = collective_split_algo(p, c, COLL_ALL_REDUCE, S, coll_group_of(n, 1, 8), ALGO_NVLS_TREE);
        double nic = (N == 2 ? 1.0 : 2.0) * S / 8;
        double nvl = S * (n - 1) / n * 8.0 / 7 / (0.85 * B);
        double fixed = 25e-6 + 2 * log2(N) * (20.9e-6 + 2 * 1.3e-6);
        assert_true(fabs(x.net_bytes - nic) < 1e-6 * nic);
        assert_true(fabs(x.fixed_s - fixed) < 1e-9);
        assert_true(fabs(x.time_s - (fixed + fmax(nvl, nic / Bn))) < 1e-9 * x.time_s);
    }
}

/* SHARP (CollNet) across nodes: each node's data goes up to the switch once and comes back once,
 * S / 8 through each of the 8 NICs (the ring: 2 (n-1)/n S / 8); over NVLink 2 S / B (Direct
 * divided by 0.85 from Hopper on, here told by a fp8 peak; by (g/r + 1)/2 with fewer NICs than
 * GPUs). Latency: Direct 2 (3.7 + 7 x 0.4) + 31 us, Chain 2 x 7 x 2.8 + 30 us, plus twice the
 * 1.3 us network latency; at one GPU per node the tree's 14 us. */
static void sharp_allreduce_nic_bytes_are_collnets(void **state)
{
    scenario_config *s = *state;
    s->platform.network.sharp = 1;
    const platform_config *p = &s->platform;
    const calibration_config *c = &s->calibration;
    double S = 1e9, B = 300e9, Bn = 25e9, a_net = 1.3e-6;
    coll_group g = coll_group_of(64, 1, 8);
    coll_split d = collective_split_algo(p, c, COLL_ALL_REDUCE, S, g, ALGO_COLLNET_DIRECT);
    coll_split ch = collective_split_algo(p, c, COLL_ALL_REDUCE, S, g, ALGO_COLLNET_CHAIN);
    coll_split ring = collective_split_algo(p, c, COLL_ALL_REDUCE, S, g, ALGO_RING);
    assert_true(fabs(d.net_bytes - S / 8) < 1e-6 && fabs(ch.net_bytes - S / 8) < 1e-6);
    assert_true(fabs(ring.net_bytes - 2.0 * 63 / 64 * S / 8) < 1e-3);
    assert_true(fabs(d.net_s - S / 8 / Bn) < 1e-12);
    assert_true(fabs(d.fixed_s - (2 * (3.7e-6 + 7 * 0.4e-6) + 31e-6 + 2 * a_net)) < 1e-12);
    assert_true(fabs(ch.fixed_s - (2 * 7 * 2.8e-6 + 30e-6 + 2 * a_net)) < 1e-12);
    assert_true(fabs(d.time_s - (d.fixed_s + fmax(2 * S / B, S / 8 / Bn))) < 1e-9 * d.time_s);
    coll_cost best = collective_time(p, c, COLL_ALL_REDUCE, S, g);
    assert_true(best.algo == ALGO_COLLNET_DIRECT || best.algo == ALGO_COLLNET_CHAIN);
    assert_true(best.time_s < ring.time_s);
    s->platform.gpu.peak_tflops[PREC_FP8] = 200; /* compute capability >= 9.0 */
    d = collective_split_algo(p, c, COLL_ALL_REDUCE, S, g, ALGO_COLLNET_DIRECT);
    assert_true(fabs(d.time_s - (d.fixed_s + fmax(2 * S / (0.85 * B), S / 8 / Bn))) < 1e-9 * d.time_s);
    s->platform.node.nics = 2; /* 4 GPUs per NIC: factor (4 + 1)/2, S / 2 through each NIC */
    d = collective_split_algo(p, c, COLL_ALL_REDUCE, S, g, ALGO_COLLNET_DIRECT);
    assert_true(fabs(d.net_bytes - S / 2) < 1e-6);
    assert_true(fabs(d.time_s - (d.fixed_s + fmax(2 * S * 2.5 / (0.85 * B), S / 2 / Bn))) < 1e-9 * d.time_s);
    s->platform.node.nics = 8;
    coll_split one = collective_split_algo(p, c, COLL_ALL_REDUCE, S, coll_group_of(16, 8, 8), ALGO_COLLNET_DIRECT);
    assert_true(fabs(one.net_bytes - S) < 1e-6 && one.nvlink_s == 0);
    assert_true(fabs(one.fixed_s - (14e-6 + 2 * a_net)) < 1e-12);
    /* all-gather over CollNet is not modelled; nor one node */
    assert_true(isinf(collective_time_algo(p, c, COLL_ALL_GATHER, S, g, ALGO_COLLNET_DIRECT)));
    assert_true(isinf(collective_time_algo(p, c, COLL_ALL_REDUCE, S, coll_group_of(8, 1, 8), ALGO_COLLNET_CHAIN)));
    /* with NVLS too, NVLS runs across nodes (NCCL's CollNet+NVLS): NVLS inside, S / 8 per NIC,
     * 25 + 18 us + 2 x 1.3 us */
    s->platform.node.nvls = 1;
    coll_split v = collective_split_algo(p, c, COLL_ALL_REDUCE, S, g, ALGO_NVLS);
    assert_true(fabs(v.net_bytes - S / 8) < 1e-6);
    assert_true(fabs(v.fixed_s - (43e-6 + 2 * a_net)) < 1e-12);
    double nvl = S * 63 / 64 * 8.0 / 7 / (0.85 * B);
    assert_true(fabs(v.time_s - (v.fixed_s + fmax(nvl, S / 8 / Bn))) < 1e-9 * v.time_s);
}

/* With both keys on, the new algorithms' splits add up as the others' do (the flow replay's). */
static void innet_splits_add_up_to_the_time(void **state)
{
    scenario_config *s = *state;
    s->platform.node.nvls = s->platform.network.sharp = 1;
    int sizes[][2] = {{8, 1}, {64, 1}, {64, 8}, {1024, 1}, {96, 4}, {16, 4}};
    check_splits_add_up(s, sizes, sizeof sizes / sizeof *sizes, ALGO_NVLS, ALGO_COLLNET_CHAIN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(ring_allreduce_inside_node_matches_closed_form),
        TEST(ring_across_nodes_is_paced_by_the_nic),
        TEST(allgather_and_reduce_scatter_move_half_an_allreduce),
        TEST(selection_prefers_low_latency_for_small_messages),
        TEST(calibrated_busbw_and_alpha_replace_the_datasheet),
        TEST(pat_cuts_the_latency_of_one_gpu_per_node_gathers),
        TEST(a_forced_algorithm_is_used),
        TEST(halving_doubling_closed_form),
        TEST(broadcast_is_a_pipelined_chain),
        TEST(splits_add_up_to_the_time),
        TEST(without_the_keys_nothing_changes),
        TEST(nvls_allreduce_on_one_node_closed_form),
        TEST(nvls_tree_across_nodes_closed_form),
        TEST(sharp_allreduce_nic_bytes_are_collnets),
        TEST(innet_splits_add_up_to_the_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
