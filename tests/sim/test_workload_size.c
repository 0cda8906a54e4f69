/* workload_size_estimate, the closed form the commands' up-front estimate stands on, against the
 * task graphs workload_build really makes: shipped scenarios and variations of their layouts
 * (pipeline and interleaving, data parallelism with and without overlapped reduction, ZeRO 1-3,
 * recomputation, a large batch). The estimate must be within a factor of 2.5 either way, and
 * its communication tasks must not be fewer than half the graph's. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "config.h"
#include "workload.h"
#include "workload_size.h"

static void check(const char *scenario, const char *const *sets, int n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/scenarios/%s", DTSIM_SOURCE_DIR, scenario);
    scenario_config s;
    config_error err;
    if (scenario_load(path, sets, n, &s, &err) != 0)
        fail_msg("%s: %s", scenario, err.msg);
    step_workload w;
    if (workload_build(&s, &w, &err) != 0)
        fail_msg("%s: %s", scenario, err.msg);
    int comm = 0;
    for (int i = 0; i < w.n_tasks; i++)
        comm += w.tasks[i].kind != TASK_COMPUTE;
    workload_size z;
    workload_size_estimate(&s, &z);
    double ratio = z.tasks / w.n_tasks;
    print_message("%-28s %-70s tasks %8d estimated %10.0f (x%.2f), comm %7d estimated %10.0f\n", scenario,
                  n ? sets[n - 1] : "", w.n_tasks, z.tasks, ratio, comm, z.comm_tasks);
    assert_true(ratio >= 1 / 2.5 && ratio <= 2.5);
    assert_true(z.comm_tasks >= 0.5 * comm);
    workload_free(&w);
    scenario_free(&s);
}

static void estimates_are_near_the_graphs(void **state)
{
    (void)state;
    check("gpt3-175b-1024-a100.json", NULL, 0);
    const char *one_f_one_b[] = {"parallel.schedule=\"1f1b\"", "parallel.virtual_pipeline_model_parallel_size=1"};
    check("gpt3-175b-1024-a100.json", one_f_one_b, 2);
    const char *big_batch[] = {"training.global_batch_size=49152"};
    check("gpt3-175b-1024-a100.json", big_batch, 1);
    const char *full[] = {"training.recompute_granularity=\"full\""};
    check("gpt3-175b-1024-a100.json", full, 1);
    check("gpt2-xl-dp32-powersgd.json", NULL, 0);
    const char *no_overlap[] = {"parallel.overlap_grad_reduce=false"};
    check("gpt2-xl-dp32-powersgd.json", no_overlap, 1);
    const char *zero3[] = {"parallel.grad_compression={\"method\": \"none\"}", "parallel.zero_stage=3"};
    check("gpt2-xl-dp32-powersgd.json", zero3, 2);
    /* DeepSpeed's stage 3 gathers each recomputed layer again for its re-run */
    const char *zero3_rerun[] = {"parallel.grad_compression={\"method\": \"none\"}", "parallel.zero_stage=3",
                                 "training.recompute_granularity=\"full\"", "parallel.pipeline_engine=\"deepspeed\""};
    check("gpt2-xl-dp32-powersgd.json", zero3_rerun, 4);
    const char *zero3_llama[] = {"parallel.pipeline_model_parallel_size=1", "parallel.pipeline_layers=[126]",
                                 "parallel.virtual_pipeline_model_parallel_size=1", "parallel.schedule=\"1f1b\"",
                                 "parallel.data_parallel_size=2048", "parallel.zero_stage=3"};
    check("llama3-405b-16k-h100.json", zero3_llama, 6);
    check("llama3-405b-16k-h100.json", NULL, 0);
    /* ZeRO-3 kept gathered (parallel.fsdp_reshard_after_forward): for the backward on one stage,
     * for the step under pipeline parallelism */
    const char *zero3_never[] = {"parallel.grad_compression={\"method\": \"none\"}", "parallel.zero_stage=3",
                                 "parallel.fsdp_reshard_after_forward=\"never\""};
    check("gpt2-xl-dp32-powersgd.json", zero3_never, 3);
    const char *zero3_pipelined[] = {"parallel.zero_stage=3", "parallel.fsdp_reshard_after_forward=\"default\""};
    check("llama3-405b-16k-h100.json", zero3_pipelined, 2);
    const char *small_buckets[] = {"parallel.bucket_size_mb=1"};
    check("llama3-405b-16k-h100.json", small_buckets, 1);
    check("gpt3-13b-1gpu-zero-offload.json", NULL, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(estimates_are_near_the_graphs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
