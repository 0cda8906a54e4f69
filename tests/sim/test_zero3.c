/* ZeRO-3 as DeepSpeed's stage 3 runs it (sim/step/zero3.h): per micro-batch, every layer's
 * partitioned parameters are all-gathered in forward and again in backward (a third time under
 * full recomputation with DeepSpeed's engine; FSDP's gather serves the re-run and the backward)
 * and its gradients reduce-scattered; tensors below the persistence
 * threshold are never gathered; the prefetch depth decides how much of the gathering hides
 * behind compute, and the memory model holds the same gathered working set the workload uses. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "fixture.h"
#include "memory.h"
#include "params.h"
#include "run.h"
#include "workload.h"
#include "zero3.h"

#define REL(a, b) (fabs((a) - (b)) <= 1e-12 * fabs(b))

/* The fixture (h 1024, f 4h, MHA, 32,000-token vocabulary, learned positions) on DP 8 with
 * ZeRO-3, two micro-batches of one sequence. */
static void zero3_fixture(scenario_config *s, int layers)
{
    fixture_scenario(s, layers);
    fixture_layout(s, 1, 1, 8, 16);
    s->parallel.zero_stage = 3;
}

static void bytes_of(const scenario_config *s, double *gathered, double *reduced, int *gathers)
{
    step_workload w;
    fixture_build(s, &w);
    *gathered = *reduced = 0;
    *gathers = 0;
    for (int i = 0; i < w.n_tasks; i++) {
        if (!strcmp(w.tasks[i].name, "zero3_param_allgather")) {
            *gathered += w.tasks[i].bytes;
            (*gathers)++;
        } else if (!strcmp(w.tasks[i].name, "dp_grad_reduce_scatter")) {
            *reduced += w.tasks[i].bytes;
        }
    }
    workload_free(&w);
}

/* Written out by hand: a layer's matrices are QKV 3h^2, projection h^2, MLP 2hf, each far above
 * the 1e5-element threshold; every bias and norm is a vector of at most f = 4,096 elements,
 * kept whole. The embedding (V h + s h) is gathered where the model starts; the LM head, tied,
 * gathers the V h table again where it ends (the final norm is below the threshold). Gradients:
 * every parameter, the table once, in bf16 (DeepSpeed reduces in the model's dtype). */
static void every_micro_batch_gathers_and_reduces_each_layer(void **state)
{
    (void)state;
    scenario_config s;
    zero3_fixture(&s, 4);
    double h = 1024, f = 4096, V = 32000, T = 1024, L = 4, m = 2;
    double matrices = 4 * h * h + 2 * h * f;
    double vectors = 3 * h + h + f + h + 4 * h;
    double ends = (V * h + T * h) + V * h;
    double all = L * (matrices + vectors) + V * h + T * h + 2 * h;
    double gathered, reduced;
    int gathers;
    bytes_of(&s, &gathered, &reduced, &gathers);
    print_message("ZeRO-3, 2 micro-batches: %d gathers, %.4g B gathered, %.4g B reduce-scattered\n", gathers,
                  gathered, reduced);
    assert_int_equal(gathers, (int)(m * 2 * L));
    assert_true(REL(gathered, m * 2 * (L * matrices + ends) * 2));
    assert_true(REL(reduced, m * all * 2));
    assert_true(REL(params_layer_small_per_gpu(&s, 1e5), vectors));

    /* Full recomputation: PyTorch FSDP and Megatron-FSDP (the default engine) gather a layer once
     * for its re-run and its backward, the same bytes as without; DeepSpeed's re-run gathers each
     * layer once more (the embedding and head are not rerun). */
    s.training.recompute = RECOMPUTE_FULL;
    bytes_of(&s, &gathered, &reduced, &gathers);
    assert_int_equal(gathers, (int)(m * 2 * L));
    assert_true(REL(gathered, m * 2 * (L * matrices + ends) * 2));
    s.parallel.pipeline_engine = PIPELINE_ENGINE_DEEPSPEED;
    bytes_of(&s, &gathered, &reduced, &gathers);
    assert_int_equal(gathers, (int)(m * 3 * L));
    assert_true(REL(gathered, m * (3 * L * matrices + 2 * ends) * 2));
    s.parallel.pipeline_engine = PIPELINE_ENGINE_MEGATRON;

    s.training.recompute = RECOMPUTE_NONE;
    s.parallel.stage3_param_persistence_threshold = 0; /* every tensor partitioned */
    bytes_of(&s, &gathered, &reduced, &gathers);
    assert_true(REL(gathered, m * 2 * (L * (matrices + vectors) + ends + 2 * h) * 2));
    fixture_free(&s);
}

/* Without prefetch (stage3_prefetch_bucket_size 0) each layer waits for its own gather: all of
 * the gathering is exposed. Prefetching ahead, with compute longer than any unit's gather and
 * reduction, only each forward's first gather is (a backward ends by waiting for its reductions,
 * DeepSpeed's independent_gradient_partition_epilogue, so the next pass starts from nothing). */
static void prefetch_hides_the_gathers_behind_compute(void **state)
{
    (void)state;
    scenario_config s;
    zero3_fixture(&s, 8);
    s.model.vocab_size = 1024;           /* the ends' gathers no longer than a layer's, */
    s.parallel.reduce_bucket_size = 1e7; /* and gradients reduced about a layer at a time */
    s.parallel.stage3_prefetch_bucket_size = 0;
    run_result r = fixture_run(&s);
    print_message("no prefetch: ZeRO total %.6f s, exposed %.6f s\n", r.comm_total_s[COMM_ZERO],
                  r.comm_exposed_s[COMM_ZERO]);
    assert_true(r.comm_total_s[COMM_ZERO] > 0);
    assert_true(fabs(r.comm_exposed_s[COMM_ZERO] - r.comm_total_s[COMM_ZERO]) < 1e-9 * r.comm_total_s[COMM_ZERO]);
    double unprefetched = r.step_time_s;

    s.parallel.stage3_prefetch_bucket_size = 5e7;
    step_workload w;
    fixture_build(&s, &w);
    double first = -1, layer_compute = 0, per_layer_comm = 0;
    for (int i = 0; i < w.n_tasks; i++) {
        if (first < 0 && !strcmp(w.tasks[i].name, "zero3_param_allgather"))
            first = w.tasks[i].duration_s;
        if (!strcmp(w.tasks[i].name, "fwd") && w.tasks[i].duration_s > layer_compute)
            layer_compute = w.tasks[i].duration_s;
        if (!strcmp(w.tasks[i].name, "zero3_param_allgather") || !strcmp(w.tasks[i].name, "dp_grad_reduce_scatter"))
            per_layer_comm = fmax(per_layer_comm, w.tasks[i].duration_s);
    }
    workload_free(&w);
    print_message("largest gather or reduction %.6f s, layer forward %.6f s\n", per_layer_comm, layer_compute);
    assert_true(2 * per_layer_comm < layer_compute); /* the premise */
    r = fixture_run(&s);
    print_message("prefetch: ZeRO total %.6f s, exposed %.6f s (first gather %.6f s); step %.6f s (was %.6f s)\n",
                  r.comm_total_s[COMM_ZERO], r.comm_exposed_s[COMM_ZERO], first, r.step_time_s, unprefetched);
    /* each micro-batch's forward starts with a gather nothing was computing under: the step's
     * first, and the one after the backward epilogue, which waits for the last reductions */
    assert_true(fabs(r.comm_exposed_s[COMM_ZERO] - 2 * first) < 1e-9 * first);
    assert_true(r.step_time_s < unprefetched);
    fixture_free(&s);
}

/* The memory model holds the working set the workload gathers: the running layer and the layers
 * prefetched ahead (as many as stage3_prefetch_bucket_size holds, within
 * stage3_max_live_parameters), and the tensors below the persistence threshold whole. */
static void memory_holds_the_gathered_working_set(void **state)
{
    (void)state;
    scenario_config s;
    zero3_fixture(&s, 4);
    zero3_plan z;
    zero3_plan_of(&s, &z);
    double layer = 4.0 * 1024 * 1024 + 2.0 * 1024 * 4096; /* partitioned: the matrices */
    assert_true(REL(z.layer_params, layer));
    assert_int_equal(z.prefetch_layers, (int)ceil(5e7 / layer));
    memory_breakdown with, without;
    assert_int_equal(memory_model_stage(&s, 0, 1, &with), 0);
    s.parallel.stage3_prefetch_bucket_size = 0;
    zero3_plan_of(&s, &z);
    assert_int_equal(z.prefetch_layers, 0);
    assert_int_equal(memory_model_stage(&s, 0, 1, &without), 0);
    assert_true(REL(with.buffers - without.buffers, ceil(5e7 / layer) * layer * 2));
    s.parallel.stage3_prefetch_bucket_size = 5e7;
    s.parallel.stage3_max_live_parameters = 2 * layer; /* room for one layer ahead */
    zero3_plan_of(&s, &z);
    assert_int_equal(z.prefetch_layers, 1);
    assert_true(REL(z.live_params, 2 * layer));
    /* Full recomputation in groups of 3 (of the chunk's 4 layers): FSDP keeps a group's layers
     * gathered from their re-run to their backward, 3 layers, more than the 2 prefetching holds;
     * DeepSpeed lets each go after its re-run (prefetching's 2); block recomputation one at a time. */
    s.training.recompute = RECOMPUTE_FULL;
    s.training.recompute_num_layers = 3;
    zero3_plan_of(&s, &z);
    assert_int_equal(z.regather_rerun, 0);
    assert_true(REL(zero3_live_params(&s, &z, 4), 3 * layer));
    assert_true(REL(zero3_live_params(&s, &z, 1), 2 * layer)); /* a chunk of one layer: a group of one */
    memory_breakdown grouped;
    assert_int_equal(memory_model_stage(&s, 0, 1, &grouped), 0);
    s.training.recompute_block = 1;
    zero3_plan_of(&s, &z);
    assert_true(REL(zero3_live_params(&s, &z, 4), 2 * layer));
    assert_int_equal(memory_model_stage(&s, 0, 1, &without), 0);
    assert_true(REL(grouped.buffers - without.buffers, layer * 2)); /* one layer more, in bf16 */
    s.training.recompute_block = 0;
    s.parallel.pipeline_engine = PIPELINE_ENGINE_DEEPSPEED;
    zero3_plan_of(&s, &z);
    assert_int_equal(z.regather_rerun, 1);
    assert_true(REL(zero3_live_params(&s, &z, 4), 2 * layer));
    fixture_free(&s);
}

/* parallel.fsdp_reshard_after_forward (zero3.h), the same hand-written sizes as above. "never" on
 * one stage: a forward's gather serves its backward, so each micro-batch gathers once and still
 * reduce-scatters everything. Under pipeline parallelism ("default" = torchtitan's policy), each
 * stage gathers its layers in its first forward and reduce-scatters its gradients once, after its
 * last backward: the bytes of one step, whatever the micro-batch count; the last stage's tied LM
 * head is its own copy of the table (V h), the final norm (2 h) a vector reduced with the rest. */
static void reshard_after_forward_gathers_once(void **state)
{
    (void)state;
    scenario_config s;
    zero3_fixture(&s, 4);
    double h = 1024, f = 4096, V = 32000, T = 1024, L = 4;
    double matrices = 4 * h * h + 2 * h * f;
    double vectors = 3 * h + h + f + h + 4 * h;
    double ends = (V * h + T * h) + V * h;
    double gathered, reduced, m = 2;
    int gathers;
    run_result always = fixture_run(&s);
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_DEFAULT; /* torchtitan's: always on one stage */
    run_result policy = fixture_run(&s);
    assert_true(policy.step_time_s == always.step_time_s);
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_NEVER;
    bytes_of(&s, &gathered, &reduced, &gathers);
    print_message("never, one stage: %d gathers, %.4g B gathered, %.4g B reduce-scattered\n", gathers, gathered,
                  reduced);
    assert_int_equal(gathers, (int)(m * L));
    assert_true(REL(gathered, m * (L * matrices + ends) * 2));
    assert_true(REL(reduced, m * (L * (matrices + vectors) + V * h + T * h + 2 * h) * 2));
    run_result never = fixture_run(&s);
    /* the same calls, half of them: half the gathering time, and no step longer */
    assert_true(REL(never.comm_total_s[COMM_ZERO], always.comm_total_s[COMM_ZERO] / 2));
    assert_true(never.step_time_s <= always.step_time_s);

    /* two stages, 8 micro-batches */
    fixture_layout(&s, 1, 2, 8, 64);
    m = 8;
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_ALWAYS;
    bytes_of(&s, &gathered, &reduced, &gathers);
    assert_true(REL(gathered, m * 2 * (L * matrices + ends) * 2));
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_DEFAULT;
    bytes_of(&s, &gathered, &reduced, &gathers);
    print_message("default, two stages, %g micro-batches: %d gathers, %.4g B gathered, %.4g B reduce-scattered\n", m,
                  gathers, gathered, reduced);
    assert_int_equal(gathers, (int)L);
    assert_true(REL(gathered, (L * matrices + ends) * 2));
    assert_true(REL(reduced, (L * (matrices + vectors) + V * h + T * h + V * h + 2 * h) * 2));

    /* memory: the stage whole in bf16 while gathered, and its gradients unsharded (bf16: ZeRO-3
     * reduces in the model's dtype) on top of what always holds */
    memory_breakdown kept, resharded;
    assert_int_equal(memory_model_stage(&s, 0, 1, &kept), 0);
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_ALWAYS;
    assert_int_equal(memory_model_stage(&s, 0, 1, &resharded), 0);
    double stage0 = L / 2 * (matrices + vectors) + V * h + T * h;
    assert_true(REL(kept.gradients - resharded.gradients, stage0 * 2));
    zero3_plan z;
    zero3_plan_of(&s, &z);
    assert_true(REL(kept.buffers - resharded.buffers, (stage0 - z.live_params) * 2));
    fixture_free(&s);
}

/* DeepSpeed's stage 3 has no such switch: the pair is refused by name. */
static void reshard_after_forward_is_not_deepspeeds(void **state)
{
    (void)state;
    scenario_config s;
    zero3_fixture(&s, 4);
    config_error err = {0};
    s.parallel.pipeline_engine = PIPELINE_ENGINE_DEEPSPEED;
    assert_int_equal(scenario_validate_layout(&s, &err), 0);
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_NEVER;
    assert_int_not_equal(scenario_validate_layout(&s, &err), 0);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "fsdp_reshard_after_forward"));
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_micro_batch_gathers_and_reduces_each_layer),
        cmocka_unit_test(prefetch_hides_the_gathers_behind_compute),
        cmocka_unit_test(memory_holds_the_gathered_working_set),
        cmocka_unit_test(reshard_after_forward_gathers_once),
        cmocka_unit_test(reshard_after_forward_is_not_deepspeeds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
