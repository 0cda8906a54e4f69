/* ZeRO-3 as DeepSpeed up to v0.5.4 ran it (parallel.stage3_list_collectives, sim/step/zero3.h):
 * gathers into a list of one view a rank, which PyTorch copies rank by rank on the host; fetches
 * that drain the device; persistent tensors let go at every backward's end and gathered again in
 * later forwards and at the step's end, copied a tensor and rank at a time. Counts written out by
 * hand for the shared ZeRO-3 fixture (fixture_zero3). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "fixture.h"
#include "params.h"
#include "collective.h"
#include "replay.h"
#include "run.h"
#include "workload.h"
#include "zero3.h"

#define REL(a, b) (fabs((a) - (b)) <= 1e-12 * fabs(b))

/* parallel.stage3_list_collectives (DeepSpeed up to v0.5.4): every gather call costs the host one
 * launch a rank of the group (PyTorch's copies from its flat buffer into the list), before the pass
 * that uses it, where nothing hides it (booked as exposed ZeRO communication). Counted by hand for
 * the fixture (4 layers, DP 8, 2 micro-batches): a forward gathers 4 x 4 + 2 (embedding) + 1
 * (head) times, a backward as often; with DeepSpeed's engine under full recomputation the
 * backward's re-run gathers 4 x 4 times more. The gradients go out in the same flat buckets, each
 * an all-reduce (that release's default contiguous_gradients false: buffered_reduce_fallback).
 * Those releases also let the persistent tensors go at every backward's end: a layer's eight
 * vectors (the QKV, projection and two MLP biases, two norms' weights and biases) and the final
 * norm's two, 4 x 8 + 2 = 34, which the second micro-batch's forward gathers again, a call each,
 * and the step's end gathers in one call and copies: each tensor's piece in (34), the call's own
 * copies out (8), then tensor by tensor and rank by rank, each at least 8 elements (34 x 8).
 * Each call also zeroes its whole flat tensor first (a memset: a launch, and the gathered bytes
 * written), and the copies cost the longer of their launches and their own device traffic (the
 * gathered bytes read and written once more): both at the fixture's memory-bound 1,000 GB/s. */
/* The fixture's tensors in elements (h 1,024, f 4,096, vocabulary 32,000, sequence 1,024, four
 * layers): a layer's four weights (QKV 3h^2, projection h^2, fc1 and fc2 hf); its persistent
 * vectors (the QKV bias 3h, the projection's h, fc1's f, fc2's h, two norms' weights and biases 4h);
 * the final norm's 2h; the embedding's table and learned positions; the tied head's table; and all
 * the persistent ones, what the step's end gathers. */
#define FX_H 1024.0
#define FX_F 4096.0
#define FX_LAYER (3 * FX_H * FX_H + FX_H * FX_H + 2 * FX_H * FX_F)
#define FX_VECTORS (3 * FX_H + FX_H + FX_F + FX_H + 4 * FX_H)
#define FX_FINAL_NORM (2 * FX_H)
#define FX_EMBED (32000 * FX_H + 1024 * FX_H)
#define FX_HEAD (32000 * FX_H)
#define FX_PERSISTENT (4 * FX_VECTORS + FX_FINAL_NORM)

/* What one piece of a pass (a layer's compute, with the embedding or the head where the pass
 * meets them) adds under the key: its gather calls' copies (a launch a rank, or the bytes read
 * and written where that is longer) and their memsets (a launch a call, the bytes written), at
 * `gbs` GB/s, for `elements` bf16 elements gathered over `ranks` ranks. */
static double listed_piece_s(double calls, double elements, double ranks, double launch, double gbs)
{
    double bytes_s = 2 * elements / (gbs * 1e9);
    return fmax(calls * ranks * launch, 2 * bytes_s) + calls * launch + bytes_s;
}

static void list_collectives_cost_a_launch_a_rank(void **state)
{
    (void)state;
    scenario_config s;
    fixture_zero3(&s, 4);
    s.calibration.launch_overhead_us = 4; /* the shipped A100 calibration's (the fixture's is 0) */
    double launch = s.calibration.launch_overhead_us * 1e-6, m = 2, ranks = 8;
    double step_end_copies = 34 + 8 + 34 * 8, gbs = 1000; /* the fixture's memory-bound rate */
    /* what the step's end all-gathers: a piece of ceil(n / 8) elements a tensor a rank of every
     * persistent tensor, FX_PERSISTENT in all (8 divides each); a pass's pieces, a layer each: the
     * embedding with the first layer a forward runs, the head with its last; a later forward also
     * gathers each piece's persistent vectors again (and the final norm's), a call each */
    double pass = 0, pass_persistent = 0;
    for (int piece = 0; piece < 4; piece++) {
        double calls = 4 + (piece == 0 ? 2 : 0) + (piece == 3 ? 1 : 0);
        double elements = FX_LAYER + (piece == 0 ? FX_EMBED : 0) + (piece == 3 ? FX_HEAD : 0);
        pass += listed_piece_s(calls, elements, ranks, launch, gbs);
        pass_persistent += listed_piece_s(calls + 8 + (piece == 3 ? 2 : 0),
                                          elements + FX_VECTORS + (piece == 3 ? FX_FINAL_NORM : 0), ranks, launch, gbs);
    }
    double fwd[2], bwd[2], fwd_listed[2], bwd_listed[2], reduced, reduced_listed, gathered;
    int tasks[2], gathers;
    run_result plain = fixture_run(&s);
    fixture_pass_s_by_stage(&s, "bwd", bwd, tasks);
    fixture_pass_s_by_stage(&s, "fwd", fwd, tasks);
    fixture_zero3_bytes(&s, &gathered, &reduced, &gathers);
    s.parallel.stage3_list_collectives = 1;
    fixture_pass_s_by_stage(&s, "bwd", bwd_listed, tasks);
    fixture_pass_s_by_stage(&s, "fwd", fwd_listed, tasks);
    fixture_zero3_bytes(&s, &gathered, &reduced_listed, &gathers);
    print_message("list collectives: forwards +%.6f s, backwards +%.6f s\n", fwd_listed[0] - fwd[0],
                  bwd_listed[0] - bwd[0]);
    /* the first forward, then the second with the persistent vectors; two backwards */
    assert_true(fabs(fwd_listed[0] - fwd[0] - (pass + pass_persistent)) < 1e-12);
    assert_true(fabs(bwd_listed[0] - bwd[0] - m * pass) < 1e-12);
    /* at the head's piece the copies' bytes outlast their launches (5 calls x 8 ranks x 4 us =
     * 160 us; 2 x 2 bytes x 45.3M elements at 1,000 GB/s = 181 us): both branches are taken */
    assert_true(5 * ranks * launch < 2 * 2 * (FX_LAYER + FX_HEAD) / (gbs * 1e9));
    assert_true(6 * ranks * launch > 2 * 2 * (FX_LAYER + FX_EMBED) / (gbs * 1e9));
    assert_true(reduced_listed == 0); /* no reduce-scatter: the same bytes all-reduced */
    step_workload w;
    fixture_build(&s, &w);
    double all_reduced = 0;
    for (int i = 0; i < w.n_tasks; i++)
        if (!strcmp(w.tasks[i].name, "dp_grad_allreduce"))
            all_reduced += w.tasks[i].bytes;
    workload_free(&w);
    assert_true(REL(all_reduced, reduced));
    run_result r = fixture_run(&s);
    print_message("step %.6f s (was %.6f s); ZeRO exposed %.6f s (was %.6f s)\n", r.step_time_s, plain.step_time_s,
                  r.comm_exposed_s[COMM_ZERO], plain.comm_exposed_s[COMM_ZERO]);
    double host = pass + pass_persistent + m * pass + step_end_copies * launch;
    coll_group dp = {8, 8, 1};
    double step_end_gather = collective_time(&s.platform, &s.calibration, COLL_ALL_GATHER,
                                             FX_PERSISTENT * scenario_activation_bytes(&s), dp).time_s;
    print_message("host %.6f s, step-end gather %.6f s\n", host, step_end_gather);
    assert_true(r.step_time_s >= plain.step_time_s + host + step_end_gather - 1e-12);
    /* at least the host's copies and the step's last gather (the second forward's extra calls may
     * also show past the compute they overlap) */
    assert_true(r.comm_exposed_s[COMM_ZERO] - plain.comm_exposed_s[COMM_ZERO] >= host + step_end_gather - 1e-12);
    /* a fixed part of its pass, not compute the overlap slows */
    double inside = 0, inside_listed = 0;
    for (int listed = 0; listed < 2; listed++) {
        s.parallel.stage3_list_collectives = listed;
        step_workload w;
        fixture_build(&s, &w);
        for (int i = 0; i < w.n_tasks; i++)
            if (w.tasks[i].kind == TASK_COMPUTE)
                *(listed ? &inside_listed : &inside) += w.tasks[i].comm_inside_s;
        workload_free(&w);
    }
    assert_true(fabs(inside_listed - inside - host) < 1e-12);
    /* DeepSpeed's engine re-gathers the recomputed layers for their re-run; what it keeps from the
     * re-run (all of the fixture's layers, at DeepSpeed's stage3_max_reuse_distance) the backward
     * does not gather, so only its embedding's and head's calls are left beside the re-run's */
    s.training.recompute = RECOMPUTE_FULL;
    s.parallel.pipeline_engine = PIPELINE_ENGINE_DEEPSPEED;
    for (int keep = 0; keep < 2; keep++) {
        s.parallel.stage3_max_reuse_distance = keep ? 1e9 : 0;
        s.parallel.stage3_list_collectives = 1;
        fixture_pass_s_by_stage(&s, "bwd", bwd_listed, tasks);
        s.parallel.stage3_list_collectives = 0;
        fixture_pass_s_by_stage(&s, "bwd", bwd, tasks);
        double expected = 0;
        for (int piece = 0; piece < 4; piece++) /* a backward meets the head first */
            expected += listed_piece_s((keep ? 4 : 8) + (piece == 0 ? 1 : 0) + (piece == 3 ? 2 : 0),
                                       (keep ? 1 : 2) * FX_LAYER + (piece == 0 ? FX_HEAD : 0) + (piece == 3 ? FX_EMBED : 0),
                                       ranks, launch, gbs);
        if (fabs(bwd_listed[0] - bwd[0] - m * expected) > 1e-12)
            fail_msg("reuse distance %g: backwards +%.9f s, expected +%.9f s", keep ? 1e9 : 0, bwd_listed[0] - bwd[0],
                     m * expected);
    }
    /* without launches the bytes alone: copies read and write them, the memset writes them */
    fixture_free(&s);
    fixture_zero3(&s, 4);
    s.calibration.launch_overhead_us = 0;
    fixture_pass_s_by_stage(&s, "fwd", fwd, tasks);
    s.parallel.stage3_list_collectives = 1;
    fixture_pass_s_by_stage(&s, "fwd", fwd_listed, tasks);
    double pass_elements = 4 * FX_LAYER + FX_EMBED + FX_HEAD;
    assert_true(fabs(fwd_listed[0] - fwd[0] - 3 * 2 * (m * pass_elements + FX_PERSISTENT) / (gbs * 1e9)) < 1e-12);
    fixture_free(&s);
}

/* parallel.stage3_list_collectives also stands for those releases' fetch, which drains the device
 * (torch.cuda.synchronize() in _synchronize_communication, zero3.h): no layer's compute starts
 * before everything its stage put on the communication stream before it is through, the gradient
 * reductions included. Buckets of one layer's gradients, so that every backward layer reduces:
 * without the key some layer's compute runs beside an earlier reduction, with it none does, and
 * the step can only be longer. */
static int compute_beside_earlier_comm(const scenario_config *s, double *step_s)
{
    step_workload w;
    replay_times t;
    fixture_build(s, &w);
    fixture_replay_analytic(&w, &t);
    int beside = 0, stage = 0;
    for (int i = 0; i < w.n_tasks; i++) {
        if (w.tasks[i].stage != stage || w.tasks[i].kind != TASK_COMPUTE || w.tasks[i].lane != LANE_COMPUTE)
            continue;
        for (int j = 0; j < i; j++)
            if (w.tasks[j].stage == stage && w.tasks[j].lane == LANE_COMM && t.finish[j] > t.start[i] + 1e-12)
                beside++;
    }
    *step_s = fixture_end(&t, w.n_tasks);
    replay_times_free(&t);
    workload_free(&w);
    return beside;
}

static void list_collectives_drain_the_device_at_every_fetch(void **state)
{
    (void)state;
    scenario_config s;
    fixture_zero3(&s, 4);
    zero3_plan z;
    zero3_plan_of(&s, &z);
    s.parallel.reduce_bucket_size = z.layer_params; /* a bucket a layer */
    /* and since each fetch waits for every gather in flight, nothing is prefetched past the next
     * layer (DeepSpeed's knobs alone reach further on this small model) */
    assert_true(z.prefetch_layers > 1);
    s.parallel.stage3_list_collectives = 1;
    zero3_plan_of(&s, &z);
    assert_int_equal(z.prefetch_layers, 1);
    assert_true(REL(z.live_params, 2 * z.layer_params));
    double plain_s, listed_s;
    s.parallel.stage3_list_collectives = 0;
    int plain = compute_beside_earlier_comm(&s, &plain_s);
    s.parallel.stage3_list_collectives = 1;
    int listed = compute_beside_earlier_comm(&s, &listed_s);
    print_message("compute beside earlier communication: %d pairs (%d with the 2021 fetch); step %.6f s (%.6f s)\n",
                  plain, listed, plain_s, listed_s);
    assert_true(plain > 0);
    assert_int_equal(listed, 0);
    /* so the gradient all-reduces are all exposed, where the reduce-scatters were partly hidden */
    s.parallel.stage3_list_collectives = 0;
    run_result rp = fixture_run(&s);
    s.parallel.stage3_list_collectives = 1;
    run_result rl = fixture_run(&s);
    print_message("DP exposed %.6f of %.6f s (%.6f of %.6f s with the 2021 fetch)\n", rp.comm_exposed_s[COMM_DP],
                  rp.comm_total_s[COMM_DP], rl.comm_exposed_s[COMM_DP], rl.comm_total_s[COMM_DP]);
    assert_true(rp.comm_exposed_s[COMM_DP] < rp.comm_total_s[COMM_DP] - 1e-9);
    assert_true(rl.comm_total_s[COMM_DP] > 0 && REL(rl.comm_exposed_s[COMM_DP], rl.comm_total_s[COMM_DP]));
    /* below ZeRO-3 the key changes nothing: DeepSpeed's fetch is stage 3's */
    for (int stage = 1; stage <= 2; stage++) {
        s.parallel.zero_stage = stage;
        s.parallel.stage3_list_collectives = 0;
        double off = fixture_run(&s).step_time_s;
        s.parallel.stage3_list_collectives = 1;
        assert_true(fixture_run(&s).step_time_s == off);
    }
    fixture_free(&s);
}

/* The persistent tensors go when a backward ends, so under a pipeline a stage's forwards before
 * its first backward do not gather them again: PP 2, 4 micro-batches, 1F1B, two layers a stage.
 * Stage 0 runs F0 F1 B0 F2 B1 F3 B2 B3: F2 and F3 each gather its two layers' eight vectors, 16
 * calls more than F0 and F1 (listed_piece_s, a piece a layer: the first with the embedding);
 * stage 1 (F0 B0 F1 B1 ...) also the final norm's two in F1, F2 and F3 (with the head, in the
 * last piece). */
static void persistent_regather_only_after_a_backward(void **state)
{
    (void)state;
    scenario_config s;
    fixture_zero3(&s, 4);
    fixture_layout(&s, 1, 2, 8, 32);
    s.calibration.launch_overhead_us = 4;
    s.parallel.stage3_list_collectives = 1;
    double launch = 4e-6, ranks = 8, gbs = 1000;
    double layer = FX_LAYER, vectors = FX_VECTORS;
    double extra0 = listed_piece_s(6 + 8, layer + FX_EMBED + vectors, ranks, launch, gbs) -
                    listed_piece_s(6, layer + FX_EMBED, ranks, launch, gbs) +
                    listed_piece_s(4 + 8, layer + vectors, ranks, launch, gbs) - listed_piece_s(4, layer, ranks, launch, gbs);
    double extra1 = listed_piece_s(4 + 8, layer + vectors, ranks, launch, gbs) -
                    listed_piece_s(4, layer, ranks, launch, gbs) +
                    listed_piece_s(5 + 8 + 2, layer + FX_HEAD + vectors + FX_FINAL_NORM, ranks, launch, gbs) -
                    listed_piece_s(5, layer + FX_HEAD, ranks, launch, gbs);
    step_workload w;
    fixture_build(&s, &w);
    double fwd[2][4] = {{0}};
    for (int i = 0; i < w.n_tasks; i++)
        if (!strcmp(w.tasks[i].name, "fwd") && w.tasks[i].micro_batch >= 0 && w.tasks[i].micro_batch < 4)
            fwd[w.tasks[i].stage][w.tasks[i].micro_batch] += w.tasks[i].duration_s;
    workload_free(&w);
    print_message("stage 0 forwards %.6f %.6f %.6f %.6f s; stage 1 %.6f %.6f %.6f %.6f s\n", fwd[0][0], fwd[0][1],
                  fwd[0][2], fwd[0][3], fwd[1][0], fwd[1][1], fwd[1][2], fwd[1][3]);
    assert_true(fabs(fwd[0][1] - fwd[0][0]) < 1e-12);
    for (int mb = 2; mb < 4; mb++)
        assert_true(fabs(fwd[0][mb] - fwd[0][0] - extra0) < 1e-12);
    for (int mb = 1; mb < 4; mb++)
        assert_true(fabs(fwd[1][mb] - fwd[1][0] - extra1) < 1e-12);
    fixture_free(&s);
}

/* DeepSpeed's synchronous gather of persistent tensors over more ranks than a tensor has
 * elements a piece can hold (params_persistent_gather): the fixture's vectors (h 1024, f 4096) at
 * 1,536 ranks, written out. A tensor of n elements gets pieces of ceil(n / 1536): the QKV bias
 * (3,072) 2, the projection's and fc2's biases and the norms (1,024) 1, fc1's bias (4,096) 3; the
 * ranks whose piece starts inside it copy, ceil(n / piece): 1,536, 1,024 and 1,366. */
static void persistent_gather_counts_pieces_and_copies(void **state)
{
    (void)state;
    scenario_config s;
    fixture_zero3(&s, 4);
    double tensors, copies, gathered;
    params_persistent_gather(&s, 1, 0, 1e5, 1536, &tensors, &copies, &gathered);
    assert_true(tensors == 8);
    assert_true(copies == 1536 + 1024 + 1366 + 1024 + 4 * 1024);
    assert_true(gathered == (2 + 1 + 3 + 1 + 4 * 1) * 1536.0);
    params_persistent_gather(&s, 0, 1, 1e5, 1536, &tensors, &copies, &gathered); /* the final norm */
    assert_true(tensors == 2 && copies == 2 * 1024 && gathered == 2 * 1536.0);
    s.model.rmsnorm = 1;
    params_persistent_gather(&s, 0, 1, 1e5, 1536, &tensors, &copies, &gathered);
    assert_true(tensors == 1 && copies == 1024 && gathered == 1536.0);
    params_persistent_gather(&s, 2, 1, 1000, 8, &tensors, &copies, &gathered); /* nothing below 1,000 */
    assert_true(tensors == 0 && copies == 0 && gathered == 0);
    fixture_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(list_collectives_cost_a_launch_a_rank),
        cmocka_unit_test(list_collectives_drain_the_device_at_every_fetch),
        cmocka_unit_test(persistent_gather_counts_pieces_and_copies),
        cmocka_unit_test(persistent_regather_only_after_a_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
