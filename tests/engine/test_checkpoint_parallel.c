/* Checkpoints of multi-rank runs under mpirun (CPU): one shard per rank and a manifest.
 *  - Resume is bit-exact: a run stopped after step 4 (checkpoints every 2 steps) and resumed
 *    logs the same losses for steps 5-6 and ends with the same params_crc32 as an uninterrupted
 *    run, for DP 2 with ZeRO-1 and ZeRO-3, TP 2, interleaved PP 2, and TP 2 x PP 2 x DP 2 in
 *    fp32 and bf16.
 *  - Resharding: a checkpoint saved at TP 2 x PP 2 x DP 2 (ZeRO-1) and loaded at DP 4, with ZeRO
 *    0 and with ZeRO 1 (each rank then keeps its own shard of the optimizer moments), continues
 *    with the same losses within 1e-5 (other summation order); step 6's loss depends on the
 *    moments restored for step 5's update.
 *  - Context parallelism: bit-exact at its own layout (CP 2, with DP 2 and ZeRO-1, with TP 2 and
 *    ZeRO-3, with EP 2), and resharded from CP 2 x DP 2 to DP 4 and back, and from CP 2 to one rank.
 *  - A truncated shard in the newest checkpoint is reported by name and the previous checkpoint
 *    is used; the run still ends bit-exact. So is an edited manifest (its seal fails); with no
 *    intact checkpoint left every rank stops with exit 2.
 * argv[1]: dtrain, argv[2]: mpirun, argv[3]: a scratch folder. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>
#include "run_dtrain.h"

static const char *DTRAIN, *MPIRUN, *DIR;
static char MODEL[4096], CKPT[4096], ERR[65536];

static const char *COMMON = "--steps 6 --micro-batch 2 --global-batch 8 --seed 7";

/* Runs `ranks` ranks of dtrain with args; returns the exit code; lines as run_dtrain. */
static int launch(int ranks, const char *args, json_t **lines, int *n)
{
    char launcher[8192], all[8192];
    snprintf(launcher, sizeof launcher, "%s' --oversubscribe -np %d '%s", MPIRUN, ranks, DTRAIN);
    snprintf(all, sizeof all, "--model %s %s %s", MODEL, COMMON, args);
    return run_dtrain(launcher, all, lines, 64, n, ERR, sizeof ERR);
}

static double num(json_t *line, const char *key)
{
    return json_number_value(json_object_get(line, key));
}

static const char *final_crc(json_t **lines, int n)
{
    return n > 0 ? json_string_value(json_object_get(lines[n - 1], "params_crc32")) : NULL;
}

static void clear_ckpt(void)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", CKPT);
    assert_int_equal(system(cmd), 0);
}

/* The uninterrupted run of a layout (A) and the same run checkpointing every `every` steps and
 * stopped after step 4 as if killed (B), from an empty checkpoint folder. */
static void run_and_stop_after_4(int ranks, const char *layout, int every, json_t **A, int *na, json_t **B, int *nb)
{
    char args[8192];
    clear_ckpt();
    if (launch(ranks, layout, A, na) != 0)
        fail_msg("%s: uninterrupted run failed: %s", layout, ERR);
    snprintf(args, sizeof args, "%s --ckpt-dir %s --ckpt-every %d --stop-after 4", layout, CKPT, every);
    if (launch(ranks, args, B, nb) != 0)
        fail_msg("%s: run to step 4 failed: %s", layout, ERR);
}

/* Uninterrupted run vs stop after 4 + resume, in the same layout: bit-exact. */
static void resume_is_bit_exact(int ranks, const char *layout)
{
    json_t *A[64], *B[64], *C[64];
    int na, nb, nc;
    char args[8192];
    run_and_stop_after_4(ranks, layout, 2, A, &na, B, &nb);
    assert_int_equal(nb, 4); /* stopped as if killed: no final line */
    snprintf(args, sizeof args, "%s --ckpt-dir %s --ckpt-every 2 --resume", layout, CKPT);
    if (launch(ranks, args, C, &nc) != 0)
        fail_msg("%s: resumed run failed: %s", layout, ERR);
    assert_non_null(strstr(ERR, "resumed from"));
    assert_int_equal(nc, 3); /* steps 5, 6 and the final line */
    for (int i = 0; i < 2; i++)
        if (num(C[i], "loss") != num(A[4 + i], "loss"))
            fail_msg("%s: step %d loss %.9g after resuming, %.9g uninterrupted", layout, 5 + i, num(C[i], "loss"),
                     num(A[4 + i], "loss"));
    assert_string_equal(final_crc(C, nc), final_crc(A, na));
    const char *crc = final_crc(A, na);
    print_message("%-44s resumed at step 4: bit-exact (params_crc32 %s)\n", layout, crc ? crc : "(none)");
    free_lines(A, na);
    free_lines(B, nb);
    free_lines(C, nc);
}

static void bit_exact_every_layout(void **state)
{
    (void)state;
    resume_is_bit_exact(2, "--dp 2 --zero 1");
    resume_is_bit_exact(2, "--dp 2 --zero 3");
    resume_is_bit_exact(2, "--tp 2");
    resume_is_bit_exact(2, "--pp 2 --schedule interleaved --vpp 2");
    resume_is_bit_exact(8, "--tp 2 --pp 2 --dp 2 --zero 1");
    resume_is_bit_exact(8, "--tp 2 --pp 2 --dp 2 --zero 1 --precision bf16");
    /* context parallelism: its CP ranks are replicas to the checkpoint, ZeRO shards over DP x CP */
    resume_is_bit_exact(2, "--cp 2");
    resume_is_bit_exact(4, "--cp 2 --dp 2 --zero 1");
    resume_is_bit_exact(4, "--cp 2 --tp 2 --sequence-parallel --zero 3 --dp 1");
}

static void reshards_to_another_layout(void **state)
{
    (void)state;
    json_t *A[64], *B[64], *C[64];
    int na, nb, nc;
    char args[8192];
    const char *saved = "--tp 2 --pp 2 --dp 2 --zero 1";
    run_and_stop_after_4(8, saved, 4, A, &na, B, &nb);
    for (int zero = 0; zero <= 1; zero++) {
        /* a resumed run checkpoints again: resume each time from a copy of the step-4 one */
        char copy[8300], cmd[17000];
        format_whole(copy, "%s.zero%d", CKPT, zero);
        format_whole(cmd, "rm -rf '%s' && cp -r '%s' '%s'", copy, CKPT, copy);
        assert_int_equal(system(cmd), 0);
        format_whole(args, "--dp 4 --zero %d --ckpt-dir %s --resume", zero, copy);
        if (launch(4, args, C, &nc) != 0)
            fail_msg("resume at DP 4 ZeRO %d failed: %s", zero, ERR);
        assert_non_null(strstr(ERR, "resharding"));
        assert_int_equal(nc, 3);
        for (int i = 0; i < 2; i++) {
            double a = num(A[4 + i], "loss"), c = num(C[i], "loss");
            if (fabs(a - c) > 1e-5 * fabs(a))
                fail_msg("step %d: loss %.9g after resharding to DP 4 ZeRO %d, %.9g uninterrupted", 5 + i, c, zero,
                         a);
        }
        print_message("TP 2 x PP 2 x DP 2 checkpoint resumed at DP 4 ZeRO %d: steps 5-6 losses %.7g %.7g "
                      "(uninterrupted %.7g %.7g)\n",
                      zero, num(C[0], "loss"), num(C[1], "loss"), num(A[4], "loss"), num(A[5], "loss"));
        free_lines(C, nc);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", copy);
        assert_int_equal(system(cmd), 0);
    }
    free_lines(A, na);
    free_lines(B, nb);
}

/* A checkpoint saved in one layout and resumed in another continues the uninterrupted run of the
 * saved layout (steps 5-6 within 1e-5: another summation order). */
static void resumes_elsewhere(int saved_ranks, const char *saved, int resumed_ranks, const char *resumed)
{
    json_t *A[64], *B[64], *C[64];
    int na, nb, nc;
    char args[8192];
    run_and_stop_after_4(saved_ranks, saved, 4, A, &na, B, &nb);
    snprintf(args, sizeof args, "%s --ckpt-dir %s --resume", resumed, CKPT);
    if (launch(resumed_ranks, args, C, &nc) != 0)
        fail_msg("%s checkpoint resumed at %s: %s", saved, resumed, ERR);
    if (!strstr(ERR, "resharding"))
        fail_msg("%s checkpoint resumed at %s: no resharding said: %s", saved, resumed, ERR);
    assert_int_equal(nc, 3);
    for (int i = 0; i < 2; i++) {
        double a = num(A[4 + i], "loss"), c = num(C[i], "loss");
        if (fabs(a - c) > 1e-5 * fabs(a))
            fail_msg("step %d: loss %.9g resumed at %s, %.9g uninterrupted at %s", 5 + i, c, resumed, a, saved);
    }
    print_message("%s checkpoint resumed at %s: steps 5-6 losses %.7g %.7g (uninterrupted %.7g %.7g)\n", saved,
                  resumed, num(C[0], "loss"), num(C[1], "loss"), num(A[4], "loss"), num(A[5], "loss"));
    free_lines(A, na);
    free_lines(B, nb);
    free_lines(C, nc);
    clear_ckpt();
}

/* Context parallelism's checkpoints reshard both ways: its CP ranks are replicas (their ZeRO-1
 * moment shards too), so CP 2 x DP 2 and DP 4 hold the same state in other places. */
static void context_parallel_reshards(void **state)
{
    (void)state;
    resumes_elsewhere(4, "--cp 2 --dp 2 --zero 1", 4, "--dp 4 --zero 1");
    resumes_elsewhere(4, "--dp 4 --zero 1", 4, "--cp 2 --dp 2 --zero 1");
    resumes_elsewhere(2, "--cp 2", 1, "--zero 0");
}

static void truncated_shard_falls_back_to_the_previous_checkpoint(void **state)
{
    (void)state;
    json_t *A[64], *B[64], *C[64];
    int na, nb, nc;
    char args[8192], shard[8192];
    const char *layout = "--tp 2 --dp 2 --zero 1";
    clear_ckpt();
    if (launch(4, layout, A, &na) != 0)
        fail_msg("uninterrupted run failed: %s", ERR);
    snprintf(args, sizeof args, "%s --ckpt-dir %s --ckpt-every 2 --stop-after 4", layout, CKPT);
    if (launch(4, args, B, &nb) != 0)
        fail_msg("run to step 4 failed: %s", ERR);
    snprintf(shard, sizeof shard, "%s/step-00000004/shard-00003.bin", CKPT);
    assert_int_equal(truncate(shard, 100), 0);
    snprintf(args, sizeof args, "%s --ckpt-dir %s --ckpt-every 2 --resume", layout, CKPT);
    if (launch(4, args, C, &nc) != 0)
        fail_msg("resume failed: %s", ERR);
    assert_non_null(strstr(ERR, "shard-00003.bin has 100 bytes"));
    assert_non_null(strstr(ERR, "resumed from"));
    assert_non_null(strstr(ERR, "step-00000002"));
    assert_int_equal(nc, 5); /* steps 3-6 and the final line */
    assert_string_equal(final_crc(C, nc), final_crc(A, na));
    free_lines(A, na);
    free_lines(B, nb);
    free_lines(C, nc);
}

/* A manifest edited within range (only its seal tells) is skipped by every rank alike and the
 * previous checkpoint resumes bit-exact; with no intact checkpoint left every rank stops with
 * exit 2 (none waits for the others). */
static void edited_manifest_falls_back_on_every_rank_or_stops_them_all(void **state)
{
    (void)state;
    json_t *A[64], *C[64];
    int na, nc;
    char args[8192], path[8192];
    const char *layout = "--dp 2 --zero 1";
    clear_ckpt();
    if (launch(2, layout, A, &na) != 0)
        fail_msg("uninterrupted run failed: %s", ERR);
    snprintf(args, sizeof args, "%s --ckpt-dir %s --ckpt-every 2 --stop-after 4", layout, CKPT);
    if (launch(2, args, C, &nc) != 0)
        fail_msg("run to step 4 failed: %s", ERR);
    free_lines(C, nc);
    snprintf(path, sizeof path, "%s/step-00000004/manifest.json", CKPT);
    json_error_t je;
    json_t *man = json_load_file(path, 0, &je);
    assert_non_null(man);
    json_object_set_new(man, "updates", json_integer(3));
    assert_int_equal(json_dump_file(man, path, JSON_INDENT(2)), 0);
    json_decref(man);
    snprintf(args, sizeof args, "%s --ckpt-dir %s --resume", layout, CKPT);
    if (launch(2, args, C, &nc) != 0)
        fail_msg("resume failed: %s", ERR);
    assert_non_null(strstr(ERR, "manifest.json: manifest_crc32 is"));
    assert_non_null(strstr(ERR, "step-00000002 (step 2 done)"));
    assert_int_equal(nc, 5); /* steps 3-6 and the final line */
    assert_string_equal(final_crc(C, nc), final_crc(A, na));
    free_lines(C, nc);
    snprintf(path, sizeof path, "rm -rf '%s/step-00000002'", CKPT);
    assert_int_equal(system(path), 0);
    assert_int_equal(launch(2, args, C, &nc), 2);
    assert_non_null(strstr(ERR, "no intact checkpoint left"));
    assert_int_equal(nc, 0);
    free_lines(A, na);
}

static void write_model(int experts)
{
    FILE *f = fopen(MODEL, "w");
    assert_non_null(f);
    if (experts) /* 4 experts, 2 per token */
        fprintf(f, "{\"num_layers\": 4, \"hidden_size\": 64, \"num_attention_heads\": 4, \"seq_length\": 32, "
                   "\"num_experts\": 4, \"moe_router_topk\": 2}\n");
    else
        fprintf(f, "{\"num_layers\": 4, \"hidden\": 64, \"heads\": 4, \"seq_len\": 32}\n");
    fclose(f);
}

/* Expert parallelism: each rank's shard holds its EP rank's experts, and under ZeRO-1 its dense
 * and expert moment shards; a run stopped and resumed in the same layout is bit-exact. The
 * manifest records the EP size, and a resume at another one stops every rank (exit 2) naming
 * both: resharding assembles one replica's layout, which EP ranks do not share. */
static void expert_parallel_resumes_in_its_own_layout(void **state)
{
    (void)state;
    write_model(1);
    resume_is_bit_exact(2, "--dp 2 --ep 2");
    resume_is_bit_exact(4, "--dp 4 --ep 2 --zero 1");
    resume_is_bit_exact(4, "--tp 2 --dp 2 --ep 2 --zero 1");
    resume_is_bit_exact(4, "--dp 4 --ep 2 --zero 2");
    resume_is_bit_exact(4, "--cp 2 --dp 2 --ep 2 --zero 1");
    resume_is_bit_exact(2, "--dp 2 --ep 2 --zero 3"); /* the parameter shards packed, as the moments */
    resume_is_bit_exact(4, "--dp 4 --ep 2 --zero 3");
    char args[8192], path[8300];
    json_t *A[64];
    int na;
    clear_ckpt();
    snprintf(args, sizeof args, "--dp 4 --ep 2 --zero 1 --ckpt-dir %s --ckpt-every 2 --stop-after 2", CKPT);
    if (launch(4, args, A, &na) != 0)
        fail_msg("%s: failed: %s", args, ERR);
    free_lines(A, na);
    snprintf(path, sizeof path, "%s/step-00000002/manifest.json", CKPT);
    json_error_t je;
    json_t *man = json_load_file(path, 0, &je);
    assert_non_null(man);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(man, "layout"), "ep")), 2);
    json_decref(man);
    snprintf(args, sizeof args, "--dp 4 --ep 4 --zero 1 --ckpt-dir %s --resume", CKPT);
    int rc = launch(4, args, A, &na);
    free_lines(A, na);
    if (rc != 2 || !strstr(ERR, "saved with --expert-model-parallel-size 2") ||
        !strstr(ERR, "this run has --expert-model-parallel-size 4"))
        fail_msg("resume at EP 4 of an EP 2 checkpoint: exit %d (want 2), stderr: %s", rc, ERR);
    print_message("EP 2 checkpoint at EP 4: refused, naming both sizes\n");
    clear_ckpt();
    write_model(0);
}

int main(int argc, char **argv)
{
    int begun = dtrain_suite_begin(argc, argv, 4, &DTRAIN, &MPIRUN);
    if (begun >= 0)
        return begun;
    DIR = argv[3];
    snprintf(MODEL, sizeof MODEL, "%s/ckp_model.json", DIR);
    snprintf(CKPT, sizeof CKPT, "%s/ckp_parallel", DIR);
    FILE *f = fopen(MODEL, "w");
    if (!f)
        return 1;
    fprintf(f, "{\"num_layers\": 4, \"hidden\": 64, \"heads\": 4, \"seq_len\": 32}\n");
    fclose(f);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bit_exact_every_layout),
        cmocka_unit_test(reshards_to_another_layout),
        cmocka_unit_test(context_parallel_reshards),
        cmocka_unit_test(truncated_shard_falls_back_to_the_previous_checkpoint),
        cmocka_unit_test(edited_manifest_falls_back_on_every_rank_or_stops_them_all),
        cmocka_unit_test(expert_parallel_resumes_in_its_own_layout),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clear_ckpt();
    remove(MODEL);
    return rc;
}
