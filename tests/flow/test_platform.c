/* The cluster the flow replay runs on (sim/replay/flow/railzone.cpp): routes between GPUs follow the
 * rails (NIC -> leaf [-> spine -> leaf] -> NIC), cross-rail traffic takes NVLink to the peer-rail
 * GPU first (PXN), fat_tree and single_switch route as their names say, the counts of hosts and
 * links match their closed forms, and the 16,384-GPU cluster loads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "fixture.h"
#include "flow/flow.h"

#define GPU(node, g) ((node) * 8 + (g))

/* Routes of n pairs on the fixture's platform at `nodes` nodes. */
static void routes_of(const platform_config *p, int nodes, const int *pairs, int n, char (*routes)[FLOW_ROUTE_MAX],
                      flow_platform_info *info)
{
    config_error err;
    if (flow_platform_probe(p, nodes, pairs, n, routes, info, &err) != 0)
        fail_msg("%s", err.msg);
}

/* The routes of n (at most 8) pairs are expect[0..n-1], printed with `print` set. */
static void check_routes(const platform_config *p, int nodes, const int *pairs, int n, const char *const *expect,
                         int print, flow_platform_info *info)
{
    char routes[8][FLOW_ROUTE_MAX];
    assert_true(n <= 8);
    routes_of(p, nodes, pairs, n, routes, info);
    for (int i = 0; i < n; i++) {
        if (print)
            print_message("%s\n", routes[i]);
        assert_string_equal(routes[i], expect[i]);
    }
}

static void rail_optimized_routes_follow_the_rails(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8); /* 8 GPUs per node, 32 nodes per leaf, 1:1 */
    int pairs[] = {
        GPU(0, 3), GPU(0, 5),  /* same node: NVLink */
        GPU(0, 3), GPU(1, 3),  /* same rail, same leaf */
        GPU(0, 3), GPU(40, 3), /* same rail, leaf 0 -> leaf 1 over spine 40 mod 32 = 8 */
        GPU(0, 3), GPU(40, 6), /* other rail: NVLink to n0g6, then rail 6 (PXN) */
        GPU(40, 6), GPU(0, 3), /* and back: rail 3 relays through n40g3 */
    };
    const char *expect[] = {
        "nv_n0g3_UP nv_n0g5_DOWN",
        "nic_n0g3_UP nic_n1g3_DOWN",
        "nic_n0g3_UP ls_r3_l0_s8_UP ls_r3_l1_s8_DOWN nic_n40g3_DOWN",
        "nv_n0g3_UP nv_n0g6_DOWN nic_n0g6_UP ls_r6_l0_s8_UP ls_r6_l1_s8_DOWN nic_n40g6_DOWN",
        "nv_n40g6_UP nv_n40g3_DOWN nic_n40g3_UP ls_r3_l1_s0_UP ls_r3_l0_s0_DOWN nic_n0g3_DOWN",
    };
    flow_platform_info info;
    check_routes(&s.platform, 64, pairs, 5, expect, 1, &info);
    /* 512 hosts; links: NVLink and NIC per GPU, 8 rails x 2 leaves x 32 spines uplinks, each
     * split-duplex (two links), plus SimGrid's loopback. */
    assert_int_equal(info.hosts, 512);
    assert_int_equal(info.links, 2 * (512 * 2 + 8 * 2 * 32) + 1);
    fixture_free(&s);
}

static void oversubscription_removes_leaf_uplinks(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    s.platform.network.oversubscription = 2; /* 32 node ports, 16 uplinks per leaf */
    int pairs[] = {GPU(0, 3), GPU(40, 3)};  /* spine 40 mod 16 = 8 */
    const char *expect[] = {"nic_n0g3_UP ls_r3_l0_s8_UP ls_r3_l1_s8_DOWN nic_n40g3_DOWN"};
    flow_platform_info info;
    check_routes(&s.platform, 64, pairs, 1, expect, 0, &info);
    assert_int_equal(info.links, 2 * (512 * 2 + 8 * 2 * 16) + 1);
    fixture_free(&s);
}

static void fat_tree_puts_a_nodes_nics_on_its_leaf(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    s.platform.network.topology = TOPO_FAT_TREE; /* one fabric; 32 nodes x 8 NICs per leaf */
    int pairs[] = {
        GPU(0, 3), GPU(1, 6),  /* same leaf, any NIC: no NVLink relay */
        GPU(0, 3), GPU(40, 6), /* across leaves: spine (40*8+6) mod 256 = 70 */
        GPU(0, 3), GPU(0, 6),  /* same node: NVLink */
    };
    const char *expect[] = {
        "nic_n0g3_UP nic_n1g6_DOWN",
        "nic_n0g3_UP ls_r0_l0_s70_UP ls_r0_l1_s70_DOWN nic_n40g6_DOWN",
        "nv_n0g3_UP nv_n0g6_DOWN",
    };
    flow_platform_info info;
    check_routes(&s.platform, 64, pairs, 3, expect, 0, &info);
    assert_int_equal(info.links, 2 * (512 * 2 + 2 * 256) + 1);
    fixture_free(&s);
}

static void single_switch_has_no_spines(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    s.platform.network.topology = TOPO_SINGLE_SWITCH;
    int pairs[] = {GPU(0, 3), GPU(40, 6)};
    const char *expect[] = {"nic_n0g3_UP nic_n40g6_DOWN"};
    flow_platform_info info;
    check_routes(&s.platform, 64, pairs, 1, expect, 0, &info);
    assert_int_equal(info.links, 2 * (512 * 2) + 1);
    fixture_free(&s);
}

static void three_tiers_climb_to_the_core_between_pods(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    s.platform.network.tiers = 3;
    s.platform.network.leaf_radix = 2; /* 8 nodes: 4 leaves per rail, 2 spines; pods of 2 leaves */
    int pairs[] = {
        GPU(0, 0), GPU(2, 0), /* other leaf, same pod: spine 2 mod 2 = 0 */
        GPU(0, 0), GPU(5, 0), /* other pod: spine 5 mod 2 = 1, core (5 / 2) mod 2 = 0 */
    };
    const char *expect[] = {
        "nic_n0g0_UP ls_r0_l0_s0_UP ls_r0_l1_s0_DOWN nic_n2g0_DOWN",
        "nic_n0g0_UP ls_r0_l0_s1_UP sc_r0_p0_s1_c0_UP sc_r0_p1_s1_c0_DOWN ls_r0_l2_s1_DOWN nic_n5g0_DOWN",
    };
    flow_platform_info info;
    check_routes(&s.platform, 8, pairs, 2, expect, 0, &info);
    fixture_free(&s);
}

static void sixteen_thousand_gpus_load(void **state)
{
    /* DGX H100 SuperPOD-like: 2,048 nodes, scalable units of 32 nodes, 3 tiers. */
    scenario_config s;
    fixture_scenario(&s, 8);
    s.platform.network.nodes = 2048;
    s.platform.network.tiers = 3;
    int pairs[] = {GPU(0, 0), GPU(2047, 7)};
    char routes[1][FLOW_ROUTE_MAX];
    flow_platform_info info;
    routes_of(&s.platform, 2048, pairs, 1, routes, &info);
    print_message("16,384 GPUs: %ld hosts, %ld links, loaded in %.3f s, peak RSS %.0f MiB\n", info.hosts, info.links,
                  info.load_s, info.peak_rss_mib);
    print_message("n0g0 -> n2047g7: %s\n", routes[0]);
    assert_int_equal(info.hosts, 16384);
    /* 8 rails x 64 leaves x 32 spines leaf uplinks; 8 rails x 2 pods x 32 spines x 32 cores */
    assert_int_equal(info.links, 2 * (16384 * 2 + 8 * 64 * 32 + 8 * 2 * 32 * 32) + 1);
    /* PXN to rail 7, then up through the core to pod 1 */
    assert_non_null(strstr(routes[0], "nv_n0g0_UP nv_n0g7_DOWN nic_n0g7_UP ls_r7_l0_"));
    assert_non_null(strstr(routes[0], "sc_r7_p0_"));
    assert_true(info.load_s < 10);
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rail_optimized_routes_follow_the_rails),
        cmocka_unit_test(oversubscription_removes_leaf_uplinks),
        cmocka_unit_test(fat_tree_puts_a_nodes_nics_on_its_leaf),
        cmocka_unit_test(single_switch_has_no_spines),
        cmocka_unit_test(three_tiers_climb_to_the_core_between_pods),
        cmocka_unit_test(sixteen_thousand_gpus_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
