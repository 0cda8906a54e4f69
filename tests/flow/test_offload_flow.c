/* ZeRO-Offload on flows (sim/step/host_offload.h, railzone.cpp): host transfers run on each GPU's PCIe
 * link and on the node's shared NVMe and DRAM links. Uncontended, the flow replay agrees with
 * the analytic replay; eight GPUs of a node reading their optimizer states from the node's NVMe
 * share it (closed form 8B/R), while their PCIe copies do not (B/pcie); and a whole offloaded
 * step agrees with the analytic replay, whose share is the same 1/8. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "fixture.h"

/* The fixture's host links (fixture_host_links), ZeRO-2, the optimizer offloaded to dev. */
static void offload_platform(scenario_config *s, offload_device dev)
{
    fixture_host_links(s);
    s->parallel.zero_stage = 2;
    s->parallel.offload_optimizer = dev;
}

/* One task per DP replica (stage 0, host lane) of `bytes` per GPU, replayed on flows. */
static double one_host_task(scenario_config *s, const char *name, double bytes)
{
    step_workload w;
    fixture_graph(&w, 1);
    sim_task t = fixture_collective(0, name, COMM_ZERO, COLL_SEND_RECV, 1, bytes, 0);
    t.lane = LANE_HOST;
    int task = fixture_add(&w, t, -1);
    return fixture_flow_finish(s, &w, NULL, task);
}

static void nvme_is_shared_by_a_nodes_gpus_pcie_is_not(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 4);
    offload_platform(&s, OFFLOAD_NVME);
    fixture_layout(&s, 1, 1, 8, 8); /* 8 replicas = the 8 GPUs of node 0 */
    const double B = 1e9;
    double nvme = one_host_task(&s, "offload_nvme_read_states", B);
    double pcie = one_host_task(&s, "offload_d2h_grads", B);
    print_message("8 GPUs x 1 GB: NVMe read %.6f s (8B/R %.6f), PCIe %.6f s (B/pcie %.6f)\n", nvme, 8 * B / 50e9,
                  pcie, B / 32e9);
    assert_true(fabs(nvme - 8 * B / 50e9) <= 1e-6 * nvme);
    assert_true(fabs(pcie - B / 32e9) <= 1e-6 * pcie);
    /* one GPU alone has the NVMe to itself */
    fixture_layout(&s, 1, 1, 1, 1);
    double alone = one_host_task(&s, "offload_nvme_read_states", B);
    assert_true(fabs(alone - B / 50e9) <= 1e-6 * alone);
    fixture_free(&s);
}

/* Whole steps: one GPU (nothing shared) and one node of 8 GPUs sharing NVMe and DRAM. The
 * analytic replay divides the node's bandwidths by its GPUs; the flows share the links. */
static void offloaded_step_flow_agrees_with_analytic(void **state)
{
    (void)state;
    offload_device devs[2] = {OFFLOAD_CPU, OFFLOAD_NVME};
    int dps[2] = {1, 8};
    for (int d = 0; d < 2; d++)
        for (int g = 0; g < 2; g++) {
            scenario_config s;
            fixture_scenario(&s, 4);
            offload_platform(&s, devs[d]);
            fixture_layout(&s, 1, 1, dps[g], 2 * dps[g]);
            double a = fixture_run_at(&s, 0).step_time_s, f = fixture_run_at(&s, 1).step_time_s;
            print_message("%s, %d GPUs: analytic %.6f s, flow %.6f s\n", d ? "nvme" : "cpu", dps[g], a, f);
            assert_within(f, a, 0.01);
            fixture_free(&s);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nvme_is_shared_by_a_nodes_gpus_pcie_is_not),
        cmocka_unit_test(offloaded_step_flow_agrees_with_analytic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
