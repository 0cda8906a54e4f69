/* ZeRO-Offload / ZeRO-Infinity (sim/step/host_offload.h, memory_model_states_offload): memory per GPU and
 * per node against the papers' closed forms, the published "13B on one V100-32GB" case, the
 * CPU optimizer step and host transfers against hand computations from the platform figures,
 * and the configuration rules. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "fixture.h"
#include "memory.h"
#include "host_offload.h"
#include "params.h"
#include "zero3.h"

static int close_rel(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) + 1e-300;
}

/* ZeRO-Offload (Ren et al. 2021, arXiv:2101.06840, Sec. 4.1-4.2), mixed-precision Adam, M
 * parameters, N data-parallel ranks, ZeRO-2: the GPU keeps the fp16 parameters (2M); the fp16
 * gradients (2M) and the optimizer states (fp32 parameters, momentum, variance: 12M) go to the
 * host, partitioned: (2 + 12)M / N per rank. */
static void zero_offload_closed_form(void **state)
{
    (void)state;
    const double M = 1.5e9;
    for (int N = 1; N <= 64; N *= 4) {
        memory_breakdown m;
        memory_model_states_offload(M, N, 2, PREC_BF16, OPTIMIZER_ADAM, OFFLOAD_CPU, OFFLOAD_NONE, &m);
        assert_true(close_rel(m.weights, 2 * M, 1e-12));
        assert_true(m.gradients == 0 && m.optimizer == 0);
        assert_true(close_rel(m.total, 2 * M, 1e-12));
        assert_true(close_rel(m.host, 14 * M / N, 1e-12));
        assert_true(m.nvme == 0);
        /* ZeRO-1 partitions the host gradients the same way (each rank keeps its shard) */
        memory_model_states_offload(M, N, 1, PREC_BF16, OPTIMIZER_ADAM, OFFLOAD_CPU, OFFLOAD_NONE, &m);
        assert_true(close_rel(m.host, 14 * M / N, 1e-12));
        /* without ZeRO every rank steps the whole model: 14M on its host */
        memory_model_states_offload(M, N, 0, PREC_BF16, OPTIMIZER_ADAM, OFFLOAD_CPU, OFFLOAD_NONE, &m);
        assert_true(close_rel(m.host, 14 * M, 1e-12));
    }
}

/* ZeRO-Infinity (Rajbhandari et al. 2021, arXiv:2104.07857, Sec. 3-5): ZeRO-3 with the
 * optimizer states and the parameters offloaded: all 16M bytes of model states leave the GPU,
 * partitioned over N ranks: fp16 parameters 2M/N and optimizer states 12M/N where the scenario
 * puts them, fp16 gradients 2M/N in host memory. */
static void zero_infinity_closed_form(void **state)
{
    (void)state;
    const double M = 1e12, N = 512; /* a trillion-parameter model on 512 GPUs */
    memory_breakdown m;
    memory_model_states_offload(M, (int)N, 3, PREC_FP16, OPTIMIZER_ADAM, OFFLOAD_NVME, OFFLOAD_NVME, &m);
    assert_true(m.total == 0 && m.weights == 0);
    assert_true(close_rel(m.nvme, (12 + 2) * M / N, 1e-12));
    assert_true(close_rel(m.host, 2 * M / N, 1e-12));
    assert_true(close_rel(m.host + m.nvme, 16 * M / N, 1e-12));

    memory_model_states_offload(M, (int)N, 3, PREC_FP16, OPTIMIZER_ADAM, OFFLOAD_CPU, OFFLOAD_CPU, &m);
    assert_true(close_rel(m.host, 16 * M / N, 1e-12) && m.nvme == 0);

    memory_model_states_offload(M, (int)N, 3, PREC_FP16, OPTIMIZER_ADAM, OFFLOAD_NVME, OFFLOAD_NONE, &m);
    assert_true(close_rel(m.weights, 2 * M / N, 1e-12)); /* ZeRO-3 shard stays on the GPU */
    assert_true(close_rel(m.nvme, 12 * M / N, 1e-12) && close_rel(m.host, 2 * M / N, 1e-12));

    /* fp32 training: 4-byte parameters and gradients, Adam's two moments only (8 bytes) */
    memory_model_states_offload(M, (int)N, 3, PREC_FP32, OPTIMIZER_ADAM, OFFLOAD_CPU, OFFLOAD_CPU, &m);
    assert_true(close_rel(m.host, (4 + 4 + 8) * M / N, 1e-12));
}

/* A GPT-2-style model of ~13B parameters (40 layers, hidden 5120) on one 32 GB GPU. */
static void thirteen_b_on_one_v100(scenario_config *s)
{
    fixture_scenario(s, 40);
    s->platform.gpu.memory_gib = 32; /* V100-SXM3-32GB of the DGX-2 the paper used */
    s->platform.node.gpus = 1;
    s->platform.node.host_memory_bandwidth_gbs = 100;
    fixture_model(s, 40, 5120, 40, 4 * 5120);
    s->model.vocab_size = 50257;
    s->model.seq_length = 1024;
    s->training.precision = PREC_FP16;
    s->training.recompute = RECOMPUTE_FULL; /* the paper trains with activation checkpointing */
    s->training.global_batch_size = 1;
}

/* The ZeRO-Offload paper's headline (Ren et al. 2021, abstract and Sec. 6: "train models with
 * over 13 billion parameters on a single GPU", a V100 32GB): without offload the 16 bytes per
 * parameter (~208 GB) do not fit; with the optimizer offloaded the GPU keeps 2 bytes per
 * parameter (~26 GB) and fits. The host then needs 14 bytes per parameter. */
static void offload_fits_13b_on_one_32gb_gpu(void **state)
{
    (void)state;
    scenario_config s;
    thirteen_b_on_one_v100(&s);
    double P = params_total(&s);
    assert_true(P > 12.5e9 && P < 13.5e9);
    run_memory m;
    run_memory_estimate(&s, &m);
    assert_true(m.oom);
    assert_true(m.total > 16 * P / 1073741824.0 * 0.99);

    s.parallel.offload_optimizer = OFFLOAD_CPU;
    run_memory_estimate(&s, &m);
    assert_false(m.oom);
    assert_true(m.total < 32);
    assert_true(close_rel(m.weights, 2 * P / 1073741824.0, 1e-9));
    assert_true(close_rel(m.host_gib, 14 * P / 1073741824.0, 1e-9)); /* one GPU on the node */
    assert_true(m.nvme_gib == 0);
    fixture_free(&s);
}

/* The fixture on DP 8 (one node), one micro-batch per replica, ZeRO-2. */
static void dp8_zero2(scenario_config *s)
{
    fixture_scenario(s, 4);
    fixture_layout(s, 1, 1, 8, 8);
    s->parallel.zero_stage = 2;
}

/* Per node: the per-GPU host bytes times the node's GPUs in the job (8 here, and 2 when the job
 * has 2 GPUs). */
static void host_memory_per_node(void **state)
{
    (void)state;
    scenario_config s;
    dp8_zero2(&s);
    s.platform.node.host_memory_bandwidth_gbs = 100;
    s.parallel.offload_optimizer = OFFLOAD_CPU;
    run_memory m;
    run_memory_estimate(&s, &m);
    double P = params_stage_per_gpu(&s, 0);
    assert_true(close_rel(m.host_gib, 8 * 14 * P / 8 / 1073741824.0, 1e-9));
    fixture_layout(&s, 1, 1, 2, 2);
    run_memory_estimate(&s, &m);
    assert_true(close_rel(m.host_gib, 2 * 14 * P / 2 / 1073741824.0, 1e-9));
    fixture_free(&s);
}

/* One node of 8 GPUs, DP 8, ZeRO-2, mixed-precision Adam, the optimizer offloaded. By hand:
 * each rank steps n = P/8 parameters; CPU Adam reads 12 (states) + 2 (fp16 gradient) and writes
 * 12 + 2 (fp16 parameter copy) = 28 bytes per parameter at host DRAM bandwidth B/8 (8 GPUs share
 * it): 28 n / (B/8); the updated fp16 shard goes back over PCIe: 2n / pcie. With NVMe: 12n read
 * at R/8 before and written at W/8 after. */
static void optimizer_step_by_hand(void **state)
{
    (void)state;
    scenario_config s;
    dp8_zero2(&s);
    fixture_host_links(&s);
    const double B = 400, pcie = 32, R = 50, W = 25; /* the fixture's host links, GB/s */
    assert_true(s.platform.node.host_memory_bandwidth_gbs == B && s.platform.node.pcie_bandwidth_gbs == pcie);
    assert_true(s.platform.node.nvme_read_gbs == R && s.platform.node.nvme_write_gbs == W);
    s.parallel.offload_optimizer = OFFLOAD_CPU;
    double n = params_stage_per_gpu(&s, 0) / 8;

    double rd, wr;
    offload_cpu_step_bytes(&s, &rd, &wr);
    assert_true(rd == 14 && wr == 14);

    step_workload w;
    fixture_build(&s, &w);
    int cpu = fixture_find_task(&w, "optimizer_cpu"), h2d = fixture_find_task(&w, "offload_h2d_params");
    assert_true(cpu >= 0 && h2d >= 0);
    assert_int_equal(fixture_find_task(&w, "optimizer"), -1); /* the GPU optimizer is gone */
    assert_true(close_rel(w.tasks[cpu].duration_s, 28 * n / (B * 1e9 / 8), 1e-12));
    assert_true(close_rel(w.tasks[h2d].duration_s, 2 * n / (pcie * 1e9), 1e-12));
    /* every reduced gradient element reaches the host once: the rank's shard, 2 bytes each (the
     * step's buckets carry the layers, the embedding and the final norm) */
    double d2h = 0;
    for (int i = 0; i < w.n_tasks; i++)
        if (strcmp(w.tasks[i].name, "offload_d2h_grads") == 0)
            d2h += w.tasks[i].bytes;
    assert_true(close_rel(d2h, 2 * params_stage_per_gpu(&s, 0) / 8, 1e-12));
    workload_free(&w);

    s.parallel.offload_optimizer = OFFLOAD_NVME;
    fixture_build(&s, &w);
    int rd_t = fixture_find_task(&w, "offload_nvme_read_states");
    int wr_t = fixture_find_task(&w, "offload_nvme_write_states");
    assert_true(rd_t >= 0 && wr_t >= 0);
    assert_true(close_rel(w.tasks[rd_t].duration_s, 12 * n / (R * 1e9 / 8), 1e-12));
    assert_true(close_rel(w.tasks[wr_t].duration_s, 12 * n / (W * 1e9 / 8), 1e-12));
    workload_free(&w);
    fixture_free(&s);
}

/* The CPU step is on the step's critical path (no one-step-delayed update): with free
 * communication and transfers, offloading adds exactly the CPU step and removes the GPU
 * optimizer step. */
static void cpu_step_on_the_critical_path(void **state)
{
    (void)state;
    scenario_config s;
    dp8_zero2(&s);
    fixture_free_communication(&s);
    s.platform.node.host_memory_bandwidth_gbs = 10;
    s.platform.node.pcie_bandwidth_gbs = 1e9; /* transfers ~free */
    double t[2], gpu_opt = 0;
    for (int off = 0; off < 2; off++) {
        s.parallel.offload_optimizer = off ? OFFLOAD_CPU : OFFLOAD_NONE;
        step_workload w;
        fixture_build(&s, &w);
        if (!off)
            gpu_opt = w.tasks[fixture_find_task(&w, "optimizer")].duration_s;
        replay_times rt;
        replay_metrics m;
        fixture_replay_analytic(&w, &rt);
        assert_int_equal(replay_metrics_compute(&w, &rt, &m), 0);
        t[off] = m.step_time_s;
        replay_metrics_free(&m);
        replay_times_free(&rt);
        workload_free(&w);
    }
    double n = params_stage_per_gpu(&s, 0) / 8;
    double cpu = 28 * n / (10e9 / 8);
    assert_true(fabs((t[1] - t[0]) - (cpu - gpu_opt)) < 1e-6 * t[1]);
    fixture_free(&s);
}

/* ZeRO-Infinity parameter offload: before each ZeRO-3 gather (one per layer and pass, the
 * embedding with the first layer of a forward, the final norm and tied head with its last;
 * zero3.h), the rank's shard of what it gathers comes in: from NVMe at the slower of PCIe and the
 * NVMe read share. */
static void parameter_fetch_before_each_gather(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 4);
    fixture_host_links(&s); /* PCIe 32 GB/s, NVMe read 50 GB/s */
    fixture_layout(&s, 1, 1, 8, 16); /* 2 micro-batches: 4 passes */
    s.parallel.zero_stage = 3;
    s.parallel.offload_optimizer = OFFLOAD_NVME;
    s.parallel.offload_parameters = OFFLOAD_NVME;
    step_workload w;
    fixture_build(&s, &w);
    zero3_plan z;
    zero3_plan_of(&s, &z);
    double h = (double)s.model.hidden_size, V = (double)s.model.vocab_size;
    double layer = z.layer_params * 2 / 8; /* the partitioned tensors, bf16, 8 shards */
    double ends = (params_embedding_per_gpu(&s) + V * h) * 2 / 8; /* the final norm stays whole */
    int fetches = 0, gathers = 0;
    double fetched = 0;
    for (int i = 0; i < w.n_tasks; i++) {
        const sim_task *k = &w.tasks[i];
        if (strcmp(k->name, "offload_fetch_params") == 0) {
            fetches++;
            fetched += k->bytes;
            assert_true(k->bytes >= layer * (1 - 1e-12));
            assert_true(close_rel(k->duration_s, k->bytes / fmin(32e9, 50e9 / 8), 1e-12));
        }
        if (strcmp(k->name, "zero3_param_allgather") == 0) {
            gathers++;
            int has_fetch = 0;
            for (int d = 0; d < k->dep_count; d++)
                has_fetch |= strcmp(w.tasks[w.deps[k->dep_begin + d]].name, "offload_fetch_params") == 0;
            assert_true(has_fetch);
        }
    }
    assert_int_equal(fetches, 16); /* 4 passes x 4 layers */
    assert_int_equal(gathers, 16);
    assert_true(close_rel(fetched, 4 * (4 * layer + ends), 1e-12));
    assert_int_equal(fixture_find_task(&w, "offload_h2d_params"), -1); /* parameters stay off the GPU */
    workload_free(&w);
    fixture_free(&s);
}

static void rules_name_the_json_path(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 4);
    config_error err;
    s.platform.node.host_memory_bandwidth_gbs = 100;
    s.parallel.offload_optimizer = OFFLOAD_CPU;
    s.parallel.offload_parameters = OFFLOAD_CPU;
    s.parallel.zero_stage = 2;
    assert_int_equal(scenario_validate_layout(&s, &err), -1);
    assert_non_null(strstr(err.msg, "scenario.parallel.offload_parameters"));
    assert_non_null(strstr(err.msg, "zero_stage 3"));

    s.parallel.offload_parameters = OFFLOAD_NONE;
    s.parallel.offload_optimizer = OFFLOAD_NVME; /* the fixture has no NVMe figures */
    assert_int_equal(scenario_validate_layout(&s, &err), -1);
    assert_non_null(strstr(err.msg, "scenario.parallel.offload_optimizer"));
    assert_non_null(strstr(err.msg, "nvme_read_gbs"));

    s.parallel.offload_optimizer = OFFLOAD_CPU;
    s.platform.node.host_memory_bandwidth_gbs = 0;
    assert_int_equal(scenario_validate_layout(&s, &err), -1);
    assert_non_null(strstr(err.msg, "host_memory_bandwidth_gbs"));
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zero_offload_closed_form),
        cmocka_unit_test(zero_infinity_closed_form),
        cmocka_unit_test(offload_fits_13b_on_one_32gb_gpu),
        cmocka_unit_test(host_memory_per_node),
        cmocka_unit_test(optimizer_step_by_hand),
        cmocka_unit_test(cpu_step_on_the_critical_path),
        cmocka_unit_test(parameter_fetch_before_each_gather),
        cmocka_unit_test(rules_name_the_json_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
