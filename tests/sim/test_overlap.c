/* Overlap as Megatron-LM runs it (docs/model.md, "Overlap"): with parallel.tp_comm_overlap each
 * sequence-parallel all-gather / reduce-scatter runs in k chunks beside its GEMM, so a pair takes
 * t/k + (k-1) max(t/k, s G/k) + G/k (t the collective, G the GEMM, s the calibration's
 * overlap_slowdown): only the first chunk is exposed when the GEMM is the longer, nearly all of it
 * when the GEMM is short; the slowdown is reported apart. overlap_param_gather moves the
 * distributed optimizer's parameter all-gather beside the next forward. Analytic and flow agree on
 * one node with both on. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "collective.h"
#include "cost.h"
#include "fixture.h"

/* Exposed TP time of one layer's forward at TP 8 with SP, by hand from the op list. */
static double tp_exposed_by_hand(const scenario_config *s, double *total, double *cost)
{
    layer_shape sh;
    workload_layer_shape(s, &sh);
    layer_op ops[LAYER_OPS_MAX];
    int n = layer_ops_forward(&sh, ops);
    cost_model cm;
    cost_model_init(&cm, s);
    double k = s->parallel.tp_comm_overlap_chunks, slow = s->calibration.overlap_slowdown, exposed = 0;
    *total = *cost = 0;
    for (int i = 0; i < n; i++) {
        if (ops[i].kind != OPK_COMM || ops[i].comm != COMM_TP)
            continue;
        /* userbuffers' chunks, not NCCL calls (collective.h) */
        double t = collective_userbuffers_time(&s->platform, &s->calibration, ops[i].coll, ops[i].bytes,
                                               coll_group_of(8, 1, 8));
        const layer_op *g = ops[i].coll == COLL_ALL_GATHER ? &ops[i + 1] : &ops[i - 1];
        assert_int_equal(g->kind, OPK_GEMM);
        double G = cost_compute_op_s(&cm, g);
        double pair = t / k + (k - 1) * fmax(t / k, slow * G / k) + G / k, c = (k - 1) * (slow - 1) * G / k;
        exposed += pair - G - c;
        *total += t;
        *cost += c;
    }
    return exposed;
}

static void chunks_hide_behind_the_gemm_when_it_is_longer(void **state)
{
    (void)state;
    for (int slow_net = 0; slow_net < 2; slow_net++) {
        scenario_config s;
        fixture_scenario(&s, 1);
        fixture_model(&s, 1, 4096, 32, 16384);
        s.model.seq_length = 4096;
        s.parallel.tp = 8;
        fixture_tp_comm_overlap(&s, 4, 1.1);
        if (slow_net)
            s.platform.node.nvlink_bandwidth_gbs = 1; /* the collectives far longer than the GEMMs */
        double total, cost;
        double exposed = tp_exposed_by_hand(&s, &total, &cost);
        sim_task fwd;
        task_comm_parts parts;
        assert_int_equal(fixture_first_task(&s, "fwd", &fwd, &parts), 0);
        double tp = parts.inside[COMM_TP], task_cost = fwd.overlap_cost_s;
        /* the first forward (the only one: one layer) also holds the embedding's TP all-reduce
         * and the unfused loss's three all-reduces of one float per token, whole */
        layer_shape sh;
        workload_layer_shape(&s, &sh);
        double embed = collective_time(&s.platform, &s.calibration, COLL_ALL_REDUCE,
                                       (double)sh.seq_length * sh.hidden * sh.act_bytes, coll_group_of(8, 1, 8)).time_s +
                       3 * collective_time(&s.platform, &s.calibration, COLL_ALL_REDUCE, (double)sh.seq_length * 4,
                                           coll_group_of(8, 1, 8)).time_s;
        print_message("%s: TP %.4g s, exposed %.4g s by hand, %.4g s in the task; overlap cost %.4g s\n",
                      slow_net ? "slow NVLink" : "NVLink", total, exposed, tp - embed, task_cost);
        assert_true(fabs(tp - embed - exposed) <= 1e-12 + 1e-9 * total);
        assert_true(fabs(task_cost - cost) <= 1e-15 + 1e-9 * cost);
        if (!slow_net)
            assert_true(fabs(exposed - total / 4) < 1e-9 * total); /* the first and last chunks only */
        else
            assert_true(exposed > 0.9 * total);
        run_result r = fixture_run(&s);
        assert_true(r.overlap_cost_s > 0 && r.comm_exposed_s[COMM_TP] < r.comm_total_s[COMM_TP]);
        fixture_free(&s);
    }
}

/* The parameter all-gather beside the next forward: exposed ZeRO time falls, the step too. */
static void parameter_gather_hides_behind_the_forward(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 1, 1, 8, 32);
    s.parallel.zero_stage = 1;
    s.parallel.overlap_grad_reduce = 1;
    run_result plain = fixture_run(&s);
    s.parallel.overlap_param_gather = 1;
    run_result overlapped = fixture_run(&s);
    print_message("ZeRO exposed %.5f s -> %.5f s (total %.5f, %.5f); step %.5f s -> %.5f s\n",
                  plain.comm_exposed_s[COMM_ZERO], overlapped.comm_exposed_s[COMM_ZERO], plain.comm_total_s[COMM_ZERO],
                  overlapped.comm_total_s[COMM_ZERO], plain.step_time_s, overlapped.step_time_s);
    assert_true(fabs(plain.comm_total_s[COMM_ZERO] - overlapped.comm_total_s[COMM_ZERO]) < 1e-9);
    assert_true(overlapped.comm_exposed_s[COMM_ZERO] < 0.5 * plain.comm_exposed_s[COMM_ZERO]);
    assert_true(overlapped.step_time_s < plain.step_time_s);
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chunks_hide_behind_the_gemm_when_it_is_longer),
        cmocka_unit_test(parameter_gather_hides_behind_the_forward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
