/* The engine and the simulator count the same parameters per GPU: for each layout, the
 * parameters each dtrain rank holds ("params_per_rank" of its --rank-params file) equal
 * params_stage_per_gpu() of dtsim's memory model for that rank's pipeline stage, and the
 * whole model equals params_total(). Two independent codes (the engine's tensor table and the
 * simulator's formulas) must agree, so a change to either side's TP split, vocabulary split,
 * tied-embedding copy or stage split shows up here. The optimizer state each rank keeps on its
 * device (its AdamW moments: all of them, or under ZeRO >= 1 its DP shard) equals the memory
 * model's fp32 Adam figure for the stage and ZeRO stage, to the padding of the shard split, and so
 * do the parameter floats it keeps on its device between passes (ZeRO-3: only its shard), and the
 * gradient floats (ZeRO-2/3: only its shard); it never holds more of them than that, start-up
 * included.
 * argv[1]: dtrain, argv[2]: mpirun, argv[3]: a scratch folder. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>
#include "run_dtrain.h"
#include "engine_scenario.h"
#include "memory.h"
#include "rank_grid.h"
#include "params.h"
#include "workload.h"

static const char *DTRAIN, *MPIRUN, *DIR;
static char ERR[65536];

enum { LAYERS = 8, HIDDEN = 64, HEADS = 4, SEQ = 32, VOCAB = 256 };
/* Llama's blocks (llama_layouts): 4 heads in 2 query groups, a SwiGLU MLP of 176, RMSNorm, rotary
 * embeddings, an untied LM head. */
enum { GROUPS = 2, LLAMA_FFN = 176 };
static int LLAMA;
/* Mixture of experts (expert_layouts): 4 experts of GPT-2's MLP, 2 per token, a router each layer. */
enum { EXPERTS = 4, TOPK = 2 };
static int MOE;
static int EP = 1; /* --expert-model-parallel-size of the layouts being run (expert_layouts) */

static void write_model(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    if (MOE)
        fprintf(f, "{\"num_layers\": %d, \"hidden_size\": %d, \"num_attention_heads\": %d, \"seq_length\": %d, "
                   "\"num_experts\": %d, \"moe_router_topk\": %d}\n", LAYERS, HIDDEN, HEADS, SEQ, EXPERTS, TOPK);
    else if (LLAMA) /* dtsim's model keys, which dtrain reads too */
        fprintf(f, "{\"num_layers\": %d, \"hidden_size\": %d, \"num_attention_heads\": %d, \"seq_length\": %d, "
                   "\"num_query_groups\": %d, \"ffn_hidden_size\": %d, \"swiglu\": true, \"normalization\": "
                   "\"RMSNorm\", \"position_embedding_type\": \"rope\", "
                   "\"untie_embeddings_and_output_weights\": true}\n", LAYERS, HIDDEN, HEADS, SEQ, GROUPS, LLAMA_FFN);
    else
        fprintf(f, "{\"num_layers\": %d, \"hidden\": %d, \"heads\": %d, \"seq_len\": %d}\n", LAYERS, HIDDEN, HEADS,
                SEQ);
    fclose(f);
}

static double floats_of(json_t *per_rank, int r)
{
    return (double)json_integer_value(json_array_get(per_rank, (size_t)r));
}

static void expect_bytes(const char *args, int r, const char *what, double engine, double model_says, double within)
{
    if (fabs(engine - model_says) > within)
        fail_msg("%s: rank %d keeps %.0f bytes of %s, the memory model says %.0f", args, r, engine, what, model_says);
}

static void engine_matches_model(int tp, int pp, int dp, int vpp, int zero, const char *extra,
                                 const int *stage_layers)
{
    char model[1024], launcher[1024], args[4096], report[1024];
    snprintf(model, sizeof model, "%s/mem_model.json", DIR);
    snprintf(report, sizeof report, "%s/mem_rank_params.json", DIR);
    write_model(model);
    int ranks = tp * pp * dp;
    snprintf(launcher, sizeof launcher, "%s' --oversubscribe -np %d '%s", MPIRUN, ranks, DTRAIN);
    snprintf(args, sizeof args,
             "--model %s --steps 1 --micro-batch 1 --global-batch %d --tp %d --pp %d --dp %d --zero %d --ep %d %s "
             "--rank-params %s", model, 4 * dp, tp, pp, dp, zero, EP, extra, report);
    json_t *lines[8];
    int n;
    int rc = run_dtrain(ranks > 1 ? launcher : DTRAIN, args, lines, 8, &n, ERR, sizeof ERR);
    remove(model);
    if (rc != 0 || n < 1)
        fail_msg("%s exited %d: %s", args, rc, ERR);
    json_error_t je;
    json_t *final = json_load_file(report, 0, &je);
    remove(report);
    if (!final)
        fail_msg("%s: no readable --rank-params file: %s", args, je.text);
    json_t *per_rank = json_object_get(final, "params_per_rank");
    json_t *moments = json_object_get(final, "optimizer_floats_per_rank");
    json_t *resident = json_object_get(final, "param_floats_per_rank");
    json_t *grads = json_object_get(final, "grad_floats_per_rank");
    json_t *peak = json_object_get(final, "state_floats_peak_per_rank");
    assert_int_equal(json_array_size(grads), ranks);
    assert_int_equal(json_array_size(peak), ranks);
    assert_int_equal(json_array_size(per_rank), ranks);
    assert_int_equal(json_array_size(resident), ranks);
    assert_int_equal(json_array_size(moments), ranks);

    scenario_config s;
    memset(&s, 0, sizeof s);
    s.model.num_layers = LAYERS;
    s.model.hidden_size = HIDDEN;
    s.model.num_attention_heads = HEADS;
    s.model.num_query_groups = LLAMA ? GROUPS : HEADS;
    s.model.ffn_hidden_size = LLAMA ? LLAMA_FFN : 4 * HIDDEN;
    s.model.swiglu = s.model.rmsnorm = s.model.rope = s.model.untie_embeddings = LLAMA;
    s.model.num_experts = MOE ? EXPERTS : 0;
    s.model.moe_router_topk = MOE ? TOPK : 0;
    s.model.seq_length = SEQ;
    s.model.vocab_size = VOCAB;
    s.parallel.tp = tp;
    s.parallel.pp = pp;
    s.parallel.dp = dp;
    s.parallel.vpp = vpp;
    s.parallel.cp = 1;
    s.parallel.ep = EP;
    s.parallel.pipeline_layers = (int *)stage_layers;
    s.parallel.pipeline_layers_count = stage_layers ? pp : 0;
    assert_int_equal(json_integer_value(json_object_get(final, "params_total")), (json_int_t)params_total(&s));
    for (int r = 0; r < ranks; r++) {
        rank_grid grid = rank_grid_make(tp, 1, pp, dp);
        int stage = rank_grid_coord(&grid, r, GRID_PP);
        double engine = (double)json_integer_value(json_array_get(per_rank, (size_t)r));
        double model_says = params_stage_per_gpu(&s, stage);
        if (engine != model_says)
            fail_msg("%s: rank %d (stage %d) holds %.0f parameters, the memory model says %.0f", args, r, stage,
                     engine, model_says);
        /* fp32 training: Adam's two fp32 moments; the weights are the master copy */
        memory_breakdown mb;
        memory_model_states(model_says, dp, zero, PREC_FP32, OPTIMIZER_ADAM, &mb);
        if (EP > 1) { /* dtsim's stage model: dense states over DP, the experts' over DP / EP */
            s.training.micro_batch_size = 1;
            s.training.global_batch_size = 4 * dp;
            s.parallel.zero_stage = zero;
            assert_int_equal(memory_model_stage(&s, stage, 1, &mb), 0);
        }
        /* the engine's shards are ceil(n / dp) (the last one shorter): within one float per
         * rank of the group, per fp32 buffer (two for the moments); under EP per group (the
         * dense shard's and the expert shard's) */
        expect_bytes(args, r, "optimizer state", 4.0 * floats_of(moments, r), mb.optimizer, 8.0 * (dp + dp / EP));
        /* fp32 weights on the device between passes: all of the stage's, or under ZeRO-3 the shard */
        expect_bytes(args, r, "parameters", 4.0 * floats_of(resident, r), mb.weights, 4.0 * dp);
        /* fp32 gradients between passes: all of the stage's, or under ZeRO-2/3 the shard */
        expect_bytes(args, r, "gradients", 4.0 * floats_of(grads, r), mb.gradients, 4.0 * (dp + dp / EP));
        /* and never more: the rank builds its model at its shards' size (a model built whole
         * and cut to the shards afterwards peaks at four full copies) */
        double kept = floats_of(resident, r) + floats_of(grads, r) + floats_of(moments, r);
        if (floats_of(peak, r) != kept)
            fail_msg("%s: rank %d held up to %.0f parameter, gradient and moment floats, %.0f between steps", args, r,
                     floats_of(peak, r), kept);
    }
    print_message("TP %d PP %d VPP %d DP %d EP %d ZeRO %d %s: every rank's parameters and optimizer state as the memory "
                  "model counts them\n", tp, pp, vpp, dp, EP, zero, extra);
    json_decref(final);
    free_lines(lines, n);
}

static void layouts(void **state)
{
    (void)state;
    static const int uneven[] = {3, 5};
    engine_matches_model(1, 1, 1, 1, 0, "", NULL);
    engine_matches_model(2, 1, 1, 1, 0, "", NULL);
    engine_matches_model(4, 1, 1, 1, 0, "", NULL);
    engine_matches_model(1, 2, 1, 1, 0, "", NULL);
    engine_matches_model(1, 2, 1, 1, 0, "--pipeline-layers 3,5", uneven);
    engine_matches_model(1, 2, 1, 2, 0, "--schedule interleaved --vpp 2", NULL);
    engine_matches_model(2, 2, 2, 1, 0, "", NULL);
    engine_matches_model(2, 2, 2, 1, 1, "", NULL);
    engine_matches_model(1, 1, 4, 1, 1, "", NULL);
    engine_matches_model(1, 1, 3, 1, 2, "", NULL);
    engine_matches_model(1, 2, 2, 1, 2, "", NULL);
    engine_matches_model(1, 2, 2, 1, 3, "", NULL);
    engine_matches_model(2, 1, 3, 1, 3, "", NULL);
}

/* One rank, TP 2, TP 2 x PP 2 x DP 2 with ZeRO-1, PP 2 x DP 2 with ZeRO-3, for the model that
 * *kind (LLAMA or MOE) selects while they run. */
static void model_layouts(int *kind)
{
    *kind = 1;
    engine_matches_model(1, 1, 1, 1, 0, "", NULL);
    engine_matches_model(2, 1, 1, 1, 0, "", NULL);
    engine_matches_model(2, 2, 2, 1, 1, "", NULL);
    engine_matches_model(1, 2, 2, 1, 3, "", NULL);
    *kind = 0;
}

/* The same for Llama's blocks: the grouped K/V rows, SwiGLU's two fc halves, the norms without
 * biases, no position table, and the untied head on the last stage (no copy of wte there). */
static void llama_layouts(void **state)
{
    (void)state;
    model_layouts(&LLAMA);
    LLAMA = 1;
    engine_matches_model(1, 2, 1, 2, 0, "--schedule interleaved --vpp 2", NULL);
    LLAMA = 0;
}

/* The same with experts: each layer's router (E x C, replicated over TP) and E copies of the MLP,
 * each split over TP as the dense one (the fc2 bias replicated). */
static void expert_layouts(void **state)
{
    (void)state;
    model_layouts(&MOE);
    /* expert parallelism: each rank holds E/ep of the experts, as dtsim divides them */
    MOE = 1;
    EP = 2;
    engine_matches_model(1, 1, 2, 1, 0, "", NULL);
    engine_matches_model(2, 2, 2, 1, 0, "", NULL);
    engine_matches_model(1, 1, 4, 1, 0, "", NULL);
    /* with ZeRO-1: the dense moments sharded over DP, the experts' over the expert-DP group (DP /
     * EP ranks; EP == DP: the rank's experts whole); with ZeRO-2 the gradients alike */
    engine_matches_model(1, 1, 2, 1, 1, "", NULL);
    engine_matches_model(1, 1, 4, 1, 1, "", NULL);
    engine_matches_model(2, 2, 2, 1, 1, "", NULL);
    engine_matches_model(1, 1, 2, 1, 2, "", NULL);
    engine_matches_model(1, 1, 4, 1, 2, "", NULL);
    engine_matches_model(1, 2, 2, 1, 2, "", NULL);
    /* with ZeRO-3 the parameters alike: the dense shard over DP, the experts' over expert-DP */
    engine_matches_model(1, 1, 2, 1, 3, "", NULL);
    engine_matches_model(1, 1, 4, 1, 3, "", NULL);
    engine_matches_model(1, 2, 2, 1, 3, "", NULL);
    EP = 4;
    engine_matches_model(1, 1, 4, 1, 0, "", NULL);
    engine_matches_model(1, 1, 4, 1, 1, "", NULL);
    EP = 1;
    MOE = 0;
}

/* ZeRO-3's traffic, counted by the engine (dp_bytes_sent_rank0 of --rank-params: what rank 0 sent
 * over the DP group) against dtsim's workload for the same run (engine_scenario_load): per
 * micro-batch, every pass all-gathers its parameters (forward and backward) and every backward
 * reduce-scatters its gradients (sim/step/zero3.h). At DP 2 a rank sends half of each collective's
 * buffer. Two differences are the engine's own, in closed form: it reduces the tied table W = V C
 * at each of its two passes (the embedding's and the head's; DeepSpeed and dtsim once, when its
 * gradient is complete), and it gathers the whole model once more after the last step (for the
 * final CRC): 4 N bytes of buffer. Everything else must be equal. */
static void zero3_bytes_match(const char *recompute)
{
    char model[1024], launcher[1024], args[4096], report[1024];
    snprintf(model, sizeof model, "%s/z3_model.json", DIR);
    snprintf(report, sizeof report, "%s/z3_rank_params.json", DIR);
    FILE *f = fopen(model, "w");
    assert_non_null(f);
    fprintf(f, "{\"num_layers\": %d, \"hidden\": %d, \"heads\": %d, \"seq_len\": %d}\n", LAYERS, HIDDEN, HEADS, SEQ);
    fclose(f);
    const int dp = 2, micro = 2, global = 8; /* two micro-batches per rank */
    snprintf(launcher, sizeof launcher, "%s' --oversubscribe -np %d '%s", MPIRUN, dp, DTRAIN);
    char extra[128] = "";
    if (recompute)
        snprintf(extra, sizeof extra, " --recompute-granularity %s", recompute);
    snprintf(args, sizeof args,
             "--model %s --steps 1 --micro-batch %d --global-batch %d --dp %d --zero 3 --rank-params %s%s", model,
             micro, global, dp, report, extra);
    json_t *lines[8];
    int n;
    int rc = run_dtrain(launcher, args, lines, 8, &n, ERR, sizeof ERR);
    remove(model);
    if (rc != 0 || n < 1)
        fail_msg("%s exited %d: %s", args, rc, ERR);
    free_lines(lines, n);
    json_error_t je;
    json_t *rp = json_load_file(report, 0, &je);
    remove(report);
    if (!rp)
        fail_msg("no readable --rank-params file: %s", je.text);
    double engine = json_number_value(json_object_get(rp, "dp_bytes_sent_rank0"));
    json_decref(rp);

    engine_run_shape shape = {.num_layers = LAYERS, .hidden = HIDDEN, .heads = HEADS, .seq_len = SEQ, .vocab = VOCAB,
                              .micro_batch = micro, .global_batch = global, .tp = 1, .pp = 1, .dp = dp, .vpp = 1,
                              .zero = 3, .precision = "fp32", .recompute = recompute};
    scenario_config s;
    config_error err;
    if (engine_scenario_load(&shape, DTSIM_SOURCE_DIR "/platforms/cpu-box.json",
                             DTSIM_SOURCE_DIR "/calibrate/data/cpu-box-measured.json", &s, &err) != 0)
        fail_msg("%s", err.msg);
    s.parallel.stage3_param_persistence_threshold = 0; /* the engine partitions every tensor */
    step_workload w;
    if (workload_build(&s, &w, &err) != 0)
        fail_msg("%s", err.msg);
    double gathered = 0, reduced = 0;
    for (int i = 0; i < w.n_tasks; i++) {
        if (!strcmp(w.tasks[i].name, "zero3_param_allgather"))
            gathered += w.tasks[i].bytes;
        else if (!strcmp(w.tasks[i].name, "dp_grad_reduce_scatter"))
            reduced += w.tasks[i].bytes;
    }
    workload_free(&w);
    double N = params_total(&s), W = (double)VOCAB * HIDDEN, A = global / (micro * dp);
    double sent = (double)(dp - 1) / dp;
    double dtsim = sent * (gathered + reduced), engine_own = sent * 4 * (A * W + N);
    scenario_free(&s);
    print_message("ZeRO-3 DP 2%s%s: engine sent %.0f B; dtsim's workload %.0f B (gathers %.0f, reduce-scatters %.0f) "
                  "+ the engine's own %.0f B\n", recompute ? ", recompute " : "", recompute ? recompute : "", engine, dtsim, sent * gathered, sent * reduced, engine_own);
    if (engine != dtsim + engine_own)
        fail_msg("the engine sent %.0f B, dtsim's workload plus the engine's own traffic say %.0f B", engine,
                 dtsim + engine_own);
}

static void zero3_bytes_match_the_workload(void **state)
{
    (void)state;
    zero3_bytes_match(NULL);
}

/* Full recomputation: the backward's rerun gathers each layer's parameters once more (DeepSpeed's
 * stage 3 under activation checkpointing), in the engine and in dtsim's workload alike. */
static void zero3_bytes_match_under_full_recompute(void **state)
{
    (void)state;
    zero3_bytes_match("full");
}

int main(int argc, char **argv)
{
    int begun = dtrain_suite_begin(argc, argv, 4, &DTRAIN, &MPIRUN);
    if (begun >= 0)
        return begun;
    DIR = argv[3];
    const struct CMUnitTest tests[] = {cmocka_unit_test(layouts), cmocka_unit_test(llama_layouts),
                                       cmocka_unit_test(expert_layouts),
                                       cmocka_unit_test(zero3_bytes_match_the_workload),
                                       cmocka_unit_test(zero3_bytes_match_under_full_recompute)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
