/* The memory model against published figures and closed forms computed here:
 *  - Rajbhandari et al. 2020 (ZeRO), Fig. 1: 7.5B parameters on 64 GPUs, model states per
 *    GPU for DDP and ZeRO-1/2/3;
 *  - Korthikanti et al. 2022, per-layer activations of a GPT-3 175B layer with and without
 *    TP, SP, selective and full recomputation;
 *  - activations scale with the micro-batches a stage holds under its schedule (1F1B stage 0
 *    holds p, GPipe m), and the stage accounting (sharding groups, capacity, OOM). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "fixture.h"
#include "memory.h"
#include "params.h"

#define CLOSE(x, y) (fabs((x) - (y)) <= 1e-9 * fabs(y))

/* GPT-3 175B (Brown et al. 2020) on a DGX-A100-like GPU, filled by hand. */
static void gpt3(scenario_config *s)
{
    memset(s, 0, sizeof *s);
    fixture_model(s, 96, 12288, 96, 4 * 12288);
    s->model.seq_length = 2048;
    s->model.vocab_size = 51200;
    fixture_single_gpu(s); /* b 1, bf16, no recomputation, one GPU, 1F1B, 40 MB buckets */
    s->training.global_batch_size = 1536;
    s->training.optimizer = OPTIMIZER_ADAM;
    s->platform.gpu.memory_gib = 80;
}

static void zero_paper_example(void **state)
{
    /* Rajbhandari et al. 2020, Figure 1: 7.5B parameters, 64-way data parallel, mixed-precision
     * Adam (2 + 2 + K=12 bytes per parameter): DDP 120 GB, ZeRO-1 31.4 GB, ZeRO-2 16.6 GB,
     * ZeRO-3 1.9 GB per GPU (GB = 1e9 bytes). */
    double expect[4] = {120, 31.4, 16.6, 1.9};
    precision_kind half[] = {PREC_FP16, PREC_BF16};
    for (int hp = 0; hp < 2; hp++)
        for (int z = 0; z < 4; z++) {
            memory_breakdown m;
            memory_model_states(7.5e9, 64, z, half[hp], OPTIMIZER_ADAM, &m);
            double gb = m.total / 1e9;
            if (fabs(gb - expect[z]) > 0.02 * expect[z])
                fail_msg("ZeRO-%d: %.2f GB, paper %.1f GB", z, gb, expect[z]);
            assert_true(CLOSE(m.total, m.weights + m.gradients + m.optimizer));
            assert_true(m.activations == 0 && m.buffers == 0);
        }
    /* the split of DDP: 2 + 2 + 12 bytes per parameter */
    memory_breakdown m;
    memory_model_states(1e9, 8, 0, PREC_BF16, OPTIMIZER_ADAM, &m);
    assert_true(CLOSE(m.weights, 2e9) && CLOSE(m.gradients, 2e9) && CLOSE(m.optimizer, 12e9));
    /* fp32: 4 + 4 + 8 */
    memory_model_states(1e9, 8, 0, PREC_FP32, OPTIMIZER_ADAM, &m);
    assert_true(CLOSE(m.weights, 4e9) && CLOSE(m.gradients, 4e9) && CLOSE(m.optimizer, 8e9));
    /* ZeRO-3 shards everything: 16 / 8 bytes per parameter */
    memory_model_states(1e9, 8, 3, PREC_BF16, OPTIMIZER_ADAM, &m);
    assert_true(CLOSE(m.total, 2e9));
}

/* The same figures through a whole scenario: a model of ~7.5B parameters on 64 GPUs,
 * pipeline 1, model states equal to 16 bytes x params_total / the ZeRO shards. */
static void zero_paper_example_through_a_scenario(void **state)
{
    scenario_config s;
    gpt3(&s);
    /* 7.5B-like: 32 layers of h 4096 (12 h^2 each = 201M) + embeddings */
    fixture_model(&s, 36, 4096, 32, 16384);
    s.parallel.dp = 64;
    s.training.precision = PREC_FP16; /* the paper's mixed precision: fp16 gradients */
    double P = params_total(&s);
    assert_true(P > 7.0e9 && P < 8.0e9);
    double expect_per_param[4] = {16, 4 + 12.0 / 64, 2 + 14.0 / 64, 16.0 / 64};
    for (int z = 0; z < 4; z++) {
        s.parallel.zero_stage = z;
        memory_breakdown m;
        assert_int_equal(memory_model_stage(&s, 0, 1, &m), 0);
        double states = m.weights + m.gradients + m.optimizer;
        if (!CLOSE(states, expect_per_param[z] * P))
            fail_msg("ZeRO-%d: %.4g bytes, expected %.4g", z, states, expect_per_param[z] * P);
    }
    /* ZeRO shards over dp x cp (Megatron's distributed optimizer) */
    s.parallel.zero_stage = 1;
    s.parallel.dp = 16;
    s.parallel.cp = 4;
    memory_breakdown m;
    assert_int_equal(memory_model_stage(&s, 0, 1, &m), 0);
    assert_true(CLOSE(m.optimizer, 12 * P / 64));

    /* bf16 as Megatron-LM runs it: gradients accumulate and reduce in fp32 (main_grad), so DDP
     * holds 2 + 4 + 12 = 18 bytes per parameter, not the paper's 16; an explicit bf16 reduction
     * keeps 16; DeepSpeed's ZeRO-3 reduces in the model's dtype */
    s.training.precision = PREC_BF16;
    s.parallel.dp = 64;
    s.parallel.cp = 1;
    s.parallel.zero_stage = 0;
    assert_int_equal(memory_model_stage(&s, 0, 1, &m), 0);
    assert_true(CLOSE(m.weights + m.gradients + m.optimizer, 18 * P));
    assert_true(params_grad_reduce_bytes(&s) == 4);
    s.parallel.grad_reduce_bytes = 2;
    assert_int_equal(memory_model_stage(&s, 0, 1, &m), 0);
    assert_true(CLOSE(m.weights + m.gradients + m.optimizer, 16 * P));
    s.parallel.grad_reduce_bytes = 0;
    s.parallel.zero_stage = 3;
    assert_true(params_grad_reduce_bytes(&s) == 2);
}

/* An untied LM head (Llama) is a parameter matrix of its own, on the last stage even at PP 1. */
static void untied_head_counts_its_own_matrix(void **state)
{
    (void)state;
    scenario_config s;
    gpt3(&s);
    double tied = params_total(&s), h = (double)s.model.hidden_size, V = (double)s.model.vocab_size;
    double last_tied = params_stage_per_gpu(&s, s.parallel.pp - 1);
    s.model.untie_embeddings = 1;
    assert_true(CLOSE(params_total(&s), tied + V * h));
    assert_true(CLOSE(params_stage_per_gpu(&s, s.parallel.pp - 1), last_tied + (s.parallel.pp == 1 ? V * h / s.parallel.tp : 0)));
}

static void gpt3_parameter_count(void **state)
{
    /* 175B within 1% (Brown et al. 2020), and the stages sum to the whole model at pp=1. */
    scenario_config s;
    gpt3(&s);
    double P = params_total(&s);
    assert_true(fabs(P - 175e9) < 0.01 * 175e9);
    memory_breakdown m;
    assert_int_equal(memory_model_stage(&s, 0, 1, &m), 0);
    assert_true(CLOSE(m.weights, 2 * P));
}

static void korthikanti_activation_formulas(void **state)
{
    /* GPT-3 175B layer (s 2048, h 12288, a 96, b 1), 16-bit activations (Korthikanti et al.
     * 2022, Table 2): no parallelism sbh(34 + 5as/h); TP t with SP sbh/t (34 + 5as/h);
     * TP without SP sbh(10 + 24/t + 5as/(ht)); selective recompute drops the 5as/h term;
     * full recompute keeps 2sbh (/t with SP). */
    scenario_config s;
    gpt3(&s);
    double sbh = 2048.0 * 12288, as_h = 96.0 * 2048 / 12288;
    struct { int tp, sp; recompute_kind r; double expect; } cases[] = {
        {1, 0, RECOMPUTE_NONE, sbh * (34 + 5 * as_h)},
        {8, 1, RECOMPUTE_NONE, sbh / 8 * (34 + 5 * as_h)},
        {8, 0, RECOMPUTE_NONE, sbh * (10 + 24.0 / 8 + 5 * as_h / 8)},
        {4, 0, RECOMPUTE_NONE, sbh * (10 + 24.0 / 4 + 5 * as_h / 4)},
        {8, 1, RECOMPUTE_SELECTIVE, sbh / 8 * 34},
        {8, 0, RECOMPUTE_SELECTIVE, sbh * (10 + 24.0 / 8)},
        {1, 0, RECOMPUTE_SELECTIVE, sbh * 34},
        {8, 1, RECOMPUTE_FULL, 2 * sbh / 8},
        {8, 0, RECOMPUTE_FULL, 2 * sbh},
        {1, 0, RECOMPUTE_FULL, 2 * sbh},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s.parallel.tp = cases[i].tp;
        s.parallel.sequence_parallel = cases[i].sp;
        s.training.recompute = cases[i].r;
        double got = memory_layer_activations(&s);
        if (!CLOSE(got, cases[i].expect))
            fail_msg("case %zu: %.6g bytes, formula %.6g", i, got, cases[i].expect);
    }
    /* Megatron-LM's --distribute-saved-activations: full recompute's kept input split over TP
     * without SP too (2sbh/t); with SP it changes nothing (already 2sbh/t) */
    s.parallel.tp = 8;
    s.training.recompute = RECOMPUTE_FULL;
    s.training.distribute_saved_activations = 1;
    s.parallel.sequence_parallel = 0;
    assert_true(CLOSE(memory_layer_activations(&s), 2 * sbh / 8));
    s.parallel.sequence_parallel = 1;
    assert_true(CLOSE(memory_layer_activations(&s), 2 * sbh / 8));
    s.training.distribute_saved_activations = 0;
    /* The paper's headline: TP 8 + SP + selective recompute needs 5x less than TP 8 alone
     * ((10 + 3 + 5*96*2048/(12288*8)) / (34/8) = 23/4.25 ~ 5.4). */
    s.parallel.tp = 8;
    s.parallel.sequence_parallel = 0;
    s.training.recompute = RECOMPUTE_NONE;
    double tp_only = memory_layer_activations(&s);
    s.parallel.sequence_parallel = 1;
    s.training.recompute = RECOMPUTE_SELECTIVE;
    double both = memory_layer_activations(&s);
    assert_true(tp_only / both > 5.0 && tp_only / both < 6.0);

    /* flash attention keeps no scores; fp32 doubles; b scales linearly */
    gpt3(&s);
    s.model.attention = ATTENTION_FLASH;
    assert_true(CLOSE(memory_layer_activations(&s), sbh * 34));
    s.training.precision = PREC_FP32;
    assert_true(CLOSE(memory_layer_activations(&s), 2 * sbh * 34));
    s.training.precision = PREC_BF16;
    s.training.activation_bytes = 4; /* bf16 math on activations kept as fp32 (dtrain's emulation) */
    assert_true(CLOSE(memory_layer_activations(&s), 2 * sbh * 34));
    s.training.activation_bytes = 0;
    s.training.micro_batch_size = 4;
    assert_true(CLOSE(memory_layer_activations(&s), 4 * sbh * 34));

    /* GQA (8 groups): K and V shrink from 2sbh each to 2sbh*g/a: 34 - 4 + 4/12 = 30.333;
     * context parallel 2 halves every term (scores: s/2 queries against s keys). */
    gpt3(&s);
    s.model.num_query_groups = 8;
    assert_true(CLOSE(memory_layer_activations(&s), sbh * (30 + 4.0 * 8 / 96 + 5 * as_h)));
    s.model.num_query_groups = 96;
    s.parallel.cp = 2;
    assert_true(CLOSE(memory_layer_activations(&s), sbh / 2 * (34 + 5 * as_h)));

    /* SwiGLU keeps three f-wide tensors (6sbf), unfused (nanotron's SiLU, then a multiply) SiLU's
     * output too (8sbf): flash attention, f = 4h, no recomputation: 34 - 16 + 24 = 42 sbh, and 50 */
    gpt3(&s);
    s.model.attention = ATTENTION_FLASH;
    s.model.swiglu = 1;
    assert_true(CLOSE(memory_layer_activations(&s), sbh * 42));
    s.parallel.framework = FRAMEWORK_NANOTRON;
    assert_true(CLOSE(memory_layer_activations(&s), sbh * 50));
}

static void activations_scale_with_micro_batches_in_flight(void **state)
{
    scenario_config s;
    gpt3(&s);
    fixture_layout(&s, 8, 8, 4, 1536); /* GPT-3's batch */
    s.parallel.sequence_parallel = 1;
    s.training.recompute = RECOMPUTE_SELECTIVE;
    int m = 32;
    pipeline_schedule one_f_one_b, gpipe;
    char err[256];
    assert_int_equal(pipeline_schedule_build(&one_f_one_b, PIPELINE_1F1B, 8, m, 1, err, sizeof err), 0);
    assert_int_equal(pipeline_schedule_build(&gpipe, PIPELINE_GPIPE, 8, m, 1, err, sizeof err), 0);

    /* stage 0 of 12 layers: layers x in-flight x per-layer, plus the embedding output
     * (b s h /t with SP, 2 bytes) of each in-flight micro-batch */
    double per_layer = 2048.0 * 12288 / 8 * 34;
    double emb = 2048.0 * 12288 * 2 / 8;
    /* selective recomputation rebuilds one layer's scores (5 a s^2 b / t) during its backward */
    double work = 5.0 * 96 * 2048 * 2048 / 8;
    assert_true(CLOSE(memory_recompute_working_set(&s, 12), work));
    memory_breakdown a, b;
    assert_int_equal(memory_model_stage(&s, 0, pipeline_schedule_peak_in_flight(&one_f_one_b, 0), &a), 0);
    assert_int_equal(memory_model_stage(&s, 0, pipeline_schedule_peak_in_flight(&gpipe, 0), &b), 0);
    assert_true(CLOSE(a.activations, 8 * (12 * per_layer + emb) + work));  /* 1F1B: p = 8 */
    assert_true(CLOSE(b.activations, m * (12 * per_layer + emb) + work));  /* GPipe: m = 32 */
    assert_true(CLOSE((b.activations - work) / (a.activations - work), (double)m / 8));
    /* model states do not depend on the schedule */
    assert_true(a.weights == b.weights && a.optimizer == b.optimizer);

    /* the worst stage: stage 0 under both (1F1B: it holds the most micro-batches; GPipe: all
     * hold m, and the embedding outputs of m micro-batches outweigh the last stage's logits
     * of one, the embedding and its tied LM-head copy weighing the same) */
    memory_breakdown w;
    int worst = -1;
    assert_int_equal(memory_model_worst_stage(&s, &one_f_one_b, &w, &worst), 0);
    assert_int_equal(worst, 0);
    assert_true(CLOSE(w.total, a.total));
    assert_int_equal(memory_model_worst_stage(&s, &gpipe, &w, &worst), 0);
    assert_int_equal(worst, 0);
    assert_true(CLOSE(w.total, b.total));
    memory_breakdown last;
    assert_int_equal(memory_model_stage(&s, 7, m, &last), 0);
    assert_true(CLOSE(last.activations, m * 12 * per_layer + work + 2048.0 * 51200 / 8 * 4));
    pipeline_schedule_free(&one_f_one_b);
    pipeline_schedule_free(&gpipe);

    /* interleaved: each in-flight pair holds one chunk (12 / 3 = 4 layers) */
    s.parallel.vpp = 3;
    s.parallel.schedule = PIPELINE_INTERLEAVED;
    pipeline_schedule il;
    assert_int_equal(pipeline_schedule_build(&il, PIPELINE_INTERLEAVED, 8, m, 3, err, sizeof err), 0);
    int peak = pipeline_schedule_peak_in_flight(&il, 0);
    assert_int_equal(peak, 2 * 7 + 2 * 8 + 1);
    assert_int_equal(memory_model_stage(&s, 0, peak, &a), 0);
    assert_true(CLOSE(a.activations, peak * (4 * per_layer + emb) + work));
    pipeline_schedule_free(&il);
}

/* run_memory_estimate reads the peaks in flight from the schedule's shape, without building it
 * (pipeline_peak_in_flight, sim/run.c): every stage's peak of the whole step's own schedule, built
 * here at every size from 1 to 6p(v + 1) micro-batches (1F1B and interleaved, p 1-8, v 1-4), gives
 * the same worst stage and memory. GPipe's peak is m. */
static void memory_estimate_matches_the_whole_schedule(void **state)
{
    (void)state;
    scenario_config s;
    gpt3(&s);
    s.training.recompute = RECOMPUTE_SELECTIVE;
    char err[256];
    int checked = 0;
    for (int p = 1; p <= 8; p *= 2)
        for (int v = 1; v <= 4; v++) {
            if (v > 1 && p == 1)
                continue;
            for (int m = v > 1 ? p : 1; m <= 6 * p * (v + 1); m += v > 1 ? p : 1) {
                fixture_layout(&s, 8, p, 4, m * 4);
                s.parallel.vpp = v;
                s.parallel.schedule = v > 1 ? PIPELINE_INTERLEAVED : PIPELINE_1F1B;
                pipeline_schedule whole;
                assert_int_equal(pipeline_schedule_build(&whole, s.parallel.schedule, p, m, v, err, sizeof err), 0);
                memory_breakdown want;
                int worst = -1;
                assert_int_equal(memory_model_worst_stage(&s, &whole, &want, &worst), 0);
                pipeline_schedule_free(&whole);
                run_memory got;
                run_memory_estimate(&s, &got);
                assert_int_equal(got.worst_stage, worst);
                assert_true(fabs(got.total * 1073741824.0 - want.total) <= 1e-9 * want.total);
                assert_true(fabs(got.activations * 1073741824.0 - want.activations) <= 1e-9 * want.activations);
                checked++;
            }
        }
    assert_true(checked > 300);
    /* GPipe holds every micro-batch: the estimate grows with m */
    fixture_layout(&s, 8, 4, 4, 64 * 4);
    s.parallel.vpp = 1;
    s.parallel.schedule = PIPELINE_GPIPE;
    run_memory at64, at128;
    run_memory_estimate(&s, &at64);
    s.training.global_batch_size = 128 * 4;
    run_memory_estimate(&s, &at128);
    assert_true(at128.activations > 1.9 * at64.activations);
}

static void full_recompute_keeps_inputs_and_one_working_layer(void **state)
{
    scenario_config s;
    gpt3(&s);
    s.parallel.tp = 8;
    s.parallel.sequence_parallel = 1;
    s.training.recompute = RECOMPUTE_FULL;
    double sbh = 2048.0 * 12288, as_h = 96.0 * 2048 / 12288;
    double full_layer = sbh / 8 * (34 + 5 * as_h);
    assert_true(CLOSE(memory_recompute_working_set(&s, 12), full_layer - 2 * sbh / 8));
    memory_breakdown m;
    assert_int_equal(memory_model_stage(&s, 0, 3, &m), 0);
    /* 96 inputs x 3 micro-batches, the layer being recomputed, the embedding outputs, the
     * logits (single stage: first and last) */
    double want = 3 * 96 * 2 * sbh / 8 + (full_layer - 2 * sbh / 8) + 3 * sbh * 2 / 8 + 2048.0 * 51200 / 8 * 4;
    assert_true(CLOSE(m.activations, want));
    s.training.recompute = RECOMPUTE_NONE;
    assert_true(memory_recompute_working_set(&s, 12) == 0);
}

/* Megatron-LM's --recompute-method over a chunk of 12 layers (TP 8 with SP, GPT-3's layer): uniform
 * groups of 5 keep ceil(12/5) = 3 inputs and rerun a group of 5 at once; block 5 keeps 5 inputs and
 * all of the other 7 layers, and reruns one layer at a time. */
static void recompute_method_sets_what_each_chunk_keeps(void **state)
{
    (void)state;
    scenario_config s;
    gpt3(&s);
    s.parallel.tp = 8;
    s.parallel.sequence_parallel = 1;
    s.training.recompute = RECOMPUTE_FULL;
    s.training.recompute_num_layers = 5;
    double sbh = 2048.0 * 12288, as_h = 96.0 * 2048 / 12288;
    double full_layer = sbh / 8 * (34 + 5 * as_h), input = 2 * sbh / 8;
    assert_true(CLOSE(memory_chunk_activations(&s, 12), 3 * input));
    assert_true(CLOSE(memory_recompute_working_set(&s, 12), 5 * full_layer - input));
    assert_true(CLOSE(memory_recompute_working_set(&s, 2), 2 * full_layer - input)); /* a chunk shorter than a group */
    s.training.recompute_block = 1;
    assert_true(CLOSE(memory_chunk_activations(&s, 12), 5 * input + 7 * full_layer));
    assert_true(CLOSE(memory_recompute_working_set(&s, 12), full_layer - input));
    s.training.recompute_num_layers = 20; /* more than the chunk: every layer keeps its input */
    assert_true(CLOSE(memory_chunk_activations(&s, 12), 12 * input));
}

static void stage_accounting(void **state)
{
    scenario_config s;
    gpt3(&s);
    fixture_layout(&s, 8, 16, 8, 1536); /* GPT-3's batch */
    s.parallel.zero_stage = 1;
    memory_breakdown first, mid, last;
    assert_int_equal(memory_model_stage(&s, 0, 1, &first), 0);
    assert_int_equal(memory_model_stage(&s, 5, 1, &mid), 0);
    assert_int_equal(memory_model_stage(&s, 15, 1, &last), 0);
    /* the embedding on stage 0 and the tied LM-head copy on the last add V*h/t each */
    double emb = 51200.0 * 12288 / 8;
    assert_true(first.weights > mid.weights);
    assert_true(CLOSE(last.weights - mid.weights, 2 * (emb + 2 * 12288)));
    assert_true(CLOSE(mid.weights, 2 * params_stage_per_gpu(&s, 5)));
    assert_true(CLOSE(mid.optimizer, 12 * params_stage_per_gpu(&s, 5) / 8));
    /* buffers: two 40 MiB DP buckets, four b*s*h activation buffers for PP send/receive */
    assert_true(CLOSE(mid.buffers, 2 * 40 * 1048576.0 + 4 * 2048.0 * 12288 * 2));
    assert_true(CLOSE(mid.total, mid.weights + mid.gradients + mid.optimizer + mid.activations + mid.buffers));
    /* capacity and OOM */
    assert_true(CLOSE(mid.capacity, 80 * 1073741824.0));
    assert_true(CLOSE(memory_bytes_to_gib(mid.capacity), 80.0));
    assert_int_equal(mid.oom, mid.total > mid.capacity);
    s.platform.gpu.memory_gib = 1;
    assert_int_equal(memory_model_stage(&s, 5, 1, &mid), 0);
    assert_int_equal(mid.oom, 1);
    /* GPT-3 175B with plain DDP on one GPU does not fit; TP 8 PP 16 ZeRO-1 does */
    s.platform.gpu.memory_gib = 80;
    memory_breakdown fit;
    assert_int_equal(memory_model_stage(&s, 0, 16, &fit), 0);
    assert_int_equal(fit.oom, 0);
    scenario_config one;
    gpt3(&one);
    assert_int_equal(memory_model_stage(&one, 0, 1, &fit), 0);
    assert_int_equal(fit.oom, 1);
    /* an impossible layer split is reported */
    s.model.num_layers = 95;
    assert_int_equal(memory_model_stage(&s, 0, 1, &mid), -1);
    pipeline_schedule sch;
    char err[128];
    assert_int_equal(pipeline_schedule_build(&sch, PIPELINE_1F1B, 16, 16, 1, err, sizeof err), 0);
    int worst;
    assert_int_equal(memory_model_worst_stage(&s, &sch, &mid, &worst), -1);
    pipeline_schedule_free(&sch);
}

static void experts_shard_over_the_expert_data_parallel_group(void **state)
{
    scenario_config s;
    gpt3(&s);
    fixture_model(&s, 4, 1024, 16, 4096);
    s.model.num_experts = 8;
    s.model.moe_router_topk = 2;
    s.parallel.dp = 8;
    s.parallel.ep = 4;
    s.parallel.zero_stage = 1;
    memory_breakdown m;
    assert_int_equal(memory_model_stage(&s, 0, 1, &m), 0);
    layer_params lp = params_layer_per_gpu(&s);
    double expert = 4 * lp.expert, dense = params_stage_per_gpu(&s, 0) - expert;
    assert_true(CLOSE(lp.expert, 2.0 * (2.0 * 1024 * 4096 + 4096 + 1024))); /* 8 experts / ep 4 */
    /* dense optimizer states over dp = 8, experts over dp / ep = 2 */
    assert_true(CLOSE(m.optimizer, 12 * dense / 8 + 12 * expert / 2));
    assert_true(CLOSE(m.weights, 2 * (dense + expert)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zero_paper_example),
        cmocka_unit_test(zero_paper_example_through_a_scenario),
        cmocka_unit_test(gpt3_parameter_count),
        cmocka_unit_test(untied_head_counts_its_own_matrix),
        cmocka_unit_test(korthikanti_activation_formulas),
        cmocka_unit_test(activations_scale_with_micro_batches_in_flight),
        cmocka_unit_test(memory_estimate_matches_the_whole_schedule),
        cmocka_unit_test(full_recompute_keeps_inputs_and_one_working_layer),
        cmocka_unit_test(recompute_method_sets_what_each_chunk_keeps),
        cmocka_unit_test(stage_accounting),
        cmocka_unit_test(experts_shard_over_the_expert_data_parallel_group),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
