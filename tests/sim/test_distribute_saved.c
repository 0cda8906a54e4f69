/* training.distribute_saved_activations (Megatron-LM's --distribute-saved-activations): under full
 * recomputation each checkpoint's kept input is split over the TP ranks in the forward and
 * all-gathered before its re-run (CheckpointFunction.backward, gather_split_1d_tensor). Counted
 * here against the step: one all-gather of the micro-batch's layer input (b s h, 2 bytes) over
 * the TP group per checkpoint and micro-batch, so the TP traffic grows by layers x micro-batches
 * such gathers (uniform groups of one layer), ceil(layers / 2) a micro-batch with groups of two
 * (3 of 5 layers: the last group is one layer), one a micro-batch when only the first layer is
 * recomputed (block); none under sequence parallelism, whose kept
 * inputs are split already (Megatron-LM turns the option off there). The gather's own time is the
 * collective model's (tests/sim/test_collective.c checks that against NCCL's measurements). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include "collective.h"
#include "fixture.h"

#define LAYERS 4
#define MICRO_BATCHES 8

/* `layers` layers, TP 2 on one node, 8 micro-batches of one sequence, full recomputation in
 * groups of `group` layers (block: only the first `group` layers of the chunk) */
static void scenario_of(scenario_config *s, int layers, int group, int block, int distribute, int sp)
{
    fixture_scenario(s, layers);
    fixture_layout(s, 2, 1, 1, MICRO_BATCHES);
    s->training.recompute = RECOMPUTE_FULL;
    s->training.recompute_num_layers = group;
    s->training.recompute_block = block;
    s->training.distribute_saved_activations = distribute;
    s->parallel.sequence_parallel = sp;
}

/* A layer's input for one micro-batch: b s h in 2-byte values */
static double input_bytes(const scenario_config *s)
{
    return (double)s->training.micro_batch_size * (double)s->model.seq_length * (double)s->model.hidden_size * 2;
}

/* TP seconds of the step with the option on, less with it off; and the activation bytes saved */
static double added_tp_of(int layers, int group, int block, int sp, double *saved_bytes)
{
    scenario_config s;
    scenario_of(&s, layers, group, block, 0, sp);
    run_result off = fixture_run_free(&s);
    scenario_of(&s, layers, group, block, 1, sp);
    run_result on = fixture_run_free(&s);
    if (saved_bytes) /* the report is in GiB */
        *saved_bytes = (off.memory.activations - on.memory.activations) * 1073741824.0;
    return on.comm_total_s[COMM_TP] - off.comm_total_s[COMM_TP];
}

static double added_tp_s(int group, int block, int sp)
{
    return added_tp_of(LAYERS, group, block, sp, NULL);
}

static double one_gather_s(void)
{
    scenario_config s;
    scenario_of(&s, LAYERS, 1, 0, 1, 0);
    double t = collective_time(&s.platform, &s.calibration, COLL_ALL_GATHER, input_bytes(&s),
                               coll_group_of(2, 1, s.platform.node.gpus)).time_s;
    fixture_free(&s);
    return t;
}

static void a_gather_per_checkpoint_and_micro_batch(void **state)
{
    (void)state;
    double g = one_gather_s();
    assert_true(g > 0);
    double uniform1 = added_tp_s(1, 0, 0), uniform2 = added_tp_s(2, 0, 0), block1 = added_tp_s(1, 1, 0);
    print_message("one gather %.3g s; added TP time: groups of 1 %.6g s, of 2 %.6g s, block of 1 %.6g s\n", g,
                  uniform1, uniform2, block1);
    assert_within(uniform1, (double)LAYERS * MICRO_BATCHES * g, 1e-9);
    assert_within(uniform2, (double)LAYERS / 2 * MICRO_BATCHES * g, 1e-9);
    assert_within(block1, (double)MICRO_BATCHES * g, 1e-9);
    /* 5 layers in groups of 2: checkpoints [0, 2), [2, 4), [4, 5) */
    assert_within(added_tp_of(5, 2, 0, 0, NULL), 3.0 * MICRO_BATCHES * g, 1e-9);
}

static void nothing_under_sequence_parallelism(void **state)
{
    (void)state;
    double saved = 1;
    assert_true(fabs(added_tp_of(LAYERS, 1, 0, 1, &saved)) < 1e-12);
    assert_true(fabs(saved) < 1e-3); /* bytes: the kept inputs were split already */
}

/* and the kept inputs shrink by TP in the memory the run reports (memory.c) */
static void the_kept_inputs_are_split(void **state)
{
    (void)state;
    scenario_config s;
    scenario_of(&s, LAYERS, 1, 0, 1, 0);
    double input = input_bytes(&s), saved = 0;
    fixture_free(&s);
    /* 1F1B on one stage: one micro-batch in flight, LAYERS kept inputs, each half of it kept,
     * but the layer being re-run holds its whole input again (gathered): LAYERS - 1 halves saved
     * at the peak */
    added_tp_of(LAYERS, 1, 0, 0, &saved);
    print_message("%.0f bytes saved\n", saved);
    assert_within(saved, (LAYERS - 1) * input / 2, 1e-9);
    /* groups of 2: two kept inputs, and the re-run group holds its first layer's whole input
     * again: one half saved; block, one layer recomputed: its half kept, then held whole again at
     * its re-run: nothing saved at the peak */
    double saved2 = 0, saved_block = 1;
    added_tp_of(LAYERS, 2, 0, 0, &saved2);
    added_tp_of(LAYERS, 1, 1, 0, &saved_block);
    assert_within(saved2, input / 2, 1e-9);
    assert_true(fabs(saved_block) < 1e-3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_gather_per_checkpoint_and_micro_batch),
        cmocka_unit_test(nothing_under_sequence_parallelism),
        cmocka_unit_test(the_kept_inputs_are_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
