/* GEMM efficiency interpolation: exact at the table's points, bounded by the table, best
 * efficiency beyond the table, and never faster than the HBM roofline. */
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
#include "cost.h"
#include "oplist.h"
#include "fixture.h"
#include "workload.h"

static void table_scenario(scenario_config *s)
{
    fixture_scenario(s, 1);
    gemm_table *t = &s->calibration.gemm[PREC_BF16];
    free(t->points);
    t->count = 3;
    t->points = calloc(3, sizeof(gemm_point));
    t->points[0] = (gemm_point){512, 512, 512, 20};
    t->points[1] = (gemm_point){2048, 2048, 2048, 60};
    t->points[2] = (gemm_point){8192, 8192, 8192, 80};
}

static void exact_at_points_and_bounded(void **state)
{
    scenario_config s;
    table_scenario(&s);
    cost_model cm;
    cost_model_init(&cm, &s);
    assert_true(fabs(cost_gemm_efficiency(&cm, 2048, 2048, 2048) - 0.60) < 1e-12);
    assert_true(fabs(cost_gemm_efficiency(&cm, 512, 512, 512) - 0.20) < 1e-12);
    for (double m = 64; m <= 65536; m *= 2)
        for (double n = 64; n <= 65536; n *= 4) {
            double e = cost_gemm_efficiency(&cm, m, n, 1024);
            assert_true(e >= 0.20 - 1e-12 && e <= 0.80 + 1e-12);
        }
    /* Between two points the efficiency lies between their efficiencies. */
    double mid = cost_gemm_efficiency(&cm, 4096, 4096, 4096);
    assert_true(mid > 0.60 && mid < 0.80);
    /* Beyond the table: the best efficiency, no extrapolation. */
    assert_true(fabs(cost_gemm_efficiency(&cm, 16384, 16384, 16384) - 0.80) < 1e-12);
    fixture_free(&s);
}

static void time_is_at_least_the_roofline(void **state)
{
    scenario_config s;
    table_scenario(&s);
    cost_model cm;
    cost_model_init(&cm, &s);
    /* A skinny GEMM is memory-bound: time >= bytes / HBM. */
    double m = 65536, n = 8, k = 8192;
    double bytes = (m * k + k * n + m * n) * 2;
    assert_true(cost_gemm_s(&cm, m, n, k, 1) >= bytes / (s.platform.gpu.hbm_bandwidth_gbs * 1e9));
    /* A large GEMM is compute-bound at its efficiency. */
    double t = cost_gemm_s(&cm, 8192, 8192, 8192, 1);
    assert_true(fabs(t - 2 * 8192.0 * 8192 * 8192 / (100e12 * 0.8)) < 1e-9);
    fixture_free(&s);
}

/* Memory-bound ops: bytes at the class's bandwidth plus a launch; a backward op at the measured
 * backward rate when the calibration has one, else at the forward rate. */
static void backward_memory_ops_use_their_own_rate(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 1);
    s.platform.gpu.hbm_bandwidth_gbs = 3000; /* above the rates below: HBM bounds a measured rate */
    s.calibration.launch_overhead_us = 5;
    s.calibration.op_gbs[OPCLASS_GELU] = 1000;
    cost_model cm;
    cost_model_init(&cm, &s);
    layer_op op = {.name = "gelu", .kind = OPK_MEMORY, .cls = OPCLASS_GELU, .bytes = 4e9};
    assert_true(fabs(cost_compute_op_s(&cm, &op) - (4e9 / 1000e9 + 5e-6)) < 1e-12);
    op.backward = 1; /* no backward figure: the forward rate */
    assert_true(fabs(cost_compute_op_s(&cm, &op) - (4e9 / 1000e9 + 5e-6)) < 1e-12);
    s.calibration.op_gbs_backward[OPCLASS_GELU] = 2500;
    cost_model_init(&cm, &s);
    assert_true(fabs(cost_compute_op_s(&cm, &op) - (4e9 / 2500e9 + 5e-6)) < 1e-12);
    op.backward = 0; /* the forward op keeps its own rate */
    assert_true(fabs(cost_compute_op_s(&cm, &op) - (4e9 / 1000e9 + 5e-6)) < 1e-12);
    /* the op list marks exactly the backward pass's ops */
    layer_shape sh = {.micro_batch = 1, .seq_length = 128, .hidden = 256, .heads = 4, .kv_groups = 4,
                      .ffn_hidden = 1024, .tp = 1, .cp = 1, .ep = 1, .attention = ATTENTION_FLASH, .act_bytes = 2};
    layer_op ops[LAYER_OPS_MAX];
    int n = layer_ops_forward(&sh, ops);
    for (int i = 0; i < n; i++)
        assert_int_equal(ops[i].backward, 0);
    n = layer_ops_backward(&sh, ops);
    assert_true(n > 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(ops[i].backward, 1);
    fixture_free(&s);
}

/* Llama's classes (RMSNorm, SwiGLU, rope) at their own measured rates, or, where a calibration
 * has not measured them, at LayerNorm's, GELU's and the elementwise rate, forward and backward. */
static void llama_classes_fall_back_to_their_stand_ins(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 1);
    s.calibration.launch_overhead_us = 0;
    for (int i = 0; i < OPCLASS_COUNT; i++)
        s.calibration.op_gbs[i] = 0;
    s.calibration.op_gbs[OPCLASS_LAYERNORM] = 100;
    s.calibration.op_gbs_backward[OPCLASS_LAYERNORM] = 50;
    s.calibration.op_gbs[OPCLASS_GELU] = 10;
    s.calibration.op_gbs[OPCLASS_ELEMENTWISE] = 400;
    cost_model cm;
    cost_model_init(&cm, &s);
    layer_op op = {.name = "ln1", .kind = OPK_MEMORY, .cls = OPCLASS_RMSNORM, .bytes = 1e9};
    assert_true(fabs(cost_compute_op_s(&cm, &op) - 1e9 / 100e9) < 1e-12);
    op.backward = 1;
    assert_true(fabs(cost_compute_op_s(&cm, &op) - 1e9 / 50e9) < 1e-12);
    op.cls = OPCLASS_SWIGLU;
    op.backward = 0;
    assert_true(fabs(cost_compute_op_s(&cm, &op) - 1e9 / 10e9) < 1e-12);
    op.cls = OPCLASS_ROPE;
    assert_true(fabs(cost_memory_s(&cm, OPCLASS_ROPE, 1e9) - 1e9 / 400e9) < 1e-12);
    /* measured: its own rate; a forward measured without a backward keeps the forward rate for
     * its backward (the stand-in's backward is not mixed in) */
    s.calibration.op_gbs[OPCLASS_RMSNORM] = 200;
    cost_model_init(&cm, &s);
    op.cls = OPCLASS_RMSNORM;
    assert_true(fabs(cost_compute_op_s(&cm, &op) - 1e9 / 200e9) < 1e-12);
    op.backward = 1;
    assert_true(fabs(cost_compute_op_s(&cm, &op) - 1e9 / 200e9) < 1e-12);
    fixture_free(&s);
}

/* training.activation_bytes sets the bytes every memory-bound op of the layer moves: 4 under bf16
 * (dtrain's fp32-stored bf16) moves twice what the default 2 moves; the GEMMs' FLOPs stay. */
static void activation_bytes_scale_the_memory_ops(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 1);
    s.training.precision = PREC_BF16;
    layer_shape sh;
    layer_op half[LAYER_OPS_MAX], wide[LAYER_OPS_MAX];
    workload_layer_shape(&s, &sh);
    assert_int_equal(sh.act_bytes, 2);
    int n = layer_ops_forward(&sh, half);
    s.training.activation_bytes = 4;
    workload_layer_shape(&s, &sh);
    assert_int_equal(sh.act_bytes, 4);
    assert_int_equal(layer_ops_forward(&sh, wide), n);
    /* the norms move activations only: exactly twice; the residuals also read a 1-byte dropout
     * mask, which stays */
    int norms = 0;
    for (int i = 0; i < n; i++) {
        if (half[i].kind == OPK_MEMORY && (!strcmp(half[i].name, "ln1") || !strcmp(half[i].name, "ln2"))) {
            norms++;
            assert_true(fabs(wide[i].bytes - 2 * half[i].bytes) <= 1e-9 * wide[i].bytes);
        } else if (half[i].kind == OPK_MEMORY) {
            assert_true(wide[i].bytes > half[i].bytes);
        }
        if (half[i].kind == OPK_GEMM)
            assert_true(wide[i].flops == half[i].flops);
    }
    assert_int_equal(norms, 2);
    fixture_free(&s);
}

/* The scenario's FP8 recipe sets the bytes a quantized GEMM operand moves (engine/oplist.c,
 * fp8_quantize): 4 under delayed scaling (and mxfp8, blockwise: the scale found in the cast), 6
 * under tensorwise current scaling (an amax pass first); 0 in any other precision. */
static void fp8_recipe_sets_the_quantize_bytes(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 1);
    layer_shape sh;
    s.training.precision = PREC_BF16;
    workload_layer_shape(&s, &sh);
    assert_true(sh.fp8_quantize_bytes == 0);
    s.training.precision = PREC_FP8;
    const double want[] = {4, 6, 4, 4};
    for (int r = FP8_RECIPE_DELAYED; r <= FP8_RECIPE_BLOCKWISE; r++) {
        s.training.fp8_recipe = (fp8_recipe_kind)r;
        workload_layer_shape(&s, &sh);
        assert_true(sh.fp8_quantize_bytes == want[r]);
    }
    fixture_free(&s);
}

/* Launches as Transformer Engine makes them (engine/oplist.c): a grouped GEMM one cuBLASLt GEMM
 * per local expert; a tensor's FP8 quantization four kernels under current scaling (zero the
 * amax, compute it, the scale, the cast) and one under delayed scaling, per expert, except that
 * delayed scaling casts a grouped GEMM's experts in one launch. Each launch beyond the first
 * costs the calibration's launch overhead once more. */
static const layer_op *op_named(const layer_op *ops, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(ops[i].name, name))
            return &ops[i];
    fail_msg("no op %s", name);
    return NULL;
}

static void launches_follow_transformer_engine(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 1);
    s.model.num_experts = 16;
    s.model.moe_router_topk = 2;
    s.training.precision = PREC_FP8;
    s.platform.gpu.peak_tflops[PREC_FP8] = 200; /* a finite GEMM time to add launches to */
    s.calibration.launch_overhead_us = 10;
    const int experts = 16;
    for (int r = FP8_RECIPE_DELAYED; r <= FP8_RECIPE_TENSORWISE; r++) {
        s.training.fp8_recipe = (fp8_recipe_kind)r;
        layer_shape sh;
        workload_layer_shape(&s, &sh);
        layer_op f[LAYER_OPS_MAX], b[LAYER_OPS_MAX];
        int nf = layer_ops_forward(&sh, f), nb = layer_ops_backward(&sh, b);
        int per_tensor = r == FP8_RECIPE_TENSORWISE ? 4 : 1;
        assert_int_equal(op_named(f, nf, "fc1")->launches, experts);
        assert_int_equal(op_named(b, nb, "fc2_wgrad")->launches, experts);
        assert_int_equal(op_named(f, nf, "qkv_quantize")->launches, per_tensor);
        assert_int_equal(op_named(f, nf, "fc1_quantize")->launches, r == FP8_RECIPE_DELAYED ? 1 : 4 * experts);
        assert_int_equal(op_named(b, nb, "fc2_grad_quantize")->launches, r == FP8_RECIPE_DELAYED ? 1 : 4 * experts);
        assert_true(op_named(f, nf, "qkv")->launches <= 1);
        /* the launches beyond the first, at 10 us each */
        cost_model cm;
        cost_model_init(&cm, &s);
        for (int i = 0; i < nf; i++) {
            layer_op once = f[i];
            once.launches = 1;
            if (f[i].kind != OPK_COMM && !isfinite(cost_compute_op_s(&cm, &f[i])))
                fail_msg("%s: no finite time", f[i].name);
            double extra = cost_compute_op_s(&cm, &f[i]) - cost_compute_op_s(&cm, &once);
            double want = f[i].kind == OPK_COMM ? 0 : ((f[i].launches > 1 ? f[i].launches : 1) - 1) * 10e-6;
            if (fabs(extra - want) > 1e-12)
                fail_msg("%s: %d launches cost %.3g s more, want %.3g", f[i].name, f[i].launches, extra, want);
        }
    }
    fixture_free(&s);
}

/* A calibration cannot make the device faster than the platform says: a GEMM table at 250
 * TFLOP/s on a 100 TFLOP/s peak runs at the peak (efficiency 1), a 5,000 GB/s memory kernel on
 * 2,000 GB/s of HBM at 2,000, a 500 TFLOP/s attention table at twice the peak (its rates count
 * the causal half the kernel skips). */
static void the_platform_bounds_the_calibrated_rates(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 1);
    s.calibration.launch_overhead_us = 0;
    s.platform.gpu.peak_tflops[PREC_BF16] = 100;
    s.platform.gpu.hbm_bandwidth_gbs = 2000;
    s.training.precision = PREC_BF16;
    static gemm_point fast[1] = {{.m = 1024, .n = 1024, .k = 1024, .tflops = 250}};
    gemm_table fixture_table = s.calibration.gemm[PREC_BF16]; /* the fixture's, freed with it */
    s.calibration.gemm[PREC_BF16] = (gemm_table){.points = fast, .count = 1};
    s.calibration.op_gbs[OPCLASS_GELU] = 5000;
    attention_calibration *a = &s.calibration.attention[ATTN_BACKEND_FLASH];
    a->points = 1;
    a->table[0].seq = 2048;
    a->table[0].head_dim = 128;
    a->table[0].tflops = 500;
    cost_model cm;
    cost_model_init(&cm, &s);
    assert_true(cost_gemm_efficiency(&cm, 1024, 1024, 1024) == 1.0);
    double t = cost_gemm_s(&cm, 8192, 8192, 8192, 1);
    assert_true(fabs(t - 2.0 * 8192 * 8192 * 8192 / 100e12) < 1e-9 * t);
    layer_op gelu = {.name = "gelu", .kind = OPK_MEMORY, .cls = OPCLASS_GELU, .bytes = 4e9};
    assert_true(fabs(cost_compute_op_s(&cm, &gelu) - 4e9 / 2000e9) < 1e-12);
    layer_op att = {.name = "attn_fused", .kind = OPK_FUSED_ATTENTION, .m = 2048, .n = 2048, .k = 128, .flops = 1e12};
    assert_true(fabs(cost_compute_op_s(&cm, &att) - 1e12 / 200e12) < 1e-15);
    s.calibration.gemm[PREC_BF16] = fixture_table;
    fixture_free(&s);
}

/* Fused attention from the calibration's table: the forward at `tflops`, the backward (twice the
 * FLOPs) at `tflops_backward`, or at `tflops` where the point has none; per backend. */
static void attention_backward_uses_its_own_rate(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 1);
    for (int p = 0; p < PREC_COUNT; p++) /* the table's rates within twice the peak, which bounds them */
        s.platform.gpu.peak_tflops[p] = 1000;
    s.calibration.launch_overhead_us = 0;
    attention_calibration *a = &s.calibration.attention[ATTN_BACKEND_FLASH];
    a->points = 1;
    a->table[0].seq = 2048;
    a->table[0].head_dim = 128;
    a->table[0].tflops = 500;
    a->table[0].tflops_backward = 400;
    cost_model cm;
    cost_model_init(&cm, &s);
    layer_op fwd = {.name = "attn_fused", .kind = OPK_FUSED_ATTENTION, .m = 2048, .n = 2048, .k = 128, .flops = 1e12};
    assert_true(fabs(cost_compute_op_s(&cm, &fwd) - 1e12 / 500e12) < 1e-15);
    layer_op bwd = fwd;
    bwd.backward = 1;
    bwd.flops = 2e12;
    assert_true(fabs(cost_compute_op_s(&cm, &bwd) - 2e12 / 400e12) < 1e-15);
    a->table[0].tflops_backward = 0;
    cost_model_init(&cm, &s);
    assert_true(fabs(cost_compute_op_s(&cm, &bwd) - 2e12 / 500e12) < 1e-15);
    /* model.attention_backend "fused" takes ops.attention_fused's figures, and flash's where the
     * calibration has none for it */
    s.model.attention_backend = ATTN_BACKEND_FUSED;
    cost_model_init(&cm, &s);
    assert_true(fabs(cost_compute_op_s(&cm, &fwd) - 1e12 / 500e12) < 1e-15);
    s.calibration.attention[ATTN_BACKEND_FUSED].efficiency = 0.8;
    cost_model_init(&cm, &s);
    assert_true(fabs(cost_compute_op_s(&cm, &fwd) - 1e12 / (0.8 * cost_peak_flops(&cm))) < 1e-15);
    fixture_free(&s);
}

/* The engine's attention table (dtcal kernels on a GPU): rows per precision and per batch (B x
 * heads a call). A run takes its precision's rows, and between two measured batches of its
 * shape the time per FLOP linear in log(batch); outside them the nearest. */
static void attention_rate_by_precision_and_batch(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 1);
    s.calibration.launch_overhead_us = 0;
    attention_calibration *a = &s.calibration.attention[ATTN_BACKEND_FLASH];
    const struct { int prec; double batch, tf; } rows[] = {
        {PREC_FP32, 64, 15}, {PREC_FP32, 128, 20}, {PREC_BF16, 64, 16}, {PREC_BF16, 128, 24}, {PREC_BF16, 256, 30}};
    a->points = 6;
    for (int i = 0; i < 5; i++) {
        a->table[i].seq = 1024;
        a->table[i].head_dim = 64;
        a->table[i].batch = rows[i].batch;
        a->table[i].tflops = rows[i].tf;
        a->table[i].tagged = 1;
        a->table[i].precision = (precision_kind)rows[i].prec;
    }
    /* another shape, at a batch between the two: interpolation stays within the nearest shape */
    a->table[5].seq = 4096;
    a->table[5].head_dim = 64;
    a->table[5].batch = 100;
    a->table[5].tflops = 99;
    a->table[5].tagged = 1;
    a->table[5].precision = PREC_BF16;
    layer_op op = {.name = "attn_fused", .kind = OPK_FUSED_ATTENTION, .m = 1024, .n = 1024, .k = 64, .batch = 96,
                   .flops = 1e12};
    cost_model cm;
    s.training.precision = PREC_BF16;
    cost_model_init(&cm, &s);
    double f = log(96.0 / 64) / log(2.0); /* 0.585 of the way from 64 to 128 */
    double want = 1e12 * ((1 - f) / 16e12 + f / 24e12);
    assert_true(fabs(cost_compute_op_s(&cm, &op) - want) < 1e-12 * want);
    op.batch = 128; /* a measured batch: its own rate */
    assert_true(fabs(cost_compute_op_s(&cm, &op) - 1e12 / 24e12) < 1e-15);
    op.batch = 512; /* past the largest: the largest's */
    assert_true(fabs(cost_compute_op_s(&cm, &op) - 1e12 / 30e12) < 1e-15);
    op.batch = 8; /* below the smallest: the smallest's */
    assert_true(fabs(cost_compute_op_s(&cm, &op) - 1e12 / 16e12) < 1e-15);
    /* an fp32 run takes the fp32 rows */
    s.training.precision = PREC_FP32;
    cost_model_init(&cm, &s);
    op.batch = 96;
    want = 1e12 * ((1 - f) / 15e12 + f / 20e12);
    assert_true(fabs(cost_compute_op_s(&cm, &op) - want) < 1e-12 * want);
    /* fp16, with no rows of its own, takes bf16's (the same width); fp8's attention runs in bf16 */
    for (int p = PREC_FP16; p <= PREC_FP8; p += PREC_FP8 - PREC_FP16) {
        s.training.precision = (precision_kind)p;
        cost_model_init(&cm, &s);
        op.batch = 128;
        assert_true(fabs(cost_compute_op_s(&cm, &op) - 1e12 / 24e12) < 1e-15);
    }
    /* the backward at its own rates, interpolated alike */
    s.training.precision = PREC_BF16;
    for (int i = 0; i < 5; i++)
        a->table[i].tflops_backward = rows[i].tf / 2;
    cost_model_init(&cm, &s);
    layer_op bwd = op;
    bwd.backward = 1;
    bwd.batch = 96;
    bwd.flops = 2e12;
    want = 2e12 * ((1 - f) / 8e12 + f / 12e12);
    assert_true(fabs(cost_compute_op_s(&cm, &bwd) - want) < 1e-12 * want);
    /* rows that name no precision serve every run when none names its own */
    for (int i = 0; i < 6; i++)
        a->table[i].tagged = 0;
    a->table[0].tagged = a->table[1].tagged = 1; /* fp32's two stay tagged: a bf16 run skips them */
    cost_model_init(&cm, &s);
    op.batch = 128;
    assert_true(fabs(cost_compute_op_s(&cm, &op) - 1e12 / 24e12) < 1e-15);
    for (int i = 0; i < 6; i++)
        a->table[i].tagged = 1;
    double got;
    /* bf16 rows only (the fp32 ones re-tagged bf16): an fp32 run's attention takes none of them
     * (FlashAttention has no fp32 kernel; at their rates it had passed the fp32 peak) but the
     * calibration's efficiency of the fp32 peak, as without a table */
    a->table[0].precision = a->table[1].precision = PREC_BF16;
    a->efficiency = 0.25;
    s.training.precision = PREC_FP32;
    cost_model_init(&cm, &s);
    op.batch = 128;
    want = 1e12 / (cost_peak_flops(&cm) * 0.25);
    assert_true(s.platform.gpu.peak_tflops[PREC_FP32] > 0 && fabs(cost_peak_flops(&cm) - s.platform.gpu.peak_tflops[PREC_FP32] * 1e12) < 1);
    assert_true(fabs(cost_compute_op_s(&cm, &op) - want) < 1e-12 * want);
    s.training.precision = PREC_TF32; /* nor tf32's, fp32's sibling */
    s.platform.gpu.peak_tflops[PREC_TF32] = 40; /* the fixture's GPU has none */
    cost_model_init(&cm, &s);
    assert_true(fabs(cost_compute_op_s(&cm, &op) - 1e12 / (cost_peak_flops(&cm) * 0.25)) < 1e-12 * want);
    a->table[0].precision = a->table[1].precision = PREC_FP32;
    a->efficiency = 0;
    /* a table without batches: the nearest shape's rate whatever the call's batch */
    for (int i = 0; i < 5; i++)
        a->table[i].batch = 0;
    s.training.precision = PREC_BF16;
    cost_model_init(&cm, &s);
    op.batch = 96;
    got = cost_compute_op_s(&cm, &op);
    assert_true(fabs(got - 1e12 / 16e12) < 1e-15); /* the first bf16 row at the nearest shape */
    fixture_free(&s);
}

/* Ranks outnumbering a node's compute devices time-share them: every op's time is multiplied by
 * max(1, ranks on the node x the fraction of the step their stage computes / devices). */
static void ranks_sharing_devices_time_share_them(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 1); /* 8 rank slots a node */
    s.calibration.launch_overhead_us = 3;
    s.parallel.tp = 8;
    layer_op mem = {.name = "gelu", .kind = OPK_MEMORY, .cls = OPCLASS_GELU, .bytes = 1e9};
    layer_op att = {.name = "attn", .kind = OPK_FUSED_ATTENTION, .flops = 1e12, .n = 2048, .k = 128};
    cost_model alone, shared;
    cost_model_init(&alone, &s); /* compute_devices unset: one device a slot */
    assert_true(alone.ranks_per_device == 1.0);
    s.platform.node.compute_devices = 2; /* 8 ranks, 2 devices, all computing at once */
    cost_model_init(&shared, &s);
    assert_true(shared.ranks_per_device == 4.0);
    assert_true(fabs(cost_gemm_s(&shared, 4096, 4096, 4096, 1) - 4 * cost_gemm_s(&alone, 4096, 4096, 4096, 1)) < 1e-12);
    assert_true(fabs(cost_compute_op_s(&shared, &mem) - 4 * cost_compute_op_s(&alone, &mem)) < 1e-12);
    assert_true(fabs(cost_compute_op_s(&shared, &att) - 4 * cost_compute_op_s(&alone, &att)) < 1e-12);

    /* no more ranks than devices: each has its own */
    s.parallel.tp = 2;
    assert_true(cost_ranks_per_device(&s) == 1.0);
    /* a pipeline: TP 2 x PP 4 = 8 ranks, m = 8 micro-batches; a stage computes 8/11 of the time */
    s.parallel.pp = 4;
    s.training.global_batch_size = 8;
    assert_true(fabs(cost_ranks_per_device(&s) - 8.0 * 8 / 11 / 2) < 1e-12);
    /* one micro-batch through TP 2 x PP 2: one stage at a time, 2 ranks on 2 devices */
    s.parallel.pp = 2;
    s.training.global_batch_size = 1;
    assert_true(cost_ranks_per_device(&s) == 1.0);
    /* interleaved, v = 2: TP 4 x PP 2, m = 2, busy 4/5 */
    s.parallel.tp = 4;
    s.parallel.schedule = PIPELINE_INTERLEAVED;
    s.parallel.vpp = 2;
    s.training.global_batch_size = 2;
    assert_true(fabs(cost_ranks_per_device(&s) - 8.0 * 4 / 5 / 2) < 1e-12);
    /* ranks over several nodes: 8 of the 32 on each node, 4 devices */
    s.parallel.schedule = PIPELINE_1F1B;
    s.parallel.vpp = 1;
    s.parallel.tp = 8;
    s.parallel.pp = 1;
    s.parallel.dp = 4;
    s.training.global_batch_size = 4;
    s.platform.node.compute_devices = 4;
    assert_true(cost_ranks_per_device(&s) == 2.0);
    fixture_free(&s);
}

/* E[max of n standard normals] by direct integration, the reference: the integral of
 * x n phi(x) Phi(x)^(n-1) over [-12, 12] by Simpson's rule on 24,000 intervals. */
static double expected_max_by_integration(double n)
{
    const int steps = 24000;
    const double a = -12, b = 12, h = (b - a) / steps;
    double sum = 0;
    for (int i = 0; i <= steps; i++) {
        double x = a + i * h;
        double cdf = 0.5 * erfc(-x / sqrt(2.0)), pdf = exp(-0.5 * x * x) / sqrt(2 * 3.14159265358979323846);
        double f = cdf > 0 ? x * n * pdf * exp((n - 1) * log(cdf)) : 0;
        sum += f * (i == 0 || i == steps ? 1 : (i % 2 ? 4 : 2));
    }
    return sum * h / 3;
}

/* The slowest of N devices: Blom's approximation of E[max of N standard normals] against the
 * integral (0.5642 = 1/sqrt(pi) at n = 2), within 1% from 10 to a million devices, and the
 * factor a calibration's compute_variability_cv gives every compute op. */
static void the_step_waits_for_the_slowest_device(void **state)
{
    (void)state;
    assert_true(fabs(expected_max_by_integration(2) - 1 / sqrt(3.14159265358979323846)) < 1e-9);
    assert_true(cost_expected_max_normal(1) == 0);
    for (double n = 10; n <= 1e6; n *= 4) {
        double exact = expected_max_by_integration(n), blom = cost_expected_max_normal(n);
        if (fabs(blom - exact) > 0.01 * exact)
            fail_msg("n = %.0f: Blom %.4f, integral %.4f", n, blom, exact);
    }
    scenario_config s;
    fixture_scenario(&s, 2);
    s.parallel.dp = 1024;
    s.calibration.compute_variability_cv = 0.02;
    double factor = cost_slowest_device_factor(&s);
    assert_true(fabs(factor - (1 + 0.02 * cost_expected_max_normal(1024))) < 1e-15);
    cost_model cm;
    cost_model_init(&cm, &s);
    double slow = cost_gemm_s(&cm, 4096, 4096, 4096, 1);
    s.calibration.compute_variability_cv = 0;
    cost_model_init(&cm, &s);
    double even = cost_gemm_s(&cm, 4096, 4096, 4096, 1);
    assert_true(fabs(slow / even - factor) < 1e-12);
    s.calibration.compute_variability_cv = -1; /* not in the file: the published default */
    assert_true(cost_slowest_device_factor(&s) > 1.03 && cost_slowest_device_factor(&s) < 1.04);
    fixture_free(&s);
}

/* The lookup remembers its answers (cost.c): a table parsed after another was freed, at what
 * may well be the same address and with the same shapes, must still give its own rates. */
static void a_new_table_is_not_answered_from_the_last(void **state)
{
    (void)state;
    const double rates[] = {100, 250, 400};
    char path[] = "/tmp/dtsim_test_cost_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "{\"device\": \"test\", \"source\": \"datasheet\", \"gemm\": {\"bf16\": ["
                   "{\"m\": 1024, \"n\": 1024, \"k\": 1024, \"tflops\": %g},"
                   "{\"m\": 8192, \"n\": 8192, \"k\": 8192, \"tflops\": %g}]}}\n",
                rates[i], 2 * rates[i]);
        assert_int_equal(fclose(f), 0);
        scenario_config s;
        fixture_scenario(&s, 1);
        s.platform.gpu.peak_tflops[PREC_BF16] = 1000; /* above the table's rates: the peak bounds them */
        calibration_free(&s.calibration);
        config_error err;
        assert_int_equal(calibration_load(path, &s.calibration, &err), 0);
        cost_model cm;
        cost_model_init(&cm, &s);
        double peak = s.platform.gpu.peak_tflops[PREC_BF16];
        for (int again = 0; again < 2; again++) { /* the second time from the memo */
            assert_true(fabs(cost_gemm_efficiency(&cm, 1024, 1024, 1024) - rates[i] / peak) < 1e-12);
            double mid = cost_gemm_efficiency(&cm, 2048, 4096, 2048);
            assert_true(mid > rates[i] / peak && mid < 2 * rates[i] / peak);
        }
        fixture_free(&s);
    }
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exact_at_points_and_bounded),
        cmocka_unit_test(time_is_at_least_the_roofline),
        cmocka_unit_test(backward_memory_ops_use_their_own_rate),
        cmocka_unit_test(the_platform_bounds_the_calibrated_rates),
        cmocka_unit_test(llama_classes_fall_back_to_their_stand_ins),
        cmocka_unit_test(ranks_sharing_devices_time_share_them),
        cmocka_unit_test(the_step_waits_for_the_slowest_device),
        cmocka_unit_test(activation_bytes_scale_the_memory_ops),
        cmocka_unit_test(fp8_recipe_sets_the_quantize_bytes),
        cmocka_unit_test(launches_follow_transformer_engine),
        cmocka_unit_test(attention_backward_uses_its_own_rate),
        cmocka_unit_test(attention_rate_by_precision_and_batch),
        cmocka_unit_test(a_new_table_is_not_answered_from_the_last),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
