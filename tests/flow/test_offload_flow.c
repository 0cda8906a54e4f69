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
#include "flow/flow.h"
#include "replay.h"
#include "run.h"
#include "workload.h"

static void offload_platform(scenario_config *s, offload_device dev)
{
    s->platform.node.host_memory_bandwidth_gbs = 400;
    s->platform.node.pcie_bandwidth_gbs = 32;
    s->platform.node.nvme_read_gbs = 50;
    s->platform.node.nvme_write_gbs = 25;
    s->parallel.zero_stage = 2;
    s->parallel.offload_optimizer = dev;
}

/* One task per DP replica (stage 0, host lane) of `bytes` per GPU, replayed on flows. */
static double one_host_task(scenario_config *s, const char *name, double bytes)
{
    step_workload w;
    memset(&w, 0, sizeof w);
    w.stages = 1;
    sim_task t;
    memset(&t, 0, sizeof t);
    t.kind = TASK_COLLECTIVE;
    t.lane = LANE_HOST;
    t.peer_stage = t.micro_batch = t.chunk = t.phase = -1;
    t.name = name;
    t.comm = COMM_ZERO;
    t.coll = COLL_SEND_RECV;
    t.group = t.span_nodes = 1;
    t.bytes = bytes;
    workload_add_task(&w, &t);
    replay_times rt;
    replay_times_alloc(&rt, w.n_tasks);
    config_error err;
    if (replay_flow(s, &w, &rt, NULL, &err) != 0)
        fail_msg("%s", err.msg);
    double end = rt.finish[0];
    replay_times_free(&rt);
    workload_free(&w);
    return end;
}

static void nvme_is_shared_by_a_nodes_gpus_pcie_is_not(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 4);
    offload_platform(&s, OFFLOAD_NVME);
    s.parallel.dp = 8; /* 8 replicas = the 8 GPUs of node 0 */
    s.training.global_batch_size = 8;
    const double B = 1e9;
    double nvme = one_host_task(&s, "offload_nvme_read_states", B);
    double pcie = one_host_task(&s, "offload_d2h_grads", B);
    print_message("8 GPUs x 1 GB: NVMe read %.6f s (8B/R %.6f), PCIe %.6f s (B/pcie %.6f)\n", nvme, 8 * B / 50e9,
                  pcie, B / 32e9);
    assert_true(fabs(nvme - 8 * B / 50e9) <= 1e-6 * nvme);
    assert_true(fabs(pcie - B / 32e9) <= 1e-6 * pcie);
    /* one GPU alone has the NVMe to itself */
    s.parallel.dp = 1;
    s.training.global_batch_size = 1;
    double alone = one_host_task(&s, "offload_nvme_read_states", B);
    assert_true(fabs(alone - B / 50e9) <= 1e-6 * alone);
    fixture_free(&s);
}

static double step(scenario_config *s, int flow)
{
    run_result r;
    config_error err;
    s->run.fidelity_flow = flow;
    if (run_scenario(s, &r, &err) != 0)
        fail_msg("%s", err.msg);
    return r.step_time_s;
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
            s.parallel.dp = dps[g];
            s.training.global_batch_size = 2 * dps[g];
            double a = step(&s, 0), f = step(&s, 1);
            print_message("%s, %d GPUs: analytic %.6f s, flow %.6f s\n", d ? "nvme" : "cpu", dps[g], a, f);
            assert_true(fabs(f - a) <= 0.01 * a);
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
