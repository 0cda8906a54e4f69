/* Pipeline schedules: counts, order, cross-stage consistency (no deadlock), in-flight
 * micro-batches, layer splits; the op list's FLOPs against DESIGN.md's closed form; the memory
 * model against the ZeRO paper's example and Korthikanti et al.'s formulas. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "memory.h"
#include "oplist.h"
#include "schedule.h"

static void check_schedule(pipeline_kind kind, int p, int m, int v)
{
    pipeline_schedule s;
    char err[256];
    assert_int_equal(pipeline_schedule_build(&s, kind, p, m, v, err, sizeof err), 0);
    int total = 0;
    for (int st = 0; st < p; st++) {
        assert_int_equal(s.count[st], 2 * m * v);
        total += s.count[st];
        /* each (mb, chunk) forward once and backward once, forward first */
        int *fwd_at = calloc((size_t)m * v, sizeof(int)), *bwd_at = calloc((size_t)m * v, sizeof(int));
        for (int i = 0; i < m * v; i++)
            fwd_at[i] = bwd_at[i] = -1;
        for (int i = 0; i < s.count[st]; i++) {
            pipe_action a = s.actions[st][i];
            assert_true(a.micro_batch >= 0 && a.micro_batch < m && a.chunk >= 0 && a.chunk < v);
            int *slot = a.phase == PIPE_FORWARD ? &fwd_at[a.micro_batch * v + a.chunk] : &bwd_at[a.micro_batch * v + a.chunk];
            assert_int_equal(*slot, -1);
            *slot = i;
        }
        for (int i = 0; i < m * v; i++)
            assert_true(fwd_at[i] >= 0 && bwd_at[i] > fwd_at[i]);
        free(fwd_at);
        free(bwd_at);
    }
    /* Execute with the cross-stage dependencies of schedule.h: every stage must finish. */
    int nvs = p * v;
    char *fdone = calloc((size_t)nvs * m, 1), *bdone = calloc((size_t)nvs * m, 1);
    int *next = calloc((size_t)p, sizeof(int));
    int remaining = total, progress = 1;
    while (remaining && progress) {
        progress = 0;
        for (int st = 0; st < p; st++)
            while (next[st] < s.count[st]) {
                pipe_action a = s.actions[st][next[st]];
                int vs = pipeline_virtual_stage(p, st, a.chunk);
                int ready = a.phase == PIPE_FORWARD ? (vs == 0 || fdone[(vs - 1) * m + a.micro_batch])
                                                    : (fdone[vs * m + a.micro_batch] &&
                                                       (vs == nvs - 1 || bdone[(vs + 1) * m + a.micro_batch]));
                if (!ready)
                    break;
                (a.phase == PIPE_FORWARD ? fdone : bdone)[vs * m + a.micro_batch] = 1;
                next[st]++;
                remaining--;
                progress = 1;
            }
    }
    if (remaining)
        fail_msg("%s p=%d m=%d v=%d deadlocks with %d actions left", pipeline_kind_name(kind), p, m, v, remaining);
    /* Activations in flight: GPipe holds all m; 1F1B at most p - s on stage s. */
    for (int st = 0; st < p; st++) {
        int peak = pipeline_schedule_peak_in_flight(&s, st);
        if (kind == PIPELINE_GPIPE)
            assert_int_equal(peak, m);
        else if (kind == PIPELINE_1F1B)
            assert_int_equal(peak, (p - st) < m ? (p - st) : m);
        else
            assert_true(peak <= (p - st - 1) * 2 + (v - 1) * p + 1);
    }
    free(fdone);
    free(bdone);
    free(next);
    pipeline_schedule_free(&s);
}

static void schedules_are_complete_ordered_and_deadlock_free(void **state)
{
    int ps[] = {1, 2, 3, 4, 8}, ms[] = {1, 2, 4, 8, 12, 16};
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 6; j++) {
            check_schedule(PIPELINE_GPIPE, ps[i], ms[j], 1);
            check_schedule(PIPELINE_1F1B, ps[i], ms[j], 1);
            if (ms[j] % ps[i] == 0 && ps[i] > 1) {
                check_schedule(PIPELINE_INTERLEAVED, ps[i], ms[j], 2);
                check_schedule(PIPELINE_INTERLEAVED, ps[i], ms[j], 3);
            }
        }
    /* stage 0 of 1F1B holds at most p micro-batches */
    pipeline_schedule s;
    char err[256];
    assert_int_equal(pipeline_schedule_build(&s, PIPELINE_1F1B, 4, 16, 1, err, sizeof err), 0);
    assert_int_equal(pipeline_schedule_peak_in_flight(&s, 0), 4);
    pipeline_schedule_free(&s);
}

static void invalid_schedules_are_refused(void **state)
{
    pipeline_schedule s;
    char err[256];
    assert_int_not_equal(pipeline_schedule_build(&s, PIPELINE_INTERLEAVED, 4, 6, 2, err, sizeof err), 0);
    assert_non_null(strstr(err, "multiple"));
    assert_int_not_equal(pipeline_schedule_build(&s, PIPELINE_INTERLEAVED, 4, 8, 1, err, sizeof err), 0);
    assert_int_not_equal(pipeline_schedule_build(&s, PIPELINE_1F1B, 4, 8, 2, err, sizeof err), 0);
    assert_int_not_equal(pipeline_schedule_build(&s, PIPELINE_1F1B, 0, 8, 1, err, sizeof err), 0);
    assert_int_equal(pipeline_kind_from_name("zigzag"), -1);
    assert_int_equal(pipeline_kind_from_name("interleaved"), PIPELINE_INTERLEAVED);
}

static void layer_splits(void **state)
{
    int out[16];
    char err[256];
    assert_int_equal(pipeline_layer_split(24, 4, 2, NULL, out, err, sizeof err), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(out[i], 3);
    int uneven[4] = {5, 7, 7, 5};
    assert_int_equal(pipeline_layer_split(24, 4, 2, uneven, out, err, sizeof err), 0);
    /* stage 1 has 7 layers over 2 chunks: chunk 0 (virtual stage 1) gets 4, chunk 1 (virtual 5) gets 3 */
    assert_int_equal(out[1], 4);
    assert_int_equal(out[5], 3);
    assert_int_not_equal(pipeline_layer_split(25, 4, 1, NULL, out, err, sizeof err), 0);
    int bad[4] = {5, 7, 7, 6};
    assert_int_not_equal(pipeline_layer_split(24, 4, 1, bad, out, err, sizeof err), 0);
}

static layer_shape shape(int tp, int sp, long long g, int swiglu, attention_impl att)
{
    layer_shape sh = {2, 2048, 4096, 32, g, 11008, swiglu, 0, 0, tp, 1, 1, sp, att, 2};
    return sh;
}

static double sum_flops(const layer_op *ops, int n)
{
    double f = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].kind != OPK_COMM)
            f += ops[i].flops;
    return f;
}

static void op_list_flops_match_the_closed_form(void **state)
{
    long long groups[] = {32, 8};
    for (int gi = 0; gi < 2; gi++)
        for (int sw = 0; sw < 2; sw++)
            for (int att = 0; att < 2; att++) {
                layer_shape one = shape(1, 0, groups[gi], sw, (attention_impl)att);
                double s = 2048, h = 4096, f = 11008, kv = h * groups[gi] / 32;
                double per_seq = 2 * s * (h * (h + 2 * kv) + h * h + (sw ? 3 : 2) * h * f) + 4 * s * s * h;
                assert_true(fabs(layer_forward_flops_per_sequence(&one) - per_seq) < 1e-9 * per_seq);
                layer_op ops[LAYER_OPS_MAX];
                for (int tp = 1; tp <= 8; tp *= 2) {
                    layer_shape sh = shape(tp, tp > 1, groups[gi], sw, (attention_impl)att);
                    int n = layer_ops_forward(&sh, ops);
                    double fwd = sum_flops(ops, n);
                    assert_true(fabs(fwd - 2 * per_seq / tp) < 1e-9 * fwd); /* micro-batch 2, split by TP */
                    n = layer_ops_backward(&sh, ops);
                    assert_true(fabs(sum_flops(ops, n) - 2 * fwd) < 1e-9 * fwd);
                }
            }
}

static void tp_communication_per_layer(void **state)
{
    layer_op ops[LAYER_OPS_MAX];
    int count[COLL_KIND_COUNT];
    for (int sp = 0; sp < 2; sp++)
        for (int tp = 1; tp <= 4; tp *= 4) {
            layer_shape sh = shape(tp, sp, 32, 0, ATTENTION_UNFUSED);
            memset(count, 0, sizeof count);
            int n = layer_ops_forward(&sh, ops);
            for (int i = 0; i < n; i++)
                if (ops[i].kind == OPK_COMM) {
                    count[ops[i].coll]++;
                    assert_true(ops[i].bytes == 2.0 * 2048 * 4096 * 2); /* b*s*h*act */
                }
            if (tp == 1) {
                assert_int_equal(count[COLL_ALL_REDUCE] + count[COLL_ALL_GATHER] + count[COLL_REDUCE_SCATTER], 0);
            } else if (sp) {
                assert_int_equal(count[COLL_ALL_GATHER], 2);
                assert_int_equal(count[COLL_REDUCE_SCATTER], 2);
            } else {
                assert_int_equal(count[COLL_ALL_REDUCE], 2);
            }
            memset(count, 0, sizeof count);
            n = layer_ops_backward(&sh, ops);
            for (int i = 0; i < n; i++)
                if (ops[i].kind == OPK_COMM)
                    count[ops[i].coll]++;
            if (tp > 1 && !sp)
                assert_int_equal(count[COLL_ALL_REDUCE], 2);
            if (tp > 1 && sp)
                assert_int_equal(count[COLL_ALL_GATHER] + count[COLL_REDUCE_SCATTER], 4);
        }
}

static void zero_paper_example(void **state)
{
    /* Rajbhandari et al. 2020, Figure 1: 7.5B parameters, 64-way data parallel, mixed-precision
     * Adam (K = 12): DDP 120 GB, ZeRO-1 31.4 GB, ZeRO-2 16.6 GB, ZeRO-3 1.9 GB per GPU. */
    double expect[4] = {120, 31.4, 16.6, 1.9};
    for (int z = 0; z < 4; z++) {
        memory_breakdown m;
        memory_model_states(7.5e9, 64, z, PREC_FP16, OPTIMIZER_ADAM, &m);
        double gb = m.total / 1e9;
        if (fabs(gb - expect[z]) > 0.02 * expect[z])
            fail_msg("ZeRO-%d: %.2f GB, paper %.1f GB", z, gb, expect[z]);
    }
}

static void korthikanti_activation_formulas(void **state)
{
    /* GPT-3 175B layer (s 2048, h 12288, a 96, b 1), 16-bit activations:
     * no parallelism: sbh(34 + 5as/h); TP t with SP: sbh/t (34 + 5as/h);
     * TP without SP: sbh(10 + 24/t + 5as/(ht)); selective recompute drops the 5as/h term;
     * full recompute keeps 2sbh. (Korthikanti et al. 2022, Table 2.) */
    scenario_config s;
    memset(&s, 0, sizeof s);
    s.model.hidden_size = 12288;
    s.model.num_attention_heads = 96;
    s.model.num_query_groups = 96;
    s.model.ffn_hidden_size = 4 * 12288;
    s.model.seq_length = 2048;
    s.training.micro_batch_size = 1;
    s.training.precision = PREC_BF16;
    s.parallel.cp = 1;
    double sbh = 2048.0 * 12288, as_h = 96.0 * 2048 / 12288;
    struct { int tp, sp; recompute_kind r; double expect; } cases[] = {
        {1, 0, RECOMPUTE_NONE, sbh * (34 + 5 * as_h)},
        {8, 1, RECOMPUTE_NONE, sbh / 8 * (34 + 5 * as_h)},
        {8, 0, RECOMPUTE_NONE, sbh * (10 + 24.0 / 8 + 5 * as_h / 8)},
        {8, 1, RECOMPUTE_SELECTIVE, sbh / 8 * 34},
        {8, 0, RECOMPUTE_SELECTIVE, sbh * (10 + 24.0 / 8)},
        {8, 1, RECOMPUTE_FULL, 2 * sbh / 8},
        {1, 0, RECOMPUTE_FULL, 2 * sbh},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s.parallel.tp = cases[i].tp;
        s.parallel.sequence_parallel = cases[i].sp;
        s.training.recompute = cases[i].r;
        double got = memory_layer_activations(&s);
        if (fabs(got - cases[i].expect) > 1e-9 * cases[i].expect)
            fail_msg("case %zu: %.6g bytes, formula %.6g", i, got, cases[i].expect);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(schedules_are_complete_ordered_and_deadlock_free),
        cmocka_unit_test(invalid_schedules_are_refused),
        cmocka_unit_test(layer_splits),
        cmocka_unit_test(op_list_flops_match_the_closed_form),
        cmocka_unit_test(tp_communication_per_layer),
        cmocka_unit_test(zero_paper_example),
        cmocka_unit_test(korthikanti_activation_formulas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
