/* What overlap costs, at both fidelities: with calibration overlap_slowdown s > 1, every
 * collective and pipeline transfer running beside the compute stream takes 1 - 1/s of its GPU
 * (sim/step/cost.h). The analytic replay integrates the compute at its share; the flow replay gets
 * the same from SimGrid's sharing of the GPU host. On uncontended layouts with gradient-reduce,
 * parameter-gather, pipeline and ZeRO-3 overlap (Megatron-FSDP's or FSDP2's) they agree within 2%
 * on the step and within 10% on the overlap cost itself, and both steps grow with s. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "fixture.h"

static void check_layout(scenario_config *s, const char *what)
{
    s->calibration.overlap_slowdown = 1.0;
    run_result a1 = fixture_run_at(s, 0);
    run_result a, f;
    s->calibration.overlap_slowdown = 1.3;
    fixture_run_both(s, &a, &f);
    print_message("%s: step %.6f s alone, beside s = 1.3: analytic %.6f s (overlap cost %.6f s), "
                  "flow %.6f s (%.6f s)\n", what, a1.step_time_s, a.step_time_s, a.overlap_cost_s, f.step_time_s,
                  f.overlap_cost_s);
    assert_true(a1.overlap_cost_s == 0);
    assert_true(a.overlap_cost_s > 0 && f.overlap_cost_s > 0);
    assert_true(a.step_time_s > a1.step_time_s);
    /* the step cannot grow by more than what the compute lost */
    assert_true(a.step_time_s <= a1.step_time_s + a.overlap_cost_s * s->parallel.pp + 1e-9);
    if (fabs(f.step_time_s - a.step_time_s) > 0.02 * a.step_time_s)
        fail_msg("%s: flow %.6f s, analytic %.6f s", what, f.step_time_s, a.step_time_s);
    if (fabs(f.overlap_cost_s - a.overlap_cost_s) > 0.10 * a.overlap_cost_s)
        fail_msg("%s: overlap cost flow %.6f s, analytic %.6f s", what, f.overlap_cost_s, a.overlap_cost_s);
}

static void gradient_reduce_and_pipeline_overlap_cost_the_same_at_both_fidelities(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 2, 2, 2, 16);
    s.parallel.overlap_grad_reduce = 1;
    check_layout(&s, "TP 2 x PP 2 x DP 2, overlap_grad_reduce");
    s.parallel.zero_stage = 1;
    s.parallel.overlap_param_gather = 1;
    check_layout(&s, "... + ZeRO-1 overlap_param_gather");
    fixture_free(&s);
}

static void zero3_prefetch_overlap_costs_the_same_at_both_fidelities(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 1, 1, 8, 16);
    s.parallel.zero_stage = 3;
    s.parallel.overlap_grad_reduce = 1;
    check_layout(&s, "ZeRO-3 DP 8");
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_NEVER;
    check_layout(&s, "... kept from forward to backward");
    /* FSDP2 under PP: a chunk gathers once a step (torchtitan's policy), or in every backward
     * (always), and reduces once */
    fixture_layout(&s, 1, 2, 4, 16);
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_DEFAULT;
    check_layout(&s, "ZeRO-3 PP 2 x DP 4, FSDP2 kept for the step");
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_ALWAYS;
    check_layout(&s, "... resharded after each forward");
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gradient_reduce_and_pipeline_overlap_cost_the_same_at_both_fidelities),
        cmocka_unit_test(zero3_prefetch_overlap_costs_the_same_at_both_fidelities),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
