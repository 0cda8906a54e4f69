/* Combined 1F1B (parallel.overlap_moe_expert_parallel_comm, sim/step/moe_overlap.h): the layer
 * pairs' two-stream schedule against schedules worked by hand, and the step: a backward and the
 * next forward run as one pass, the all-to-alls' total unchanged and most of it hidden, the same
 * at both fidelities; Megatron-Core's requirements refused by name. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "fixture.h"
#include "moe_overlap.h"

/* Worked by hand. F = {attn 1, dispatch 2, experts 1, combine 2}, B = {attn 2, dispatch 2,
 * experts 2, combine 2}, no slowdown:
 *   compute: F.attn [0,1], B.experts [2,4] (after B.combine), F.experts [4,5] (after F.dispatch),
 *            B.attn [6,8] (after B.dispatch)
 *   comm:    B.combine [0,2], F.dispatch [2,4], B.dispatch [4,6], F.combine [6,8]
 * span 8 (the two passes one after the other: 6 + 8 = 14), compute busy 6, all-to-alls 8 of which
 * 2 beside idle compute ([1,2] and [5,6]). The next pair starts at 8 on both streams: 8 a pair. */
static void pairs_run_as_worked_by_hand(void **state)
{
    (void)state;
    moe_layer_parts f = {1, 2, 1, 2, 0}, b = {2, 2, 2, 2, 0};
    moe_pair_result r;
    assert_int_equal(moe_pair_time(&f, &b, 1, 1.0, &r), 0);
    assert_true(fabs(r.time_s - 8) < 1e-12 && fabs(r.compute_s - 6) < 1e-12);
    assert_true(fabs(r.comm_total_s - 8) < 1e-12 && fabs(r.comm_exposed_s - 2) < 1e-12 && r.overlap_cost_s == 0);
    assert_int_equal(moe_pair_time(&f, &b, 3, 1.0, &r), 0);
    assert_true(fabs(r.time_s - 24) < 1e-12 && fabs(r.comm_exposed_s - 6) < 1e-12);

    /* no all-to-all: the compute one after the other; only all-to-alls: the comm likewise */
    moe_layer_parts fc = {1, 0, 3, 0, 0}, bc = {2, 0, 5, 0, 0}, fm = {0, 1, 0, 2, 0}, bm = {0, 3, 0, 4, 0};
    assert_int_equal(moe_pair_time(&fc, &bc, 4, 1.5, &r), 0);
    assert_true(fabs(r.time_s - 4 * 11) < 1e-12 && r.comm_total_s == 0 && r.overlap_cost_s == 0);
    assert_int_equal(moe_pair_time(&fm, &bm, 4, 1.5, &r), 0);
    assert_true(fabs(r.time_s - 4 * 10) < 1e-12 && fabs(r.comm_exposed_s - 40) < 1e-12 && r.compute_s == 0);

    /* slowdown 2: F.attn (2 s alone) beside B.combine (1 s) does 0.5 s of work in that second,
     * then 1.5 s alone: it ends at 2.5, and the slowdown cost 0.5 s */
    moe_layer_parts fs = {2, 0, 0, 0, 0}, bs = {0, 0, 0, 1, 0};
    assert_int_equal(moe_pair_time(&fs, &bs, 1, 2.0, &r), 0);
    assert_true(fabs(r.time_s - 2.5) < 1e-12 && fabs(r.overlap_cost_s - 0.5) < 1e-12 && r.comm_exposed_s == 0);

    /* The compute on the combine's side (unpermute to the layer's end) is compute, never an
     * exposed all-to-all. f = b = {attn 0.1, dispatch 1, experts 0.1, combine 1, its compute 3}:
     *   compute: B.pre [0,3], F.attn [3,3.1], B.experts [4,4.1], F.experts [5,5.1],
     *            B.attn [6,6.1], F.post [7,10] (after F.combine)
     *   comm:    B.combine [3,4] (after B.pre), F.dispatch [4,5], B.dispatch [5,6], F.combine [6,7]
     * span 10, compute 6.4, all-to-alls 4 of which 3.6 beside idle compute. */
    moe_layer_parts t = {0.1, 1, 0.1, 1, 3};
    assert_int_equal(moe_pair_time(&t, &t, 1, 1.0, &r), 0);
    assert_true(fabs(r.time_s - 10) < 1e-12 && fabs(r.compute_s - 6.4) < 1e-12);
    assert_true(fabs(r.comm_total_s - 4) < 1e-12 && fabs(r.comm_exposed_s - 3.6) < 1e-12);
    assert_int_equal(moe_pair_time(&t, &t, 1, 2.0, &r), 0);
    assert_true(r.comm_exposed_s <= r.comm_total_s + 1e-12 && r.overlap_cost_s <= 4 + 1e-12);

    moe_layer_parts bad = {1, -1, 0, 0, 0};
    assert_int_equal(moe_pair_time(&bad, &b, 1, 1.0, &r), -1);
    assert_int_equal(moe_pair_time(&f, &b, -1, 1.0, &r), -1);
    assert_int_equal(moe_pair_time(&f, &b, 0, 1.0, &r), 0);
    assert_true(r.time_s == 0);
}

/* E 8, top-2, EP 4 over DP 4, one stage, 4 micro-batches, a slow network so that the
 * all-to-alls count: with the option the m - 1 middle backward/forward pairs become one task
 * each, the all-to-alls' total is the same and less of it is exposed, the step is shorter, and
 * both fidelities replay the same graph alike. */
static void the_step_hides_the_all_to_alls(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 4);
    s.model.num_experts = 8;
    s.model.moe_router_topk = 2;
    fixture_layout(&s, 1, 1, 4, 16); /* DP 4 x micro-batch 1 x 4 micro-batches */
    s.parallel.ep = 4;
    s.platform.network.nodes = 4; /* one GPU a node: the EP group crosses the network */
    s.platform.node.gpus = 1;
    s.platform.node.nic_bandwidth_gbps = 20;
    run_result off = fixture_run(&s);
    sim_task f0, b0, pair;
    task_comm_parts f0_parts, b0_parts;
    assert_int_equal(fixture_first_task(&s, "fwd", &f0, &f0_parts), 0);
    assert_int_equal(fixture_first_task(&s, "bwd", &b0, &b0_parts), 0);
    s.parallel.overlap_moe_a2a = 1;
    /* the pair holds both passes' work: at most both one after the other, at least that less
     * their exposed all-to-alls (the op lists are cut, none left out) */
    assert_int_equal(fixture_first_task(&s, "fwd_bwd", &pair, NULL), 0);
    double serial = f0.duration_s + b0.duration_s;
    double a2a = f0_parts.inside[COMM_EP] + b0_parts.inside[COMM_EP];
    assert_true(a2a > 0 && pair.duration_s <= serial + 1e-12 && pair.duration_s >= serial - a2a - 1e-12);
    assert_true(pair.duration_s < serial - 0.2 * a2a);
    run_result on = fixture_run(&s);
    print_message("EP all-to-alls %.4g s, exposed %.4g s without, %.4g s with; step %.6g -> %.6g s\n",
                  off.comm_total_s[COMM_EP], off.comm_exposed_s[COMM_EP], on.comm_exposed_s[COMM_EP], off.step_time_s,
                  on.step_time_s);
    assert_true(off.comm_exposed_s[COMM_EP] > 0.5 * off.comm_total_s[COMM_EP]);
    assert_true(fabs(on.comm_total_s[COMM_EP] - off.comm_total_s[COMM_EP]) <= 1e-9 * off.comm_total_s[COMM_EP]);
    assert_true(on.comm_exposed_s[COMM_EP] < 0.75 * off.comm_exposed_s[COMM_EP]);
    assert_true(on.step_time_s < off.step_time_s);

    step_workload w;
    fixture_build(&s, &w);
    int pairs = 0, fwd = 0, bwd = 0;
    for (int i = 0; i < w.n_tasks; i++) { /* F0 | B0+F1 | B1+F2 | B2+F3 | B3 (per layer: DP buckets) */
        const sim_task *t = &w.tasks[i];
        if (!strcmp(t->name, "fwd_bwd"))
            assert_int_equal(t->micro_batch, ++pairs); /* the forward's micro-batch */
        if (!strcmp(t->name, "fwd"))
            assert_int_equal(t->micro_batch, fwd++);
        if (!strcmp(t->name, "bwd"))
            assert_true(++bwd && t->micro_batch == 3);
    }
    assert_int_equal(pairs, 3);
    assert_int_equal(fwd, 1);
    assert_true(bwd >= 1);
    workload_free(&w);

    run_result a, f;
    fixture_run_both(&s, &a, &f);
    print_message("analytic %.6g s, flow %.6g s\n", a.step_time_s, f.step_time_s);
    assert_true(fabs(a.step_time_s - f.step_time_s) <= 0.02 * a.step_time_s);
    fixture_free(&s);
}

/* PP 2 x 2 virtual stages (interleaved 1F1B), 8 micro-batches: steady-state backwards pair
 * with the forward after them on both stages, nothing deadlocks, both fidelities agree, and the
 * step is shorter than without. */
static void virtual_stages_pair_their_steady_state(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 8);
    s.model.num_experts = 8;
    s.model.moe_router_topk = 2;
    fixture_layout(&s, 1, 2, 4, 32); /* PP 2 x DP 4, 8 micro-batches */
    s.parallel.vpp = 2;
    s.parallel.schedule = PIPELINE_INTERLEAVED;
    s.parallel.ep = 4;
    s.platform.node.nic_bandwidth_gbps = 20;
    run_result off = fixture_run(&s);
    s.parallel.overlap_moe_a2a = 1;
    step_workload w;
    fixture_build(&s, &w);
    int pairs[2] = {0, 0};
    for (int i = 0; i < w.n_tasks; i++)
        if (!strcmp(w.tasks[i].name, "fwd_bwd"))
            pairs[w.tasks[i].stage]++;
    workload_free(&w);
    run_result a, f;
    fixture_run_both(&s, &a, &f);
    print_message("pairs per stage %d, %d; step %.6g s without, %.6g s with (flow %.6g s)\n", pairs[0], pairs[1],
                  off.step_time_s, a.step_time_s, f.step_time_s);
    assert_true(pairs[0] >= 8 && pairs[1] >= 8); /* of 16 backwards each, minus warm-up and drain */
    assert_true(a.step_time_s < off.step_time_s);
    assert_true(fabs(a.step_time_s - f.step_time_s) <= 0.02 * a.step_time_s);
    fixture_free(&s);
}

static void requirements_are_refused_by_name(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 4);
    s.model.num_experts = 8;
    s.model.moe_router_topk = 2;
    fixture_layout(&s, 1, 2, 4, 16);
    s.parallel.overlap_moe_a2a = 1;
    config_error err;
    assert_int_equal(scenario_validate_layout(&s, &err), -1); /* EP 1 */
    assert_non_null(strstr(err.msg, "overlap_moe_expert_parallel_comm"));
    assert_non_null(strstr(err.msg, "expert_model_parallel_size"));
    s.parallel.ep = 4;
    assert_int_equal(scenario_validate_layout(&s, &err), -1); /* PP 2 without virtual stages */
    assert_non_null(strstr(err.msg, "virtual_pipeline_model_parallel_size"));
    s.parallel.pp = 1;
    s.parallel.schedule = PIPELINE_GPIPE;
    assert_int_equal(scenario_validate_layout(&s, &err), -1); /* no backward is followed by a forward */
    assert_non_null(strstr(err.msg, "1f1b"));
    s.parallel.schedule = PIPELINE_1F1B;
    s.training.recompute = RECOMPUTE_FULL;
    assert_int_equal(scenario_validate_layout(&s, &err), -1);
    assert_non_null(strstr(err.msg, "full recomputation"));
    s.training.recompute = RECOMPUTE_NONE;
    s.parallel.zero_stage = 3;
    assert_int_equal(scenario_validate_layout(&s, &err), -1);
    assert_non_null(strstr(err.msg, "zero_stage 3"));
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pairs_run_as_worked_by_hand),
        cmocka_unit_test(the_step_hides_the_all_to_alls),
        cmocka_unit_test(virtual_stages_pair_their_steady_state),
        cmocka_unit_test(requirements_are_refused_by_name),
    };
    return cmocka_run_group_tests(tests, fixture_setup, fixture_teardown);
}
