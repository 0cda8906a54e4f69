/* The host's side of a pass (sim/step/host_issue.h) and nanotron's fp32 gradient accumulation
 * (sim/step/workload.c, accumulate_fp32_grads), on the fixture's 4-layer model on one GPU, one
 * pass a micro-batch holding the embedding and the head:
 *  - a pass takes the longer of its GPU time and its launches times host_issue_us: the host's
 *    where that is longer, the GPU's where it is not, and nothing changes without the calibration
 *    figure or for a framework whose launches are not known;
 *  - nanotron adds each backward's gradients into fp32 ones in a pass of 10 bytes a parameter
 *    after every backward; Megatron-LM (in its GEMMs) has no such pass. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "cost.h"
#include "fixture.h"
#include "host_issue.h"
#include "params.h"

static void nanotron(scenario_config *s)
{
    fixture_scenario(s, 4);
    s->training.precision = PREC_BF16;
    s->parallel.framework = FRAMEWORK_NANOTRON;
}

/* The duration of the first task named `name` of s's step. */
static double first_s(const scenario_config *s, const char *name)
{
    sim_task t;
    assert_int_equal(fixture_first_task(s, name, &t, NULL), 0);
    return t.duration_s;
}

static void test_a_pass_takes_the_longer_of_gpu_and_host(void **state)
{
    (void)state;
    scenario_config s;
    nanotron(&s);
    s.calibration.host_issue_us = 0;
    double gpu_fwd = first_s(&s, "fwd"), gpu_bwd = first_s(&s, "bwd");
    host_launches n;
    host_launches_of(&s, &n);
    int L = s.model.num_layers;
    double fwd_launches = L * n.layer_fwd + n.embed_fwd + n.head_fwd;
    double bwd_launches = L * n.layer_bwd + n.embed_bwd + n.head_bwd;
    assert_true(n.layer_fwd > 0 && n.layer_bwd > n.layer_fwd);

    /* a host slower than the GPU: the pass is the host's */
    s.calibration.host_issue_us = 1000;
    assert_true(fwd_launches * 1e-3 > gpu_fwd && bwd_launches * 1e-3 > gpu_bwd);
    assert_within(first_s(&s, "fwd"), fwd_launches * 1e-3, 1e-12);
    assert_within(first_s(&s, "bwd"), bwd_launches * 1e-3, 1e-12);

    /* a host faster than the GPU: the GPU's, to the bit */
    s.calibration.host_issue_us = 1e-3;
    assert_true(fwd_launches * 1e-9 < gpu_fwd);
    assert_true(first_s(&s, "fwd") == gpu_fwd);
    assert_true(first_s(&s, "bwd") == gpu_bwd);

    /* a framework whose launches dtsim does not know: no host model */
    s.calibration.host_issue_us = 1000;
    s.parallel.framework = FRAMEWORK_MEGATRON;
    host_launches_of(&s, &n);
    assert_int_equal(n.layer_fwd + n.layer_bwd + n.embed_fwd + n.head_fwd, 0);
    s.parallel.framework = FRAMEWORK_NANOTRON;
    s.calibration.host_issue_us = 0;
    double nano = first_s(&s, "fwd");
    s.parallel.framework = FRAMEWORK_MEGATRON;
    s.calibration.host_issue_us = 1000;
    assert_true(first_s(&s, "fwd") == nano);
    fixture_free(&s);
}

/* The step of a host-bound run: every micro-batch's forward and backward at the host's pace, so
 * the step grows by m x (forward + backward launches) x host_issue_us over the GPU-bound one's
 * passes. */
static void test_host_bound_step(void **state)
{
    (void)state;
    scenario_config s;
    nanotron(&s);
    s.calibration.host_issue_us = 0;
    run_result gpu = fixture_run(&s);
    double gpu_fwd = first_s(&s, "fwd"), gpu_bwd = first_s(&s, "bwd");
    s.calibration.host_issue_us = 1000;
    run_result host = fixture_run(&s);
    host_launches n;
    host_launches_of(&s, &n);
    int L = s.model.num_layers;
    double per_mb = (L * (n.layer_fwd + n.layer_bwd) + n.embed_fwd + n.embed_bwd + n.head_fwd + n.head_bwd) * 1e-3;
    double m = (double)scenario_micro_batches(&s);
    assert_within(host.step_time_s - gpu.step_time_s, m * (per_mb - gpu_fwd - gpu_bwd), 1e-9 * host.step_time_s);
    fixture_free(&s);
}

static int count_named(const step_workload *w, const char *name, double *each)
{
    int n = 0;
    for (int i = 0; i < w->n_tasks; i++)
        if (w->tasks[i].name && strcmp(w->tasks[i].name, name) == 0) {
            n++;
            *each = w->tasks[i].duration_s;
        }
    return n;
}

static void test_nanotron_accumulates_in_fp32_every_micro_batch(void **state)
{
    (void)state;
    scenario_config s;
    nanotron(&s);
    step_workload w;
    double each = 0;
    fixture_build(&s, &w);
    assert_int_equal(count_named(&w, "fp32_grad_accumulate", &each), (int)scenario_micro_batches(&s));
    cost_model cm;
    cost_model_init(&cm, &s);
    assert_within(each, cost_memory_s(&cm, OPCLASS_ELEMENTWISE, 10.0 * params_stage_per_gpu(&s, 0)), 1e-15);
    workload_free(&w);
    s.parallel.framework = FRAMEWORK_MEGATRON; /* in the weight-gradient GEMM: no pass */
    fixture_build(&s, &w);
    assert_int_equal(count_named(&w, "fp32_grad_accumulate", &each), 0);
    workload_free(&w);
    fixture_free(&s);
}

/* A pass emitted in pieces (the last backward, a task per layer, where DDP's buckets go out as
 * they fill) takes the time of the same pass emitted whole, max(GPU, host): the host runs ahead
 * within it. At 50 us a launch the head's backward (its vocabulary GEMMs) is longer on the GPU than
 * on the host and each layer's the other way round, so a floor per piece would charge more. */
static void backward_sums(const scenario_config *s, double sum[2], int tasks[2])
{
    step_workload w;
    fixture_build(s, &w);
    sum[0] = sum[1] = 0;
    tasks[0] = tasks[1] = 0;
    for (int i = 0; i < w.n_tasks; i++)
        if (w.tasks[i].name && strcmp(w.tasks[i].name, "bwd") == 0) {
            sum[w.tasks[i].micro_batch] += w.tasks[i].duration_s;
            tasks[w.tasks[i].micro_batch]++;
        }
    workload_free(&w);
}

static void test_a_pass_in_pieces_takes_the_time_of_the_whole(void **state)
{
    (void)state;
    scenario_config s;
    nanotron(&s);
    fixture_layout(&s, 1, 1, 8, 16); /* DP 8, two micro-batches of one sequence */
    s.parallel.overlap_grad_reduce = 1;
    host_launches n;
    host_launches_of(&s, &n);
    int L = s.model.num_layers;
    assert_int_equal(scenario_micro_batches(&s), 2);
    double sum[2];
    int tasks[2];
    s.calibration.host_issue_us = 0;
    backward_sums(&s, sum, tasks);
    double gpu = sum[0];
    s.calibration.host_issue_us = 50;
    double host = (L * n.layer_bwd + n.embed_bwd + n.head_bwd) * 50e-6;
    backward_sums(&s, sum, tasks);
    assert_int_equal(tasks[0], 1); /* the first backward whole, the last in a piece a layer */
    assert_int_equal(tasks[1], L);
    assert_true(host > gpu);
    assert_within(sum[0], host, 1e-12);
    assert_within(sum[1], sum[0], 1e-12);
    fixture_free(&s);
}

/* Under a pipeline every stage adds each of its backwards' gradients into fp32: m passes a stage. */
static void test_every_stage_accumulates_every_backward(void **state)
{
    (void)state;
    scenario_config s;
    nanotron(&s);
    fixture_layout(&s, 1, 2, 1, 8);
    step_workload w;
    fixture_build(&s, &w);
    int per_stage[2] = {0, 0};
    for (int i = 0; i < w.n_tasks; i++)
        if (w.tasks[i].name && strcmp(w.tasks[i].name, "fp32_grad_accumulate") == 0)
            per_stage[w.tasks[i].stage]++;
    assert_int_equal(per_stage[0], (int)scenario_micro_batches(&s));
    assert_int_equal(per_stage[1], (int)scenario_micro_batches(&s));
    workload_free(&w);
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_pass_takes_the_longer_of_gpu_and_host),
        cmocka_unit_test(test_host_bound_step),
        cmocka_unit_test(test_nanotron_accumulates_in_fp32_every_micro_batch),
        cmocka_unit_test(test_a_pass_in_pieces_takes_the_time_of_the_whole),
        cmocka_unit_test(test_every_stage_accumulates_every_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
