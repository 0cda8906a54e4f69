/* The analytic replay: critical paths of hand-built graphs, pipeline bubbles against the
 * closed forms of DESIGN.md, and the attribution of exposed communication. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "collective.h"
#include "fixture.h"

static sim_task compute(int stage, double d)
{
    return fixture_compute(stage, "c", d);
}

/* A task's communication by kind is kept beside the tasks: none is -1, equal parts are one entry,
 * different ones two, and each task reads back its own. A step of a real layout holds a handful
 * of distinct parts however many tasks it has (what the budget's bytes a task assume). */
static void task_parts_are_shared_and_read_back(void **state)
{
    (void)state;
    step_workload w;
    fixture_graph(&w, 1);
    task_comm_parts tp = {0}, ep = {0}, zero = {0};
    tp.inside[COMM_TP] = 0.25;
    ep.inside[COMM_EP] = 0.5;
    ep.hidden[COMM_EP] = 0.125;
    sim_task t = compute(0, 1);
    int a = workload_add_task_parts(&w, &t, &tp), b = workload_add_task_parts(&w, &t, &ep);
    int c = workload_add_task_parts(&w, &t, &tp), d = workload_add_task_parts(&w, &t, &zero);
    int e = workload_add_task(&w, &t), f = workload_add_task_parts(&w, &t, NULL);
    assert_int_equal(w.n_parts, 2);
    assert_int_equal(w.tasks[a].parts, w.tasks[c].parts);
    assert_int_not_equal(w.tasks[a].parts, w.tasks[b].parts);
    assert_int_equal(w.tasks[d].parts, -1);
    assert_int_equal(w.tasks[e].parts, -1);
    assert_int_equal(w.tasks[f].parts, -1);
    assert_true(workload_task_parts(&w, &w.tasks[c])->inside[COMM_TP] == 0.25);
    assert_true(workload_task_parts(&w, &w.tasks[b])->hidden[COMM_EP] == 0.125);
    assert_true(workload_task_parts(&w, &w.tasks[e])->inside[COMM_TP] == 0);
    workload_free(&w);

    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 2, 4, 2, 64); /* TP 2: every pass holds TP communication */
    fixture_build(&s, &w);
    int with_parts = 0;
    for (int i = 0; i < w.n_tasks; i++)
        with_parts += w.tasks[i].parts >= 0;
    print_message("%d tasks, %d with parts, %d distinct\n", w.n_tasks, with_parts, w.n_parts);
    assert_true(with_parts > 100);
    assert_true(w.n_parts > 0 && w.n_parts <= 16);
    workload_free(&w);
    fixture_free(&s);
}

static void critical_path_of_a_hand_built_graph(void **state)
{
    /* stage 0: a(1) -> b(2); stage 1: c(4) waits for a; d(1) on stage 1 waits for b and c.
     * Critical path: a, c, d = 1 + 4 + 1 = 6; b runs in parallel with c. */
    step_workload w;
    fixture_graph(&w, 2);
    int a = fixture_add(&w, compute(0, 1), -1);
    int b = fixture_add(&w, compute(0, 2), -1);
    int c = fixture_add(&w, compute(1, 4), a);
    int d = fixture_add(&w, compute(1, 1), b);
    workload_add_dep(&w, d, c);
    replay_times rt;
    fixture_replay_analytic(&w, &rt);
    assert_true(fabs(rt.start[b] - 1) < 1e-12);
    assert_true(fabs(rt.finish[d] - 6) < 1e-12);
    replay_metrics m;
    assert_int_equal(replay_metrics_compute(&w, &rt, &m), 0);
    assert_true(fabs(m.step_time_s - 6) < 1e-12);
    /* stage 0 idles 3 of 6 s after b; stage 1 idles 1 s before c. */
    assert_true(fabs(m.stage_bubble_s[0] - 3) < 1e-12);
    assert_true(fabs(m.stage_bubble_s[1] - 1) < 1e-12);
    replay_metrics_free(&m);
    replay_times_free(&rt);
    workload_free(&w);
}

/* Contention (step_workload.overlap_slowdown s): a compute task of 1 s starts beside
 * collectives of 0.5 s on its stage. Each takes 1 - 1/s of the device while it runs, never more
 * than an equal share; the compute finishes late by what it lost. Closed forms per case. */
static double finish_beside(double slowdown, int comms, double *contention)
{
    step_workload w;
    fixture_graph(&w, 1);
    w.overlap_slowdown = slowdown;
    for (int c = 0; c < comms; c++) {
        sim_task t = compute(0, 0.5);
        t.kind = c == 0 ? TASK_COLLECTIVE : TASK_P2P;
        t.lane = c == 0 ? LANE_COMM : LANE_P2P;
        fixture_add(&w, t, -1);
    }
    int a = fixture_add(&w, compute(0, 1), -1);
    replay_times rt;
    fixture_replay_analytic(&w, &rt);
    double f = rt.finish[a];
    *contention = rt.contention[a];
    replay_metrics m;
    assert_int_equal(replay_metrics_compute(&w, &rt, &m), 0);
    assert_true(fabs(m.overlap_cost_s - *contention) < 1e-12); /* booked as overlap cost */
    replay_metrics_free(&m);
    replay_times_free(&rt);
    workload_free(&w);
    return f;
}

static void compute_beside_communication_runs_at_its_share(void **state)
{
    double lost;
    /* none: 1 s */
    assert_true(fabs(finish_beside(1.0, 1, &lost) - 1.0) < 1e-12 && lost == 0);
    /* s = 1.25, one collective: 0.8 of the device for 0.5 s (0.4 s of work), then 0.6 s alone */
    assert_true(fabs(finish_beside(1.25, 1, &lost) - 1.1) < 1e-12);
    assert_true(fabs(lost - 0.1) < 1e-12);
    /* two at once (a collective and a transfer): 1 - 2 x 0.2 = 0.6 for 0.5 s, 0.7 s alone */
    assert_true(fabs(finish_beside(1.25, 2, &lost) - 1.2) < 1e-12);
    /* s = 3 would take 2/3: capped at an equal share, 1/2 for 0.5 s, then 0.75 s alone */
    assert_true(fabs(finish_beside(3.0, 1, &lost) - 1.25) < 1e-12);
}

/* The event-driven path (taken when overlap costs something) is the list scheduler when it costs
 * nothing: every task of a pipelined, ZeRO-1, overlapped step starts and ends at the same time
 * with overlap_slowdown 1 + 1e-12 as the list scheduler has it with 1. */
static void event_replay_matches_list_scheduling_without_cost(void **state)
{
    scenario_config s;
    fixture_scenario(&s, 16);
    fixture_layout(&s, 1, 4, 4, 32);
    s.parallel.zero_stage = 1;
    s.parallel.overlap_grad_reduce = 1;
    step_workload w;
    fixture_build(&s, &w);
    replay_times list, ev;
    w.overlap_slowdown = 1;
    fixture_replay_analytic(&w, &list);
    w.overlap_slowdown = 1 + 1e-12;
    fixture_replay_analytic(&w, &ev);
    for (int i = 0; i < w.n_tasks; i++)
        if (fabs(list.start[i] - ev.start[i]) > 1e-9 || fabs(list.finish[i] - ev.finish[i]) > 1e-9)
            fail_msg("task %d (%s): list %.9f-%.9f, events %.9f-%.9f", i, w.tasks[i].name, list.start[i],
                     list.finish[i], ev.start[i], ev.finish[i]);
    replay_times_free(&list);
    replay_times_free(&ev);
    workload_free(&w);
    fixture_free(&s);
}

/* The loss's bytes follow the framework's code path (workload.c, loss_traffic): on one bf16 GPU,
 * Megatron-LM's unfused fp32 path moves 38 + 14 bytes per logit element, its jit-fused one
 * 22 + 6, a single pass 2 + 4. The step differs by the bytes' difference over the calibrated
 * rate (1000 GB/s in the fixture), for each micro-batch: closed form. */
static double step_with_loss(int fusion, int impl)
{
    scenario_config s;
    fixture_scenario(&s, 2);
    s.model.cross_entropy_loss_fusion = fusion;
    s.model.cross_entropy_fusion_impl = impl;
    return fixture_run_free(&s).step_time_s;
}

static void loss_bytes_follow_the_framework_code_path(void **state)
{
    double unfused = step_with_loss(0, 0), native = step_with_loss(1, 0), one_pass = step_with_loss(1, 1);
    double logits = 8.0 * 1024 * 32000; /* 8 micro-batches of 1 x 1024 tokens, vocabulary 32000 */
    double per_byte = logits / 1000e9;
    print_message("step: unfused %.6f s, native %.6f s, one pass %.6f s\n", unfused, native, one_pass);
    assert_true(fabs((unfused - native) - (52 - 28) * per_byte) < 1e-9);
    assert_true(fabs((native - one_pass) - (28 - 6) * per_byte) < 1e-9);
}

static double simulated_bubble(pipeline_kind kind, int p, int m, int v)
{
    scenario_config s;
    fixture_scenario(&s, p * v * 2);
    fixture_free_communication(&s);
    s.parallel.pp = p;
    s.parallel.vpp = v;
    s.parallel.schedule = kind;
    s.training.global_batch_size = m;
    return fixture_run_free(&s).bubble_mean;
}

static void bubble_matches_closed_forms(void **state)
{
    int ps[] = {2, 4, 8}, ms[] = {4, 8, 16, 32};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 4; j++) {
            int p = ps[i], m = ms[j];
            double ideal = (double)(p - 1) / (m + p - 1);
            double g = simulated_bubble(PIPELINE_GPIPE, p, m, 1);
            double f = simulated_bubble(PIPELINE_1F1B, p, m, 1);
            assert_within(g, ideal, 0.02);
            assert_within(f, ideal, 0.02);
            if (m % p == 0) {
                double iv = simulated_bubble(PIPELINE_INTERLEAVED, p, m, 2);
                double ideal_v = (double)(p - 1) / (2 * m + p - 1);
                print_message("p=%d m=%d gpipe %.4f 1f1b %.4f ideal %.4f interleaved %.4f ideal %.4f\n", p, m,
                              g, f, ideal, iv, ideal_v);
                assert_within(iv, ideal_v, 0.02);
            }
        }
}

static run_result run_dp(int overlap, int pp)
{
    scenario_config s;
    fixture_scenario(&s, 8);
    /* DP 16 / pp: two nodes, DP rings over NVLink + NICs; 8 micro-batches under a pipeline */
    fixture_layout(&s, 1, pp, 16 / pp, (pp > 1 ? 8 : 2) * (16 / pp));
    s.parallel.overlap_grad_reduce = overlap;
    s.parallel.zero_stage = 0;
    return fixture_run_free(&s);
}

static void dp_gradient_reduction_is_exposed_unless_overlapped(void **state)
{
    /* Under a pipeline too: each stage's reduction runs after its last backward, while its
     * compute stream waits for it and then, at the gradient norm, for the stage that ends last.
     * Its own reduction is still exposed there, not a bubble (it was, before 2026-11-28: a middle
     * stage's wait at the norm was charged to the end stages' embedding sum and called bubble). */
    run_result piped = run_dp(0, 4);
    assert_true(piped.comm_total_s[COMM_DP] > 0);
    assert_true(fabs(piped.comm_exposed_s[COMM_DP] - piped.comm_total_s[COMM_DP]) <=
                1e-9 + 1e-6 * piped.comm_total_s[COMM_DP]);
    run_result serial = run_dp(0, 1), overlapped = run_dp(1, 1);
    assert_true(serial.comm_total_s[COMM_DP] > 0);
    /* Without overlap the optimizer waits for every bucket: all of it is exposed. */
    assert_true(fabs(serial.comm_exposed_s[COMM_DP] - serial.comm_total_s[COMM_DP]) <=
                1e-9 + 1e-6 * serial.comm_total_s[COMM_DP]);
    /* With overlap the same traffic is mostly hidden under the backward pass. */
    assert_true(fabs(overlapped.comm_total_s[COMM_DP] - serial.comm_total_s[COMM_DP]) <=
                1e-6 * serial.comm_total_s[COMM_DP]);
    assert_true(overlapped.comm_exposed_s[COMM_DP] < 0.5 * serial.comm_exposed_s[COMM_DP]);
    assert_true(overlapped.step_time_s < serial.step_time_s);
    for (int c = 0; c < COMM_CLASS_COUNT; c++)
        assert_true(overlapped.comm_exposed_s[c] <= overlapped.comm_total_s[c] + 1e-12);
}

/* A pipeline of uneven stages and no gradient reduction (DP 1) under both pipeline engines
 * (GPT-3 175B's scenario cut to 16 layers over TP 8 x PP 4): no class of communication is charged
 * more exposed time than its tasks ran. (A stage's step-end rule above once followed a forward's
 * input transfer back onto the sending stage's own lane and charged that stage's transfers to
 * this one: under DeepSpeed's engine 8.3 ms of PP exposed against 6.8 ms run.) */
static void uneven_pipeline_exposes_no_more_than_ran(void **state)
{
    (void)state;
    static const char *const splits[] = {"parallel.pipeline_layers=[2,6,4,4]", "parallel.pipeline_layers=[6,2,4,4]",
                                         "parallel.pipeline_layers=[4,4,2,6]"};
    for (int engine = 0; engine < 2; engine++)
        for (int gbs = 0; gbs < 2; gbs++)
            for (size_t q = 0; q < sizeof splits / sizeof *splits; q++) {
                const char *set[] = {"model.num_layers=16", "parallel.tensor_model_parallel_size=8",
                                     "parallel.pipeline_model_parallel_size=4", "parallel.data_parallel_size=1",
                                     "parallel.schedule=\"1f1b\"", "parallel.virtual_pipeline_model_parallel_size=1",
                                     "parallel.overlap_grad_reduce=false", splits[q],
                                     engine ? "parallel.pipeline_engine=\"deepspeed\""
                                            : "parallel.pipeline_engine=\"megatron\"",
                                     gbs ? "training.global_batch_size=16" : "training.global_batch_size=8"};
                scenario_config s;
                config_error err;
                if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", set, 10, &s, &err) != 0)
                    fail_msg("%s", err.msg);
                run_result r = fixture_run(&s);
                scenario_free(&s);
                assert_true(r.comm_total_s[COMM_PP] > 0);
                for (int c = 0; c < COMM_CLASS_COUNT; c++)
                    if (r.comm_exposed_s[c] > r.comm_total_s[c] * (1 + 1e-9) + 1e-15)
                        fail_msg("engine %d, %s, batch %d: class %d exposed %.6g s of %.6g s run", engine, splits[q],
                                 gbs ? 16 : 8, c, r.comm_exposed_s[c], r.comm_total_s[c]);
            }
}

static void step_time_without_pipeline_equals_the_sum_of_passes(void **state)
{
    /* One stage, no communication: the step is m forward + m backward passes + optimizer,
     * and HFU = hardware FLOPs / (time x peak) cannot exceed the GEMM efficiency (100%). */
    scenario_config s;
    fixture_scenario(&s, 4);
    fixture_free_communication(&s);
    run_result r = fixture_run(&s);
    assert_true(r.bubble_mean < 1e-6);
    assert_true(r.hfu <= 1.0 + 1e-9);
    /* Dense GEMMs dominate; with free memory traffic the fixture's GEMMs run at 100% of peak,
     * so HFU is close to 1 (the unfused attention softmax is not free of launch cost: none). */
    assert_true(r.hfu > 0.97);
    fixture_free(&s);
}

/* Compression by precision (parallel.grad_reduce_dtype). The DP reduction's time is its fixed
 * terms, a bandwidth term proportional to the bytes per gradient, and (narrower than the
 * gradients) the packing and unpacking, memory-bound passes over 2 (4 + b) bytes per element.
 * With one bucket per stage and the conversion made free (elementwise ops and HBM at 1e15 GB/s), 4, 2
 * and 1 bytes per gradient give T4 - T2 = 2 (T2 - T1); the conversion's own cost then scales
 * as (4 + 2) / (4 + 1) between 2 and 1 bytes. */
static void bf16_gradient_reduction_halves_the_dp_bandwidth_term(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_layout(&s, 1, 1, 8, 8);
    s.training.precision = PREC_FP32;
    s.parallel.bucket_size_mb = 1e6;
    double t[5] = {0}, slow[5] = {0};
    for (int pass = 0; pass < 2; pass++) {
        s.calibration.op_gbs[OPCLASS_ELEMENTWISE] = pass == 0 ? 1e15 : 50;
        s.platform.gpu.hbm_bandwidth_gbs = pass == 0 ? 1e15 : 2000; /* HBM bounds a kernel's rate */
        for (int bytes = 1; bytes <= 4; bytes *= 2) {
            s.parallel.grad_reduce_bytes = bytes;
            (pass == 0 ? t : slow)[bytes] = fixture_run(&s).comm_total_s[COMM_DP];
        }
    }
    print_message("DP communication: 4 bytes %.6f s, 2 (bf16) %.6f s, 1 %.6f s; with packing at 50 GB/s: 2 bytes "
                  "%.6f s, 1 %.6f s\n", t[4], t[2], t[1], slow[2], slow[1]);
    assert_true(t[4] > t[2] && t[2] > t[1] && t[1] > 0);
    assert_true(fabs((t[4] - t[2]) - 2 * (t[2] - t[1])) < 1e-6 * t[4]);
    assert_true(fabs(slow[4] - t[4]) < 1e-12); /* no conversion at the gradients' own width */
    assert_true(fabs((slow[2] - t[2]) / (slow[1] - t[1]) - 6.0 / 5.0) < 1e-6);
    fixture_free(&s);
}

/* Blocking pipeline sends (parallel.overlap_p2p_comm false, Megatron-LM's default). Two stages,
 * two micro-batches, 1F1B: stage 1 runs F0 B0 F1 B1 and stage 0 F0 F1 B0 B1. With sends beside
 * compute, stage 1's F1 starts when B0 ends; a blocking stage first waits for B0's gradient to
 * reach stage 0 (one transfer, d), and everything after F1 on the critical path shifts by d
 * (stage 0 then waits for B1's gradient, which leaves d later). So the step grows by exactly d. */
/* The fixture on two pipeline stages of TP tp, two micro-batches of one sequence. */
static void two_stage_fixture(scenario_config *s, int tp)
{
    fixture_scenario(s, 4);
    fixture_layout(s, tp, 2, 1, 2 * s->training.micro_batch_size);
}

static double pipeline_step(int overlap_p2p, double *transfer_s, double *pp_total_s)
{
    scenario_config s;
    two_stage_fixture(&s, 1);
    s.parallel.overlap_p2p_comm = overlap_p2p;
    step_workload w;
    fixture_build(&s, &w);
    *transfer_s = 0;
    int transfers = 0;
    for (int i = 0; i < w.n_tasks; i++)
        if (w.tasks[i].kind == TASK_P2P) {
            assert_true(*transfer_s == 0 || fabs(w.tasks[i].duration_s - *transfer_s) < 1e-15);
            *transfer_s = w.tasks[i].duration_s;
            transfers++;
        }
    assert_int_equal(transfers, 4); /* two activations forward, two gradients back */
    workload_free(&w);
    run_result r = fixture_run(&s);
    *pp_total_s = r.comm_total_s[COMM_PP];
    for (int c = 0; c < COMM_CLASS_COUNT; c++)
        assert_true(r.comm_exposed_s[c] <= r.comm_total_s[c] + 1e-12);
    fixture_free(&s);
    return r.step_time_s;
}

static void blocking_pipeline_sends_add_one_transfer_to_two_micro_batches(void **state)
{
    (void)state;
    double d, d_overlap, pp_total, pp_total_overlap;
    double blocking = pipeline_step(0, &d, &pp_total), overlapped = pipeline_step(1, &d_overlap, &pp_total_overlap);
    print_message("1F1B p=2 m=2: step %.6f s with blocking sends, %.6f s overlapped, transfer %.6f s\n", blocking,
                  overlapped, d);
    assert_true(d > 0 && d == d_overlap);
    assert_true(fabs((blocking - overlapped) - d) < 1e-9 * blocking);
    /* each transfer is a send on one GPU and a receive on the other: 4 transfers x 2 GPUs / 2 stages */
    assert_true(fabs(pp_total - 4 * d) < 1e-12 && fabs(pp_total_overlap - 4 * d) < 1e-12);
}

/* The step's end as Megatron-LM runs it (finalize_model_grads, then the optimizer): with a tied
 * embedding and PP > 1, the first and last stage sum the word-embedding gradient (V x h / TP
 * values, fp32 under bf16) in a two-rank all-reduce; every stage then all-reduces one float of
 * gradient norm over every GPU. Untied (Llama), the embedding sum is gone; one stage, too. */
static int step_end_tasks(const scenario_config *s, const char *name, double *bytes_or_s)
{
    step_workload w;
    fixture_build(s, &w);
    int n = 0;
    for (int i = 0; i < w.n_tasks; i++)
        if (!strcmp(w.tasks[i].name, name)) {
            n++;
            *bytes_or_s = workload_task_parts(&w, &w.tasks[i])->inside[COMM_DP];
            assert_true(w.tasks[i].comm_inside_s == *bytes_or_s);
        }
    workload_free(&w);
    return n;
}

static void step_end_sums_the_tied_embedding_and_the_gradient_norm(void **state)
{
    (void)state;
    scenario_config s;
    two_stage_fixture(&s, 2);
    s.parallel.dp = 4;
    s.training.global_batch_size = 4 * 2 * s.training.micro_batch_size;
    double t_emb = 0, t_norm = 0;
    assert_int_equal(step_end_tasks(&s, "embedding_grad_allreduce", &t_emb), 2);
    double bytes = (double)s.model.vocab_size * (double)s.model.hidden_size / 2 * 4; /* fp32 under bf16 */
    coll_group ends = {2, 2, 1}; /* stage 1 is TP 2 x DP 4 = 8 ranks on (rank_grid.h): the next node */
    assert_true(fabs(t_emb - collective_time(&s.platform, &s.calibration, COLL_ALL_REDUCE, bytes, ends).time_s) <
                1e-15);
    assert_int_equal(step_end_tasks(&s, "grad_norm", &t_norm), 2);
    coll_group world = coll_group_of(16, 1, 8);
    assert_true(fabs(t_norm - collective_time(&s.platform, &s.calibration, COLL_ALL_REDUCE, 4, world).time_s) < 1e-15);
    /* every stage's norm waits for every stage's gradients: exposed DP never exceeds DP total */
    run_result r = fixture_run(&s);
    for (int c = 0; c < COMM_CLASS_COUNT; c++)
        assert_true(r.comm_exposed_s[c] <= r.comm_total_s[c] + 1e-12);
    s.model.untie_embeddings = 1;
    assert_int_equal(step_end_tasks(&s, "embedding_grad_allreduce", &t_emb), 0);
    s.model.untie_embeddings = 0;
    s.parallel.pp = 1;
    assert_int_equal(step_end_tasks(&s, "embedding_grad_allreduce", &t_emb), 0);
    fixture_free(&s);
}

/* What crosses between stages under TP 2 (parallel.scatter_gather_p2p, sequence_parallel): the
 * bytes each TP rank sends, and the receiving stage's NVLink all-gather of scattered slices,
 * charged to the pass that starts from them. */
static void stage_forward_and_transfer(int scatter_gather, int sp, double *bytes, double *fwd_s)
{
    scenario_config s;
    two_stage_fixture(&s, 2);
    s.parallel.sequence_parallel = sp;
    s.parallel.scatter_gather_p2p = scatter_gather;
    step_workload w;
    fixture_build(&s, &w);
    *bytes = *fwd_s = -1;
    for (int i = 0; i < w.n_tasks; i++) {
        if (w.tasks[i].kind == TASK_P2P)
            *bytes = w.tasks[i].bytes;
        if (w.tasks[i].kind == TASK_COMPUTE && w.tasks[i].stage == 1 && w.tasks[i].phase == PIPE_FORWARD)
            *fwd_s = w.tasks[i].duration_s;
    }
    workload_free(&w);
    fixture_free(&s);
}

static void pipeline_transfers_follow_the_tp_split(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 4);
    double activation = (double)s.training.micro_batch_size * (double)s.model.seq_length *
                        (double)s.model.hidden_size * 2; /* bf16 */
    coll_group tp_group = coll_group_of(2, 1, s.platform.node.gpus);
    double gather = collective_time(&s.platform, &s.calibration, COLL_ALL_GATHER, activation, tp_group).time_s;
    fixture_free(&s);
    double b_sg, f_sg, b_full, f_full, b_sp, f_sp, b_sp_full, f_sp_full;
    stage_forward_and_transfer(1, 0, &b_sg, &f_sg);
    stage_forward_and_transfer(0, 0, &b_full, &f_full);
    stage_forward_and_transfer(1, 1, &b_sp, &f_sp);
    stage_forward_and_transfer(0, 1, &b_sp_full, &f_sp_full);
    assert_true(gather > 0);
    assert_true(b_sg == activation / 2 && b_full == activation); /* scattered slices, or all of it */
    assert_true(fabs((f_sg - f_full) - gather) < 1e-15);         /* and the slices gathered again */
    assert_true(b_sp == activation / 2 && b_sp_full == activation / 2 && f_sp == f_sp_full); /* SP: shards */
}

/* Megatron-LM's --recompute-method: uniform reruns every layer of a chunk (in groups), block only
 * its first recompute_num_layers. One stage, no communication: the backward grows by one layer's
 * rerun per recomputed layer, so over 8 layers (block k - none) = k/8 (uniform - none), and uniform
 * costs the same whatever its group size. The analytic and the flow replay agree. */
static void recompute_method_sets_the_layers_rerun(void **state)
{
    (void)state;
    scenario_config s;
    fixture_scenario(&s, 8);
    fixture_free_communication(&s);
    double none = fixture_run(&s).step_time_s;
    s.training.recompute = RECOMPUTE_FULL;
    s.training.recompute_num_layers = 1;
    double uniform = fixture_run(&s).step_time_s;
    s.training.recompute_num_layers = 4;
    double uniform4 = fixture_run(&s).step_time_s;
    s.training.recompute_block = 1;
    s.training.recompute_num_layers = 3;
    run_result analytic, flow;
    fixture_run_both(&s, &analytic, &flow);
    print_message("step: none %.6f s, full uniform %.6f s (groups of 4: %.6f s), block 3 of 8: %.6f s (flow %.6f s)\n",
                  none, uniform, uniform4, analytic.step_time_s, flow.step_time_s);
    assert_true(uniform > none * 1.2);
    assert_true(fabs(uniform4 - uniform) <= 1e-9 * uniform);
    assert_true(fabs((analytic.step_time_s - none) - 3.0 / 8 * (uniform - none)) <= 1e-6 * uniform);
    assert_true(fabs(flow.step_time_s - analytic.step_time_s) <= 0.01 * analytic.step_time_s);
    s.training.recompute_num_layers = 8; /* block over the whole chunk: every layer */
    assert_true(fabs(fixture_run(&s).step_time_s - uniform) <= 1e-9 * uniform);
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(task_parts_are_shared_and_read_back),
        cmocka_unit_test(critical_path_of_a_hand_built_graph),
        cmocka_unit_test(compute_beside_communication_runs_at_its_share),
        cmocka_unit_test(event_replay_matches_list_scheduling_without_cost),
        cmocka_unit_test(loss_bytes_follow_the_framework_code_path),
        cmocka_unit_test(bubble_matches_closed_forms),
        cmocka_unit_test(dp_gradient_reduction_is_exposed_unless_overlapped),
        cmocka_unit_test(step_time_without_pipeline_equals_the_sum_of_passes),
        cmocka_unit_test(uneven_pipeline_exposes_no_more_than_ran),
        cmocka_unit_test(recompute_method_sets_the_layers_rerun),
        cmocka_unit_test(bf16_gradient_reduction_halves_the_dp_bandwidth_term),
        cmocka_unit_test(blocking_pipeline_sends_add_one_transfer_to_two_micro_batches),
        cmocka_unit_test(pipeline_transfers_follow_the_tp_split),
        cmocka_unit_test(step_end_sums_the_tied_embedding_and_the_gradient_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
