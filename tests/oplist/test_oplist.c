/* The op list of one transformer layer on one GPU: FLOPs against DESIGN.md's closed form
 * and Narayanan et al.'s 24sh^2(1 + s/6h) (computed here independently of oplist.c), GEMM
 * shapes, TP/SP/CP/EP communication present exactly when the layout asks for it, and the
 * backward pass as the mirror of the forward. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "oplist.h"

static layer_shape shape(long long b, long long s, long long h, long long a, long long g, long long f, int swiglu,
                         int tp, int sp, attention_impl att)
{
    layer_shape sh;
    memset(&sh, 0, sizeof sh);
    sh.micro_batch = b;
    sh.seq_length = s;
    sh.hidden = h;
    sh.heads = a;
    sh.kv_groups = g;
    sh.ffn_hidden = f;
    sh.swiglu = swiglu;
    sh.tp = tp;
    sh.cp = 1;
    sh.ep = 1;
    sh.sequence_parallel = sp;
    sh.attention = att;
    sh.act_bytes = 2;
    return sh;
}

/* DESIGN.md: 2s(h(h+2k) + h^2 + (2|3)hf) + 4s^2h, k = h*g/a. */
static double design_formula(double s, double h, double a, double g, double f, int swiglu)
{
    double k = h * g / a;
    return 2 * s * (h * (h + 2 * k) + h * h + (swiglu ? 3 : 2) * h * f) + 4 * s * s * h;
}

static double sum_flops(const layer_op *ops, int n)
{
    double f = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].kind != OPK_COMM)
            f += ops[i].flops;
    return f;
}

static const layer_op *find(const layer_op *ops, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(ops[i].name, name))
            return &ops[i];
    return NULL;
}

static int count_comm(const layer_op *ops, int n, comm_class cc, coll_kind k)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].kind == OPK_COMM && ops[i].comm == cc && ops[i].coll == k)
            c++;
    return c;
}

#define CLOSE(x, y) (fabs((x) - (y)) <= 1e-9 * fabs(y))

static void forward_flops_match_the_closed_form(void **state)
{
    /* GPT-3 175B-like (MHA, f = 4h), Llama-2 7B-like (MHA, SwiGLU), Llama-2 70B-like (GQA 8,
     * SwiGLU), a small odd one. */
    struct { long long s, h, a, g, f; int swiglu; } shapes[] = {
        {2048, 12288, 96, 96, 49152, 0},
        {4096, 4096, 32, 32, 11008, 1},
        {4096, 8192, 64, 8, 28672, 1},
        {512, 768, 12, 4, 3072, 0},
    };
    int tps[] = {1, 2, 4, 8};
    layer_op ops[LAYER_OPS_MAX];
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int att = 0; att < 2; att++) {
            double want = design_formula((double)shapes[i].s, (double)shapes[i].h, (double)shapes[i].a,
                                         (double)shapes[i].g, (double)shapes[i].f, shapes[i].swiglu);
            layer_shape one = shape(1, shapes[i].s, shapes[i].h, shapes[i].a, shapes[i].g, shapes[i].f,
                                    shapes[i].swiglu, 1, 0, (attention_impl)att);
            if (!CLOSE(layer_forward_flops_per_sequence(&one), want))
                fail_msg("shape %zu: per-sequence %.6g, formula %.6g", i, layer_forward_flops_per_sequence(&one), want);
            for (size_t t = 0; t < sizeof tps / sizeof tps[0]; t++)
                for (int sp = 0; sp < 2; sp++) {
                    if (shapes[i].g % tps[t] && tps[t] > shapes[i].g)
                        continue;
                    layer_shape sh = shape(3, shapes[i].s, shapes[i].h, shapes[i].a, shapes[i].g, shapes[i].f,
                                           shapes[i].swiglu, tps[t], sp && tps[t] > 1, (attention_impl)att);
                    int n = layer_ops_forward(&sh, ops);
                    assert_true(n > 0 && n <= LAYER_OPS_MAX);
                    double fwd = sum_flops(ops, n);
                    if (!CLOSE(fwd, 3 * want / tps[t])) /* micro-batch 3, split by TP */
                        fail_msg("shape %zu tp %d sp %d att %d: %.6g FLOPs, formula %.6g", i, tps[t], sp, att, fwd,
                                 3 * want / tps[t]);
                    n = layer_ops_backward(&sh, ops);
                    assert_true(n > 0 && n <= LAYER_OPS_MAX);
                    assert_true(CLOSE(sum_flops(ops, n), 2 * fwd));
                }
        }
}

/* Narayanan et al. (SC'21), Sec. 5.1: with full activation recomputation a GPT model with
 * f = 4h and MHA costs 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) FLOPs per iteration: four
 * passes' worth of the layers (forward, recomputed forward, backward = 2x) and three of the
 * LM head (not recomputed). Per sequence: 4 l x layer + 3 x head. */
static void gpt3_model_flops_match_narayanan(void **state)
{
    double s = 2048, h = 12288, l = 96, V = 51200;
    layer_shape sh = shape(1, 2048, 12288, 96, 96, 4 * 12288, 0, 1, 0, ATTENTION_UNFUSED);
    double layer = layer_forward_flops_per_sequence(&sh), head = lm_head_forward_flops_per_sequence(2048, 12288, 51200);
    double want = 96 * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    assert_true(CLOSE(4 * l * layer + 3 * head, want));
    /* the forward of one layer alone: 24 s h^2 (1 + s/(6h)) */
    assert_true(CLOSE(layer, 24 * s * h * h * (1 + s / (6 * h))));
    assert_true(CLOSE(lm_head_forward_flops_per_sequence(10, 20, 30), 2.0 * 10 * 20 * 30));
}

static void gemm_shapes_follow_the_megatron_split(void **state)
{
    layer_op ops[LAYER_OPS_MAX];
    /* b 2, s 1024, h 4096, a 32, g 8 (kv width 1024), f 11008 swiglu, tp 4, cp 2 */
    layer_shape sh = shape(2, 1024, 4096, 32, 8, 11008, 1, 4, 0, ATTENTION_UNFUSED);
    sh.cp = 2;
    int n = layer_ops_forward(&sh, ops);
    const layer_op *q = find(ops, n, "qkv");
    assert_non_null(q);
    assert_int_equal(q->kind, OPK_GEMM);
    assert_int_equal(q->m, 2 * 1024 / 2);
    assert_int_equal(q->n, (4096 + 2 * 1024) / 4);
    assert_int_equal(q->k, 4096);
    const layer_op *sc = find(ops, n, "attn_score");
    assert_non_null(sc);
    assert_int_equal(sc->kind, OPK_BATCHED_GEMM);
    assert_int_equal(sc->batch, 2 * 32 / 4);
    assert_int_equal(sc->m, 512);
    assert_int_equal(sc->n, 1024);
    assert_int_equal(sc->k, 128);
    const layer_op *av = find(ops, n, "attn_value");
    assert_non_null(av);
    assert_int_equal(av->m, 512);
    assert_int_equal(av->n, 128);
    assert_int_equal(av->k, 1024);
    const layer_op *sm = find(ops, n, "attn_softmax");
    assert_non_null(sm);
    assert_int_equal(sm->kind, OPK_MEMORY);
    assert_int_equal(sm->cls, OPCLASS_SOFTMAX);
    assert_true(sm->bytes >= 2.0 * (2 * 32 / 4) * 512 * 1024 * 2); /* read + write the scores */
    const layer_op *pr = find(ops, n, "attn_proj");
    assert_non_null(pr);
    assert_int_equal(pr->m, 1024);
    assert_int_equal(pr->n, 4096);
    assert_int_equal(pr->k, 1024);
    const layer_op *f1 = find(ops, n, "fc1");
    assert_non_null(f1);
    assert_int_equal(f1->n, 2 * 11008 / 4);
    assert_non_null(find(ops, n, "swiglu"));
    assert_null(find(ops, n, "gelu"));
    const layer_op *f2 = find(ops, n, "fc2");
    assert_non_null(f2);
    assert_int_equal(f2->n, 4096);
    assert_int_equal(f2->k, 11008 / 4);
    /* the order of a pre-LN block */
    const char *order[] = {"ln1", "qkv", "attn_score", "attn_softmax", "attn_value", "attn_proj", "residual1",
                           "ln2", "fc1", "swiglu", "fc2", "residual2"};
    int at = -1;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const layer_op *op = find(ops, n, order[i]);
        assert_non_null(op);
        assert_true(op - ops > at);
        at = (int)(op - ops);
    }
    /* flash: one fused op with the FLOPs of score + value */
    sh.attention = ATTENTION_FLASH;
    n = layer_ops_forward(&sh, ops);
    assert_null(find(ops, n, "attn_score"));
    const layer_op *fa = find(ops, n, "attn_fused");
    assert_non_null(fa);
    assert_int_equal(fa->kind, OPK_FUSED_ATTENTION);
    assert_true(CLOSE(fa->flops, sc->flops + av->flops));
}

static void tp_communication_only_with_tp_and_mirrored(void **state)
{
    layer_op ops[LAYER_OPS_MAX];
    for (int sp = 0; sp < 2; sp++)
        for (int tp = 1; tp <= 8; tp *= 2) {
            layer_shape sh = shape(2, 2048, 4096, 32, 32, 16384, 0, tp, sp, ATTENTION_UNFUSED);
            int n = layer_ops_forward(&sh, ops);
            int ar = count_comm(ops, n, COMM_TP, COLL_ALL_REDUCE), ag = count_comm(ops, n, COMM_TP, COLL_ALL_GATHER),
                rs = count_comm(ops, n, COMM_TP, COLL_REDUCE_SCATTER);
            for (int i = 0; i < n; i++)
                if (ops[i].kind == OPK_COMM) {
                    assert_int_equal(ops[i].comm, COMM_TP);
                    assert_int_equal(ops[i].group, tp);
                    assert_true(ops[i].bytes == 2.0 * 2048 * 4096 * 2); /* b*s*h*act */
                }
            if (tp == 1) {
                assert_int_equal(ar + ag + rs, 0);
            } else if (sp) {
                assert_int_equal(ar, 0);
                assert_int_equal(ag, 2);
                assert_int_equal(rs, 2);
            } else {
                assert_int_equal(ar, 2);
                assert_int_equal(ag + rs, 0);
            }
            /* backward: all-reduce conjugates (f/g of Megatron) and AG <-> RS */
            n = layer_ops_backward(&sh, ops);
            int bar = count_comm(ops, n, COMM_TP, COLL_ALL_REDUCE), bag = count_comm(ops, n, COMM_TP, COLL_ALL_GATHER),
                brs = count_comm(ops, n, COMM_TP, COLL_REDUCE_SCATTER);
            assert_int_equal(bar, ar);
            assert_int_equal(bag, rs);
            assert_int_equal(brs, ag);
            if (tp > 1 && !sp) {
                /* the input-gradient all-reduce follows qkv's data gradient */
                const layer_op *d = find(ops, n, "qkv_dgrad"), *r = find(ops, n, "tp_allreduce_attn_bwd");
                assert_non_null(d);
                assert_non_null(r);
                assert_true(r > d);
                assert_true(r->bytes == 2.0 * 2048 * 4096 * 2);
            }
        }
    /* SP splits the norms' and residuals' memory traffic over TP */
    layer_shape one = shape(2, 2048, 4096, 32, 32, 16384, 0, 1, 0, ATTENTION_UNFUSED);
    layer_shape spl = shape(2, 2048, 4096, 32, 32, 16384, 0, 4, 1, ATTENTION_UNFUSED);
    layer_shape nosp = shape(2, 2048, 4096, 32, 32, 16384, 0, 4, 0, ATTENTION_UNFUSED);
    layer_op a[LAYER_OPS_MAX], b[LAYER_OPS_MAX], c[LAYER_OPS_MAX];
    int na = layer_ops_forward(&one, a), nb = layer_ops_forward(&spl, b), nc = layer_ops_forward(&nosp, c);
    const char *split_ops[] = {"ln1", "ln2", "residual1", "residual2"};
    for (int i = 0; i < 4; i++) {
        assert_true(CLOSE(find(b, nb, split_ops[i])->bytes, find(a, na, split_ops[i])->bytes / 4));
        assert_true(CLOSE(find(c, nc, split_ops[i])->bytes, find(a, na, split_ops[i])->bytes));
    }
    const layer_op *ln = find(a, na, "ln1");
    assert_int_equal(ln->kind, OPK_MEMORY);
    assert_int_equal(ln->cls, OPCLASS_LAYERNORM);
    assert_true(ln->bytes == 2.0 * 2 * 2048 * 4096 * 2); /* read + write b*s*h at 2 bytes */
}

static void context_parallel_gathers_keys_and_values(void **state)
{
    layer_op ops[LAYER_OPS_MAX];
    for (int cp = 1; cp <= 4; cp *= 2) {
        layer_shape sh = shape(1, 8192, 4096, 32, 8, 14336, 1, 2, 1, ATTENTION_FLASH);
        sh.cp = cp;
        sh.cp_comm = CP_COMM_ALL_GATHER;
        int n = layer_ops_forward(&sh, ops);
        int ag = count_comm(ops, n, COMM_CP, COLL_ALL_GATHER);
        assert_int_equal(ag, cp > 1 ? 1 : 0);
        if (cp > 1) {
            const layer_op *g = find(ops, n, "cp_allgather_kv");
            assert_non_null(g);
            assert_int_equal(g->group, cp);
            /* K and V of the whole sequence, kv width 1024 split over tp 2, 2 bytes */
            assert_true(CLOSE(g->bytes, 2.0 * 8192 * 1024 / 2 * 2));
            assert_true(g < find(ops, n, "attn_fused"));
            assert_true(g > find(ops, n, "qkv"));
        }
        /* the per-GPU FLOPs divide by tp x cp */
        layer_shape one = shape(1, 8192, 4096, 32, 8, 14336, 1, 1, 0, ATTENTION_FLASH);
        assert_true(CLOSE(sum_flops(ops, n), layer_forward_flops_per_sequence(&one) / (2.0 * cp)));
        /* the TP all-reduce moves this GPU's tokens: b*s/cp*h*act */
        sh.sequence_parallel = 0;
        n = layer_ops_forward(&sh, ops);
        assert_true(CLOSE(find(ops, n, "tp_allreduce_attn")->bytes, 8192.0 / cp * 4096 * 2));
    }
}

/* Ring attention (Megatron-Core's p2p, the default): cp - 1 passes of this rank's K/V block
 * (2 T kv / tp values) beside the attention, twice the bytes in backward (K/V and their
 * gradients). Ulysses (a2a): an all-to-all of this rank's Q, K, V before attention and of its
 * output after; attention then runs all s queries for 1/cp of the heads: the same FLOPs. */
static void context_parallel_rings_and_all_to_alls(void **state)
{
    (void)state;
    layer_op ops[LAYER_OPS_MAX], bwd[LAYER_OPS_MAX];
    const double s = 8192, h = 4096, kvw = 1024, cp = 4, tp = 2, T = s / cp;
    layer_shape sh = shape(1, 8192, 4096, 32, 8, 14336, 1, 2, 1, ATTENTION_FLASH);
    sh.cp = 4;
    int n = layer_ops_forward(&sh, ops);
    const layer_op *ring = find(ops, n, "cp_ring_kv");
    assert_non_null(ring);
    assert_int_equal(ring->coll, COLL_SEND_RECV);
    assert_int_equal(ring->steps, 3);
    assert_true(ring->overlaps_attention);
    assert_true(CLOSE(ring->bytes, 2 * T * kvw / tp * 2));
    assert_int_equal(count_comm(ops, n, COMM_CP, COLL_ALL_GATHER), 0);
    double ring_flops = sum_flops(ops, n);
    int nb = layer_ops_backward(&sh, bwd);
    assert_true(CLOSE(find(bwd, nb, "cp_ring_kv")->bytes, 2 * ring->bytes));

    sh.cp_comm = CP_COMM_A2A;
    n = layer_ops_forward(&sh, ops);
    const layer_op *in = find(ops, n, "cp_alltoall_qkv"), *out = find(ops, n, "cp_alltoall_out");
    assert_non_null(in);
    assert_non_null(out);
    assert_true(CLOSE(in->bytes, T * (h + 2 * kvw) / tp * 2));
    assert_true(CLOSE(out->bytes, T * h / tp * 2));
    const layer_op *att = find(ops, n, "attn_fused");
    assert_true(in < att && att < out);
    assert_int_equal(att->m, 8192);          /* every query */
    assert_int_equal(att->batch, 32 / 2 / 4); /* for 1/cp of this rank's heads */
    assert_true(CLOSE(sum_flops(ops, n), ring_flops));
    assert_null(find(ops, n, "cp_ring_kv"));
}

static void moe_routes_tokens_through_its_experts(void **state)
{
    layer_op ops[LAYER_OPS_MAX];
    double s = 4096, h = 4096, f = 14336, E = 8, k = 2;
    for (int ep = 1; ep <= 4; ep *= 4) {
        layer_shape sh = shape(1, 4096, 4096, 32, 8, 14336, 1, 1, 0, ATTENTION_FLASH);
        sh.num_experts = 8;
        sh.moe_topk = 2;
        sh.ep = ep;
        /* Mixtral-like: MLP term times topk plus the router (2 s h E) */
        double kvw = h * 8 / 32;
        double want = 2 * s * (h * (h + 2 * kvw) + h * h + 3 * h * f * k + h * E) + 4 * s * s * h;
        assert_true(CLOSE(layer_forward_flops_per_sequence(&sh), want));
        int n = layer_ops_forward(&sh, ops);
        /* balanced routing: every GPU runs s*topk token-expert pairs whatever ep is */
        assert_true(CLOSE(sum_flops(ops, n), want));
        const layer_op *r = find(ops, n, "router");
        assert_non_null(r);
        assert_int_equal(r->n, 8);
        /* E / ep local experts, one GEMM each over its share of the s x topk rows */
        assert_int_equal(find(ops, n, "fc1")->batch, 8 / ep);
        assert_int_equal(find(ops, n, "fc1")->m, 4096 * 2 / (8 / ep));
        assert_int_equal(find(ops, n, "fc2")->batch, 8 / ep);
        /* the permute before the dispatch and the unpermute after the combine: each reads one
         * side (s or s x topk rows of h) and writes the other */
        const layer_op *perm = find(ops, n, "moe_permute"), *unperm = find(ops, n, "moe_unpermute");
        assert_non_null(perm);
        assert_non_null(unperm);
        assert_true(perm > r && unperm > find(ops, n, "fc2"));
        assert_true(CLOSE(perm->bytes, (s + s * k) * h * 2) && CLOSE(unperm->bytes, perm->bytes));
        int a2a = count_comm(ops, n, COMM_EP, COLL_ALL_TO_ALL);
        assert_int_equal(a2a, ep > 1 ? 2 : 0);
        if (ep > 1) {
            const layer_op *d = find(ops, n, "ep_alltoall_dispatch"), *c = find(ops, n, "ep_alltoall_combine");
            assert_non_null(d);
            assert_non_null(c);
            assert_true(d > r && c > find(ops, n, "fc2"));
            assert_true(CLOSE(d->bytes, s * k * h * 2)); /* tokens * topk * h * act */
            assert_int_equal(d->group, ep);
        }
        n = layer_ops_backward(&sh, ops);
        assert_int_equal(count_comm(ops, n, COMM_EP, COLL_ALL_TO_ALL), a2a);
        /* each expert's weight gradient contracts over its own rows only */
        const layer_op *wg = find(ops, n, "fc1_wgrad");
        assert_int_equal(wg->batch, 8 / ep);
        assert_true(wg->m == 2 * 14336 && wg->n == 4096 && wg->k == 4096 * 2 / (8 / ep));
        assert_non_null(find(ops, n, "moe_permute_bwd"));
        assert_non_null(find(ops, n, "moe_unpermute_bwd"));
    }
}

/* Heads wider than hidden / heads (Megatron's --kv-channels; Qwen3-30B-A3B: h 2048, 32 heads of
 * 128 in 4 groups): the QKV GEMM writes 32 x 128 + 2 x 4 x 128 = 5120 columns, the projection
 * reads 4096, the attention core works on 128-wide heads; by hand, TP 2. */
static void heads_may_be_wider_than_hidden_over_heads(void **state)
{
    (void)state;
    layer_shape sh = shape(1, 4096, 2048, 32, 4, 768, 1, 2, 0, ATTENTION_FLASH);
    sh.head_dim = 128;
    layer_op f[LAYER_OPS_MAX];
    int n = layer_ops_forward(&sh, f);
    const layer_op *qkv = find(f, n, "qkv"), *proj = find(f, n, "attn_proj"), *att = find(f, n, "attn_fused");
    assert_true(qkv->m == 4096 && qkv->n == 5120 / 2 && qkv->k == 2048);
    assert_true(proj->m == 4096 && proj->n == 2048 && proj->k == 4096 / 2);
    assert_int_equal(att->k, 128);
    assert_true(CLOSE(att->flops, 4.0 * 16 * 4096.0 * 4096 * 128));
    /* per sequence, unsplit: 2 s (h (q + 2 kv) + q h + 3 h f) + 4 s^2 q */
    sh.tp = 1;
    double s = 4096, h = 2048, q = 4096, kv = 512, ff = 768;
    assert_true(CLOSE(layer_forward_flops_per_sequence(&sh), 2 * s * (h * (q + 2 * kv) + q * h + 3 * h * ff) + 4 * s * s * q));
    sh.head_dim = 0; /* hidden / heads = 64 */
    n = layer_ops_forward(&sh, f);
    assert_int_equal(find(f, n, "qkv")->n, 2048 + 2 * 4 * 64);
    assert_int_equal(find(f, n, "attn_fused")->k, 64);
}

/* Experts with their own TP of 1 under TP 4 and SP (Megatron-Core's expert_tensor_parallel_size
 * 1; Qwen3-235B-like: h 4096, 128 experts of 1536, top-8, EP 32): each GPU routes its own s / 4
 * tokens, runs 128 / 32 = 4 whole experts, and has no TP collective around the MoE block; the
 * FLOPs of the GPU are still the layer's over TP (balanced routing). By hand. */
static void folded_experts_route_their_own_sequence_shard(void **state)
{
    (void)state;
    double s = 4096, h = 4096, f = 1536, k = 8;
    layer_shape sh = shape(1, 4096, 4096, 64, 4, 1536, 1, 4, 1, ATTENTION_FLASH);
    sh.head_dim = 128;
    sh.num_experts = 128;
    sh.moe_topk = 8;
    sh.ep = 32;
    sh.etp = 1;
    layer_op ops[LAYER_OPS_MAX];
    int n = layer_ops_forward(&sh, ops);
    assert_int_equal(find(ops, n, "router")->m, 4096 / 4);
    const layer_op *fc1 = find(ops, n, "fc1"), *fc2 = find(ops, n, "fc2");
    assert_true(fc1->batch == 4 && fc1->m == 1024 * 8 / 4 && fc1->n == 2 * 1536 && fc1->k == 4096);
    assert_true(fc2->batch == 4 && fc2->n == 4096 && fc2->k == 1536);
    assert_null(find(ops, n, "tp_allgather_mlp"));
    assert_null(find(ops, n, "tp_allreduce_mlp"));
    assert_non_null(find(ops, n, "tp_allgather_attn")); /* attention keeps its TP */
    const layer_op *d = find(ops, n, "ep_alltoall_dispatch");
    assert_true(d && d->group == 32 && CLOSE(d->bytes, s / 4 * k * h * 2));
    sh.tp = 1; /* the layer's FLOPs, unsplit, over the 4 GPUs of TP */
    sh.etp = 0;
    sh.sequence_parallel = 0;
    assert_true(CLOSE(sum_flops(ops, n), layer_forward_flops_per_sequence(&sh) / 4));
    (void)f;
}

static void backward_mirrors_the_forward(void **state)
{
    layer_op f[LAYER_OPS_MAX], b[LAYER_OPS_MAX];
    layer_shape sh = shape(2, 1024, 2048, 16, 16, 8192, 0, 2, 0, ATTENTION_UNFUSED);
    int nf = layer_ops_forward(&sh, f), nb = layer_ops_backward(&sh, b);
    char name[64];
    for (int i = 0; i < nf; i++) {
        if (f[i].kind == OPK_GEMM || f[i].kind == OPK_BATCHED_GEMM) {
            snprintf(name, sizeof name, "%s_dgrad", f[i].name);
            const layer_op *d = find(b, nb, name);
            snprintf(name, sizeof name, "%s_wgrad", f[i].name);
            const layer_op *w = find(b, nb, name);
            if (!d || !w)
                fail_msg("%s has no dgrad/wgrad", f[i].name);
            assert_true(CLOSE(d->flops, f[i].flops));
            assert_true(CLOSE(w->flops, f[i].flops));
            assert_int_equal(d->kind, f[i].kind);
        } else if (f[i].kind == OPK_MEMORY) {
            snprintf(name, sizeof name, "%s_bwd", f[i].name);
            const layer_op *m = find(b, nb, name);
            if (!m)
                fail_msg("%s has no backward", f[i].name);
            assert_true(CLOSE(m->bytes, 2 * f[i].bytes));
            assert_int_equal(m->cls, f[i].cls);
        }
    }
    /* reverse order: the last forward compute op's gradient comes first */
    assert_string_equal(b[0].name, "residual2_bwd");
    assert_true(find(b, nb, "fc2_dgrad") < find(b, nb, "fc1_dgrad"));
    assert_true(find(b, nb, "attn_proj_dgrad") < find(b, nb, "qkv_dgrad"));
    assert_string_equal(b[nb - 1].name, "ln1_bwd");
}

/* Llama's layer: RMSNorm's class for both norms, SwiGLU's for the activation (fc1 twice as wide),
 * and rope after the QKV GEMM reading and writing q and k once: 2 b s (h + kv) / t elements, by
 * hand for b 2, s 128, h 256, 8 heads in 2 groups (kv 64), t 2, bf16. Nothing of it without. */
static void llama_layer_has_its_own_ops(void **state)
{
    (void)state;
    layer_shape sh = {.micro_batch = 2, .seq_length = 128, .hidden = 256, .heads = 8, .kv_groups = 2,
                      .ffn_hidden = 688, .swiglu = 1, .rope = 1, .rmsnorm = 1, .tp = 2, .cp = 1, .ep = 1,
                      .attention = ATTENTION_FLASH, .act_bytes = 2};
    layer_op f[LAYER_OPS_MAX], b[LAYER_OPS_MAX];
    int nf = layer_ops_forward(&sh, f), nb = layer_ops_backward(&sh, b);
    const layer_op *rope = find(f, nf, "rope"), *qkv = find(f, nf, "qkv");
    assert_non_null(rope);
    assert_ptr_equal(rope, qkv + 1);
    assert_int_equal(rope->cls, OPCLASS_ROPE);
    assert_true(CLOSE(rope->bytes, 2.0 * 2 * 128 * (256 + 64) / 2 * 2));
    assert_int_equal(find(f, nf, "ln1")->cls, OPCLASS_RMSNORM);
    assert_int_equal(find(f, nf, "ln2")->cls, OPCLASS_RMSNORM);
    assert_int_equal(find(f, nf, "swiglu")->cls, OPCLASS_SWIGLU);
    assert_non_null(find(b, nb, "rope_bwd"));
    assert_int_equal(find(b, nb, "rope_bwd")->cls, OPCLASS_ROPE);
    /* unfused (eager PyTorch: SiLU, then a multiply): 5 elements a row element in two kernels,
     * against the fused kernel's 3 in one; T = 2 x 128 tokens, f / tp = 344, 2 bytes */
    const layer_op *fused = find(f, nf, "swiglu");
    assert_true(CLOSE(fused->bytes, 3.0 * 256 * 344 * 2));
    assert_true(fused->launches <= 1);
    sh.swiglu_unfused = 1;
    nf = layer_ops_forward(&sh, f);
    nb = layer_ops_backward(&sh, b);
    assert_true(CLOSE(find(f, nf, "swiglu")->bytes, 5.0 * 256 * 344 * 2));
    assert_int_equal(find(f, nf, "swiglu")->launches, 2);
    assert_true(CLOSE(find(b, nb, "swiglu_bwd")->bytes, 2 * 5.0 * 256 * 344 * 2));
    assert_int_equal(find(b, nb, "swiglu_bwd")->launches, 4);
    sh.swiglu_unfused = 0;
    sh.rope = sh.rmsnorm = 0;
    nf = layer_ops_forward(&sh, f);
    assert_null(find(f, nf, "rope"));
    assert_int_equal(find(f, nf, "ln1")->cls, OPCLASS_LAYERNORM);
}

/* FP8 GEMMs quantize their operands (Transformer Engine): before each of qkv, attn_proj, fc1 and
 * fc2 its activation input (m x k), before its dgrad and wgrad its output gradient (m x n), at
 * q bytes an element; the router and the attention core stay in the training precision, and a
 * quantization has no "_bwd" of its own. By hand for b 2, s 64, h 128, 4 heads in 2 groups
 * (kv 64), f 256 SwiGLU, TP 2 without SP: T = 128 tokens. Nothing of it without FP8. */
static void fp8_gemms_quantize_their_operands(void **state)
{
    (void)state;
    layer_shape sh = {.micro_batch = 2, .seq_length = 64, .hidden = 128, .heads = 4, .kv_groups = 2,
                      .ffn_hidden = 256, .swiglu = 1, .tp = 2, .cp = 1, .ep = 1, .attention = ATTENTION_FLASH,
                      .act_bytes = 2, .fp8_quantize_bytes = 6};
    layer_op f[LAYER_OPS_MAX], b[LAYER_OPS_MAX];
    int nf = layer_ops_forward(&sh, f), nb = layer_ops_backward(&sh, b);
    double T = 128, h = 128, kv = 64, ff = 256, t = 2, q = 6;
    struct { const char *name; double bytes; } want[] = {
        {"qkv_quantize", T * h * q},           {"attn_proj_quantize", T * h / t * q},
        {"fc1_quantize", T * h * q},           {"fc2_quantize", T * ff / t * q},
        {"qkv_grad_quantize", T * (h + 2 * kv) / t * q}, {"attn_proj_grad_quantize", T * h * q},
        {"fc1_grad_quantize", T * 2 * ff / t * q},       {"fc2_grad_quantize", T * h * q},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const layer_op *op = find(i < 4 ? f : b, i < 4 ? nf : nb, want[i].name);
        if (!op)
            fail_msg("no %s", want[i].name);
        assert_int_equal(op->kind, OPK_MEMORY);
        assert_int_equal(op->cls, OPCLASS_ELEMENTWISE);
        assert_int_equal(op->quantize, 1);
        if (!CLOSE(op->bytes, want[i].bytes))
            fail_msg("%s: %g bytes, want %g", want[i].name, op->bytes, want[i].bytes);
    }
    /* each quantization runs right before its GEMM */
    assert_ptr_equal(find(f, nf, "fc2_quantize") + 1, find(f, nf, "fc2"));
    assert_ptr_equal(find(b, nb, "qkv_grad_quantize") + 1, find(b, nb, "qkv_dgrad"));
    assert_null(find(b, nb, "qkv_quantize_bwd"));
    int quantized = 0;
    for (int i = 0; i < nb; i++)
        quantized += b[i].quantize;
    assert_int_equal(quantized, 4);
    /* MoE: the experts' GEMMs quantize their routed tokens; the router does not */
    sh.num_experts = 8;
    sh.moe_topk = 2;
    nf = layer_ops_forward(&sh, f);
    nb = layer_ops_backward(&sh, b);
    assert_true(CLOSE(find(f, nf, "fc1_quantize")->bytes, T * 2 * h * q));
    assert_null(find(f, nf, "router_quantize"));
    for (int i = 0; i < nb; i++)
        if (b[i].quantize && strstr(b[i].name, "router"))
            fail_msg("%s: the router is not fp8", b[i].name);
    sh.fp8_quantize_bytes = 0;
    nf = layer_ops_forward(&sh, f);
    nb = layer_ops_backward(&sh, b);
    for (int i = 0; i < nf; i++)
        assert_int_equal(f[i].quantize, 0);
    for (int i = 0; i < nb; i++)
        assert_int_equal(b[i].quantize, 0);
}

static void names(void **state)
{
    assert_string_equal(op_class_name(OPCLASS_LAYERNORM), "layernorm");
    assert_string_equal(op_class_name(OPCLASS_SOFTMAX), "softmax");
    assert_string_equal(op_class_name(OPCLASS_GELU), "gelu");
    assert_string_equal(op_class_name(OPCLASS_ELEMENTWISE), "elementwise");
    assert_string_equal(op_class_name(OPCLASS_CROSS_ENTROPY), "cross_entropy");
    assert_string_equal(op_class_name(OPCLASS_ADAMW), "adamw");
    assert_string_equal(op_class_name(OPCLASS_EMBEDDING), "embedding");
    assert_string_equal(op_class_name(OPCLASS_RMSNORM), "rmsnorm");
    assert_string_equal(op_class_name(OPCLASS_SWIGLU), "swiglu");
    assert_string_equal(op_class_name(OPCLASS_ROPE), "rope");
    assert_string_equal(op_class_name(OPCLASS_COUNT), "?");
    assert_int_equal(op_class_fallback(OPCLASS_RMSNORM), OPCLASS_LAYERNORM);
    assert_int_equal(op_class_fallback(OPCLASS_SWIGLU), OPCLASS_GELU);
    assert_int_equal(op_class_fallback(OPCLASS_ROPE), OPCLASS_ELEMENTWISE);
    assert_int_equal(op_class_fallback(OPCLASS_SOFTMAX), OPCLASS_SOFTMAX);
    assert_string_equal(coll_kind_name(COLL_ALL_REDUCE), "all_reduce");
    assert_string_equal(coll_kind_name(COLL_ALL_GATHER), "all_gather");
    assert_string_equal(coll_kind_name(COLL_REDUCE_SCATTER), "reduce_scatter");
    assert_string_equal(coll_kind_name(COLL_ALL_TO_ALL), "all_to_all");
    assert_string_equal(coll_kind_name(COLL_SEND_RECV), "send_recv");
    const char *cc[] = {"tp", "pp", "dp", "zero", "cp", "ep"};
    for (int i = 0; i < COMM_CLASS_COUNT; i++)
        assert_string_equal(comm_class_name((comm_class)i), cc[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forward_flops_match_the_closed_form),
        cmocka_unit_test(gpt3_model_flops_match_narayanan),
        cmocka_unit_test(gemm_shapes_follow_the_megatron_split),
        cmocka_unit_test(tp_communication_only_with_tp_and_mirrored),
        cmocka_unit_test(context_parallel_gathers_keys_and_values),
        cmocka_unit_test(context_parallel_rings_and_all_to_alls),
        cmocka_unit_test(moe_routes_tokens_through_its_experts),
        cmocka_unit_test(heads_may_be_wider_than_hidden_over_heads),
        cmocka_unit_test(folded_experts_route_their_own_sequence_shard),
        cmocka_unit_test(backward_mirrors_the_forward),
        cmocka_unit_test(llama_layer_has_its_own_ops),
        cmocka_unit_test(fp8_gemms_quantize_their_operands),
        cmocka_unit_test(names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
