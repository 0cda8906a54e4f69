/* The planner: never worse than the scenario's own layout; for GPT-3 175B on 1,024 A100 the
 * best layout keeps TP inside a node and fits in memory; every returned layout obeys the
 * layout rules and fits; ranking is by step time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "plan.h"

static void gpt3_on_1024_a100(void **state)
{
    scenario_config s;
    config_error err;
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", NULL, 0, &s, &err) != 0)
        fail_msg("%s", err.msg);
    plan_result p;
    assert_int_equal(plan_search(&s, 0, &p, &err, NULL), 0);
    assert_true(p.count > 0);
    const plan_layout *best = &p.layouts[0];
    assert_true(best->tp <= s.platform.node.gpus);
    assert_false(best->result.memory.oom);
    assert_true(best->result.memory.total <= s.platform.gpu.memory_gib);
    int found_own = 0;
    for (int i = 0; i < p.count; i++) {
        const plan_layout *l = &p.layouts[i];
        if (i > 0)
            assert_true(l->result.step_time_s >= p.layouts[i - 1].result.step_time_s);
        assert_false(l->result.memory.oom);
        assert_int_equal(l->tp * l->pp * l->dp * l->cp, 1024);
        scenario_config c;
        plan_apply(&s, l, &c);
        assert_int_equal(scenario_validate_layout(&c, &err), 0);
        if (l->is_scenario_own) {
            found_own = 1;
            assert_true(best->result.step_time_s <= l->result.step_time_s);
        }
    }
    assert_true(found_own);
    assert_true(p.enumerated > 1000);
    plan_result_free(&p);
    scenario_free(&s);
}

static void nothing_fits_on_too_few_gpus(void **state)
{
    scenario_config s;
    config_error err;
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", NULL, 0, &s, &err) != 0)
        fail_msg("%s", err.msg);
    plan_result p;
    /* 175B parameters need > 2.8 TB of model states: 8 GPUs of 80 GiB cannot hold them. */
    assert_int_equal(plan_search(&s, 8, &p, &err, NULL), 0);
    assert_int_equal(p.count, 0);
    assert_true(p.out_of_memory > 0);
    plan_result_free(&p);
    assert_int_not_equal(plan_search(&s, 1 << 20, &p, &err, NULL), 0);
    scenario_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt3_on_1024_a100),
        cmocka_unit_test(nothing_fits_on_too_few_gpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
