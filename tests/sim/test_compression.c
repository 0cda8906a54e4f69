/* Gradient compression (sim/step/compression.c): the DP wire bytes of each method against closed
 * forms derived here from the model's shapes, the compute it adds against a hand computation,
 * the step time it buys or costs, the scenario rules, and the flow replay of its tasks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "compression.h"
#include "fixture.h"
#include "params.h"
#include "run.h"
#include "workload.h"

#define REL(a, b) (fabs((a) - (b)) <= 1e-9 * fabs(b))

/* The fixture's model, DP n on nodes of 8 GPUs, TP = PP = 1. */
static void scenario_dp(scenario_config *s, int layers, int dp)
{
    fixture_scenario(s, layers);
    /* fp16: the plain reduction is in the gradients' own 2 bytes ("auto" under bf16 reduces in
     * fp32, as Megatron does), which the closed forms below take as the uncompressed wire */
    s->training.precision = PREC_FP16;
    fixture_layout(s, 1, 1, dp, 2 * dp);
}

/* The methods: top-k of a ratio of the gradients, PowerSGD of a rank, int8 blocks with a scale. */
static void use_topk(scenario_config *s, double ratio)
{
    s->parallel.grad_compression = GRAD_COMPRESSION_TOPK;
    s->parallel.topk_ratio = ratio;
}

static void use_powersgd(scenario_config *s, int rank)
{
    s->parallel.grad_compression = GRAD_COMPRESSION_POWERSGD;
    s->parallel.powersgd_rank = rank;
}

static void use_int8(scenario_config *s)
{
    s->parallel.grad_reduce_int8 = 1;
    s->parallel.grad_reduce_bytes = 1 + 4.0 / GRAD_INT8_BLOCK;
}

typedef struct {
    dp_sync_totals with, without;
} both_totals;

static both_totals totals_of(const scenario_config *s)
{
    both_totals t;
    step_workload w;
    fixture_build(s, &w);
    compression_totals(&w, 0, &t.with);
    workload_free(&w);
    scenario_config off = *s;
    off.parallel.grad_compression = GRAD_COMPRESSION_NONE;
    off.parallel.grad_reduce_bytes = 0;
    off.parallel.grad_reduce_int8 = 0;
    fixture_build(&off, &w);
    compression_totals(&w, 0, &t.without);
    workload_free(&w);
    return t;
}

/* The fixture's GPT layer (h 1024, f 4h, MHA, biases, learned positions), derived by hand:
 * QKV 3h x h + 3h, projection h x h + h, MLP 2 h f + f + h, two norms 4h. */
static double fixture_layer_elements(const scenario_config *s)
{
    double h = (double)s->model.hidden_size, f = (double)s->model.ffn_hidden_size;
    return 3 * h * h + 3 * h + h * h + h + 2 * h * f + f + h + 4 * h;
}

static double fixture_stage0_elements(const scenario_config *s)
{
    double h = (double)s->model.hidden_size;
    return (double)s->model.num_layers * fixture_layer_elements(s) +
           ((double)s->model.vocab_size + (double)s->model.seq_length) * h + 2 * h; /* + the final norm */
}

static void plain_reduction_is_the_uncompressed_closed_form(void **state)
{
    (void)state;
    scenario_config s;
    scenario_dp(&s, 4, 8);
    use_topk(&s, 0.01);
    both_totals t = totals_of(&s);
    double n = 8, E = fixture_stage0_elements(&s);
    /* ring all-reduce of E bf16 values: each rank sends 2 (n-1)/n of them */
    assert_true(REL(t.without.wire_bytes, 2 * (n - 1) / n * E * 2));
    fixture_free(&s);
}

static void topk_sends_dp_times_k_pairs(void **state)
{
    (void)state;
    scenario_config s;
    scenario_dp(&s, 4, 8);
    use_topk(&s, 0.01);
    both_totals t = totals_of(&s);
    double n = 8, E = fixture_stage0_elements(&s), rho = 0.01;
    /* all-gather of n k (value, int32 index) pairs: each rank sends (n-1)/n of the gathered
     * n k (2 + 4) bytes, i.e. (n-1) k 6; the ratio to the all-reduce is n rho (2+4) / (2 x 2) */
    assert_true(REL(t.with.wire_bytes, (n - 1) * rho * E * 6));
    assert_true(REL(t.with.wire_bytes / t.without.wire_bytes, n * rho * 6 / 4));
    fixture_free(&s);
}

static void int8_sends_a_byte_and_a_shared_scale(void **state)
{
    (void)state;
    double q = 1 + 4.0 / GRAD_INT8_BLOCK;
    for (int zero = 0; zero <= 1; zero++) {
        scenario_config s;
        scenario_dp(&s, 4, 16); /* two nodes: the hierarchical form */
        s.parallel.zero_stage = zero;
        use_int8(&s); /* q bytes per gradient */
        both_totals t = totals_of(&s);
        double n = 16, E = fixture_stage0_elements(&s);
        /* ZeRO 0: reduce-scatter then all-gather of q E; ZeRO 1: the reduce-scatter alone,
         * against a bf16 all-reduce resp. reduce-scatter of 2 E */
        double with = (zero ? 1 : 2) * (n - 1) / n * E * q;
        assert_true(REL(t.with.wire_bytes, with));
        assert_true(REL(t.with.wire_bytes / t.without.wire_bytes, q / 2));
        fixture_free(&s);
    }
}

/* PowerSGD's factors, per layer: QKV (3h + h) r, projection (h + h) r, fc1 and fc2 (f + h) r
 * each, the 9h + f vector elements uncompressed; the embedding's (V + h) r and positions'
 * (S + h) r; the final norm's 2h uncompressed. */
static double powersgd_elements_sent(const scenario_config *s, int r)
{
    double h = (double)s->model.hidden_size, f = (double)s->model.ffn_hidden_size;
    double V = (double)s->model.vocab_size, S = (double)s->model.seq_length;
    double layer = (4 * h + 2 * h + 2 * (f + h)) * r + 9 * h + f;
    return (double)s->model.num_layers * layer + (V + h) * r + (S + h) * r + 2 * h; /* + the final norm, as is */
}

static void powersgd_sends_the_factors(void **state)
{
    (void)state;
    scenario_config s;
    scenario_dp(&s, 4, 8);
    use_powersgd(&s, 4);
    both_totals t = totals_of(&s);
    double n = 8, E = fixture_stage0_elements(&s), sent = powersgd_elements_sent(&s, 4);
    assert_true(REL(t.with.wire_bytes, 2 * (n - 1) / n * sent * 2));
    assert_true(REL(t.with.wire_bytes / t.without.wire_bytes, sent / E));
    print_message("PowerSGD rank 4, fixture model: wire bytes x%.5f\n", sent / E);
    fixture_free(&s);
}

static void matrices_cover_the_parameters(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 2);
    s.model.swiglu = 1; /* a Llama-shaped layer: RMSNorm, rotary positions */
    s.model.rmsnorm = 1;
    s.model.rope = 1;
    s.model.num_query_groups = 4;
    s.model.num_experts = 8;
    s.model.moe_router_topk = 2;
    s.parallel.tp = 2;
    s.parallel.ep = 2;
    grad_matrix m[GRAD_MATRICES_MAX];
    double vec, sum = 0;
    int k = compression_matrices(&s, 0, m, &vec);
    for (int i = 0; i < k; i++)
        sum += m[i].rows * m[i].cols * m[i].count;
    layer_params lp = params_layer_per_gpu(&s);
    assert_true(REL(sum + vec, lp.dense + lp.expert));
    k = compression_matrices(&s, 1, m, &vec);
    assert_int_equal(k, 1); /* rotary positions: the token table alone */
    assert_true(REL(m[0].rows * m[0].cols + vec, params_embedding_per_gpu(&s)));
    fixture_free(&s);
}

/* Top-k, one bucket holding the whole stage (E elements), launch 3 us, 1000 GB/s: the bytes
 * of compression.c's passes, derived again here, with 9 kernel launches. */
static void topk_compute_by_hand(void **state)
{
    (void)state;
    scenario_config s;
    scenario_dp(&s, 2, 8);
    s.parallel.bucket_size_mb = 1e6;
    use_topk(&s, 0.05);
    s.calibration.launch_overhead_us = 3;
    both_totals t = totals_of(&s);
    double E = fixture_stage0_elements(&s), k = 0.05 * E, n = 8, bw = 1000e9;
    double ef = E * (2 + 4 + 4), radix = 4 * 4 * E, gather = 4 * E + k * 6, zero = 8 * k;
    double scatter = 2 * E + n * k * (6 + 4);
    double hand = (ef + radix + gather + zero + scatter) / bw + 9 * 3e-6;
    assert_true(REL(t.with.compute_s, hand));
    fixture_free(&s);
}

/* PowerSGD: per matrix n x m, rank r, bf16: GEMMs M Q, M^T P, P Q^T from the calibration's
 * GEMM model; error feedback 5 x 2 n m bytes before, 3 x 2 n m after; Gram-Schmidt
 * n 2 r (r + 3) / 2 bytes. Summed over the layers' and the embedding's matrices. */
static double powersgd_matrix_s(const cost_model *cm, double n, double m, double r, double count)
{
    return count * (cost_gemm_s(cm, n, r, m, 1) + cost_gemm_s(cm, m, r, n, 1) + cost_gemm_s(cm, n, m, r, 1) +
                    cost_memory_s(cm, OPCLASS_ELEMENTWISE, 10 * n * m) +
                    cost_memory_s(cm, OPCLASS_ELEMENTWISE, 6 * n * m) +
                    cost_memory_s(cm, OPCLASS_ELEMENTWISE, n * 2 * r * (r + 3) / 2));
}

static void powersgd_compute_by_hand(void **state)
{
    (void)state;
    scenario_config s;
    scenario_dp(&s, 3, 8);
    use_powersgd(&s, 8);
    s.calibration.launch_overhead_us = 2;
    both_totals t = totals_of(&s);
    cost_model cm;
    cost_model_init(&cm, &s);
    double h = 1024, f = 4096, r = 8, L = 3;
    double layer = powersgd_matrix_s(&cm, 3 * h, h, r, 1) + powersgd_matrix_s(&cm, h, h, r, 1) +
                   powersgd_matrix_s(&cm, f, h, r, 1) + powersgd_matrix_s(&cm, h, f, r, 1);
    double embedding = powersgd_matrix_s(&cm, 32000, h, r, 1) + powersgd_matrix_s(&cm, 1024, h, r, 1);
    assert_within(t.with.compute_s, (L * layer + embedding), 1e-9);
    fixture_free(&s);
}

/* DP over two nodes on a slow network (10 Gb/s per NIC): the gradient all-reduce is most of the
 * step and PowerSGD's small factors shorten it. */
static void step_time_falls_when_dp_comm_is_exposed(void **state)
{
    (void)state;
    scenario_config s;
    scenario_dp(&s, 8, 16);
    s.platform.node.nic_bandwidth_gbps = 10;
    run_result plain = fixture_run(&s);
    use_powersgd(&s, 4);
    run_result comp = fixture_run(&s);
    print_message("exposed: plain %.4f s (dp exposed %.4f s), PowerSGD %.4f s; saved %.4f s, added %.4f s\n",
                  plain.step_time_s, plain.comm_exposed_s[COMM_DP], comp.step_time_s, comp.compression.comm_saved_s,
                  comp.compression.compute_s);
    assert_true(plain.comm_exposed_s[COMM_DP] > 0.1 * plain.step_time_s);
    assert_true(comp.step_time_s < plain.step_time_s);
    assert_int_equal(comp.compression.present, 1);
    assert_true(comp.compression.comm_saved_s > comp.compression.compute_s);
    assert_true(comp.compression.bytes_ratio < 0.05);
    /* the --json document's "compression" object, which sweep and validate look keys up in */
    double v;
    assert_int_equal(run_result_lookup(&comp, "compression.bytes_ratio", &v), 0);
    assert_true(v == comp.compression.bytes_ratio);
    assert_int_equal(run_result_lookup(&comp, "compression.comm_saved_s", &v), 0);
    assert_int_equal(run_result_lookup(&plain, "compression.bytes_ratio", &v), -1);
    fixture_free(&s);
}

/* DP inside one node (NVLink), backward long enough to hide the buckets: top-k's selection
 * passes on the compute stream only add time. */
static void step_time_rises_when_dp_comm_is_hidden(void **state)
{
    (void)state;
    scenario_config s;
    scenario_dp(&s, 8, 8);
    s.training.global_batch_size = 64;
    run_result plain = fixture_run(&s);
    use_topk(&s, 0.01);
    run_result comp = fixture_run(&s);
    print_message("hidden: plain %.4f s (dp exposed %.5f s), top-k %.4f s; added %.4f s\n", plain.step_time_s,
                  plain.comm_exposed_s[COMM_DP], comp.step_time_s, comp.compression.compute_s);
    assert_true(plain.comm_exposed_s[COMM_DP] < 0.02 * plain.step_time_s);
    assert_true(comp.step_time_s > plain.step_time_s);
    fixture_free(&s);
}

/* The scenario rules, through the loader and --set overrides: the error names the JSON path. */
static void expect_rejected(const char *const *overrides, int n, const char *needle)
{
    scenario_config s;
    config_error err;
    const char *path = DTSIM_SOURCE_DIR "/scenarios/gpt2-xl-dp32-powersgd.json";
    int rc = scenario_load(path, overrides, n, &s, &err);
    if (rc == 0) {
        scenario_free(&s);
        fail_msg("accepted: %s", overrides[n - 1]);
    }
    print_message("rejected: %s\n", err.msg);
    if (!strstr(err.msg, needle))
        fail_msg("'%s' does not name '%s'", err.msg, needle);
}

static void bad_settings_are_rejected(void **state)
{
    (void)state;
    const char *topk_zero1[] = {"parallel.grad_compression={\"method\":\"topk\"}", "parallel.zero_stage=1"};
    expect_rejected(topk_zero1, 2, "scenario.parallel.grad_compression.method");
    const char *psgd_zero2[] = {"parallel.zero_stage=2"};
    expect_rejected(psgd_zero2, 1, "zero_stage");
    const char *int8_topk[] = {"parallel.grad_compression={\"method\":\"topk\"}",
                               "parallel.grad_reduce_dtype=\"int8\""};
    expect_rejected(int8_topk, 2, "int8");
    const char *ratio0[] = {"parallel.grad_compression={\"method\":\"topk\",\"topk_ratio\":0}"};
    expect_rejected(ratio0, 1, "scenario.parallel.grad_compression.topk_ratio");
    const char *ratio_big[] = {"parallel.grad_compression={\"method\":\"topk\",\"topk_ratio\":1.5}"};
    expect_rejected(ratio_big, 1, "scenario.parallel.grad_compression.topk_ratio");
    const char *rank0[] = {"parallel.grad_compression={\"method\":\"powersgd\",\"powersgd_rank\":0}"};
    expect_rejected(rank0, 1, "scenario.parallel.grad_compression.powersgd_rank");
    const char *bad_dtype[] = {"parallel.grad_reduce_dtype=\"int4\""};
    expect_rejected(bad_dtype, 1, "scenario.parallel.grad_reduce_dtype");

    scenario_config s;
    config_error err;
    const char *ok[] = {"parallel.grad_compression={\"method\":\"none\"}", "parallel.grad_reduce_dtype=\"int8\"",
                        "parallel.zero_stage=1"};
    assert_int_equal(scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt2-xl-dp32-powersgd.json", ok, 3, &s, &err), 0);
    assert_int_equal(s.parallel.grad_reduce_int8, 1);
    scenario_free(&s);
}

/* The flow replay (SimGrid) runs every method's tasks (compute on both streams, all-gather,
 * reduce-scatter, the chained all-reduces) and agrees with the analytic replay where nothing
 * contends: TP 8 x DP 4 on 4 nodes, every DP ring on its own rail, 50 Gb/s NICs so that DP comm
 * is a large part of the step (method 4: uncompressed, for reference). Tolerance 1%: measured
 * +0.01% to +0.09%. */
static int have_platform_module(void)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 64);
    if (n <= 0)
        return 0;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return 0;
    strcpy(slash, "/../lib/libdtsim_railzone.so");
    return access(exe, R_OK) == 0 || getenv("DTSIM_RAILZONE_SO");
}

static void flow_replay_agrees_for_every_method(void **state)
{
    (void)state;
    if (!have_platform_module())
        skip();
    for (int method = 0; method < 5; method++) {
        scenario_config s;
        scenario_dp(&s, 8, 4);
        s.parallel.tp = 8;
        s.platform.node.nic_bandwidth_gbps = 50;
        if (method == 0) {
            use_int8(&s);
        } else if (method == 1) {
            use_topk(&s, 0.01);
        } else if (method == 2) {
            use_powersgd(&s, 4);
        } else if (method == 3) {
            use_int8(&s);
            s.parallel.zero_stage = 1;
        }
        run_result a, f;
        fixture_run_both(&s, &a, &f);
        print_message("method %d: analytic %.5f s, flow %.5f s (%+.2f%%)\n", method, a.step_time_s, f.step_time_s,
                      100 * (f.step_time_s / a.step_time_s - 1));
        assert_within(f.step_time_s, a.step_time_s, 0.01);
        assert_int_equal(f.compression.present, method < 4);
        fixture_free(&s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plain_reduction_is_the_uncompressed_closed_form),
        cmocka_unit_test(topk_sends_dp_times_k_pairs),
        cmocka_unit_test(int8_sends_a_byte_and_a_shared_scale),
        cmocka_unit_test(powersgd_sends_the_factors),
        cmocka_unit_test(matrices_cover_the_parameters),
        cmocka_unit_test(topk_compute_by_hand),
        cmocka_unit_test(powersgd_compute_by_hand),
        cmocka_unit_test(step_time_falls_when_dp_comm_is_exposed),
        cmocka_unit_test(step_time_rises_when_dp_comm_is_hidden),
        cmocka_unit_test(bad_settings_are_rejected),
        cmocka_unit_test(flow_replay_agrees_for_every_method),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
