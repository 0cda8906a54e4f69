/* Context and expert parallelism in the step: ring attention's K/V passes hide behind the
 * attention blocks and show only what a block does not cover; every kind of traffic is booked
 * as itself (cp, ep), at both fidelities' shared metrics; MoE's busiest expert-parallel rank
 * sets the pace (the sampling floor of a balanced router, a declared imbalance, a capacity). */
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
#include "params.h"

/* Ring attention over cp ranks: cp - 1 passes of t each beside cp attention blocks of A / cp:
 * exposed (cp - 1) max(0, t - A / cp), hidden the rest of (cp - 1) t, per layer. A network a
 * thousand times slower turns most of it exposed; all_gather exposes all of its gather. */
static void ring_attention_hides_behind_the_blocks(void **state)
{
    (void)state;
    for (int slow = 0; slow < 2; slow++) {
        scenario_config s;
        fixture_scenario(&s, 2);
        s.model.seq_length = 8192;
        fixture_layout(&s, 8, 1, 1, 2);
        s.parallel.cp = 4; /* TP fills a node: the CP ring crosses nodes */
        if (slow)
            s.platform.node.nic_bandwidth_gbps = 0.2;
        layer_shape sh;
        workload_layer_shape(&s, &sh);
        layer_op ops[LAYER_OPS_MAX];
        int n = layer_ops_forward(&sh, ops);
        cost_model cm;
        cost_model_init(&cm, &s);
        double A = 0, t = 0;
        for (int i = 0; i < n; i++) {
            if (!strcmp(ops[i].name, "attn_score") || !strcmp(ops[i].name, "attn_softmax") ||
                !strcmp(ops[i].name, "attn_dropout") || !strcmp(ops[i].name, "attn_value")) /* core attention */
                A += cost_compute_op_s(&cm, &ops[i]);
            if (!strcmp(ops[i].name, "cp_ring_kv"))
                t = collective_time(&s.platform, &s.calibration, COLL_SEND_RECV, ops[i].bytes,
                                    coll_group_of(4, 8, 8)).time_s;
        }
        sim_task fwd;
        task_comm_parts parts;
        assert_int_equal(fixture_first_task(&s, "fwd", &fwd, &parts), 0);
        double exposed = parts.inside[COMM_CP], hidden = parts.hidden[COMM_CP];
        int L = (int)s.model.num_layers;
        double want_exposed = L * 3 * fmax(0, t - A / 4), want_total = L * 3 * t;
        print_message("%s network: pass %.3g s, attention %.3g s; exposed %.9g s (closed form %.9g), hidden %.4g s\n",
                      slow ? "slow" : "fast", t, A, exposed, want_exposed, hidden);
        assert_true(t > 0 && A > 0);
        assert_true(fabs(exposed - want_exposed) <= 1e-12 + 1e-9 * want_total);
        assert_within(exposed + hidden, want_total, 1e-9);
        assert_true(slow ? exposed > 0.5 * want_total : exposed == 0);
        run_result r = fixture_run(&s);
        assert_true(r.comm_total_s[COMM_CP] > 0 && r.comm_exposed_s[COMM_CP] <= r.comm_total_s[COMM_CP] + 1e-15);
        assert_true(slow || r.comm_exposed_s[COMM_CP] == 0);
        s.parallel.cp_comm = CP_COMM_ALL_GATHER;
        r = fixture_run(&s);
        assert_true(r.comm_total_s[COMM_CP] > 0 && fabs(r.comm_exposed_s[COMM_CP] - r.comm_total_s[COMM_CP]) < 1e-12);
        fixture_free(&s);
    }
}

/* Two layers of `experts` experts, top-k, over DP = EP = ep GPUs (one sequence each). */
static void moe_fixture(scenario_config *s, long long experts, int topk, int ep)
{
    fixture_scenario(s, 2);
    s->model.num_experts = experts;
    s->model.moe_router_topk = topk;
    fixture_layout(s, 1, 1, ep, ep);
    s->parallel.ep = ep;
}

/* MoE: E 8, top-2, EP 4 over DP 4. A balanced router's busiest rank gets 1 + sqrt((1 - 1/ep) /
 * (T k)) E[max of ep normals] of the mean; a declared imbalance replaces it; a capacity factor
 * caps it (and with padding is what every expert runs); the experts' GEMMs and all-to-alls grow
 * by it; the all-to-alls are booked as ep. */
static void the_busiest_expert_rank_sets_the_pace(void **state)
{
    (void)state;
    scenario_config s;
    moe_fixture(&s, 8, 2, 4);
    double T = 1024, k = 2;
    double balanced = 1 + sqrt(0.75 / (T * k)) * cost_expected_max_normal(4);
    assert_true(fabs(workload_moe_load(&s) - balanced) < 1e-15);
    layer_shape sh;
    workload_layer_shape(&s, &sh);
    layer_op ops[LAYER_OPS_MAX];
    int n = layer_ops_forward(&sh, ops);
    for (int i = 0; i < n; i++) /* the busiest rank's rows over its 2 local experts, a GEMM each */
        if (!strcmp(ops[i].name, "fc1")) {
            assert_int_equal(ops[i].batch, 2);
            assert_true(fabs((double)ops[i].m - T * k * balanced / 2) <= 1);
        }
    s.model.moe_load_imbalance = 1.5;
    assert_true(workload_moe_load(&s) == 1.5);
    s.model.moe_expert_capacity_factor = 1.25;
    assert_true(workload_moe_load(&s) == 1.25);
    s.model.moe_load_imbalance = 1.1;
    assert_true(workload_moe_load(&s) == 1.1);
    s.model.moe_pad_expert_input_to_capacity = 1;
    assert_true(workload_moe_load(&s) == 1.25);
    run_result r = fixture_run(&s);
    assert_true(r.comm_total_s[COMM_EP] > 0);
    assert_true(r.comm_total_s[COMM_TP] == 0 && r.comm_total_s[COMM_CP] == 0);
    double padded = r.step_time_s;
    s.model.moe_pad_expert_input_to_capacity = 0;
    s.model.moe_expert_capacity_factor = 0;
    s.model.moe_load_imbalance = 1;
    r = fixture_run(&s);
    assert_true(r.step_time_s < padded);
    fixture_free(&s);
}

/* Parameter counts of two published MoE models against their model cards (independent figures):
 * Qwen3-30B-A3B, "30.5B in total", and Qwen3-235B-A22B, "235B in total" (Qwen/Qwen3-30B-A3B and
 * Qwen/Qwen3-235B-A22B on Hugging Face; config.json: head_dim 128 with hidden 2048 / 32 heads and
 * 4096 / 64 heads, 4 KV heads, 128 experts of moe_intermediate_size 768 / 1536, vocabulary
 * 151,936, untied). Without kv_channels the attention would count half its width. dtsim also
 * counts biases Qwen3 has not: well under the cards' rounding. */
static void qwen3_moe_parameters_match_their_model_cards(void **state)
{
    (void)state;
    struct { long long L, h, a, f; double total; } m[] = {{48, 2048, 32, 768, 30.5e9}, {94, 4096, 64, 1536, 235e9}};
    for (int i = 0; i < 2; i++) {
        scenario_config s;
        fixture_scenario(&s, 2);
        s.model.num_layers = m[i].L;
        s.model.hidden_size = m[i].h;
        s.model.num_attention_heads = m[i].a;
        s.model.num_query_groups = 4;
        s.model.kv_channels = 128;
        s.model.ffn_hidden_size = m[i].f;
        s.model.swiglu = s.model.rmsnorm = s.model.rope = s.model.untie_embeddings = 1;
        s.model.vocab_size = 151936;
        s.model.num_experts = 128;
        s.model.moe_router_topk = 8;
        double p = params_total(&s);
        print_message("%lld layers: %.4g parameters (model card %.4g)\n", m[i].L, p, m[i].total);
        assert_true(fabs(p / m[i].total - 1) < 0.005);
        s.model.kv_channels = 0;
        assert_true(params_total(&s) < 0.99 * m[i].total);
        /* per GPU on Megatron-Bridge's H100 layout of the 235B (TP 2, SP, DP 16, EP 32 with the
         * experts' own TP 1): 128 / 32 whole experts (3 h f weights, 2 f + h biases), one replica
         * of each in the stage's 32 GPUs; with the experts split like the MLP (TP 2) and EP 8,
         * 16 half experts, two replicas (DP 16 / EP 8) */
        double h = (double)m[i].h, f = (double)m[i].f;
        s.parallel.tp = 2;
        s.parallel.sequence_parallel = 1;
        s.parallel.dp = 16;
        s.parallel.ep = 32;
        s.parallel.etp = 1;
        assert_true(fabs(params_layer_per_gpu(&s).expert - 4 * (3 * h * f + 2 * f + h)) < 1e-6);
        assert_int_equal(scenario_expert_dp(&s), 1);
        s.parallel.ep = 8;
        s.parallel.etp = 0;
        assert_true(fabs(params_layer_per_gpu(&s).expert - 16 * ((3 * h * f + 2 * f) / 2 + h)) < 1e-6);
        assert_int_equal(scenario_expert_dp(&s), 2);
        fixture_free(&s);
    }
}

/* An EP group over two nodes: the flex dispatcher (DeepEP / HybridEP, one RDMA copy of a token a
 * node) makes each all-to-all the closed form of collective_moe_flex_time for the layer's own
 * dispatch bytes, costs the step less than NCCL's all-to-all, and both fidelities charge it the
 * same (the dispatch is folded into the layer's pass, which both replay). */
static void flex_dispatcher_prices_the_layers_all_to_alls(void **state)
{
    (void)state;
    scenario_config s;
    moe_fixture(&s, 16, 4, 16);
    s.model.moe_load_imbalance = 1;
    layer_shape sh;
    workload_layer_shape(&s, &sh);
    layer_op ops[LAYER_OPS_MAX];
    int n = layer_ops_forward(&sh, ops);
    double bytes = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(ops[i].name, "ep_alltoall_dispatch"))
            bytes = ops[i].bytes;
    assert_true(bytes > 0);
    coll_group g = coll_group_of(16, 1, 8);
    double flex = collective_moe_flex_time(&s.platform, &s.calibration, bytes, g, 16, 4, 16, 4);
    double a2a = collective_time(&s.platform, &s.calibration, COLL_ALL_TO_ALL, bytes, g).time_s;
    assert_true(flex < a2a);
    run_result nccl_a, nccl_f, deep_a, deep_f;
    fixture_run_both(&s, &nccl_a, &nccl_f);
    s.parallel.moe_flex_dispatcher = 1;
    fixture_run_both(&s, &deep_a, &deep_f);
    /* four all-to-alls a layer a micro-batch (dispatch and combine, each way), two layers */
    double m = (double)scenario_micro_batches(&s);
    assert_true(fabs(deep_a.comm_total_s[COMM_EP] - 2 * 4 * m * flex) <= 1e-9 * deep_a.comm_total_s[COMM_EP]);
    assert_true(fabs(nccl_a.comm_total_s[COMM_EP] - 2 * 4 * m * a2a) <= 1e-9 * nccl_a.comm_total_s[COMM_EP]);
    assert_true(deep_a.step_time_s < nccl_a.step_time_s);
    assert_true(fabs(deep_f.step_time_s - deep_a.step_time_s) <= 1e-6 * deep_a.step_time_s);
    assert_true(fabs(deep_f.comm_total_s[COMM_EP] - deep_a.comm_total_s[COMM_EP]) <=
                1e-6 * deep_a.comm_total_s[COMM_EP]);
    /* group-limited routing (2 groups, one a node; a token's 4 experts from one group) keeps a
     * token on one node: less flex traffic, and NCCL's all-to-all, which sends every copy, the same */
    s.model.moe_router_num_groups = 2;
    s.model.moe_router_group_topk = 1;
    run_result grouped = fixture_run(&s);
    assert_true(grouped.comm_total_s[COMM_EP] < deep_a.comm_total_s[COMM_EP]);
    double g1 = collective_moe_flex_time(&s.platform, &s.calibration, bytes, g, 16, 4, 2, 1);
    assert_true(fabs(grouped.comm_total_s[COMM_EP] - 2 * 4 * m * g1) <= 1e-9 * grouped.comm_total_s[COMM_EP]);
    s.parallel.moe_flex_dispatcher = 0;
    run_result grouped_a2a = fixture_run(&s);
    assert_true(grouped_a2a.comm_total_s[COMM_EP] == nccl_a.comm_total_s[COMM_EP]);
    /* groups that neither fill whole GPUs nor span them (48 experts, 3 a GPU, in 6 groups of 8):
     * the flex dispatcher's reach is not modelled there, and the build says so */
    s.parallel.moe_flex_dispatcher = 1;
    s.model.num_experts = 48;
    s.model.moe_router_num_groups = 6;
    step_workload w;
    config_error err;
    assert_int_not_equal(workload_build(&s, &w, &err), 0);
    assert_non_null(strstr(err.msg, "moe_router_num_groups"));
    fixture_free(&s);
}

/* The op named `name` in ops (its first), or NULL. */
static const layer_op *op_named(const layer_op *ops, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(ops[i].name, name))
            return &ops[i];
    return NULL;
}

/* Experts split over TP 4 (expert_tensor_parallel_size = TP) under SP, E 8, top-2, EP 4, a
 * balanced router (load 1), 1,024 tokens of h 1,024 in bf16. Megatron-Core's alltoall dispatcher
 * (MoEAlltoAllTokenDispatcher at core_v0.10.0: all_to_all over EP, then
 * gather_from_sequence_parallel_region over the experts' TP group; reduce-scatter, then
 * all_to_all back), and dtrain's layer likewise (engine/gpt_moe.c), sends each GPU's own
 * 256-token shard, 256 x 2 copies x 1,024 x 2 bytes = 1 MiB, then gathers 4 MiB over TP, so each
 * GPU runs 1,024 rows on each of its two experts; without SP every TP rank routes and sends all
 * 1,024 tokens (4 MiB) after the dense MLP's TP gather. Megatron-Core's expert grid puts an EP
 * group's ranks etp apart: under CP 2 (TP 2, DP 4) the group spans one node. */
static void expert_tp_sends_each_shard_once(void **state)
{
    (void)state;
    scenario_config s;
    moe_fixture(&s, 8, 2, 4);
    fixture_layout(&s, 4, 1, 4, 4);
    s.model.moe_load_imbalance = 1;
    double shard = 256 * 2 * 1024 * 2.0, whole = 4 * shard;
    for (int sp = 1; sp >= 0; sp--) {
        s.parallel.sequence_parallel = sp;
        layer_shape sh;
        workload_layer_shape(&s, &sh);
        layer_op ops[LAYER_OPS_MAX], bwd[LAYER_OPS_MAX];
        int n = layer_ops_forward(&sh, ops), nb = layer_ops_backward(&sh, bwd);
        const layer_op *dispatch = op_named(ops, n, "ep_alltoall_dispatch"), *fc1 = op_named(ops, n, "fc1");
        const layer_op *ag = op_named(ops, n, "moe_tp_allgather"), *rs = op_named(ops, n, "moe_tp_reducescatter");
        assert_non_null(dispatch);
        assert_true(dispatch->bytes == (sp ? shard : whole));
        assert_true(op_named(ops, n, "ep_alltoall_combine")->bytes == dispatch->bytes);
        assert_int_equal(fc1->batch, 2);
        assert_int_equal(fc1->m, 1024);
        assert_int_equal(op_named(ops, n, "router")->m, sp ? 256 : 1024);
        if (!sp) {
            assert_null(ag);
            assert_null(rs);
            assert_non_null(op_named(ops, n, "tp_allreduce_mlp"));
        } else {
            assert_null(op_named(ops, n, "tp_allgather_mlp"));
            assert_null(op_named(ops, n, "tp_allreduce_mlp"));
            assert_true(ag && ag->coll == COLL_ALL_GATHER && ag->group == 4 && ag->bytes == whole && ag->plain_nccl);
            assert_true(rs && rs->coll == COLL_REDUCE_SCATTER && rs->bytes == whole && rs->plain_nccl);
            /* the backward mirrors them: the output gradients gathered, the input ones scattered */
            assert_int_equal(op_named(bwd, nb, "moe_tp_reducescatter")->coll, COLL_ALL_GATHER);
            assert_int_equal(op_named(bwd, nb, "moe_tp_allgather")->coll, COLL_REDUCE_SCATTER);
        }
    }
    /* the step's EP time: four all-to-alls a layer a micro-batch (dispatch and combine, each way),
     * two layers, one micro-batch, over the group the expert grid places, ranks etp apart */
    s.parallel.sequence_parallel = 1;
    struct {
        int tp, cp;
        double bytes;
        int stride;
    } cases[] = {{4, 1, shard, 4}, /* CP 2: 512 tokens a GPU, 256 a shard */ {2, 2, 256 * 2 * 1024 * 2.0, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fixture_layout(&s, cases[c].tp, 1, 4, 4);
        s.parallel.cp = cases[c].cp;
        double a2a = collective_time(&s.platform, &s.calibration, COLL_ALL_TO_ALL, cases[c].bytes,
                                     coll_group_of(4, cases[c].stride, 8)).time_s;
        run_result r = fixture_run(&s);
        if (fabs(r.comm_total_s[COMM_EP] - 2 * 4 * a2a) > 1e-9 * r.comm_total_s[COMM_EP])
            fail_msg("TP %d CP %d: EP %.9f s, expected %.9f s", cases[c].tp, cases[c].cp, r.comm_total_s[COMM_EP],
                     2 * 4 * a2a);
    }
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ring_attention_hides_behind_the_blocks),
        cmocka_unit_test(the_busiest_expert_rank_sets_the_pace),
        cmocka_unit_test(expert_tp_sends_each_shard_once),
        cmocka_unit_test(qwen3_moe_parameters_match_their_model_cards),
        cmocka_unit_test(flex_dispatcher_prices_the_layers_all_to_alls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
