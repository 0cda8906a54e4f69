/* The layout a scenario resolves to (sim/config/layout.c, engine/rank_grid.h): the rank grid
 * against its closed form rank = t + tp (c + cp (d + dp p)) (Megatron-Core's tp-cp-ep-dp-pp) and its inverse on every rank of
 * several shapes; the layers per stage against Megatron-LM's split written out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include "fixture.h"

static void rank_grid_is_tp_innermost_then_cp_dp_pp(void **state)
{
    (void)state;
    const int shapes[][4] = {{1, 1, 1, 1}, {8, 1, 4, 2}, {2, 3, 5, 7}, {4, 2, 1, 3}, {1, 1, 16, 4}};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        int tp = shapes[k][0], cp = shapes[k][1], pp = shapes[k][2], dp = shapes[k][3];
        rank_grid g = rank_grid_make(tp, cp, pp, dp);
        assert_int_equal(rank_grid_ranks(&g), (long)tp * cp * pp * dp);
        assert_int_equal(rank_grid_stride(&g, GRID_TP), 1);
        assert_int_equal(rank_grid_stride(&g, GRID_CP), tp);
        assert_int_equal(rank_grid_stride(&g, GRID_DP), (long)tp * cp);
        assert_int_equal(rank_grid_stride(&g, GRID_PP), (long)tp * cp * dp);
        long expect = 0;
        for (int p = 0; p < pp; p++)
            for (int d = 0; d < dp; d++)
                for (int c = 0; c < cp; c++)
                    for (int t = 0; t < tp; t++, expect++) { /* counting up, TP fastest */
                        long r = rank_grid_rank(&g, t, c, p, d);
                        assert_int_equal(r, expect);
                        assert_int_equal(rank_grid_coord(&g, r, GRID_TP), t);
                        assert_int_equal(rank_grid_coord(&g, r, GRID_CP), c);
                        assert_int_equal(rank_grid_coord(&g, r, GRID_PP), p);
                        assert_int_equal(rank_grid_coord(&g, r, GRID_DP), d);
                    }
    }
}

static void stage_layers_follow_megatron_split(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 12);
    s.parallel.pp = 4;
    s.parallel.vpp = 1;
    for (int p = 0; p < 4; p++) /* 12 layers over 4 stages: 3 each */
        assert_int_equal(scenario_stage_layers(&s, p), 3);
    s.parallel.pp = 2;
    s.parallel.vpp = 3; /* 2 stages x 3 chunks of 2 layers: 6 per stage */
    assert_int_equal(scenario_stage_layers(&s, 0), 6);
    assert_int_equal(scenario_stage_layers(&s, 1), 6);
    assert_int_equal(scenario_stage_layers(&s, 2), -1); /* no such stage */
    int uneven[3] = {2, 7, 3};
    s.parallel.pp = 3;
    s.parallel.vpp = 1;
    s.parallel.pipeline_layers = uneven;
    s.parallel.pipeline_layers_count = 3;
    assert_int_equal(scenario_stage_layers(&s, 0), 2);
    assert_int_equal(scenario_stage_layers(&s, 1), 7);
    assert_int_equal(scenario_stage_layers(&s, 2), 3);
    s.parallel.pipeline_layers = NULL;
    s.parallel.pipeline_layers_count = 0;
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rank_grid_is_tp_innermost_then_cp_dp_pp),
        cmocka_unit_test(stage_layers_follow_megatron_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
