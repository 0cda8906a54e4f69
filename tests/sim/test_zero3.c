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
#include "collective.h"
#include "cost.h"
#include "replay.h"
#include "run.h"
#include "workload.h"
#include "zero3.h"

#define REL(a, b) (fabs((a) - (b)) <= 1e-12 * fabs(b))

/* Written out by hand: a layer's matrices are QKV 3h^2, projection h^2, MLP 2hf, each far above
 * the 1e5-element threshold; every bias and norm is a vector of at most f = 4,096 elements,
 * kept whole. The embedding (V h + s h) is gathered where the model starts; the LM head, tied,
 * gathers the V h table again where it ends (the final norm is below the threshold). Gradients:
 * every parameter, the table once, in bf16 (DeepSpeed reduces in the model's dtype). */
static void every_micro_batch_gathers_and_reduces_each_layer(void **state)
{
    (void)state;
    scenario_config s;
    fixture_zero3(&s, 4);
    double h = 1024, f = 4096, V = 32000, T = 1024, L = 4, m = 2;
    double matrices = 4 * h * h + 2 * h * f;
    double vectors = 3 * h + h + f + h + 4 * h;
    double ends = (V * h + T * h) + V * h;
    double all = L * (matrices + vectors) + V * h + T * h + 2 * h;
    double gathered, reduced;
    int gathers;
    fixture_zero3_bytes(&s, &gathered, &reduced, &gathers);
    print_message("ZeRO-3, 2 micro-batches: %d gathers, %.4g B gathered, %.4g B reduce-scattered\n", gathers,
                  gathered, reduced);
    assert_int_equal(gathers, (int)(m * 2 * L));
    assert_true(REL(gathered, m * 2 * (L * matrices + ends) * 2));
    assert_true(REL(reduced, m * all * 2));
    assert_true(REL(params_layer_small_per_gpu(&s, 1e5), vectors));

    /* Full recomputation: PyTorch FSDP and Megatron-FSDP (the default engine) gather a layer once
     * for its re-run and its backward, the same bytes as without; DeepSpeed's re-run gathers each
     * layer once more (the embedding and head are not rerun), and lets it go after unless the
     * trace uses it again within stage3_max_reuse_distance elements: with 0, every layer is
     * gathered again for its backward; with DeepSpeed's 1e9, none of the fixture's 12.6M-element
     * layers is (its backward gathers only the embedding and the head, two pieces of four). */
    s.training.recompute = RECOMPUTE_FULL;
    fixture_zero3_bytes(&s, &gathered, &reduced, &gathers);
    assert_int_equal(gathers, (int)(m * 2 * L));
    assert_true(REL(gathered, m * 2 * (L * matrices + ends) * 2));
    s.parallel.pipeline_engine = PIPELINE_ENGINE_DEEPSPEED;
    s.parallel.stage3_max_reuse_distance = 0;
    fixture_zero3_bytes(&s, &gathered, &reduced, &gathers);
    assert_int_equal(gathers, (int)(m * 3 * L));
    assert_true(REL(gathered, m * (3 * L * matrices + 2 * ends) * 2));
    s.parallel.stage3_max_reuse_distance = 1e9;
    fixture_zero3_bytes(&s, &gathered, &reduced, &gathers);
    assert_int_equal(gathers, (int)(m * (2 * L + 2)));
    assert_true(REL(gathered, m * (2 * L * matrices + 2 * ends) * 2));
    /* the block method on the first 2 layers: the other two gather in full for their backwards
     * (the last with the head), the recomputed ones for their re-runs, and of their backwards only
     * the embedding's: 4 + 2 + 2 + 1 gathers a micro-batch, FSDP's bytes */
    long long group = s.training.recompute_num_layers;
    s.training.recompute_block = 1;
    s.training.recompute_num_layers = 2;
    fixture_zero3_bytes(&s, &gathered, &reduced, &gathers);
    assert_int_equal(gathers, (int)(m * (L + 2 + 2 + 1)));
    assert_true(REL(gathered, m * (2 * L * matrices + 2 * ends) * 2));
    s.training.recompute_block = 0;
    s.training.recompute_num_layers = group;
    s.parallel.pipeline_engine = PIPELINE_ENGINE_MEGATRON;

    s.training.recompute = RECOMPUTE_NONE;
    s.parallel.stage3_param_persistence_threshold = 0; /* every tensor partitioned */
    fixture_zero3_bytes(&s, &gathered, &reduced, &gathers);
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
    fixture_zero3(&s, 8);
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
    fixture_zero3(&s, 4);
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

/* parallel.fsdp_reshard_after_forward: FSDP2 as torchtitan runs it (zero3.h), the same hand-written
 * sizes as above. FSDP2 shards every tensor, so a layer gathers its vectors too and the head its
 * final norm (2 h); it prefetches one layer and reduce-scatters a layer in one call. On one stage
 * "always" gathers before every pass, two a micro-batch; "never" keeps a forward's gather for its
 * backward: one a micro-batch, the same calls, and the chunk with its embedding and head held
 * gathered. Both reduce-scatter every gradient each backward. */
static void fsdp2_on_one_stage(void **state)
{
    (void)state;
    scenario_config s;
    fixture_zero3(&s, 4);
    double h = 1024, f = 4096, V = 32000, T = 1024, L = 4, m = 2;
    double layer = 4 * h * h + 2 * h * f + 3 * h + h + f + h + 4 * h; /* matrices and vectors */
    double ends = (V * h + T * h) + (V * h + 2 * h);
    double all = L * layer + V * h + T * h + 2 * h;
    double gathered, reduced;
    int gathers;
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_ALWAYS;
    fixture_zero3_bytes(&s, &gathered, &reduced, &gathers);
    assert_int_equal(gathers, (int)(m * 2 * L));
    assert_true(REL(gathered, m * 2 * (L * layer + ends) * 2));
    assert_true(REL(reduced, m * all * 2));
    /* RMSNorm has a weight and no bias: each layer's two norms are h smaller each, and so is the
     * final norm the head gathers (h, not LayerNorm's 2 h) */
    s.model.rmsnorm = 1;
    double rms_gathered, rms_reduced;
    fixture_zero3_bytes(&s, &rms_gathered, &rms_reduced, &gathers);
    assert_true(REL(gathered - rms_gathered, m * 2 * (L * 2 * h + h) * 2));
    assert_true(REL(reduced - rms_reduced, m * (L * 2 * h + h) * 2));
    s.model.rmsnorm = 0;
    run_result always = fixture_run(&s);
    memory_breakdown resharded, kept;
    assert_int_equal(memory_model_stage(&s, 0, 1, &resharded), 0);
    zero3_plan z;
    zero3_plan_of(&s, &z);
    assert_int_equal(z.prefetch_layers, 1);
    assert_true(REL(z.live_params, 2 * layer));
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_DEFAULT; /* torchtitan's: always on one stage */
    assert_true(fixture_run(&s).step_time_s == always.step_time_s);

    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_NEVER;
    fixture_zero3_bytes(&s, &gathered, &reduced, &gathers);
    print_message("never, one stage: %d gathers, %.4g B gathered, %.4g B reduce-scattered\n", gathers, gathered,
                  reduced);
    assert_int_equal(gathers, (int)(m * L));
    assert_true(REL(gathered, m * (L * layer + ends) * 2));
    assert_true(REL(reduced, m * all * 2));
    run_result never = fixture_run(&s);
    assert_true(REL(never.comm_total_s[COMM_ZERO], always.comm_total_s[COMM_ZERO] / 2));
    assert_true(never.step_time_s <= always.step_time_s);
    /* held from the forward to the backward: every layer in place of the two live, the embedding
     * (V h + T h; the tied head is the same table) and the final norm (2 h), in bf16 */
    assert_int_equal(memory_model_stage(&s, 0, 1, &kept), 0);
    assert_true(REL(kept.buffers - resharded.buffers, ((L - 2) * layer + V * h + T * h + 2 * h) * 2));
    assert_true(REL(kept.gradients, resharded.gradients) && REL(kept.weights, resharded.weights));
    fixture_free(&s);
}

/* Under pipeline parallelism (two stages of two layers, 8 micro-batches, 1F1B) PyTorch's
 * pipelining keeps the layers after every backward and reduces once a step, after each chunk's
 * last backward. "never" ("default" under PP): each stage gathers in its first forward only.
 * "always": a forward lets them go, so the passes that follow a forward gather, and so do the
 * forwards before a stage's first backward: the P - s forwards before it (s the stage's index) and
 * the m backwards but the P - s - 1 of the cool-down that follow a backward, m + 1 passes a
 * stage. Either way the gradients are reduced once: every parameter, the last stage's tied head
 * its own copy of the table (V h), in bf16. Each backward but a chunk's first adds its bf16
 * gradients into the accumulated ones (read both, write one: 6 bytes a parameter). */
static void fsdp2_under_pipeline_parallelism(void **state)
{
    (void)state;
    scenario_config s;
    fixture_zero3(&s, 4);
    fixture_layout(&s, 1, 2, 8, 64);
    double h = 1024, f = 4096, V = 32000, T = 1024, L = 4, m = 8;
    double layer = 4 * h * h + 2 * h * f + 3 * h + h + f + h + 4 * h;
    double stage_params[2] = {2 * layer + V * h + T * h, 2 * layer + V * h + 2 * h};
    double reduced_once = (stage_params[0] + stage_params[1]) * 2;
    double gathered, reduced;
    int gathers;
    double megatron_bwd[2], bwd[2];
    int bwd_tasks[2];
    fixture_pass_s_by_stage(&s, "bwd", megatron_bwd, bwd_tasks); /* unset: Megatron-FSDP's rule */

    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_DEFAULT;
    fixture_zero3_bytes(&s, &gathered, &reduced, &gathers);
    print_message("default, two stages: %d gathers, %.4g B gathered, %.4g B reduce-scattered\n", gathers, gathered,
                  reduced);
    assert_int_equal(gathers, (int)L);
    assert_true(REL(gathered, (stage_params[0] + stage_params[1]) * 2));
    assert_true(REL(reduced, reduced_once));
    /* no backward is cut into layers (nothing goes out during one), and each carries the
     * accumulation but a chunk's first */
    fixture_pass_s_by_stage(&s, "bwd", bwd, bwd_tasks);
    cost_model cm;
    cost_model_init(&cm, &s);
    for (int p = 0; p < 2; p++) {
        assert_int_equal(bwd_tasks[p], (int)m);
        double added = (m - 1) * cost_memory_s(&cm, OPCLASS_ELEMENTWISE, 6 * stage_params[p]);
        assert_true(fabs(bwd[p] - megatron_bwd[p] - added) < 1e-9 * bwd[p]);
    }

    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_ALWAYS;
    fixture_zero3_bytes(&s, &gathered, &reduced, &gathers);
    print_message("always, two stages: %d gathers, %.4g B gathered, %.4g B reduce-scattered\n", gathers, gathered,
                  reduced);
    assert_int_equal(gathers, (int)(2 * (m + 1) * 2));
    assert_true(REL(gathered, (m + 1) * (stage_params[0] + stage_params[1]) * 2));
    assert_true(REL(reduced, reduced_once));

    /* memory against Megatron-FSDP's rule on stage 0: the stage whole in bf16 in place of the
     * gathered working set, its gradients unsharded in bf16 (ZeRO-3 reduces in the model's dtype),
     * two layers' reduce-scatter input in flight in place of the stage's (DeepSpeed's 5e8-element
     * buckets hold it), and no persistent vectors beside the shards (FSDP2 shards them) */
    memory_breakdown kept, megatron;
    assert_int_equal(memory_model_stage(&s, 0, 1, &kept), 0);
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_UNSET;
    assert_int_equal(memory_model_stage(&s, 0, 1, &megatron), 0);
    zero3_plan z;
    zero3_plan_of(&s, &z);
    double vectors = 3 * h + h + f + h + 4 * h;
    assert_true(REL(kept.gradients - megatron.gradients, stage_params[0] * 2));
    assert_true(REL(kept.buffers - megatron.buffers,
                    (stage_params[0] - z.live_params) * 2 + 2 * layer * 2 - stage_params[0] * 2));
    assert_true(REL(megatron.weights - kept.weights, 2 * vectors * 2 * (1 - 1.0 / 8)));
    fixture_free(&s);
}

/* Interleaved (two stages, two chunks of one layer each, 4 micro-batches): each chunk gathers in
 * its first forward under "default" (4 gathers), in m + 1 passes under "always" (P V (m + 1)).
 * With the gradients reduced in fp32 a chunk's first backward casts its bf16 gradients (2 + 4
 * bytes a parameter) and the later ones add into them (2 + 4 + 4); the embedding goes with
 * virtual stage 0, the head's table copy and the final norm with the last. A chunk's reductions
 * end before its stage's next pass starts (FSDP's final callback waits for them). */
static void fsdp2_interleaved(void **state)
{
    (void)state;
    scenario_config s;
    fixture_zero3(&s, 4);
    fixture_layout(&s, 1, 2, 8, 32);
    s.parallel.vpp = 2;
    s.parallel.schedule = PIPELINE_INTERLEAVED;
    s.parallel.grad_reduce_bytes = 4; /* grad_reduce_dtype fp32, as torchtitan reduces */
    double h = 1024, f = 4096, V = 32000, T = 1024, m = 4;
    double layer = 4 * h * h + 2 * h * f + 3 * h + h + f + h + 4 * h;
    double gathered, reduced;
    int gathers;
    double megatron_bwd[2], bwd[2];
    int bwd_tasks[2];
    fixture_pass_s_by_stage(&s, "bwd", megatron_bwd, bwd_tasks);
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_ALWAYS;
    fixture_zero3_bytes(&s, &gathered, &reduced, &gathers);
    assert_int_equal(gathers, (int)(2 * 2 * (m + 1)));
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_DEFAULT;
    fixture_zero3_bytes(&s, &gathered, &reduced, &gathers);
    assert_int_equal(gathers, 4);
    assert_true(REL(reduced, (4 * layer + V * h + T * h + V * h + 2 * h) * 4));
    fixture_pass_s_by_stage(&s, "bwd", bwd, bwd_tasks);

    step_workload w;
    fixture_build(&s, &w);
    replay_times t;
    fixture_replay_analytic(&w, &t);
    cost_model cm;
    cost_model_init(&cm, &s);
    for (int p = 0; p < 2; p++) {
        double added = 0;
        for (int c = 0; c < 2; c++) {
            int vs = c * 2 + p;
            double params = layer + (vs == 0 ? V * h + T * h : 0) + (vs == 3 ? V * h + 2 * h : 0);
            added += cost_memory_s(&cm, OPCLASS_ELEMENTWISE, 6 * params) +
                     (m - 1) * cost_memory_s(&cm, OPCLASS_ELEMENTWISE, 10 * params);
        }
        /* after each chunk's last backward: its reduce-scatters, then the stage's next pass */
        double reduced_by = -1;
        int checked = 0;
        for (int i = 0; i < w.n_tasks; i++) {
            const sim_task *k = &w.tasks[i];
            if (k->stage != p)
                continue;
            if (!strcmp(k->name, "dp_grad_reduce_scatter"))
                reduced_by = fmax(reduced_by, t.finish[i]);
            else if (k->kind == TASK_COMPUTE && k->lane == LANE_COMPUTE && reduced_by >= 0 &&
                     (!strcmp(k->name, "bwd") || !strcmp(k->name, "fwd"))) {
                assert_true(t.start[i] >= reduced_by - 1e-12);
                reduced_by = -1;
                checked++;
            }
        }
        print_message("stage %d: backward %.6f s, Megatron-FSDP's %.6f s, %d passes after a reduction\n", p, bwd[p],
                      megatron_bwd[p], checked);
        assert_true(checked >= 1);
        assert_true(fabs(bwd[p] - megatron_bwd[p] - added) < 1e-9 * bwd[p]);
    }
    replay_times_free(&t);
    workload_free(&w);
    fixture_free(&s);
}

/* The key is FSDP2's: with DeepSpeed's engine or ZeRO-Infinity's offload it is refused by name. */
static void fsdp2_key_is_refused_where_it_cannot_run(void **state)
{
    (void)state;
    scenario_config s;
    fixture_zero3(&s, 4);
    config_error err = {0};
    s.parallel.pipeline_engine = PIPELINE_ENGINE_DEEPSPEED;
    assert_int_equal(scenario_validate_layout(&s, &err), 0);
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_ALWAYS;
    assert_int_not_equal(scenario_validate_layout(&s, &err), 0);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "fsdp_reshard_after_forward"));
    /* nor with parameters offloaded, which dtsim runs as ZeRO-Infinity does */
    s.parallel.pipeline_engine = PIPELINE_ENGINE_MEGATRON;
    s.parallel.offload_optimizer = s.parallel.offload_parameters = OFFLOAD_CPU;
    assert_int_not_equal(scenario_validate_layout(&s, &err), 0);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "offload_parameters"));
    fixture_free(&s);
}

/* parallel.framework megatron: Megatron-FSDP's own rule (zero3.c), written out from its code: every
 * tensor sharded (the layer's norms and biases gathered too), one bucket of gradients a layer, and
 * a gather prefetching the next layers until they hold max(5e8, P) elements, P a layer's, within
 * its model chunk: on 32 layers 40 of the fixture's 12.6M-element layers (dtsim's cap: 16), 3 of a
 * 201M one, 1 of an 805M one and of a 3.2G one; on a 4-layer chunk the chunk's 3 others at most.
 * The unset rule, DeepSpeed's knobs, prefetches ceil(5e7 / P) layers within max_live_parameters
 * 1e9 counted tensor by tensor, as DeepSpeed's coordinator counts them: 4, 1, 1 (its largest
 * tensor, 268M, leaves room for the next one: whole layers counted had said 0) and 0 (a 1.07G
 * tensor alone passes 1e9), holding at most max_live (or the running layer, if larger) and the
 * tensor that crossed it. */
static void megatron_fsdp_prefetches_by_its_size(void **state)
{
    (void)state;
    static const struct {
        long long h, f;
        int layers, megatron_ahead, deepspeed_ahead;
    } sizes[] = {{1024, 4096, 32, 16, 4}, {4096, 16384, 32, 3, 1}, {8192, 32768, 32, 1, 1},
                 {16384, 65536, 32, 1, 0}, {1024, 4096, 4, 3, 4}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        scenario_config s;
        fixture_zero3(&s, sizes[i].layers);
        fixture_model(&s, sizes[i].layers, sizes[i].h, 16, sizes[i].f);
        double h = (double)sizes[i].h, f = (double)sizes[i].f;
        double matrices = 4 * h * h + 2 * h * f, vectors = 3 * h + h + f + h + 4 * h;
        zero3_plan z, d;
        zero3_plan_of(&s, &d);
        s.parallel.framework = FRAMEWORK_MEGATRON;
        zero3_plan_of(&s, &z);
        print_message("h %lld, %d layers: Megatron-FSDP %d layers ahead, DeepSpeed's knobs %d\n", sizes[i].h,
                      sizes[i].layers, z.prefetch_layers, d.prefetch_layers);
        assert_true(REL(z.layer_params, matrices + vectors));
        assert_true(z.layer_persistent == 0);
        assert_int_equal(z.prefetch_layers, sizes[i].megatron_ahead);
        assert_true(REL(z.live_params, (1 + sizes[i].megatron_ahead) * (matrices + vectors)));
        assert_true(REL(z.reduce_bucket_params, matrices + vectors));
        assert_int_equal(d.prefetch_layers, sizes[i].deepspeed_ahead);
        double largest = h * f, layer = d.layer_params + d.layer_persistent;
        double deepspeed_live = d.prefetch_layers == 0 ? d.layer_params
                                : fmin((1 + d.prefetch_layers) * d.layer_params, fmax(1e9, d.layer_params) + largest);
        if (!REL(d.live_params, deepspeed_live))
            fail_msg("h %lld: DeepSpeed's live set %g, expected %g (layer %g)", sizes[i].h, d.live_params,
                     deepspeed_live, layer);
        fixture_free(&s);
    }
    /* what a step gathers: every tensor, as with no persistence threshold (the first test) */
    scenario_config s;
    fixture_zero3(&s, 4);
    s.parallel.framework = FRAMEWORK_MEGATRON;
    double h = 1024, f = 4096, V = 32000, T = 1024, L = 4, m = 2;
    double matrices = 4 * h * h + 2 * h * f, vectors = 3 * h + h + f + h + 4 * h;
    double ends = (V * h + T * h) + V * h;
    double gathered, reduced;
    int gathers;
    fixture_zero3_bytes(&s, &gathered, &reduced, &gathers);
    assert_int_equal(gathers, (int)(m * 2 * L));
    assert_true(REL(gathered, m * 2 * (L * (matrices + vectors) + ends + 2 * h) * 2));
    /* every parameter's gradient each micro-batch, the table once, in the model's bf16 */
    assert_true(REL(reduced, m * (L * (matrices + vectors) + V * h + T * h + 2 * h) * 2));
    fixture_free(&s);
}

/* DeepSpeed's stage 3 gathers tensor by tensor (zero3.c): a layer's gather is one all-gather call
 * a tensor at or above the persistence threshold, each paying the collective's own time for its
 * share. The fixture's layer: QKV, projection and the two MLP matrices are partitioned, its 3
 * biases and 4 norm vectors (at most f = 4,096 elements) kept whole: 4 calls; with no threshold
 * all 12 tensors; FSDP's unit and Megatron-FSDP's bucket one. The embedding (where the model
 * starts) is its token table and its learned positions, 2 calls; the end (the tied head) its
 * table, 1 (the final norm, 1,024 elements, stays whole). With DeepSpeed's engine under full
 * recomputation (and nothing kept from the re-run) the re-run gathers each layer, 4 calls too. */
static void deepspeed_gathers_tensor_by_tensor(void **state)
{
    (void)state;
    scenario_config s;
    fixture_zero3(&s, 4);
    zero3_plan z;
    zero3_plan_of(&s, &z);
    assert_true(z.gather_calls_per_layer == 4);
    assert_true(z.embed_gather_calls == 2 && z.head_gather_calls == 1);
    double layer = z.layer_params, h = 1024, V = 32000, T = 1024;
    for (int recompute = 0; recompute < 2; recompute++) {
        s.training.recompute = recompute ? RECOMPUTE_FULL : RECOMPUTE_NONE;
        s.parallel.pipeline_engine = recompute ? PIPELINE_ENGINE_DEEPSPEED : PIPELINE_ENGINE_MEGATRON;
        s.parallel.stage3_max_reuse_distance = 0; /* every re-run's layer gathered again (the next test) */
        step_workload w;
        fixture_build(&s, &w);
        int count[3] = {0, 0, 0};
        for (int i = 0; i < w.n_tasks; i++) {
            const sim_task *k = &w.tasks[i];
            if (strcmp(k->name, "zero3_param_allgather"))
                continue;
            double extra = k->bytes / 2 - layer; /* bf16 */
            int end = fabs(extra) < 1 ? 0 : fabs(extra - (V * h + T * h)) < 1 ? 1 : fabs(extra - V * h) < 1 ? 2 : -1;
            if (end < 0)
                fail_msg("gather %d: %g bytes, neither a layer nor a layer and an end", i, k->bytes);
            double calls = 4 + (end == 1 ? 2 : end == 2 ? 1 : 0);
            coll_group g = {k->group, k->span_nodes, k->group / k->span_nodes};
            double one = collective_time(&s.platform, &s.calibration, COLL_ALL_GATHER, k->bytes / calls, g).time_s;
            if (k->calls != calls || !REL(k->duration_s, calls * one))
                fail_msg("gather %d: %g calls, %.9g s; expected %g calls of %.9g s", i, k->calls, k->duration_s,
                         calls, one);
            count[end]++;
        }
        workload_free(&w);
        /* 2 micro-batches, forward and backward, each pass two layers alone, one with the
         * embedding, one with the head; the re-run's four layers alone */
        assert_int_equal(count[0], 2 * (2 * 2 + (recompute ? 4 : 0)));
        assert_int_equal(count[1], 2 * 2);
        assert_int_equal(count[2], 2 * 2);
    }
    s.parallel.stage3_param_persistence_threshold = 0;
    zero3_plan_of(&s, &z);
    assert_true(z.gather_calls_per_layer == 12);
    assert_true(z.embed_gather_calls == 2 && z.head_gather_calls == 3); /* LayerNorm's weight and bias */
    s.parallel.stage3_param_persistence_threshold = 1e5;
    s.parallel.framework = FRAMEWORK_MEGATRON;
    zero3_plan_of(&s, &z);
    assert_true(z.gather_calls_per_layer == 1 && z.embed_gather_calls == 1 && z.head_gather_calls == 1);
    s.parallel.framework = FRAMEWORK_UNSET;
    s.parallel.fsdp_reshard_after_forward = FSDP_RESHARD_ALWAYS;
    zero3_plan_of(&s, &z);
    assert_true(z.gather_calls_per_layer == 1 && z.embed_gather_calls == 1 && z.head_gather_calls == 1);
    fixture_free(&s);
}

/* stage3_max_reuse_distance (DeepSpeed's 1e9): a tensor of a re-run layer stays gathered for the
 * layer's backward when the trace uses it again within that many elements, which is twice what the
 * re-run uses after it (the rest of the re-run, then their backwards). Written out: at h 12,288
 * (GPT-3 175B) the second MLP weight (604M) stays, the first does not (2 x 604M past it); at
 * h 4,096 all four weights stay (the QKV's distance is 2 x 151M); with 0 none; at 2.5e9 the
 * 175B layer keeps its projection too (2 x 1.21e9 past it), not its QKV (2 x 1.36e9). A module goes
 * or stays whole: at h 25,600 the first MLP's bias (102,400 elements, partitioned) goes with its
 * weight, 2 x 2.6e9 from its use again. In recomputed groups of two (h 8,192: the MLP's two weights
 * stay, 2 x 268M past the first) the group's first layer has the second's re-run and backward
 * between, 2 x 805M, and keeps nothing: one weight a layer on average. */
static void reuse_distance_keeps_the_rerun_tail(void **state)
{
    (void)state;
    static const struct {
        long long h, f;
        double reuse, kept_tensors, kept;
    } sizes[] = {{12288, 49152, 1e9, 1, 12288.0 * 49152}, {4096, 16384, 1e9, 4, 12.0 * 4096 * 4096},
                 {4096, 16384, 0, 0, 0}, {12288, 49152, 2.5e9, 3, 2 * 12288.0 * 49152 + 12288.0 * 12288},
                 {25600, 102400, 1e9, 1, 25600.0 * 102400}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        scenario_config s;
        fixture_zero3(&s, 4);
        fixture_model(&s, 4, sizes[i].h, 16, sizes[i].f);
        s.training.recompute = RECOMPUTE_FULL;
        s.parallel.pipeline_engine = PIPELINE_ENGINE_DEEPSPEED;
        s.parallel.stage3_max_reuse_distance = sizes[i].reuse;
        zero3_plan z;
        zero3_plan_of(&s, &z);
        print_message("h %lld, reuse %g: %g tensors kept, %.4g elements\n", sizes[i].h, sizes[i].reuse,
                      z.rerun_kept_calls, z.rerun_kept_params);
        assert_true(z.rerun_kept_calls == sizes[i].kept_tensors);
        assert_true(REL(z.rerun_kept_params, sizes[i].kept) || (sizes[i].kept == 0 && z.rerun_kept_params == 0));
        fixture_free(&s);
    }
    for (int group = 1; group <= 2; group++) {
        scenario_config s;
        fixture_zero3(&s, 4);
        fixture_model(&s, 4, 8192, 16, 32768);
        s.training.recompute = RECOMPUTE_FULL;
        s.training.recompute_num_layers = group;
        s.parallel.pipeline_engine = PIPELINE_ENGINE_DEEPSPEED;
        zero3_plan z;
        zero3_plan_of(&s, &z);
        print_message("h 8192, groups of %d: %g tensors kept a layer, %.4g elements\n", group, z.rerun_kept_calls,
                      z.rerun_kept_params);
        assert_true(REL(z.rerun_kept_calls, 2.0 / group));
        assert_true(REL(z.rerun_kept_params, 2 * 8192.0 * 32768 / group));
        fixture_free(&s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_micro_batch_gathers_and_reduces_each_layer),
        cmocka_unit_test(prefetch_hides_the_gathers_behind_compute),
        cmocka_unit_test(memory_holds_the_gathered_working_set),
        cmocka_unit_test(deepspeed_gathers_tensor_by_tensor),
        cmocka_unit_test(reuse_distance_keeps_the_rerun_tail),
        cmocka_unit_test(megatron_fsdp_prefetches_by_its_size),
        cmocka_unit_test(fsdp2_on_one_stage),
        cmocka_unit_test(fsdp2_under_pipeline_parallelism),
        cmocka_unit_test(fsdp2_interleaved),
        cmocka_unit_test(fsdp2_key_is_refused_where_it_cannot_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
