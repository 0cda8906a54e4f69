/* Gradient buckets at the edges of parallel.bucket_size_mb: tiny buckets cost their calls in
 * closed form, in bounded work (sim/step/workload_emit.c), and huge ones hold no more than the
 * gradients (sim/step/memory.c). Before that, bucket_size_mb = 1e-9 built a task per bucket:
 * billions, until the memory ran out. */
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

#define GIB 1073741824.0

/* The fixture's 4-layer model on DP 8 (one node), fp16 so a gradient element travels in 2
 * bytes, with the gradient reduction overlapped (a flush per layer). */
static void scenario_dp8(scenario_config *s)
{
    fixture_scenario(s, 4);
    s->training.precision = PREC_FP16;
    fixture_layout(s, 1, 1, 8, 16);
}

/* One all-reduce of `bytes` over the DP group of scenario_dp8 (stride 1: TP = CP = PP = 1). */
static double dp_call_s(const scenario_config *s, double bytes)
{
    coll_group g = coll_group_of(s->parallel.dp, 1, s->platform.node.gpus);
    return collective_time(&s->platform, &s->calibration, COLL_ALL_REDUCE, bytes, g).time_s;
}

/* The DP gradient all-reduces of s's step graph: their time and calls in all, and the graph's
 * tasks. */
typedef struct {
    double seconds, calls;
    int tasks;
} bucket_sums;

static bucket_sums sums_of(const scenario_config *s)
{
    step_workload w;
    fixture_build(s, &w);
    bucket_sums b = {0, 0, w.n_tasks};
    for (int i = 0; i < w.n_tasks; i++)
        if (w.tasks[i].name && strcmp(w.tasks[i].name, "dp_grad_allreduce") == 0) {
            b.seconds += w.tasks[i].duration_s;
            b.calls += w.tasks[i].calls > 1 ? w.tasks[i].calls : 1;
        }
    workload_free(&w);
    return b;
}

static int tasks_at_40mb(void)
{
    scenario_config s;
    scenario_dp8(&s);
    bucket_sums b = sums_of(&s);
    fixture_free(&s);
    return b.tasks;
}

/* Buckets of 64 elements: the gradients are filled into buckets one after the other, and only
 * the stage's last flush sends a partial one, so the DP reduction is floor(E / 64) calls of 64
 * elements and one of the rest, E the GPU's gradient elements. The graph stays the size it has
 * at 40 MB, not a task per bucket (200,000 of them per layer here). */
static void test_small_buckets_cost_their_calls(void **state)
{
    (void)state;
    int normal = tasks_at_40mb();
    scenario_config s;
    scenario_dp8(&s);
    double elem = params_grad_reduce_bytes(&s), E = params_stage_per_gpu(&s, 0);
    assert_true(elem == 2);
    s.parallel.bucket_size_mb = 64 * elem / 1048576.0;
    double full = floor(E / 64), rest = E - 64 * full;
    bucket_sums b = sums_of(&s);
    assert_true(b.tasks <= normal + 64);
    assert_true(b.calls == full + (rest > 0));
    assert_within(b.seconds, full * dp_call_s(&s, 64 * elem) + (rest > 0 ? dp_call_s(&s, rest * elem) : 0), 1e-9);
    fixture_free(&s);
}

/* 1e-9 MiB is below one element: every call reduces one element (no framework splits one), E
 * calls in all, in a graph of the usual size; both fidelities run it, and agree. */
static void test_tiny_buckets_bounded(void **state)
{
    (void)state;
    int normal = tasks_at_40mb();
    scenario_config s;
    scenario_dp8(&s);
    s.parallel.bucket_size_mb = 1e-9;
    double E = params_stage_per_gpu(&s, 0), want = E * dp_call_s(&s, params_grad_reduce_bytes(&s));
    bucket_sums b = sums_of(&s);
    assert_true(b.tasks <= normal + 64);
    assert_true(b.calls == E);
    assert_within(b.seconds, want, 1e-9);
    run_result a, f;
    fixture_run_both(&s, &a, &f);
    assert_true(isfinite(a.step_time_s) && a.step_time_s >= want);
    assert_within(f.step_time_s, a.step_time_s, 0.01);
    fixture_free(&s);
}

/* The same bound for the distributed optimizer's parameter all-gather beside the forward
 * (overlap_param_gather); its first bucket stays one call, since a chunk's first forward waits
 * for it alone. */
static void test_tiny_param_gather_buckets(void **state)
{
    (void)state;
    scenario_config s;
    scenario_dp8(&s);
    s.parallel.zero_stage = 1;
    s.parallel.overlap_param_gather = 1;
    int normal = sums_of(&s).tasks;
    s.parallel.bucket_size_mb = 1e-9;
    step_workload w;
    fixture_build(&s, &w);
    int first = fixture_find_task(&w, "zero_param_allgather");
    assert_true(first >= 0);
    assert_true(w.tasks[first].calls <= 1);
    assert_true(w.n_tasks <= normal + 64);
    workload_free(&w);
    fixture_free(&s);
}

/* DeepSpeed's reduce_bucket_size of one element under ZeRO-3: a reduction per element of every
 * micro-batch's gradients, still in a graph of the usual size. */
static void test_tiny_zero3_reduce_buckets(void **state)
{
    (void)state;
    scenario_config s;
    scenario_dp8(&s);
    s.parallel.zero_stage = 3;
    run_result normal = fixture_run(&s);
    int normal_tasks = sums_of(&s).tasks;
    s.parallel.reduce_bucket_size = 1;
    assert_true(sums_of(&s).tasks <= normal_tasks + 64);
    run_result r = fixture_run(&s);
    assert_true(isfinite(r.step_time_s) && r.comm_total_s[COMM_DP] > normal.comm_total_s[COMM_DP]);
    fixture_free(&s);
}

/* bucket_size_mb at its largest (1e6 MiB): one bucket holds all of a GPU's gradients, never two
 * terabyte-sized buffers (no false OOM). Megatron-LM reduces that bucket in place in its gradient
 * buffer (no buffer of its own); DeepSpeed's reduce bucket is a copy: the gradients once more. */
static void test_huge_buckets_hold_the_gradients(void **state)
{
    (void)state;
    scenario_config s;
    scenario_dp8(&s);
    s.parallel.bucket_size_mb = 1e6;
    run_result r = fixture_run(&s);
    assert_false(r.memory.oom);
    assert_true(r.memory.buffers == 0);
    s.parallel.framework = FRAMEWORK_DEEPSPEED;
    s.parallel.pipeline_engine = PIPELINE_ENGINE_DEEPSPEED;
    double grads = params_stage_per_gpu(&s, 0) * params_grad_reduce_bytes(&s);
    r = fixture_run(&s);
    assert_false(r.memory.oom);
    assert_within(r.memory.buffers, grads / GIB, 1e-9);
    fixture_free(&s);
}

/* Left out, bucket_size_mb is the framework's own default (params.h), written out here from the
 * frameworks' code: Megatron-LM max(4e7, 1e6 x DP x CP) parameters in fp32 under bf16 when it
 * overlaps the reduction (distributed_data_parallel.py), all of them when not; DeepSpeed's
 * reduce_bucket_size under ZeRO-1/2 and 5e8 otherwise, in bf16; PyTorch DDP's 25 MiB (Composer's
 * fsdp NO_SHARD runs it), torchtitan's replicate(bucket_cap_mb=100). */
static void test_default_buckets_are_the_frameworks(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 4);
    s.training.precision = PREC_BF16;
    fixture_layout(&s, 1, 1, 8, 16);
    s.parallel.bucket_size_mb = 0;
    s.parallel.overlap_grad_reduce = 1;
    assert_true(params_dp_bucket_bytes(&s) == 4e7 * 4);
    s.parallel.dp = 48;
    assert_true(params_dp_bucket_bytes(&s) == 4.8e7 * 4);
    s.parallel.cp = 2;
    assert_true(params_dp_bucket_bytes(&s) == 9.6e7 * 4);
    s.parallel.overlap_grad_reduce = 0;
    assert_true(params_dp_bucket_bytes(&s) == 1e6 * 1048576.0);
    s.parallel.cp = 1;
    s.parallel.framework = FRAMEWORK_DEEPSPEED;
    s.parallel.pipeline_engine = PIPELINE_ENGINE_DEEPSPEED; /* as the loader sets it for deepspeed */
    s.parallel.zero_stage = 1;
    s.parallel.reduce_bucket_size = 2e8;
    assert_true(params_dp_bucket_bytes(&s) == 2e8 * 2);
    s.parallel.zero_stage = 0;
    assert_true(params_dp_bucket_bytes(&s) == 5e8 * 2);
    s.parallel.framework = FRAMEWORK_TORCHTITAN;
    s.parallel.pipeline_engine = PIPELINE_ENGINE_MEGATRON;
    assert_true(params_dp_bucket_bytes(&s) == 100 * 1048576.0);
    s.parallel.framework = FRAMEWORK_FSDP;
    assert_true(params_dp_bucket_bytes(&s) == 25 * 1048576.0);
    s.parallel.bucket_size_mb = 7;
    assert_true(params_dp_bucket_bytes(&s) == 7 * 1048576.0);
    /* nanotron: DDP's 25 MB of bf16 gradients under ZeRO 0 (model.ddp_bucket_cap_mb), which its fp32
     * hook reduces as 50 MB of fp32; its whole fp32 buffer under 1, whatever bucket_size_mb says */
    s.parallel.bucket_size_mb = 0;
    s.parallel.framework = FRAMEWORK_NANOTRON;
    s.parallel.zero_stage = 0;
    assert_true(params_dp_bucket_bytes(&s) == 50 * 1048576.0);
    s.parallel.zero_stage = 1;
    assert_true(params_dp_bucket_bytes(&s) == 1e6 * 1048576.0);
    s.parallel.bucket_size_mb = 7;
    assert_true(params_dp_bucket_bytes(&s) == 1e6 * 1048576.0);
    fixture_free(&s);
}

/* The step's tasks named `name`: how many, the collective calls they stand for, their bytes and
 * their time. */
static bucket_sums named(const step_workload *w, const char *name, double *bytes)
{
    bucket_sums b = {0, 0, 0};
    *bytes = 0;
    for (int i = 0; i < w->n_tasks; i++)
        if (w->tasks[i].name && strcmp(w->tasks[i].name, name) == 0) {
            b.tasks++;
            b.seconds += w->tasks[i].duration_s;
            b.calls += w->tasks[i].calls > 1 ? w->tasks[i].calls : 1;
            *bytes += w->tasks[i].bytes;
        }
    return b;
}

/* nanotron's ZeRO-1 (framework nanotron, config.h): no reduce-scatter; the whole gradient, in fp32
 * under bf16, all-reduced in one call after the backward (trainer.py: sync_gradients_across_dp with
 * reduce_scatter=False over the contiguous fp32 buffer), then the updated shards gathered as
 * Megatron's distributed optimizer gathers them, and the gradient norm read from the whole fp32
 * buffer (its clip_grad_norm). The same layout under Megatron-LM reduce-scatters and reads its shard.
 * The call's time is the collective model's all-reduce of that many bytes over the DP group. */
static void test_nanotron_zero1_all_reduces_the_whole_gradient(void **state)
{
    (void)state;
    scenario_config s;
    scenario_dp8(&s);
    s.training.precision = PREC_BF16;
    s.parallel.zero_stage = 1;
    s.parallel.overlap_grad_reduce = 0;
    s.parallel.bucket_size_mb = 0;
    double grads = params_stage_per_gpu(&s, 0) * 4; /* fp32 */
    step_workload w;
    double bytes;

    fixture_build(&s, &w); /* Megatron-LM's distributed optimizer */
    double norm_shard = named(&w, "grad_norm", &bytes).seconds;
    assert_int_equal(named(&w, "dp_grad_allreduce", &bytes).tasks, 0);
    assert_true(named(&w, "dp_grad_reduce_scatter", &bytes).tasks >= 1);
    assert_within(bytes, grads, 1e-9 * grads);
    assert_true(named(&w, "zero_param_allgather", &bytes).tasks >= 1);
    workload_free(&w);

    s.parallel.framework = FRAMEWORK_NANOTRON;
    int tasks_without = 0;
    for (int overlap = 0; overlap < 2; overlap++) { /* overlap_grad_reduce is its DDP's: the same step */
        s.parallel.overlap_grad_reduce = overlap;
        fixture_build(&s, &w);
        if (overlap)
            assert_int_equal(w.n_tasks, tasks_without); /* no backward split into layers for buckets */
        tasks_without = w.n_tasks;
        assert_int_equal(named(&w, "dp_grad_reduce_scatter", &bytes).tasks, 0);
        bucket_sums ar = named(&w, "dp_grad_allreduce", &bytes);
        assert_int_equal(ar.tasks, 1);
        assert_within(bytes, grads, 1e-9 * grads);
        assert_within(ar.seconds, dp_call_s(&s, grads), 1e-9 * ar.seconds);
        assert_true(named(&w, "zero_param_allgather", &bytes).tasks >= 1);
        /* its clip_grad_norm reads every parameter's fp32 gradient, not the rank's shard */
        cost_model cm;
        cost_model_init(&cm, &s);
        assert_within(named(&w, "grad_norm", &bytes).seconds - norm_shard,
                      cost_memory_s(&cm, OPCLASS_ADAMW, grads) - cost_memory_s(&cm, OPCLASS_ADAMW, grads / 8), 1e-12);
        workload_free(&w);
    }

    /* under ZeRO 0 it is DDP's: calls of 25 MiB of bf16 gradients (50 MiB as the fp32 hook sends
     * them), overlapped */
    s.parallel.zero_stage = 0;
    s.parallel.overlap_grad_reduce = 1;
    fixture_build(&s, &w);
    bucket_sums ddp = named(&w, "dp_grad_allreduce", &bytes);
    assert_within(bytes, grads, 1e-9 * grads);
    assert_within(ddp.calls, ceil(grads / (50 * 1048576.0)), 1e-9);
    assert_int_equal(named(&w, "zero_param_allgather", &bytes).tasks, 0);
    workload_free(&w);
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_buckets_cost_their_calls),
        cmocka_unit_test(test_tiny_buckets_bounded),
        cmocka_unit_test(test_tiny_param_gather_buckets),
        cmocka_unit_test(test_tiny_zero3_reduce_buckets),
        cmocka_unit_test(test_huge_buckets_hold_the_gradients),
        cmocka_unit_test(test_default_buckets_are_the_frameworks),
        cmocka_unit_test(test_nanotron_zero1_all_reduces_the_whole_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
