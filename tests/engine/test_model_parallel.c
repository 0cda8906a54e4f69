/* Tensor and pipeline parallelism under mpirun on CPU: for the same seed, global batch and data,
 * every layout logs each step's loss equal to the single-rank run's within 1e-5 relative and
 * the same gradient norm, and ends (after 5 steps) with gathered parameters equal to 1e-5
 * relative (2-norm): TP 2 and 4; PP 2 and 4
 * with GPipe, 1F1B and interleaved 1F1B (2 chunks per stage); an uneven layer split; TP 2 x
 * PP 2 x DP 2 with ZeRO-1. Bad layouts (TP not dividing the heads, more stages than layers, a
 * split that does not add up) stop every rank with a clear error and no hang.
 * argv[1]: dtrain, argv[2]: mpirun, argv[3]: a scratch folder, argv[4] (optional) "llama": the
 * same check for Llama's blocks over a set of layouts (llama_blocks); "moe": mixture of experts
 * (experts); "moe_ep": expert parallelism against the same single-rank (EP 1) run
 * (expert_parallel) and its refusals; "cp": context parallelism in its three forms (ring
 * attention, all-gather and all-to-all), the whole-sequence fallbacks, and their refusals. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "run_dtrain.h"

static const char *DTRAIN, *MPIRUN, *DIR;
static int LLAMA; /* argv[4] "llama": Llama's blocks (llama_blocks below) */
static int CP;    /* argv[4] "cp": context parallelism (context_parallel_* below) */
static int MOE;   /* argv[4] "moe" or "moe_ep": mixture of experts (experts, expert_parallel below) */
static char MODEL[4096], SINGLE[4096];
static json_t *S[64];
static int NS;
static char ERR[65536];

/* 8 layers (so 4 stages x 2 chunks each get one), 4 heads, small enough to run in a second. */
#define LR 3e-3 /* the learning rate of every run here */
#define TEXT_OF(x) #x
#define TEXT(x) TEXT_OF(x)
static const char *COMMON = "--steps 5 --micro-batch 2 --global-batch 8 --seed 5 --lr " TEXT(LR) " --warmup 1";
/* with experts: their load-balancing loss on */
static const char *COMMON_MOE = "--steps 5 --micro-batch 2 --global-batch 8 --seed 5 --lr " TEXT(LR) " --warmup 1 "
                                "--moe-aux-loss-coeff 0.01";

static int setup(void **state)
{
    (void)state;
    snprintf(MODEL, sizeof MODEL, "%s/mp_model.json", DIR);
    FILE *f = fopen(MODEL, "w");
    if (!f)
        return -1;
    if (MOE) /* 4 experts, 2 per token, dropless: a capacity's drop of a token whose weight ties
              * another's within rounding is a step of the loss, which summation order may take or not
              * (measured: TP 2 at step 4, 4e-6 of the loss); test_moe_routing checks the drops */
        fprintf(f, "{\"num_layers\": 8, \"hidden_size\": 64, \"num_attention_heads\": 4, \"seq_length\": 32, "
                   "\"num_experts\": 4, \"moe_router_topk\": 2}\n");
    else if (LLAMA) /* dtsim's model keys: 8 heads in 4 query groups, SwiGLU (so RMSNorm and rope), untied head */
        fprintf(f, "{\"num_layers\": 8, \"hidden_size\": 64, \"num_attention_heads\": 8, \"num_query_groups\": 4, "
                   "\"ffn_hidden_size\": 160, \"swiglu\": true, \"seq_length\": 32, "
                   "\"untie_embeddings_and_output_weights\": true}\n");
    else
        fprintf(f, "{\"num_layers\": 8, \"hidden\": 64, \"heads\": 4, \"seq_len\": 32}\n");
    fclose(f);
    snprintf(SINGLE, sizeof SINGLE, "%s/mp_single.bin", DIR);
    char args[1024];
    format_whole(args, "--model %s %s --dump-params %s", MODEL, MOE ? COMMON_MOE : COMMON, SINGLE);
    int rc = run_dtrain(DTRAIN, args, S, 64, &NS, ERR, sizeof ERR);
    if (rc != 0 || NS != 6) {
        fprintf(stderr, "single-rank run failed (%d): %s\n", rc, ERR);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free_lines(S, NS);
    remove(SINGLE);
    remove(MODEL);
    return 0;
}

static void equivalent(int ranks, const char *layout)
{
    char launcher[4096], args[8192], dump[4096];
    json_t *D[64];
    int nd;
    snprintf(dump, sizeof dump, "%s/mp_multi.bin", DIR);
    /* run_dtrain quotes its first argument: launch mpirun through it */
    snprintf(launcher, sizeof launcher, "%s' --oversubscribe -np %d '%s", MPIRUN, ranks, DTRAIN);
    format_whole(args, "%s --model %s %s --dump-params %s", layout, MODEL, MOE ? COMMON_MOE : COMMON, dump);
    int rc = run_dtrain(launcher, args, D, 64, &nd, ERR, sizeof ERR);
    if (rc != 0)
        fail_msg("%s exited %d: %s", layout, rc, ERR);
    assert_int_equal(nd, NS);
    double worst = 0;
    for (int i = 0; i < NS - 1; i++) {
        double a = json_number_value(json_object_get(S[i], "loss")), b = json_number_value(json_object_get(D[i], "loss"));
        worst = fmax(worst, fabs(a - b) / fabs(a));
        if (fabs(a - b) > 1e-5 * fabs(a))
            fail_msg("%s step %d: loss %.9g vs single-rank %.9g", layout, i + 1, b, a);
        /* the global gradient norm: every gradient of every rank, each counted once */
        a = json_number_value(json_object_get(S[i], "grad_norm"));
        b = json_number_value(json_object_get(D[i], "grad_norm"));
        if (fabs(a - b) > 1e-5 * fabs(a))
            fail_msg("%s step %d: gradient norm %.9g vs single-rank %.9g", layout, i + 1, b, a);
    }
    /* the routing's balance (engine/gpt_moe_ep.c): every step has one with experts, none without;
     * one rank is the busiest of one, EP ranks' is in [1, ep] (ep: the most it can be, every row
     * on one rank) and above 1 unless every layer and micro-batch split its rows exactly evenly */
    const char *at = strstr(layout, "--ep ");
    at = at ? at : strstr(layout, "--expert-model-parallel-size ");
    int ep = at ? atoi(strchr(at, ' ') + 1) : 1;
    for (int i = 0; i < NS - 1; i++) {
        json_t *a = json_object_get(S[i], "moe_load_imbalance"), *b = json_object_get(D[i], "moe_load_imbalance");
        if (!MOE) {
            assert_null(a);
            assert_null(b);
            continue;
        }
        assert_true(json_is_number(a) && json_number_value(a) == 1.0);
        double x = json_number_value(b);
        if (!json_is_number(b) || x < 1 || x > ep || (ep > 1 && x <= 1) || (ep == 1 && x != 1))
            fail_msg("%s step %d: moe_load_imbalance %s (%g; EP %d)", layout, i + 1,
                     json_is_number(b) ? "out of range" : "missing", x, ep);
    }
    size_t n1 = 0, n2 = 0;
    float *p1 = load_params(SINGLE, &n1), *p2 = load_params(dump, &n2);
    assert_non_null(p1);
    assert_non_null(p2);
    assert_int_equal(n1, n2);
    /* Relative to the whole parameter vector (2-norm). Element by element the layouts differ by
     * up to ~1e-5 of the largest parameter after 5 steps: AdamW divides each gradient by its own
     * running magnitude (plus eps 1e-8), so a weight whose gradient is near zero (a GELU unit
     * that is almost never active) turns rounding-level differences of summation order (TP sums
     * partial products) into update differences of a fraction of lr. On CUDA, cuBLAS picks its
     * tiling (and so its summation order) by shape, so a rank's narrower GEMM sums otherwise than
     * the single rank's: a handful of such elements pass 1e-4 of the largest (1.1e-4 seen, CP 2 x
     * TP 2 on an H200). So: at most one element in 10^4 beyond 1e-4 of the largest, and none
     * beyond one step's AdamW update (lr): a wrong gradient moves whole tensors, by steps x lr. */
    double num = 0, den = 0, worst_el = 0, big = 1e-30;
    for (size_t i = 0; i < n1; i++) {
        double d = (double)p1[i] - p2[i];
        num += d * d;
        den += (double)p1[i] * p1[i];
        worst_el = fmax(worst_el, fabs(d));
        big = fmax(big, fabs(p1[i]));
    }
    size_t beyond = 0;
    for (size_t i = 0; i < n1; i++)
        beyond += fabs((double)p1[i] - p2[i]) > 1e-4 * big;
    double rel = sqrt(num / den);
    print_message("%-40s loss rel. diff %.1e; parameters rel. diff %.1e (2-norm), %.1e (largest element), "
                  "%zu of %zu beyond 1e-4\n", layout, worst, rel, worst_el / big, beyond, n1);
    assert_true(rel <= 1e-5);
    assert_true(beyond * 10000 <= n1);
    assert_true(worst_el <= LR);
    free(p1);
    free(p2);
    remove(dump);
    free_lines(D, nd);
}

static void tensor_parallel(void **state)
{
    (void)state;
    equivalent(2, "--tp 2");
    equivalent(4, "--tp 4");
}

/* Sequence parallelism: the same model as TP alone (the norms' and residuals' tokens split over
 * the TP ranks, all-gather and reduce-scatter in place of the all-reduces, the norms' gradients
 * summed over TP), so the same single-rank reference, within summation order; with a pipeline
 * (each TP rank sends its block of tokens), ZeRO-3 and recomputation. */
static void sequence_parallel(void **state)
{
    (void)state;
    equivalent(2, "--tp 2 --sequence-parallel");
    equivalent(4, "--tp 4 --sequence-parallel");
    equivalent(4, "--tp 2 --pp 2 --sequence-parallel");
    equivalent(4, "--tp 2 --pp 2 --schedule interleaved --vpp 2 --sequence-parallel --recompute-granularity full");
    equivalent(4, "--tp 2 --dp 2 --zero 3 --sequence-parallel");
}

/* Context parallelism: each sequence's 32 positions split over the CP ranks in 2 x CP chunks
 * (causal load balancing), gradients summed over DP x CP: the single-rank model, with TP, SP, PP,
 * ZeRO and recomputation. Ring attention (--cp-comm-type p2p, the default): K/V blocks passed
 * around the CP ranks, partial outputs merged by their log-sum-exp, K/V gradients sent home. */
static void context_parallel_ring(void **state)
{
    (void)state;
    equivalent(2, "--cp 2");
    equivalent(4, "--cp 4 --cp-comm-type p2p");
    equivalent(4, "--cp 2 --tp 2");
    equivalent(4, "--cp 2 --tp 2 --sequence-parallel");
    equivalent(4, "--cp 2 --pp 2 --recompute-granularity full");
    equivalent(2, "--cp 2 --recompute-granularity selective");
    equivalent(4, "--cp 2 --dp 2 --zero 1");
    equivalent(8, "--cp 2 --dp 2 --pp 2 --zero 3 --schedule interleaved --vpp 2");
}

/* --cp-comm-type all_gather: K/V gathered for the attention and their gradients reduce-scattered
 * back. */
static void context_parallel_all_gather(void **state)
{
    (void)state;
    equivalent(2, "--cp 2 --cp-comm-type all_gather");
    equivalent(4, "--cp 4 --cp-comm-type all_gather");
    equivalent(4, "--cp 2 --tp 2 --sequence-parallel --cp-comm-type all_gather");
    equivalent(4, "--cp 2 --dp 2 --zero 1 --cp-comm-type all_gather");
}

/* --cp-comm-type a2a (DeepSpeed-Ulysses): an all-to-all gives each CP rank the whole sequence of
 * 1/cp of the heads, plain causal attention runs there, and a second one sends the output back;
 * the backward mirrors them from the head-sharded tensors the forward kept (or, under selective
 * recomputation, reran). */
static void context_parallel_a2a(void **state)
{
    (void)state;
    equivalent(2, "--cp 2 --cp-comm-type a2a");
    equivalent(4, "--cp 4 --cp-comm-type a2a");
    equivalent(4, "--cp 2 --tp 2 --sequence-parallel --cp-comm-type a2a");
    equivalent(2, "--cp 2 --cp-comm-type a2a --recompute-granularity selective");
    equivalent(4, "--cp 2 --pp 2 --cp-comm-type a2a --recompute-granularity full");
    equivalent(4, "--cp 2 --dp 2 --zero 1 --cp-comm-type a2a");
}

/* The backend without the block and positional kernels (CUDA's, for now): the ring brings the
 * whole sequence's K/V and sends their gradients home, around the whole-sequence kernel. */
static void context_parallel_fallbacks(void **state)
{
    (void)state;
    equivalent(4, "--cp 4 --test-plain-attention");
    equivalent(4, "--cp 2 --tp 2 --test-plain-attention");
    equivalent(2, "--cp 2 --cp-comm-type all_gather --test-plain-attention");
}

/* The two forms against each other, step by step: the same losses and gradient norms. */
static void context_parallel_ring_matches_all_gather(void **state)
{
    (void)state;
    json_t *R[2][64];
    int n[2] = {0, 0};
    const char *form[2] = {"p2p", "all_gather"};
    for (int i = 0; i < 2; i++) {
        char launcher[4096], args[8192];
        snprintf(launcher, sizeof launcher, "%s' --oversubscribe -np 4 '%s", MPIRUN, DTRAIN);
        snprintf(args, sizeof args, "--cp 4 --cp-comm-type %s --model %s %s", form[i], MODEL, COMMON);
        int rc = run_dtrain(launcher, args, R[i], 64, &n[i], ERR, sizeof ERR);
        if (rc != 0)
            fail_msg("--cp 4 --cp-comm-type %s exited %d: %s", form[i], rc, ERR);
    }
    assert_int_equal(n[0], n[1]);
    for (int i = 0; i < n[0] - 1; i++)
        for (int f = 0; f < 2; f++) {
            const char *key = f ? "grad_norm" : "loss";
            double a = json_number_value(json_object_get(R[0][i], key));
            double b = json_number_value(json_object_get(R[1][i], key));
            if (!(fabs(a - b) <= 1e-5 * fabs(b)))
                fail_msg("step %d: %s %.9g under p2p vs %.9g under all_gather", i + 1, key, a, b);
        }
    free_lines(R[0], n[0]);
    free_lines(R[1], n[1]);
}

static void refused(int ranks, const char *layout, const char *message);

static void context_parallel_refusals(void **state)
{
    (void)state;
    refused(2, "--cp 3", "ranks");
    refused(2, "--cp 2 --cp-comm-type a2a+p2p", "--cp-comm-type: 'a2a+p2p' is not p2p, all_gather or a2a");
    /* 4 heads: TP 2 leaves 2 a rank, which CP 4 cannot split */
    refused(8, "--cp 4 --tp 2 --cp-comm-type a2a", "splits each TP rank's 2 heads over the 4 CP ranks");
}

/* --tp-comm-overlap: the same collectives as rings of TP steps, each beside the GEMM of the block
 * of tokens already at hand (a GEMM in row blocks, its weight gradient summed block by block): the
 * same model within summation order. */
static void tp_comm_overlap(void **state)
{
    (void)state;
    equivalent(2, "--tp 2 --sequence-parallel --tp-comm-overlap");
    equivalent(4, "--tp 4 --sequence-parallel --tp-comm-overlap");
    equivalent(4, "--tp 2 --pp 2 --sequence-parallel --tp-comm-overlap --recompute-granularity full");
}

static void pipeline_parallel_every_schedule(void **state)
{
    (void)state;
    equivalent(2, "--pp 2 --schedule gpipe");
    equivalent(2, "--pp 2 --schedule 1f1b");
    equivalent(2, "--pp 2 --schedule interleaved --vpp 2");
    equivalent(4, "--pp 4 --schedule gpipe");
    equivalent(4, "--pp 4 --schedule 1f1b");
    equivalent(4, "--pp 4 --schedule interleaved --vpp 2");
}

static void uneven_pipeline_layers(void **state)
{
    (void)state;
    equivalent(2, "--pp 2 --pipeline-layers 3,5");
}

static void three_dimensional(void **state)
{
    (void)state;
    equivalent(8, "--tp 2 --pp 2 --dp 2 --zero 1");
}

/* ZeRO-2/3 with a pipeline: the tied embedding's two ends each hold their gradient reduced over
 * DP and sharded (each in its own stage's shard layout), and sum them gathered. */
static void sharded_gradients_with_pipeline(void **state)
{
    (void)state;
    equivalent(4, "--pp 2 --dp 2 --zero 2");
    equivalent(4, "--pp 2 --dp 2 --zero 3 --schedule interleaved --vpp 2");
}

/* Runs a layout that must be refused; checks every rank stopped (no hang) with the message. */
static void refused(int ranks, const char *layout, const char *message)
{
    char cmd[4096], errf[1024];
    snprintf(errf, sizeof errf, "%s/mp_err.txt", DIR);
    format_whole(cmd, "timeout 60 '%s' --oversubscribe -np %d '%s' --model %s %s %s 2>%s >/dev/null", MPIRUN, ranks,
                 DTRAIN, MODEL, COMMON, layout, errf);
    int st = system(cmd);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    FILE *f = fopen(errf, "r");
    size_t got = f ? fread(ERR, 1, sizeof ERR - 1, f) : 0;
    ERR[got] = 0;
    if (f)
        fclose(f);
    remove(errf);
    if (rc == 0 || rc == 124 || !strstr(ERR, message))
        fail_msg("%s: exit %d (want non-zero, not a hang), stderr: %s", layout, rc, ERR);
}

static void bad_layouts_stop_every_rank(void **state)
{
    (void)state;
    refused(3, "--tp 3", "must divide the heads");
    refused(2, "--pp 2 --pipeline-layers 3,4", "sum");
    refused(4, "--pp 4 --schedule interleaved --vpp 4", "fewer than its 4 model chunks");
    refused(2, "--pp 2 --schedule interleaved", "interleaved");
    refused(2, "--dp 2 --sequence-parallel", "--tp 2 or more");
    refused(2, "--tp 2 --tp-comm-overlap", "needs --sequence-parallel");
}

/* Llama's blocks (RMSNorm, rotary embeddings at each rank's positions, grouped-query attention
 * with the groups split over TP, SwiGLU with its gate and up halves split over TP, an untied LM
 * head that needs no sum between the pipeline's ends) under every kind of split. */
static void llama_blocks(void **state)
{
    (void)state;
    equivalent(2, "--tp 2");
    equivalent(4, "--tp 4 --sequence-parallel");
    equivalent(4, "--tp 2 --pp 2 --sequence-parallel --tp-comm-overlap --recompute-granularity full");
    equivalent(2, "--pp 2 --schedule interleaved --vpp 2");
    equivalent(4, "--cp 2 --tp 2 --sequence-parallel");
    equivalent(2, "--cp 2 --recompute-granularity selective");
    equivalent(2, "--cp 2 --cp-comm-type a2a"); /* each rank's 2 groups sent, repeated to 4 heads on arrival */
    equivalent(4, "--cp 2 --tp 2 --sequence-parallel --cp-comm-type a2a");
    /* 8 heads in 4 groups: TP 2 leaves 4 heads but 2 groups a rank, which CP 4 cannot split */
    refused(8, "--cp 4 --tp 2 --cp-comm-type a2a", "splits each TP rank's 2 query groups over the 4 CP ranks");
    equivalent(8, "--tp 2 --pp 2 --dp 2 --zero 1");
    equivalent(4, "--pp 2 --dp 2 --zero 3 --schedule interleaved --vpp 2");
}

/* Mixture of experts with the load-balancing loss on: without SP the router sees every token of a
 * micro-batch on every TP rank; with SP each TP rank routes its own and the experts' rows go
 * through the TP group (Megatron-Core's dispatch), the loss's counts and the router's gradient
 * summed over it. Either way the split routes as one rank does (dropless); the experts' MLPs
 * split over TP as the dense one. Under CP each CP rank routes its positions of the sequences and
 * the loss's counts are the CP group's (the router's gradient joins the DP x CP reduction). */
static void experts(void **state)
{
    (void)state;
    equivalent(2, "--tp 2");
    equivalent(2, "--tp 2 --sequence-parallel");
    /* under SP each TP rank routes its own tokens (engine/gpt_moe.c): again in the recomputation */
    equivalent(4, "--tp 2 --pp 2 --sequence-parallel --recompute-granularity full");
    equivalent(4, "--tp 2 --recompute-granularity full --pp 2");
    equivalent(2, "--pp 2 --schedule interleaved --vpp 2");
    equivalent(8, "--tp 2 --pp 2 --dp 2 --zero 1");
    equivalent(4, "--pp 2 --dp 2 --zero 3");
    equivalent(2, "--cp 2");
    equivalent(4, "--cp 2 --tp 2 --sequence-parallel");
}

/* Expert parallelism (--expert-model-parallel-size): each EP rank holds 2 or 1 of the 4 experts,
 * routes its own tokens and sends the rows to their experts' ranks and back; the experts'
 * gradients are summed over the expert-data-parallel group, their norm over the EP group. The
 * reference is the single-rank run (EP 1): same losses and gradient norms, same final gathered
 * parameters, within summation order (an expert's GEMM runs over every EP rank's rows at once).
 * With CP the EP groups are carved from the DP x CP ranks, CP first (Megatron-Core's expert
 * grid): CP 2 x EP 2 is one replica's two CP ranks, CP 2 x DP 2 x EP 4 all four. */
static void expert_parallel(void **state)
{
    (void)state;
    equivalent(2, "--dp 2 --ep 2");
    equivalent(4, "--dp 4 --expert-model-parallel-size 2");
    equivalent(4, "--dp 4 --ep 4");
    equivalent(4, "--tp 2 --dp 2 --ep 2");
    equivalent(4, "--tp 2 --dp 2 --ep 2 --sequence-parallel");
    equivalent(4, "--pp 2 --dp 2 --ep 2 --recompute-granularity full");
    equivalent(8, "--tp 2 --pp 2 --dp 2 --ep 2 --schedule interleaved --vpp 2");
    equivalent(2, "--cp 2 --ep 2");
    equivalent(4, "--cp 2 --dp 2 --ep 2");
    equivalent(4, "--cp 2 --dp 2 --ep 4");
    equivalent(8, "--tp 2 --cp 2 --dp 2 --ep 2 --sequence-parallel");
    equivalent(4, "--pp 2 --cp 2 --ep 2 --cp-comm-type all_gather");
}

/* Expert parallelism with ZeRO-1 and ZeRO-2 (Megatron-Core's distributed optimizer): the dense
 * parameters update sharded over the DP group, the experts' over the expert-DP group (DP 2 x EP
 * 2: each rank's experts whole; DP 4 x EP 2: halves), each shard all-gathered over its own
 * group; under ZeRO-2 each backward pass's gradients are reduce-scattered into those shards; under
 * ZeRO-3 (Megatron-FSDP's or DeepSpeed-MoE's layout) the parameters stay in those shards too. */
static void expert_parallel_zero(void **state)
{
    (void)state;
    equivalent(2, "--dp 2 --ep 2 --zero 1");
    equivalent(4, "--dp 4 --ep 2 --zero 1");
    equivalent(4, "--dp 4 --ep 4 --zero 1");
    equivalent(4, "--tp 2 --dp 2 --ep 2 --zero 1");
    equivalent(2, "--dp 2 --ep 2 --zero 2");
    equivalent(4, "--dp 4 --ep 2 --zero 2");
    equivalent(4, "--pp 2 --dp 2 --ep 2 --zero 2");
    equivalent(4, "--cp 2 --dp 2 --ep 2 --zero 1");
    /* ZeRO-3: the parameters too, packed by kind; each pass gathers its window, dense over DP and
     * experts over the expert-DP group */
    equivalent(2, "--dp 2 --ep 2 --zero 3");
    equivalent(4, "--dp 4 --ep 2 --zero 3");
    equivalent(4, "--pp 2 --dp 2 --ep 2 --zero 3");
    equivalent(4, "--tp 2 --dp 2 --ep 2 --zero 3 --sequence-parallel");
    equivalent(4, "--dp 4 --ep 2 --zero 3 --recompute-granularity full");
    equivalent(4, "--cp 2 --dp 2 --ep 4 --zero 3");
}

/* --overlap-grad-reduce with EP: each bucket's dense part all-reduced over DP and its expert part
 * over the expert-DP group, started as the backward passes end (ZeRO-0 and ZeRO-1; under PP the
 * tied embedding waits for the step's end). Buckets of 0.5 MiB: a layer or two each. With
 * --overlap-param-gather (ZeRO-1) each bucket's updated parameters are all-gathered the same way,
 * dense over DP and experts over the expert-DP group, each landed by the next forward that reads
 * the bucket (Megatron-Core's MoE recipes run the distributed optimizer so). */
static void expert_parallel_overlap(void **state)
{
    (void)state;
    equivalent(4, "--dp 4 --ep 2 --overlap-grad-reduce --bucket-mb 0.5");
    equivalent(4, "--dp 4 --ep 2 --zero 1 --overlap-grad-reduce --bucket-mb 0.5");
    equivalent(4, "--pp 2 --dp 2 --ep 2 --overlap-grad-reduce --bucket-mb 0.5");
    equivalent(4, "--dp 4 --ep 2 --zero 1 --overlap-grad-reduce --overlap-param-gather --bucket-mb 0.5");
    equivalent(4, "--pp 2 --dp 2 --ep 2 --zero 1 --overlap-grad-reduce --overlap-param-gather --bucket-mb 0.5");
    equivalent(4, "--cp 2 --dp 2 --ep 4 --zero 1 --overlap-grad-reduce --overlap-param-gather --bucket-mb 0.5");
}

/* --grad-reduce bf16 under EP (Megatron-LM's --grad-reduce-in-bf16): the dense gradients travel
 * and are summed as bf16 over DP, the experts' over the expert-DP group (ZeRO-0/1 all-reduced
 * whole, ZeRO-2 reduce-scattered pass by pass). Training goes on as in fp32, every step's loss
 * within 1e-3 of the single-rank run's; and the reduction did round: the gradient norms are not
 * the fp32 reduction's, step after step. */
static void expert_parallel_bf16_reduction(void **state)
{
    (void)state;
    const char *layouts[] = {"--dp 2 --ep 2", "--dp 4 --ep 2 --zero 1", "--dp 4 --ep 2 --zero 2"};
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        json_t *R[2][64];
        int n[2];
        for (int bf16 = 0; bf16 < 2; bf16++) {
            char launcher[4096], args[8192];
            int ranks = strstr(layouts[l], "--dp 4") ? 4 : 2;
            snprintf(launcher, sizeof launcher, "%s' --oversubscribe -np %d '%s", MPIRUN, ranks, DTRAIN);
            snprintf(args, sizeof args, "%s --grad-reduce %s --model %s %s", layouts[l], bf16 ? "bf16" : "fp32", MODEL,
                     COMMON_MOE);
            if (run_dtrain(launcher, args, R[bf16], 64, &n[bf16], ERR, sizeof ERR) != 0)
                fail_msg("%s: %s", args, ERR);
        }
        assert_int_equal(n[0], NS);
        assert_int_equal(n[1], NS);
        int rounded = 0;
        for (int i = 0; i < NS - 1; i++) {
            double a = json_number_value(json_object_get(S[i], "loss"));
            double b = json_number_value(json_object_get(R[1][i], "loss"));
            if (fabs(a - b) > 1e-3 * fabs(a))
                fail_msg("%s --grad-reduce bf16, step %d: loss %.9g vs single-rank %.9g", layouts[l], i + 1, b, a);
            double g32 = json_number_value(json_object_get(R[0][i], "grad_norm"));
            double g16 = json_number_value(json_object_get(R[1][i], "grad_norm"));
            rounded += fabs(g16 - g32) > 1e-6 * fabs(g32);
        }
        print_message("%s --grad-reduce bf16: losses within 1e-3 of one rank's; gradient norms off fp32's at %d of %d "
                      "steps\n", layouts[l], rounded, NS - 1);
        assert_true(rounded == NS - 1);
        free_lines(R[0], n[0]);
        free_lines(R[1], n[1]);
    }
}

/* The logged routing is the busiest EP group's and pipeline stage's (the step waits for the
 * slowest). With PP 2 each stage's 4 layers have their own balance, and the single-stage run's
 * figure is the mean of the two (the same data and weights route alike, layer by layer), so the
 * PP run's is the larger: at least the single-stage figure at every step, at most 2 x it - 1 (the
 * other stage's is at least 1). Rank 0's own figure alone (stage 0) falls below the single-stage
 * one at the steps where stage 1 is the busier, as it does here from step 2. */
static void expert_load_is_the_busiest_stages(void **state)
{
    (void)state;
    json_t *A[64], *B[64];
    int na, nb;
    char launcher[4096], args[8192];
    snprintf(args, sizeof args, "--dp 2 --ep 2 --model %s %s", MODEL, COMMON_MOE);
    snprintf(launcher, sizeof launcher, "%s' --oversubscribe -np 2 '%s", MPIRUN, DTRAIN);
    if (run_dtrain(launcher, args, A, 64, &na, ERR, sizeof ERR) != 0)
        fail_msg("--dp 2 --ep 2: %s", ERR);
    snprintf(args, sizeof args, "--pp 2 --dp 2 --ep 2 --model %s %s", MODEL, COMMON_MOE);
    snprintf(launcher, sizeof launcher, "%s' --oversubscribe -np 4 '%s", MPIRUN, DTRAIN);
    if (run_dtrain(launcher, args, B, 64, &nb, ERR, sizeof ERR) != 0)
        fail_msg("--pp 2 --dp 2 --ep 2: %s", ERR);
    assert_int_equal(na, nb);
    int above = 0;
    for (int i = 0; i < na - 1; i++) {
        double a = json_number_value(json_object_get(A[i], "moe_load_imbalance"));
        double b = json_number_value(json_object_get(B[i], "moe_load_imbalance"));
        print_message("step %d: one stage %.9g, PP 2 %.9g\n", i + 1, a, b);
        if (!(a >= 1 && b >= a - 1e-12 && b <= 2 * a - 1 + 1e-12))
            fail_msg("step %d: PP 2 logged %.9g where the stages' mean is %.9g", i + 1, b, a);
        above += b > a + 1e-12;
    }
    assert_true(above > 0); /* the stages differ: the figure is their larger, not their mean */
    free_lines(A, na);
    free_lines(B, nb);
}

/* Layouts expert parallelism cannot take stop every rank, naming the flag and the values. */
static void expert_parallel_refusals(void **state)
{
    (void)state;
    refused(4, "--dp 4 --ep 3", "--expert-model-parallel-size 3: expert-parallel ranks are carved out of the "
                                "data-parallel ranks, so it must divide --dp (4)");
    refused(3, "--dp 3 --ep 3 --global-batch 6", "3 must divide num_experts (4)");
    refused(6, "--cp 2 --dp 3 --ep 4 --global-batch 6", "it must divide --dp x --cp (3 x 2 = 6)");
    refused(2, "--dp 2 --ep 2 --model tiny", "has none (num_experts 0)");
}

int main(int argc, char **argv)
{
    LLAMA = argc > 4 && !strcmp(argv[4], "llama");
    CP = argc > 4 && !strcmp(argv[4], "cp");
    int ep = argc > 4 && !strcmp(argv[4], "moe_ep");
    MOE = (argc > 4 && !strcmp(argv[4], "moe")) || ep;
    int begun = dtrain_suite_begin(argc, argv, 4, &DTRAIN, &MPIRUN);
    if (begun >= 0)
        return begun;
    DIR = argv[3];
    const struct CMUnitTest llama[] = {cmocka_unit_test(llama_blocks)};
    const struct CMUnitTest moe[] = {cmocka_unit_test(experts)};
    const struct CMUnitTest moe_ep[] = {cmocka_unit_test(expert_parallel), cmocka_unit_test(expert_parallel_zero),
                                        cmocka_unit_test(expert_parallel_bf16_reduction),
                                        cmocka_unit_test(expert_parallel_overlap),
                                        cmocka_unit_test(expert_load_is_the_busiest_stages),
                                        cmocka_unit_test(expert_parallel_refusals)};
    const struct CMUnitTest cp[] = {cmocka_unit_test(context_parallel_ring), cmocka_unit_test(context_parallel_all_gather),
                                    cmocka_unit_test(context_parallel_a2a),
                                    cmocka_unit_test(context_parallel_ring_matches_all_gather),
                                    cmocka_unit_test(context_parallel_fallbacks),
                                    cmocka_unit_test(context_parallel_refusals)};
    if (ep)
        return cmocka_run_group_tests(moe_ep, setup, teardown);
    if (CP)
        return cmocka_run_group_tests(cp, setup, teardown);
    if (LLAMA)
        return cmocka_run_group_tests(llama, setup, teardown);
    if (MOE)
        return cmocka_run_group_tests(moe, setup, teardown);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tensor_parallel),
        cmocka_unit_test(sequence_parallel),
        cmocka_unit_test(tp_comm_overlap),
        cmocka_unit_test(pipeline_parallel_every_schedule),
        cmocka_unit_test(uneven_pipeline_layers),
        cmocka_unit_test(three_dimensional),
        cmocka_unit_test(sharded_gradients_with_pipeline),
        cmocka_unit_test(bad_layouts_stop_every_rank),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
