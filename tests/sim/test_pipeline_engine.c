/* The pipeline engines' transfers. DeepSpeed's PipelineEngine (parallel.pipeline_engine
 * "deepspeed", sim/step/workload.c): the replayed step against a clock-by-clock run of DeepSpeed's
 * TrainSchedule, in which every transfer is a blocking call that starts once both stages reach it
 * and holds both until it is through; the same step at both fidelities. Megatron-LM's batched
 * transfers, which synchronise the device (params_p2p_drains_device): pass by pass, on the replay's
 * times, nothing of a pass after an exchange starts before what its stage issued before it ends. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "fixture.h"
#include "params.h"

/* deepspeed/runtime/pipe/schedule.py, TrainSchedule._step_to_micro_batch and the four
 * _even/_odd_step_forward/backward_id helpers, as written there. */
static int train_schedule_micro_batch(int stages, int stage_id, int step_id, int *is_forward)
{
    int even_step = step_id % 2 == 0, even_stage = stage_id % 2 == 0;
    if (even_step && even_stage) {
        *is_forward = 1;
        return step_id / 2 - stage_id / 2;
    }
    if (!even_step && !even_stage) {
        *is_forward = 1;
        return (step_id - 1) / 2 - stage_id / 2;
    }
    *is_forward = 0;
    if (even_step)
        return step_id / 2 - stages + (stage_id + 1) / 2;
    return ((step_id - 1) / 2) - stages + 1 + stage_id / 2;
}

/* Each stage a clock; each step's commands in TrainSchedule's order (a backward step: send the
 * previous output, receive the output gradient; a forward step: receive the input, send the
 * previous input gradient; then the pass). A transfer starts at the later of its two stages'
 * clocks and sets both to its end. Writes when each stage's last pass ends. */
static void train_schedule_clocks(int P, int m, const double *F, const double *B, double c, double *last)
{
    double clock[8];
    assert_true(P <= 8);
    int *prev = malloc((size_t)P * sizeof(int)), *mb = malloc((size_t)P * sizeof(int)),
        *fwd = malloc((size_t)P * sizeof(int));
    for (int s = 0; s < P; s++) {
        clock[s] = 0;
        prev[s] = -1;
    }
    for (int t = 0; t < 2 * (m + P - 1); t++) {
        for (int s = 0; s < P; s++) {
            mb[s] = train_schedule_micro_batch(P, s, t, &fwd[s]);
            if (mb[s] >= m)
                mb[s] = -1;
        }
        for (int s = 0; s + 1 < P; s++) /* SendActivation(prev) meets the next stage's RecvActivation */
            if (!fwd[s] && prev[s] >= 0) {
                double at = fmax(clock[s], clock[s + 1]) + c;
                clock[s] = clock[s + 1] = at;
            }
        for (int s = 1; s < P; s++) /* SendGrad(prev) meets the previous stage's RecvGrad */
            if (fwd[s] && prev[s] >= 0) {
                double at = fmax(clock[s], clock[s - 1]) + c;
                clock[s] = clock[s - 1] = at;
            }
        for (int s = 0; s < P; s++) {
            if (mb[s] >= 0)
                last[s] = clock[s] += fwd[s] ? F[s] : B[s];
            prev[s] = mb[s];
        }
    }
    free(prev);
    free(mb);
    free(fwd);
}

static void deepspeed_fixture(scenario_config *s, int P, int m)
{
    fixture_scenario(s, 2 * P);
    fixture_layout(s, 1, P, 1, m * s->training.micro_batch_size);
    s->parallel.overlap_grad_reduce = 0;
    s->parallel.pipeline_engine = PIPELINE_ENGINE_DEEPSPEED;
    s->training.recompute = RECOMPUTE_FULL; /* a backward three forwards long: stages wait on it */
    s->training.recompute_num_layers = 1;
    s->platform.node.nvlink_bandwidth_gbs = 2; /* the stages share a node: transfers of 2 MiB about
                                                 as long as a forward, so that waiting matters */
}

static void replay_follows_the_train_schedule_clocks(void **state)
{
    (void)state;
    static const int cases[][2] = {{2, 1}, {2, 5}, {3, 2}, {4, 4}, {4, 9}, {5, 3}, {6, 13}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int P = cases[k][0], m = cases[k][1];
        scenario_config s;
        deepspeed_fixture(&s, P, m);
        step_workload w;
        fixture_build(&s, &w);
        double F[8] = {0}, B[8] = {0}, U[8] = {0}, c = 0, want[8], got[8] = {0};
        int passes = 0, transfers = 0, updates = 0;
        replay_times t;
        fixture_replay_analytic(&w, &t);
        for (int i = 0; i < w.n_tasks; i++) {
            const sim_task *x = &w.tasks[i];
            int fw = !strcmp(x->name, "fwd"), bw = !strcmp(x->name, "bwd"), up = !strcmp(x->name, "update_hp_grads");
            if (fw || bw || up) { /* one duration per stage and kind: the clocks' inputs */
                double *d = fw ? &F[x->stage] : bw ? &B[x->stage] : &U[x->stage];
                assert_true(*d == 0 || fabs(*d - x->duration_s) < 1e-15);
                *d = x->duration_s;
                got[x->stage] = fmax(got[x->stage], t.finish[i]);
                passes += !up;
                updates += up;
            } else if (x->kind == TASK_P2P) {
                assert_true(c == 0 || fabs(c - x->duration_s) < 1e-15);
                c = x->duration_s;
                transfers++;
            }
        }
        assert_int_equal(passes, 2 * P * m);
        assert_int_equal(transfers, 2 * (P - 1) * m);
        /* bf16: BF16_Optimizer's fp32 accumulation after every backward, 18 bytes a parameter of
         * the stage at the fixture's 1,000 GB/s, on the compute stream (part of the backward's
         * step, for the clocks) */
        assert_int_equal(updates, P * m);
        for (int p = 0; p < P; p++) {
            assert_true(fabs(U[p] - 18 * params_stage_per_gpu(&s, p) / 1e12) <= 1e-12 * U[p]);
            B[p] += U[p];
        }
        print_message("P %d m %d: F %.6f s, B %.6f s, transfer %.6f s\n", P, m, F[0], B[0], c);
        assert_true(c > 0 && B[0] > 2 * F[0]);
        train_schedule_clocks(P, m, F, B, c, want);
        for (int p = 0; p < P; p++) {
            print_message("P %d m %d stage %d: last pass ends %.6f s, TrainSchedule's clocks %.6f s\n", P, m, p,
                          got[p], want[p]);
            assert_true(fabs(got[p] - want[p]) <= 1e-9 * want[p]);
        }
        replay_times_free(&t);
        workload_free(&w);
        fixture_free(&s);
    }
}

/* Where the two engines part: a stage's send waits for its neighbour to reach the matching
 * receive. With a backward three forwards long, Megatron-LM's stage 0 sends its warm-up outputs
 * as it makes them; DeepSpeed's waits, each time, for stage 1 to finish the pass it is in. The
 * steady state costs the same (F + B + two transfers each way a micro-batch): what differs is
 * bounded, and the DeepSpeed step is not the shorter. */
static void deepspeed_step_against_megatron(void **state)
{
    (void)state;
    scenario_config s;
    deepspeed_fixture(&s, 4, 16);
    s.parallel.pipeline_engine = PIPELINE_ENGINE_MEGATRON;
    s.training.precision = PREC_FP16; /* no BF16_Optimizer pass: the schedules alone */
    run_result mg = fixture_run(&s);
    s.parallel.pipeline_engine = PIPELINE_ENGINE_DEEPSPEED;
    run_result ds = fixture_run(&s);
    step_workload w; /* fp16 trains through FP16_Optimizer: no fp32 accumulation pass */
    fixture_build(&s, &w);
    assert_int_equal(fixture_find_task(&w, "update_hp_grads"), -1);
    workload_free(&w);
    print_message("P 4 m 16: DeepSpeed %.6f s, Megatron-LM %.6f s\n", ds.step_time_s, mg.step_time_s);
    assert_true(ds.step_time_s >= mg.step_time_s * (1 - 1e-12));
    assert_true(ds.step_time_s < 1.2 * mg.step_time_s);
    fixture_free(&s);
}

/* Which DeepSpeed runs go through the BF16_Optimizer (its fp32 accumulation once per
 * micro-batch's backward, its whole-gradient all-reduce): bf16 with ZeRO-1 at most under a
 * pipeline (the pipeline engine takes bf16 only through it), ZeRO stage 0 without one (ZeRO-1 is
 * then DeepSpeed's ZeRO optimizer, which reduce-scatters); not under ZeRO-2, not in fp16, not with
 * Megatron-LM's engine. DeepSpeed sends gradients in the model's 16-bit type by default. */
static int tasks_named(const scenario_config *s, const char *name)
{
    step_workload w;
    fixture_build(s, &w);
    int n = 0;
    for (int i = 0; i < w.n_tasks; i++)
        n += !strcmp(w.tasks[i].name, name);
    workload_free(&w);
    return n;
}

static void bf16_optimizer_runs_where_deepspeed_runs_it(void **state)
{
    (void)state;
    scenario_config s;
    deepspeed_fixture(&s, 1, 4);
    s.parallel.dp = 2;
    s.training.global_batch_size = 2 * 4 * s.training.micro_batch_size;
    assert_int_equal(tasks_named(&s, "update_hp_grads"), 4);
    assert_true(tasks_named(&s, "dp_grad_allreduce") > 0);
    assert_true(params_grad_reduce_bytes(&s) == 2);
    /* its own ZeRO-1 at stage 0 (bf16_optimizer.py: fp32 master and Adam states of a 1/dp
     * partition, the bf16 parameters all-gathered after the step): the optimizer states of
     * Megatron-LM's ZeRO-1, half those of its DDP at DP 2; fp32 gradients, whole */
    assert_int_equal(params_optimizer_shards(&s), 2);
    assert_true(tasks_named(&s, "zero_param_allgather") > 0);
    run_memory ds, ddp, zero1;
    run_memory_estimate(&s, &ds);
    s.parallel.pipeline_engine = PIPELINE_ENGINE_MEGATRON;
    run_memory_estimate(&s, &ddp);
    assert_int_equal(tasks_named(&s, "zero_param_allgather"), 0);
    s.parallel.zero_stage = 1;
    run_memory_estimate(&s, &zero1);
    s.parallel.zero_stage = 0;
    s.parallel.pipeline_engine = PIPELINE_ENGINE_DEEPSPEED;
    print_message("optimizer states: BF16_Optimizer %.4g GiB, Megatron ZeRO-1 %.4g, DDP %.4g\n", ds.optimizer,
                  zero1.optimizer, ddp.optimizer);
    assert_true(ds.optimizer > 0 && fabs(ds.optimizer - zero1.optimizer) < 1e-9 * zero1.optimizer);
    assert_true(fabs(2 * ds.optimizer - ddp.optimizer) < 1e-9 * ddp.optimizer);
    assert_true(fabs(ds.gradients - ddp.gradients) < 1e-9 * ddp.gradients); /* both fp32 */
    s.parallel.zero_stage = 1; /* no pipeline: DeepSpeed's ZeRO-1 optimizer */
    assert_int_equal(tasks_named(&s, "update_hp_grads"), 0);
    assert_true(tasks_named(&s, "dp_grad_reduce_scatter") > 0);
    s.parallel.pp = 2; /* a pipeline: the BF16_Optimizer, its states sharded, the gradient all-reduced */
    s.model.num_layers = 2;
    s.training.global_batch_size = 2 * 4 * s.training.micro_batch_size;
    assert_int_equal(tasks_named(&s, "update_hp_grads"), 2 * 4);
    assert_true(tasks_named(&s, "dp_grad_allreduce") > 0);
    assert_int_equal(tasks_named(&s, "dp_grad_reduce_scatter"), 0);
    s.training.precision = PREC_FP16;
    assert_int_equal(tasks_named(&s, "update_hp_grads"), 0);
    s.training.precision = PREC_BF16;
    s.parallel.pipeline_engine = PIPELINE_ENGINE_MEGATRON;
    assert_int_equal(tasks_named(&s, "update_hp_grads"), 0);
    assert_true(params_grad_reduce_bytes(&s) == 4); /* Megatron-LM: fp32 under bf16 */
    fixture_free(&s);
}

static void both_fidelities_agree(void **state)
{
    (void)state;
    scenario_config s;
    deepspeed_fixture(&s, 4, 6);
    run_result a, f;
    fixture_run_both(&s, &a, &f);
    print_message("analytic %.6f s, flow %.6f s\n", a.step_time_s, f.step_time_s);
    assert_true(fabs(f.step_time_s - a.step_time_s) <= 0.02 * a.step_time_s);
    fixture_free(&s);
}

/* Task k runs a pass's compute (a forward or backward piece on the compute lane). */
static int is_pass_compute(const sim_task *k)
{
    return k->lane == LANE_COMPUTE && (!strcmp(k->name, "fwd") || !strcmp(k->name, "bwd"));
}

/* Pieces a and b belong to one pass (the same phase, micro-batch and chunk). */
static int same_pass(const sim_task *a, const sim_task *b)
{
    return a->phase == b->phase && a->micro_batch == b->micro_batch && a->chunk == b->chunk;
}

/* The finish of the pipeline transfer task i receives on its own stage, or -1. */
static double received_finish(const step_workload *w, const replay_times *t, int i)
{
    const sim_task *k = &w->tasks[i];
    double received = -1;
    for (int d = 0; d < k->dep_count; d++) {
        int j = w->deps[k->dep_begin + d];
        if (w->tasks[j].kind == TASK_P2P && w->tasks[j].peer_stage == k->stage)
            received = t->finish[j];
    }
    return received;
}

/* Megatron-LM's batched transfers synchronise the device (params_p2p_drains_device). Walks the
 * step's tasks in graph order (each stage's in the order it issues them) and, at the first compute
 * task c0 of each pass of a stage, asks whether Megatron-LM's schedule runs an exchange call
 * before it (its own reading here, apart from the workload's): under 1F1B when the stage sent
 * after its last pass or c0 receives (the calls that do neither return early on the first and last
 * stage, p2p_communication.py); under interleaving before every pass but a steady-state backward,
 * which follows its forward with no call between (schedules.py): a backward after a forward is
 * one unless it is the stage's first and every forward came before it (all of them warm-up). A
 * stage's first pass is not checked. After such an exchange, c0 and the ZeRO-3 gathers issued for it must start no earlier
 * than every earlier task of the stage, the transfer c0 receives included, has ended (on the
 * analytic replay's times). Returns the passes that break it; *checked counts the passes after an
 * exchange, *free_early the others that start before their stage's earlier work has ended (where
 * no drain holds them back), *mismatched (ZeRO-3) the passes whose first gather waits for the
 * stage's last compute (the drain's dependency: its prefetch would wait for one further back)
 * where no exchange comes before them, or does not where one does. */
static int passes_started_before_the_drain(const scenario_config *s, int *checked, int *free_early, int *mismatched)
{
    step_workload w;
    fixture_build(s, &w);
    replay_times t;
    fixture_replay_analytic(&w, &t);
    int P = w.stages, broken = 0, interleaved = s->parallel.vpp > 1;
    double *done = calloc((size_t)P, sizeof(double)), *gather_start = malloc((size_t)P * sizeof(double));
    double *gather_end = calloc((size_t)P, sizeof(double));
    int *last = malloc((size_t)P * sizeof(int)), *sent = calloc((size_t)P, sizeof(int));
    int *first_gather = malloc((size_t)P * sizeof(int)), *first_backward = malloc((size_t)P * sizeof(int));
    long long total = scenario_micro_batches(s) * (interleaved ? s->parallel.vpp : 1);
    for (int p = 0; p < P; p++) {
        last[p] = first_gather[p] = first_backward[p] = -1;
        gather_start[p] = INFINITY;
    }
    *checked = *free_early = *mismatched = 0;
    /* each stage's passes in order: phase and the finish of the transfer each receives (-1: none),
     * for the exchange before a steady-state forward, which receives its backward's too; and where
     * its first backward comes (after all of its forwards: every forward warm-up) */
    int *n_pass = calloc((size_t)P, sizeof(int)), *at = malloc((size_t)P * sizeof(int)); /* the pass at hand */
    int cap = 2 * (int)total + 2;
    int *pass_phase = malloc((size_t)P * cap * sizeof(int));
    double *pass_received = malloc((size_t)P * cap * sizeof(double));
    for (int p = 0; p < P; p++)
        at[p] = -1;
    for (int i = 0; i < w.n_tasks; i++) {
        const sim_task *k = &w.tasks[i];
        int p = k->stage;
        if (!is_pass_compute(k))
            continue;
        int piece = last[p] >= 0 && same_pass(&w.tasks[last[p]], k);
        last[p] = i;
        if (piece)
            continue; /* a later piece of the same pass */
        assert_true(n_pass[p] < cap);
        if (k->phase == PIPE_BACKWARD && first_backward[p] < 0)
            first_backward[p] = n_pass[p];
        pass_phase[p * cap + n_pass[p]] = k->phase;
        pass_received[p * cap + n_pass[p]] = received_finish(&w, &t, i);
        n_pass[p]++;
    }
    for (int p = 0; p < P; p++)
        last[p] = -1;
    for (int i = 0; i < w.n_tasks; i++) {
        const sim_task *k = &w.tasks[i];
        int p = k->stage;
        if (k->lane == LANE_COMM && !strcmp(k->name, "zero3_param_allgather")) { /* for the stage's next piece */
            if (first_gather[p] < 0)
                first_gather[p] = i;
            gather_start[p] = fmin(gather_start[p], t.start[i]);
            gather_end[p] = fmax(gather_end[p], t.finish[i]);
            continue;
        }
        if (k->kind == TASK_P2P)
            sent[p] = 1;
        if (is_pass_compute(k)) {
            const sim_task *prev = last[p] >= 0 ? &w.tasks[last[p]] : NULL;
            int new_pass = !prev || !same_pass(prev, k), all_warmup = first_backward[p] == total;
            double received = received_finish(&w, &t, i);
            int exchange = interleaved && prev
                               ? !(k->phase == PIPE_BACKWARD && prev->phase == PIPE_FORWARD && !all_warmup)
                               : sent[p] || received >= 0;
            at[p] += new_pass;
            int j = at[p] + 1; /* the pass after this one */
            double partner = interleaved && new_pass && k->phase == PIPE_FORWARD && j < n_pass[p] &&
                                     pass_phase[p * cap + j] == PIPE_BACKWARD && !all_warmup
                                 ? pass_received[p * cap + j]
                                 : -1;
            if (new_pass && prev) {
                double ready = fmax(fmax(done[p], received), partner), first = fmin(t.start[i], gather_start[p]);
                int early = first < ready - 1e-12 * ready;
                if (exchange) {
                    (*checked)++;
                    broken += early;
                } else {
                    *free_early += early;
                }
                if (first_gather[p] >= 0) {
                    const sim_task *g = &w.tasks[first_gather[p]];
                    int waits = 0;
                    for (int d = 0; d < g->dep_count; d++)
                        waits |= w.deps[g->dep_begin + d] == last[p];
                    *mismatched += waits != exchange;
                }
            }
            if (new_pass)
                sent[p] = 0;
            done[p] = fmax(done[p], gather_end[p]);
            gather_start[p] = INFINITY;
            gather_end[p] = 0;
            first_gather[p] = -1;
            last[p] = i;
        }
        done[p] = fmax(done[p], t.finish[i]);
    }
    free(done); free(gather_start); free(gather_end); free(last); free(sent); free(first_gather); free(first_backward);
    free(n_pass); free(at); free(pass_phase); free(pass_received);
    replay_times_free(&t);
    workload_free(&w);
    return broken;
}

static void megatron_transfers_drain_the_device(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 8); /* four layers a stage: DeepSpeed's default prefetch holds them all */
    fixture_layout(&s, 1, 2, 2, 2 * 6 * s.training.micro_batch_size); /* six micro-batches */
    s.parallel.zero_stage = 3;
    assert_true(params_p2p_drains_device(&s));
    int checked = 0, free_early = 0, mismatched = 0;
    int broken = passes_started_before_the_drain(&s, &checked, &free_early, &mismatched);
    double drained = fixture_run(&s).step_time_s;
    /* 1F1B on two stages, six micro-batches: stage 0 runs F0 F1 B0 F2 B1 ... F5 B4 B5 and exchanges
     * before F1 (F0's send) and before every backward (it receives its gradient): 7 passes; stage 1
     * runs F0 B0 F1 B1 ... and exchanges before F1..F5 (it receives; after a backward it sends): 5.
     * The other passes (stage 0's forwards after a backward, stage 1's backwards) are not drained:
     * some of them start early, their gathers prefetched during the pass before */
    print_message("1F1B: %d of %d passes after an exchange start early, %d of the others; %d drained where Megatron-LM "
                  "does not, or not where it does; step %.6f s\n", broken, checked, free_early, mismatched, drained);
    assert_int_equal(broken, 0);
    assert_int_equal(mismatched, 0);
    assert_int_equal(checked, 12);
    assert_true(free_early > 0);
    /* ZeRO-Offload's gradient copies run on the host lane, and are waited for too */
    fixture_host_links(&s);
    s.parallel.offload_optimizer = OFFLOAD_CPU;
    int checked_off = 0, free_off = 0, mism_off = 0;
    int broken_off = passes_started_before_the_drain(&s, &checked_off, &free_off, &mism_off);
    print_message("with the optimizer offloaded: %d of %d start early, %d mismatched\n", broken_off, checked_off,
                  mism_off);
    assert_true(broken_off == 0 && mism_off == 0 && checked_off == 12);
    s.parallel.offload_optimizer = OFFLOAD_NONE;
    /* transfers beside compute (overlap_p2p_comm): nothing drains, and passes after an exchange
     * start early, so the check can fail; the step is no longer */
    s.parallel.overlap_p2p_comm = 1;
    assert_false(params_p2p_drains_device(&s));
    int checked_overlap = 0, free_overlap = 0, mismatched_overlap = 0;
    int broken_overlap = passes_started_before_the_drain(&s, &checked_overlap, &free_overlap, &mismatched_overlap);
    double overlapped = fixture_run(&s).step_time_s;
    print_message("transfers beside compute: %d of %d start early, step %.6f s\n", broken_overlap, checked_overlap,
                  overlapped);
    assert_true(broken_overlap > 0);
    assert_true(overlapped < drained);
    /* the interleaved schedule, ZeRO-3 and then ZeRO-1 with its buckets overlapped (a chunk's go out
     * in its last backward, while the other chunk's passes run): every pass drained but the
     * steady-state backwards, whose gathers still run ahead */
    s.parallel.overlap_p2p_comm = 0;
    s.parallel.vpp = 2;
    s.parallel.schedule = PIPELINE_INTERLEAVED;
    /* four stages of two chunks, as many micro-batches as stages: stages 0 and 1 run all their
     * eight forwards as warm-up (Megatron-LM's 2(P - s - 1) + (V - 1)P = 10 and 8, capped at 8), so
     * their first backward follows an exchange; 4 x 15 passes after the first, less the steady
     * backwards of stages 2 and 3 (8 - 6 and 8 - 4) */
    fixture_layout(&s, 1, 4, 2, 2 * 4 * s.training.micro_batch_size);
    s.parallel.zero_stage = 3;
    int checked_w = 0, free_w = 0, mism_w = 0, broken_w = passes_started_before_the_drain(&s, &checked_w, &free_w,
                                                                                         &mism_w);
    print_message("interleaved, all warm-up on two stages: %d of %d after an exchange start early, %d mismatched\n",
                  broken_w, checked_w, mism_w);
    assert_true(broken_w == 0 && mism_w == 0 && checked_w == 4 * 15 - 2 - 4);
    /* eight micro-batches: warm-up 10, 8, 6 and 4 forwards of 16; 4 x 31 passes after the first,
     * less the 6 + 8 + 10 + 12 steady backwards */
    fixture_layout(&s, 1, 4, 2, 2 * 8 * s.training.micro_batch_size);
    for (int zero = 3; zero >= 1; zero -= 2) {
        s.parallel.zero_stage = zero;
        s.parallel.overlap_grad_reduce = zero == 1;
        int checked_v = 0, free_v = 0, mism_v = 0, broken_v = passes_started_before_the_drain(&s, &checked_v, &free_v,
                                                                                             &mism_v);
        s.parallel.overlap_p2p_comm = 1;
        int checked_vo = 0, free_vo = 0, mism_vo = 0,
            broken_vo = passes_started_before_the_drain(&s, &checked_vo, &free_vo, &mism_vo);
        s.parallel.overlap_p2p_comm = 0;
        print_message("interleaved, ZeRO-%d: %d of %d after an exchange start early, %d of the others, %d "
                      "mismatched; beside compute %d of %d\n", zero, broken_v, checked_v, free_v, mism_v, broken_vo,
                      checked_vo);
        assert_true(broken_v == 0 && mism_v == 0 && checked_v == 4 * 31 - 36 && broken_vo > 0);
        if (zero == 3)
            assert_true(free_v > 0);
    }
    /* other engines do not synchronise: PyTorch's pipelining (torchtitan) and DeepSpeed's */
    s.parallel.framework = FRAMEWORK_TORCHTITAN;
    assert_false(params_p2p_drains_device(&s));
    s.parallel.framework = FRAMEWORK_UNSET;
    s.parallel.pipeline_engine = PIPELINE_ENGINE_DEEPSPEED;
    assert_false(params_p2p_drains_device(&s));
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(replay_follows_the_train_schedule_clocks),
        cmocka_unit_test(deepspeed_step_against_megatron),
        cmocka_unit_test(bf16_optimizer_runs_where_deepspeed_runs_it),
        cmocka_unit_test(both_fidelities_agree),
        cmocka_unit_test(megatron_transfers_drain_the_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
