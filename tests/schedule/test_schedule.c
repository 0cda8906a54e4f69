/* Pipeline schedules: counts, order, cross-stage consistency (an execution with the
 * dependencies of schedule.h finishes: no deadlock), activations in flight, the bubble of a
 * unit-time execution against the closed forms of DESIGN.md, hand-derived orders from the
 * papers, layer splits and refusals. */
#include <math.h>
#include <stdio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "schedule.h"

/* Executes a schedule with forward time tf and backward time tb per chunk and no
 * communication cost: an action starts when its stage is free and its dependencies
 * (schedule.h) are done. Returns the makespan, or -1 on a deadlock. busy[st] (may be NULL)
 * receives each stage's compute time. */
static double execute(const pipeline_schedule *s, double tf, double tb, double *busy)
{
    int p = s->stages, m = s->micro_batches, nvs = p * s->chunks;
    double *fend = malloc(sizeof(double) * (size_t)nvs * m), *bend = malloc(sizeof(double) * (size_t)nvs * m);
    double *free_at = calloc((size_t)p, sizeof(double));
    int *next = calloc((size_t)p, sizeof(int));
    for (int i = 0; i < nvs * m; i++)
        fend[i] = bend[i] = -1;
    int remaining = 0;
    for (int st = 0; st < p; st++) {
        remaining += s->count[st];
        if (busy)
            busy[st] = 0;
    }
    int progress = 1;
    while (remaining && progress) {
        progress = 0;
        for (int st = 0; st < p; st++)
            while (next[st] < s->count[st]) {
                pipe_action a = s->actions[st][next[st]];
                int vs = pipeline_virtual_stage(p, st, a.chunk);
                double dep;
                if (a.phase == PIPE_FORWARD) {
                    dep = vs == 0 ? 0 : fend[(vs - 1) * m + a.micro_batch];
                } else {
                    double own = fend[vs * m + a.micro_batch];
                    double next_vs = vs == nvs - 1 ? 0 : bend[(vs + 1) * m + a.micro_batch];
                    dep = (own < 0 || next_vs < 0) ? -1 : (own > next_vs ? own : next_vs);
                }
                if (dep < 0)
                    break; /* waits for another stage */
                double start = dep > free_at[st] ? dep : free_at[st];
                double d = a.phase == PIPE_FORWARD ? tf : tb;
                free_at[st] = start + d;
                if (busy)
                    busy[st] += d;
                (a.phase == PIPE_FORWARD ? fend : bend)[vs * m + a.micro_batch] = start + d;
                next[st]++;
                remaining--;
                progress = 1;
            }
    }
    double makespan = -1;
    if (!remaining)
        for (int st = 0; st < p; st++)
            if (free_at[st] > makespan)
                makespan = free_at[st];
    free(fend);
    free(bend);
    free(free_at);
    free(next);
    return makespan;
}

static void check_schedule(pipeline_kind kind, int p, int m, int v)
{
    pipeline_schedule s;
    char err[256];
    if (pipeline_schedule_build(&s, kind, p, m, v, err, sizeof err) != 0)
        fail_msg("%s p=%d m=%d v=%d refused: %s", pipeline_kind_name(kind), p, m, v, err);
    assert_int_equal(s.stages, p);
    assert_int_equal(s.micro_batches, m);
    assert_int_equal(s.chunks, v);
    for (int st = 0; st < p; st++) {
        assert_int_equal(s.count[st], 2 * m * v);
        /* each (mb, chunk) forward once and backward once, forward first */
        int *fwd_at = malloc(sizeof(int) * (size_t)m * v), *bwd_at = malloc(sizeof(int) * (size_t)m * v);
        for (int i = 0; i < m * v; i++)
            fwd_at[i] = bwd_at[i] = -1;
        for (int i = 0; i < s.count[st]; i++) {
            pipe_action a = s.actions[st][i];
            assert_true(a.micro_batch >= 0 && a.micro_batch < m && a.chunk >= 0 && a.chunk < v);
            int *slot = a.phase == PIPE_FORWARD ? &fwd_at[a.micro_batch * v + a.chunk]
                                                : &bwd_at[a.micro_batch * v + a.chunk];
            assert_int_equal(*slot, -1);
            *slot = i;
        }
        for (int i = 0; i < m * v; i++)
            assert_true(fwd_at[i] >= 0 && bwd_at[i] > fwd_at[i]);
        free(fwd_at);
        free(bwd_at);
    }

    /* Globally consistent orders: the execution finishes. */
    double busy[64];
    double T = execute(&s, 1.0 / v, 2.0 / v, busy);
    if (T < 0)
        fail_msg("%s p=%d m=%d v=%d deadlocks", pipeline_kind_name(kind), p, m, v);

    /* Bubble with forward 1, backward 2 per micro-batch (each chunk 1/v of it), no comm:
     * (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v*m+p-1) interleaved (DESIGN.md, Metrics). */
    double expect = kind == PIPELINE_INTERLEAVED ? (p - 1.0) / (v * m + p - 1.0) : (p - 1.0) / (m + p - 1.0);
    for (int st = 0; st < p; st++) {
        assert_true(fabs(busy[st] - 3.0 * m) < 1e-9 * m);
        double bubble = (T - busy[st]) / T;
        if (fabs(bubble - expect) > 1e-9)
            fail_msg("%s p=%d m=%d v=%d stage %d: bubble %.6f, closed form %.6f", pipeline_kind_name(kind), p, m, v,
                     st, bubble, expect);
    }

    /* Activations in flight: GPipe holds all m; 1F1B p - s (at most m); interleaved its
     * warm-up + 1 (Megatron-LM's max_outstanding_backprops), at most m*v. */
    for (int st = 0; st < p; st++) {
        int peak = pipeline_schedule_peak_in_flight(&s, st), want;
        if (kind == PIPELINE_GPIPE) {
            want = m;
        } else if (kind == PIPELINE_1F1B) {
            want = p - st < m ? p - st : m;
        } else {
            want = 2 * (p - st - 1) + (v - 1) * p + 1;
            if (want > m * v)
                want = m * v;
        }
        if (peak != want)
            fail_msg("%s p=%d m=%d v=%d stage %d: peak %d, expected %d", pipeline_kind_name(kind), p, m, v, st, peak,
                     want);
    }
    pipeline_schedule_free(&s);
}

static void schedules_are_complete_consistent_and_have_the_closed_form_bubble(void **state)
{
    int ps[] = {1, 2, 3, 4, 8}, ms[] = {1, 2, 3, 4, 8, 12, 16, 24, 32};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        for (size_t j = 0; j < sizeof ms / sizeof ms[0]; j++) {
            check_schedule(PIPELINE_GPIPE, ps[i], ms[j], 1);
            check_schedule(PIPELINE_1F1B, ps[i], ms[j], 1);
            if (ms[j] % ps[i] == 0)
                for (int v = 2; v <= 4; v++)
                    check_schedule(PIPELINE_INTERLEAVED, ps[i], ms[j], v);
        }
    check_schedule(PIPELINE_INTERLEAVED, 16, 64, 2);
    check_schedule(PIPELINE_1F1B, 16, 5, 1);
}

/* A broken order must be caught by the executor (the test can fail). */
static void the_executor_detects_a_deadlock(void **state)
{
    pipeline_schedule s;
    char err[256];
    assert_int_equal(pipeline_schedule_build(&s, PIPELINE_1F1B, 2, 2, 1, err, sizeof err), 0);
    assert_true(execute(&s, 1, 2, NULL) > 0);
    /* stage 0: F0 B0 F1 B1, stage 1: F1 B1 F0 B0. Stage 0's B0 needs stage 1's B0, which sits
     * behind stage 1's F1, which needs stage 0's F1, which sits behind B0: a cycle. */
    pipe_action s0[4] = {{PIPE_FORWARD, 0, 0}, {PIPE_BACKWARD, 0, 0}, {PIPE_FORWARD, 1, 0}, {PIPE_BACKWARD, 1, 0}};
    pipe_action s1[4] = {{PIPE_FORWARD, 1, 0}, {PIPE_BACKWARD, 1, 0}, {PIPE_FORWARD, 0, 0}, {PIPE_BACKWARD, 0, 0}};
    memcpy(s.actions[0], s0, sizeof s0);
    memcpy(s.actions[1], s1, sizeof s1);
    assert_true(execute(&s, 1, 2, NULL) < 0);
    pipeline_schedule_free(&s);
}

static void expect_actions(const pipeline_schedule *s, int st, const char *want)
{
    /* want: "F0.0 B0.0 ..." = phase, micro-batch, chunk */
    char got[1024] = "";
    for (int i = 0; i < s->count[st]; i++) {
        char one[32];
        snprintf(one, sizeof one, "%s%c%d.%d", i ? " " : "", s->actions[st][i].phase == PIPE_FORWARD ? 'F' : 'B',
                 s->actions[st][i].micro_batch, s->actions[st][i].chunk);
        strcat(got, one);
    }
    if (strcmp(got, want))
        fail_msg("stage %d:\n  got  %s\n  want %s", st, got, want);
}

/* Orders derived by hand from the papers' figures and Megatron-LM's rules. */
static void orders_match_hand_derived_sequences(void **state)
{
    pipeline_schedule s;
    char err[256];
    /* 1F1B, p=4, m=8 (Narayanan et al. SC'21, Fig. 4 top): stage 0 warms up with 3
     * forwards; the last stage alternates from the start. */
    assert_int_equal(pipeline_schedule_build(&s, PIPELINE_1F1B, 4, 8, 1, err, sizeof err), 0);
    expect_actions(&s, 0, "F0.0 F1.0 F2.0 F3.0 B0.0 F4.0 B1.0 F5.0 B2.0 F6.0 B3.0 F7.0 B4.0 B5.0 B6.0 B7.0");
    expect_actions(&s, 3, "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 F3.0 B3.0 F4.0 B4.0 F5.0 B5.0 F6.0 B6.0 F7.0 B7.0");
    pipeline_schedule_free(&s);
    /* GPipe, p=2, m=3: all forwards, then all backwards. */
    assert_int_equal(pipeline_schedule_build(&s, PIPELINE_GPIPE, 2, 3, 1, err, sizeof err), 0);
    expect_actions(&s, 1, "F0.0 F1.0 F2.0 B0.0 B1.0 B2.0");
    pipeline_schedule_free(&s);
    /* Interleaved, p=2, v=2, m=4. Stage 1 warms up with (v-1)p = 2 forwards of chunk 0, then
     * alternates; micro-batches go through each chunk in groups of p = 2; backwards start
     * with the last chunk. Stage 0 warms up with 2 + 2 = 4. */
    assert_int_equal(pipeline_schedule_build(&s, PIPELINE_INTERLEAVED, 2, 4, 2, err, sizeof err), 0);
    expect_actions(&s, 1, "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
    expect_actions(&s, 0, "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
    pipeline_schedule_free(&s);
}

static void peak_in_flight_counts_live_forwards(void **state)
{
    pipeline_schedule s;
    char err[256];
    /* 1F1B p=4, m=16: stage 0 holds p = 4 micro-batches, the last stage 1; GPipe holds m. */
    assert_int_equal(pipeline_schedule_build(&s, PIPELINE_1F1B, 4, 16, 1, err, sizeof err), 0);
    assert_int_equal(pipeline_schedule_peak_in_flight(&s, 0), 4);
    assert_int_equal(pipeline_schedule_peak_in_flight(&s, 3), 1);
    pipeline_schedule_free(&s);
    assert_int_equal(pipeline_schedule_build(&s, PIPELINE_GPIPE, 4, 16, 1, err, sizeof err), 0);
    assert_int_equal(pipeline_schedule_peak_in_flight(&s, 0), 16);
    assert_int_equal(pipeline_schedule_peak_in_flight(&s, 3), 16);
    pipeline_schedule_free(&s);
    /* Interleaved p=4, v=2, m=8: stage 0 warms up with 2*3 + 4 = 10, holds 11 pairs
     * (= 5.5 micro-batches of full-stage activations, more than 1F1B's 4: the known memory
     * cost of interleaving). */
    assert_int_equal(pipeline_schedule_build(&s, PIPELINE_INTERLEAVED, 4, 8, 2, err, sizeof err), 0);
    assert_int_equal(pipeline_schedule_peak_in_flight(&s, 0), 11);
    assert_int_equal(pipeline_schedule_peak_in_flight(&s, 3), 5);
    pipeline_schedule_free(&s);
}

static void invalid_schedules_are_refused(void **state)
{
    pipeline_schedule s;
    char err[256];
    err[0] = 0;
    assert_int_equal(pipeline_schedule_build(&s, PIPELINE_INTERLEAVED, 4, 6, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "multiple"));
    assert_int_equal(pipeline_schedule_build(&s, PIPELINE_INTERLEAVED, 4, 8, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "2 model chunks"));
    assert_int_equal(pipeline_schedule_build(&s, PIPELINE_1F1B, 4, 8, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "interleaved"));
    assert_int_equal(pipeline_schedule_build(&s, PIPELINE_GPIPE, 4, 8, 3, err, sizeof err), -1);
    assert_int_equal(pipeline_schedule_build(&s, PIPELINE_1F1B, 0, 8, 1, err, sizeof err), -1);
    assert_int_equal(pipeline_schedule_build(&s, PIPELINE_1F1B, 4, 0, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "micro-batches"));
    assert_int_equal(pipeline_schedule_build(&s, (pipeline_kind)7, 4, 8, 1, err, sizeof err), -1);
    /* a refused build leaves nothing to free, and freeing it is harmless */
    assert_null(s.actions);
    pipeline_schedule_free(&s);
}

static void kind_names_round_trip(void **state)
{
    assert_int_equal(pipeline_kind_from_name("gpipe"), PIPELINE_GPIPE);
    assert_int_equal(pipeline_kind_from_name("1f1b"), PIPELINE_1F1B);
    assert_int_equal(pipeline_kind_from_name("interleaved"), PIPELINE_INTERLEAVED);
    assert_int_equal(pipeline_kind_from_name("zigzag"), -1);
    assert_int_equal(pipeline_kind_from_name(""), -1);
    for (int k = 0; k < 3; k++)
        assert_int_equal(pipeline_kind_from_name(pipeline_kind_name((pipeline_kind)k)), k);
    assert_int_equal(pipeline_virtual_stage(4, 1, 2), 9);
}

static void layer_splits(void **state)
{
    int out[16];
    char err[256];
    assert_int_equal(pipeline_layer_split(24, 4, 2, NULL, out, err, sizeof err), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(out[i], 3);
    assert_int_equal(pipeline_layer_split(24, 4, 1, NULL, out, err, sizeof err), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(out[i], 6);
    /* uneven, like Llama 3's lighter first and last stages */
    int uneven[4] = {5, 7, 7, 5};
    assert_int_equal(pipeline_layer_split(24, 4, 2, uneven, out, err, sizeof err), 0);
    /* stage 1 has 7 layers over 2 chunks: chunk 0 (virtual stage 1) gets 4, chunk 1 (virtual 5) gets 3 */
    assert_int_equal(out[1], 4);
    assert_int_equal(out[5], 3);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[4], 2);
    int sum = 0;
    for (int i = 0; i < 8; i++)
        sum += out[i];
    assert_int_equal(sum, 24);
    /* 10 layers on one stage, 3 chunks: 4 3 3 */
    assert_int_equal(pipeline_layer_split(10, 1, 3, NULL, out, err, sizeof err), 0);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 3);
    assert_int_equal(out[2], 3);
    /* errors */
    assert_int_equal(pipeline_layer_split(25, 4, 1, NULL, out, err, sizeof err), -1);
    assert_non_null(strstr(err, "25"));
    int bad[4] = {5, 7, 7, 6};
    assert_int_equal(pipeline_layer_split(24, 4, 1, bad, out, err, sizeof err), -1);
    assert_non_null(strstr(err, "sum"));
    int thin[4] = {1, 11, 11, 1};
    assert_int_equal(pipeline_layer_split(24, 4, 2, thin, out, err, sizeof err), -1);
    assert_int_equal(pipeline_layer_split(24, 0, 1, NULL, out, err, sizeof err), -1);
}

/* A stage's peak in flight from the schedule's shape equals the built schedule's, for every kind,
 * 1-8 stages, 1-4 chunks and 1 to 6p(v + 1) micro-batches; what the builder refuses the check
 * refuses, with the same reason. */
static void peak_in_flight_in_closed_form(void **state)
{
    (void)state;
    int checked = 0;
    for (int kind = PIPELINE_GPIPE; kind <= PIPELINE_INTERLEAVED; kind++)
        for (int p = 1; p <= 8; p++)
            for (int v = 1; v <= 4; v++)
                for (int m = 1; m <= 6 * p * (v + 1); m++) {
                    pipeline_schedule s;
                    char e1[256] = "", e2[256] = "";
                    int built = pipeline_schedule_build(&s, (pipeline_kind)kind, p, m, v, e1, sizeof e1);
                    assert_int_equal(pipeline_schedule_check((pipeline_kind)kind, p, m, v, e2, sizeof e2), built);
                    if (built != 0) {
                        assert_string_equal(e1, e2);
                        continue;
                    }
                    for (int st = 0; st < p; st++)
                        assert_int_equal(pipeline_peak_in_flight((pipeline_kind)kind, p, m, v, st),
                                         pipeline_schedule_peak_in_flight(&s, st));
                    pipeline_schedule_free(&s);
                    checked++;
                }
    assert_true(checked > 1000);
}

/* A stage's layer count without the split written out: the sum of its chunks' layers in the split,
 * and refused (with the split's reason) wherever the split is, for even and uneven splits. */
static void stage_layer_counts_agree_with_the_split(void **state)
{
    (void)state;
    int uneven[4] = {5, 7, 7, 5}, bad[4] = {5, 7, 7, 6}, thin[4] = {1, 11, 11, 1};
    const int *lists[] = {NULL, uneven, bad, thin};
    for (int li = 0; li < 4; li++)
        for (int layers = 1; layers <= 30; layers++)
            for (int stages = 1; stages <= (lists[li] ? 4 : 6); stages++)
                for (int chunks = 1; chunks <= 4; chunks++) {
                    if (lists[li] && stages != 4)
                        continue;
                    int out[64];
                    char e1[256] = "", e2[256] = "";
                    int split = pipeline_layer_split(layers, stages, chunks, lists[li], out, e1, sizeof e1);
                    for (int st = 0; st < stages; st++) {
                        int n = pipeline_stage_layer_count(layers, stages, chunks, lists[li], st, e2, sizeof e2);
                        if (split != 0) {
                            assert_int_equal(n, -1);
                            assert_string_equal(e1, e2);
                            continue;
                        }
                        int sum = 0;
                        for (int c = 0; c < chunks; c++)
                            sum += out[pipeline_virtual_stage(stages, st, c)];
                        assert_int_equal(n, sum);
                    }
                }
    char err[256];
    assert_int_equal(pipeline_stage_layer_count(24, 4, 1, NULL, 4, err, sizeof err), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(schedules_are_complete_consistent_and_have_the_closed_form_bubble),
        cmocka_unit_test(the_executor_detects_a_deadlock),
        cmocka_unit_test(orders_match_hand_derived_sequences),
        cmocka_unit_test(peak_in_flight_counts_live_forwards),
        cmocka_unit_test(invalid_schedules_are_refused),
        cmocka_unit_test(kind_names_round_trip),
        cmocka_unit_test(layer_splits),
        cmocka_unit_test(stage_layer_counts_agree_with_the_split),
        cmocka_unit_test(peak_in_flight_in_closed_form),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
