/* Checkpoints: resume is bit-exact (same per-step losses and params_crc32 as an uninterrupted
 * run) in fp32, bf16 and fp16; a corrupt or truncated newest shard is skipped by name and the
 * previous checkpoint still ends equal; so is one whose manifest lies about sizes, names or
 * layout, holds any field out of range or fails its seal (manifest_crc32), each named; a
 * manifest from before the seal still loads; none intact left is refused (exit 2); no
 * checkpoint starts fresh; only the newest K are kept; a resume with nothing left to do does
 * nothing, one with another --seed is refused, one with another learning-rate schedule is refused
 * unless told which schedule holds (each then logs that schedule's closed-form rates); a checkpoint that cannot be written exits 1 and
 * leaves no step folder; SIGTERM writes a last checkpoint and exits 0. argv[1]: dtrain. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "run_dtrain.h"

static const char *DTRAIN;
static json_t *A[64], *B[64];
static char ERR[65536];
#define DIR_ "dtrain_test_ckpt" /* inside the run's private folder (main) */

static const char *crc(json_t *line)
{
    return json_string_value(json_object_get(line, "params_crc32"));
}

static void reset_dir(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", DIR_);
    if (system(cmd) != 0)
        fail_msg("cannot clear %s", DIR_);
}

/* Uninterrupted run vs. a run stopped after `stop` and resumed: equal losses after the
 * checkpoint and equal final CRC. */
static void resume_matches(const char *prec, int steps, int every, int stop)
{
    char args[512];
    int na, nb, nb1;
    reset_dir();
    snprintf(args, sizeof args, "--steps %d --micro-batch 2 --precision %s", steps, prec);
    assert_int_equal(run_dtrain(DTRAIN, args, A, 64, &na, ERR, sizeof ERR), 0);
    snprintf(args, sizeof args, "--steps %d --micro-batch 2 --precision %s --ckpt-dir %s --ckpt-every %d --stop-after %d",
             steps, prec, DIR_, every, stop);
    assert_int_equal(run_dtrain(DTRAIN, args, B, 64, &nb1, ERR, sizeof ERR), 0);
    free_lines(B, nb1);
    snprintf(args, sizeof args, "--steps %d --micro-batch 2 --precision %s --ckpt-dir %s --resume", steps, prec, DIR_);
    assert_int_equal(run_dtrain(DTRAIN, args, B, 64, &nb, ERR, sizeof ERR), 0);
    int resumed_at = (stop / every) * every; /* the last checkpoint before the stop */
    assert_int_equal(nb, steps - resumed_at + 1);
    for (int i = 0; i < nb - 1; i++) {
        int step = (int)json_integer_value(json_object_get(B[i], "step"));
        assert_int_equal(step, resumed_at + 1 + i);
        double la = json_number_value(json_object_get(A[step - 1], "loss"));
        double lb = json_number_value(json_object_get(B[i], "loss"));
        if (la != lb)
            fail_msg("%s: step %d loss %.9g after resume, %.9g uninterrupted", prec, step, lb, la);
    }
    assert_string_equal(crc(A[na - 1]), crc(B[nb - 1]));
    free_lines(A, na);
    free_lines(B, nb);
}

static void resume_is_bit_exact(void **state)
{
    resume_matches("fp32", 6, 2, 3);
    resume_matches("fp32", 7, 3, 6);
    resume_matches("bf16", 6, 2, 5);
    resume_matches("fp16", 6, 2, 3);
}

static void corrupt_newest_is_skipped(void **state)
{
    int na, nb;
    const char *how[2] = {"corrupt", "truncated"};
    for (int k = 0; k < 2; k++) {
        reset_dir();
        assert_int_equal(run_dtrain(DTRAIN, "--steps 8 --micro-batch 2", A, 64, &na, ERR, sizeof ERR), 0);
        assert_int_equal(run_dtrain(DTRAIN, "--steps 8 --micro-batch 2 --ckpt-dir " DIR_ " --ckpt-every 2 --stop-after 6",
                                    B, 64, &nb, ERR, sizeof ERR), 0);
        free_lines(B, nb);
        const char *shard = DIR_ "/step-00000006/shard-00000.bin";
        if (k == 0) { /* flip one byte in the middle */
            FILE *f = fopen(shard, "r+b");
            assert_non_null(f);
            fseek(f, 100000, SEEK_SET);
            int c = fgetc(f);
            fseek(f, 100000, SEEK_SET);
            fputc(c ^ 0x5a, f);
            fclose(f);
        } else {
            assert_int_equal(truncate(shard, 5000), 0);
        }
        assert_int_equal(run_dtrain(DTRAIN, "--steps 8 --micro-batch 2 --ckpt-dir " DIR_ " --resume", B, 64, &nb, ERR,
                                    sizeof ERR), 0);
        if (!strstr(ERR, "skipping checkpoint " DIR_ "/step-00000006") || !strstr(ERR, how[k]) ||
            !strstr(ERR, "step-00000004 (step 4 done)"))
            fail_msg("%s shard: stderr was: %s", how[k], ERR);
        assert_int_equal(nb, 5); /* steps 5..8 and the final line */
        assert_string_equal(crc(A[na - 1]), crc(B[nb - 1]));
        free_lines(A, na);
        free_lines(B, nb);
    }
}

/* Sets the value at pointer (/a/0/b) of manifest man to v (taken), or removes it (v NULL). */
static void edit_manifest(const char *man, const char *pointer, json_t *v)
{
    json_error_t je;
    json_t *m = json_load_file(man, 0, &je);
    assert_non_null(m);
    json_t *target = m;
    char key[64];
    const char *p = pointer + 1;
    for (;;) { /* walk /a/0/b */
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        snprintf(key, sizeof key, "%.*s", (int)n, p);
        if (!slash)
            break;
        target = json_is_array(target) ? json_array_get(target, (size_t)atoi(key)) : json_object_get(target, key);
        assert_non_null(target);
        p = slash + 1;
    }
    if (json_is_array(target))
        assert_int_equal(json_array_set_new(target, (size_t)atoi(key), v), 0);
    else if (v)
        json_object_set_new(target, key, v);
    else
        json_object_del(target, key);
    assert_int_equal(json_dump_file(m, man, 0), 0);
    json_decref(m);
}

/* Makes a manifest one written before the seal existed: format 2, no manifest_crc32. */
static void unseal(const char *man)
{
    edit_manifest(man, "/manifest_crc32", NULL);
    edit_manifest(man, "/format", json_integer(2));
}

static char PRISTINE[16384]; /* step 6's manifest as written */
#define MAN6 DIR_ "/step-00000006/manifest.json"

/* Checkpoints at steps 2, 4, 6 in DIR_ (a run stopped after step 6). */
static void three_checkpoints(void)
{
    int nb;
    reset_dir();
    assert_int_equal(run_dtrain(DTRAIN, "--steps 8 --micro-batch 2 --ckpt-dir " DIR_ " --ckpt-every 2 --stop-after 6",
                                B, 64, &nb, ERR, sizeof ERR), 0);
    free_lines(B, nb);
    FILE *f = fopen(MAN6, "r");
    assert_non_null(f);
    PRISTINE[fread(PRISTINE, 1, sizeof PRISTINE - 1, f)] = 0;
    fclose(f);
}

/* Puts step 6's manifest back as written (a resume without --ckpt-every changes nothing else). */
static void restore_manifest(void)
{
    FILE *f = fopen(MAN6, "w");
    assert_non_null(f);
    fputs(PRISTINE, f);
    fclose(f);
}

/* Resumes after an edit of step 6's checkpoint: it is skipped with `why` (which names the file
 * at fault), and step 4's checkpoint resumes (steps 5..8 and the final line). */
static void resume_skips_the_edit(const char *what, const char *why)
{
    int nb;
    assert_int_equal(run_dtrain(DTRAIN, "--steps 8 --micro-batch 2 --ckpt-dir " DIR_ " --resume", B, 64, &nb, ERR,
                                sizeof ERR), 0);
    if (!strstr(ERR, "skipping checkpoint " DIR_ "/step-00000006: ") || !strstr(ERR, why) ||
        !strstr(ERR, "step-00000004 (step 4 done)"))
        fail_msg("%s: stderr was: %s", what, ERR);
    assert_int_equal(nb, 5);
    free_lines(B, nb);
}

/* A manifest that lies, in the format without a seal (so that nothing but the checks below the
 * seal can catch it): a byte count far beyond the file (it must not be allocated), a shard name
 * that climbs out of the step folder, a layout whose rank count overflows an int. Each is
 * skipped with its reason and the previous checkpoint resumes. */
static void hostile_manifest_is_skipped(void **state)
{
    const char *edit[3][2] = {{"/shards/0/bytes", "1000000000000000"},
                              {"/shards/0/file", "../step-00000004/shard-00000.bin"},
                              {"/layout/tp", "65536"}};
    const char *why[3] = {"shard-00000.bin has 10011712 bytes, the manifest says 1000000000000000",
                          MAN6 ": shards[0].file is no plain file name", MAN6 ": layout.tp is 65536"};
    const char *man = MAN6;
    three_checkpoints();
    for (int k = 0; k < 3; k++) {
        restore_manifest();
        unseal(man);
        edit_manifest(man, edit[k][0], k == 1 ? json_string(edit[k][1]) : json_integer(strtoll(edit[k][1], NULL, 10)));
        if (k == 2) /* tp x pp: 65536 x 65536 overflows a 32-bit product */
            edit_manifest(man, "/layout/pp", json_integer(65536));
        resume_skips_the_edit(edit[k][0], why[k]);
    }
}

/* Every field a manifest holds is range-checked, in a sealed manifest and (the first three) in
 * one written before the seal; an edit within range breaks the seal. Each edited checkpoint is
 * skipped naming the file and the field, and the previous one resumes. */
static void edited_manifest_falls_back_naming_the_field(void **state)
{
    struct {
        const char *pointer, *value, *why;
    } edits[] = {
        {"/updates", "-3", "updates is -3, outside 0..6"},
        {"/step", "-6", "step is -6"},
        {"/step", "1099511627776", "step is 1099511627776"}, /* 2^40: once cut to an int */
        {"/step", "4", "step is 4, the folder is step 6"},
        {"/data_position", "1099511627776", "data_position is 1099511627776"},
        {"/seed", "-1", "seed is -1"},
        {"/precision", "7", "precision is 7"},
        {"/lr_schedule/lr", "1e9", "lr_schedule.lr is 1000000000"},
        {"/lr_schedule/steps", "0", "lr_schedule.steps is 0"},
        {"/loss_scale", "0", "loss_scale is 0"},
        {"/good_steps", "3", "good_steps is 3"}, /* fp32 counts none */
        {"/layout/stage_layers", "[1, 3]", "layout.stage_layers is not a list of layout.pp = 1"},
        {"/layout/world", "2", "layout.world is 2"},
        {"/shards/0/bytes", "101", "shards[0].bytes is 101"},
        {"/shards/0/crc32", "\"xyz\"", "shards[0].crc32 is not 8 hex digits"},
        {"/format", "9", "format is 9"},
    };
    const char *man = MAN6;
    three_checkpoints();
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++)
        for (int sealed = k < 3 ? 0 : 1; sealed < 2; sealed++) {
            restore_manifest();
            if (!sealed)
                unseal(man);
            json_error_t je;
            edit_manifest(man, edits[k].pointer, json_loads(edits[k].value, JSON_DECODE_ANY, &je));
            char why[256];
            snprintf(why, sizeof why, "%s: %s", MAN6, edits[k].why);
            resume_skips_the_edit(edits[k].pointer, why);
        }
    /* within range, so only the seal tells */
    restore_manifest();
    edit_manifest(man, "/updates", json_integer(5));
    resume_skips_the_edit("updates 5", MAN6 ": manifest_crc32 is ");
    restore_manifest();
    edit_manifest(man, "/manifest_crc32", NULL); /* a format 3 manifest is sealed */
    resume_skips_the_edit("no seal", MAN6 ": manifest_crc32 is missing");
    FILE *f = fopen(man, "w"); /* cut short */
    assert_non_null(f);
    fputs("{\"format\": 3, \"step\"", f);
    fclose(f);
    resume_skips_the_edit("cut", MAN6 ": not readable JSON");
}

/* A manifest written before the seal existed (format 2, no manifest_crc32) still resumes, and
 * the seal does not depend on the file's layout: both end as the uninterrupted run. */
static void unsealed_and_reformatted_manifests_still_load(void **state)
{
    int na, nb;
    assert_int_equal(run_dtrain(DTRAIN, "--steps 8 --micro-batch 2", A, 64, &na, ERR, sizeof ERR), 0);
    three_checkpoints();
    for (int legacy = 0; legacy < 2; legacy++) {
        const char *man = MAN6;
        restore_manifest();
        if (legacy)
            unseal(man);
        else
            edit_manifest(man, "/step", json_integer(6)); /* the same value, written compact */
        assert_int_equal(run_dtrain(DTRAIN, "--steps 8 --micro-batch 2 --ckpt-dir " DIR_ " --resume", B, 64, &nb, ERR,
                                    sizeof ERR), 0);
        if (!strstr(ERR, "step-00000006 (step 6 done)"))
            fail_msg("%s: stderr was: %s", legacy ? "format 2" : "reformatted", ERR);
        assert_int_equal(nb, 3);
        assert_string_equal(crc(A[na - 1]), crc(B[nb - 1]));
        free_lines(B, nb);
    }
    free_lines(A, na);
}

/* Written checkpoints that all fail their checks: refused (exit 2, naming the newest and why),
 * nothing trained or logged. Folders without a manifest only (a run stopped before its first
 * checkpoint completed) still start fresh. */
static void no_intact_checkpoint_left_is_refused(void **state)
{
    int nb;
    reset_dir();
    assert_int_equal(run_dtrain(DTRAIN, "--steps 2 --micro-batch 2 --ckpt-dir " DIR_ " --ckpt-every 2", B, 64, &nb, ERR,
                                sizeof ERR), 0);
    free_lines(B, nb);
    edit_manifest(DIR_ "/step-00000002/manifest.json", "/updates", json_integer(-3));
    assert_int_equal(run_dtrain(DTRAIN, "--steps 4 --micro-batch 2 --ckpt-dir " DIR_ " --resume", B, 64, &nb, ERR,
                                sizeof ERR), 2);
    if (!strstr(ERR, "no intact checkpoint left in " DIR_) ||
        !strstr(ERR, "step-00000002/manifest.json: updates is -3"))
        fail_msg("stderr was: %s", ERR);
    assert_int_equal(nb, 0);
    reset_dir();
    assert_int_equal(mkdir(DIR_, 0755), 0);
    assert_int_equal(mkdir(DIR_ "/step-00000002", 0755), 0);
    assert_int_equal(run_dtrain(DTRAIN, "--steps 2 --micro-batch 2 --ckpt-dir " DIR_ " --resume", B, 64, &nb, ERR,
                                sizeof ERR), 0);
    assert_non_null(strstr(ERR, "starting fresh"));
    assert_int_equal(nb, 3);
    free_lines(B, nb);
}

/* Resuming a checkpoint that already holds --steps: nothing to do, exit 0, nothing trained,
 * logged or written (the checkpoint folder unchanged). */
static void resume_at_or_past_the_last_step_does_nothing(void **state)
{
    int nb;
    three_checkpoints();
    const char *steps[2] = {"6", "3"};
    for (int k = 0; k < 2; k++) {
        char args[256], want[128];
        snprintf(args, sizeof args, "--steps %s --micro-batch 2 --ckpt-dir %s --ckpt-every 1 --resume", steps[k], DIR_);
        assert_int_equal(run_dtrain(DTRAIN, args, B, 64, &nb, ERR, sizeof ERR), 0);
        snprintf(want, sizeof want, "is at step 6 and --steps %s asks for no more: nothing to do", steps[k]);
        if (!strstr(ERR, want) || strstr(ERR, "final loss"))
            fail_msg("--steps %s: stderr was: %s", steps[k], ERR);
        assert_int_equal(nb, 0);
        int n = 0;
        DIR *d = opendir(DIR_);
        struct dirent *e;
        while (d && (e = readdir(d)))
            n += !strncmp(e->d_name, "step-", 5);
        if (d)
            closedir(d);
        assert_int_equal(n, 3); /* step-2, 4, 6: none new */
    }
}

/* Another --seed on resume would change the data order mid-run: refused naming both seeds. */
static void another_seed_on_resume_is_refused(void **state)
{
    int nb;
    three_checkpoints();
    assert_int_equal(run_dtrain(DTRAIN, "--steps 8 --micro-batch 2 --seed 5 --ckpt-dir " DIR_ " --resume", B, 64, &nb,
                                ERR, sizeof ERR), 2);
    if (!strstr(ERR, "step-00000006 was made with --seed 1, this run has --seed 5"))
        fail_msg("stderr was: %s", ERR);
    assert_int_equal(nb, 0);
}

/* The cosine schedule of train_lr (lr_schedule.c) in closed form: warm-up to lr, then down to lr / 10 at decay. */
static double cosine_lr(double lr, int warmup, int decay, int step)
{
    if (warmup > 0 && step <= warmup)
        return lr * step / warmup;
    double p = (double)(step - warmup) / (decay - warmup);
    p = p > 1 ? 1 : p;
    return 0.1 * lr + 0.5 * 0.9 * lr * (1 + cos(M_PI * p));
}

static void expect_rates(int nb, double lr, int warmup, int decay, const char *what)
{
    assert_int_equal(nb, 12 - 6 + 1); /* steps 7..12 and the final line */
    for (int i = 0; i < nb - 1; i++) {
        int step = (int)json_integer_value(json_object_get(B[i], "step"));
        double got = json_number_value(json_object_get(B[i], "lr")), want = cosine_lr(lr, warmup, decay, step);
        if (fabs(got - want) > 1e-12 + 1e-6 * want)
            fail_msg("%s: step %d lr %.9g, the schedule's %.9g", what, step, got, want);
    }
    free_lines(B, nb);
}

/* The checkpoints hold a schedule of --steps 8 (lr 1e-3, no warm-up, decay over 8 steps). Asking
 * for 12 steps changes it (decay over 12, warm-up 12/10 = 1): refused, naming both, unless
 * --use-checkpoint-opt-param-scheduler keeps the checkpoint's or --override-opt-param-scheduler
 * takes this run's (Megatron-LM's rule and flags). */
static void another_lr_schedule_on_resume_is_refused_unless_chosen(void **state)
{
    int nb;
    three_checkpoints();
    assert_int_equal(run_dtrain(DTRAIN, "--steps 12 --micro-batch 2 --ckpt-dir " DIR_ " --resume", B, 64, &nb, ERR,
                                sizeof ERR), 2);
    if (!strstr(ERR, "step-00000006 was trained on another learning-rate schedule: --lr 0.001, --warmup 0, decay over "
                     "8 steps; this run has --lr 0.001, --warmup 1, decay over 12 steps"))
        fail_msg("stderr was: %s", ERR);
    assert_int_equal(nb, 0);
    assert_int_equal(run_dtrain(DTRAIN, "--steps 12 --micro-batch 2 --ckpt-dir " DIR_
                                " --resume --use-checkpoint-opt_param-scheduler", B, 64, &nb, ERR, sizeof ERR), 0);
    expect_rates(nb, 1e-3, 0, 8, "checkpoint's schedule");
    restore_manifest();
    assert_int_equal(run_dtrain(DTRAIN, "--steps 12 --micro-batch 2 --ckpt-dir " DIR_
                                " --resume --override-opt-param-scheduler", B, 64, &nb, ERR, sizeof ERR), 0);
    expect_rates(nb, 1e-3, 1, 12, "this run's schedule");
    /* the two contradict each other; either without --resume chooses nothing */
    assert_int_equal(run_dtrain(DTRAIN, "--steps 12 --micro-batch 2 --ckpt-dir " DIR_ " --resume "
                                "--override-opt-param-scheduler --use-checkpoint-opt-param-scheduler", B, 64, &nb,
                                ERR, sizeof ERR), 2);
    assert_non_null(strstr(ERR, "contradict each other"));
    assert_int_equal(run_dtrain(DTRAIN, "--steps 12 --micro-batch 2 --override-opt-param-scheduler", B, 64, &nb, ERR,
                                sizeof ERR), 2);
    assert_non_null(strstr(ERR, "they need --resume"));
}

/* A checkpoint that cannot be written (files capped below a shard's size: EFBIG, as a full disk
 * gives ENOSPC) stops the run with exit 1 and the reason, never "done", and leaves no step
 * folder behind: with the background writer and with --ckpt-sync. */
static void a_failed_final_checkpoint_exits_1_and_leaves_nothing(void **state)
{
    const char *how[2] = {"", "--ckpt-sync"};
    for (int k = 0; k < 2; k++) {
        char args[512];
        reset_dir();
        snprintf(args, sizeof args, "--steps 4 --micro-batch 2 --ckpt-dir %s --ckpt-every 4 %s --log-json /dev/null",
                 DIR_, how[k]);
        assert_int_equal(run_dtrain_sh("trap '' XFSZ; ulimit -f 1000; exec", DTRAIN, args, ERR, sizeof ERR), 1);
        if (!strstr(ERR, DIR_ "/step-00000004/shard-00000.bin: write failed: File too large") ||
            !strstr(ERR, "stopped after step 4") || strstr(ERR, "dtrain: done"))
            fail_msg("%s: stderr was: %s", how[k], ERR);
        struct stat st;
        assert_int_not_equal(stat(DIR_ "/step-00000004", &st), 0);
    }
}

static void no_checkpoint_starts_fresh_and_old_ones_are_pruned(void **state)
{
    int n;
    reset_dir();
    assert_int_equal(run_dtrain(DTRAIN, "--steps 5 --micro-batch 2 --ckpt-dir " DIR_ " --resume --ckpt-every 1 "
                                        "--ckpt-keep 2", A, 64, &n, ERR, sizeof ERR), 0);
    assert_non_null(strstr(ERR, "starting fresh"));
    free_lines(A, n);
    struct stat st;
    assert_int_equal(stat(DIR_ "/step-00000005/manifest.json", &st), 0);
    assert_int_equal(stat(DIR_ "/step-00000004/manifest.json", &st), 0);
    assert_int_not_equal(stat(DIR_ "/step-00000003", &st), 0);
    assert_int_not_equal(stat(DIR_ "/step-00000001", &st), 0);
}

static void sigterm_writes_a_last_checkpoint(void **state)
{
    reset_dir();
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "'%s' --steps 100000 --micro-batch 2 --ckpt-dir %s --log-json %s/log.jsonl 2>/dev/null & pid=$!; "
             "sleep 3; kill -TERM $pid; wait $pid", DTRAIN, DIR_, "/tmp");
    int status = system(cmd);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    DIR *d = opendir(DIR_);
    assert_non_null(d);
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "step-", 5)) {
            char man[512];
            snprintf(man, sizeof man, "%s/%s/manifest.json", DIR_, e->d_name);
            struct stat st;
            found += stat(man, &st) == 0;
        }
    closedir(d);
    assert_int_equal(found, 1);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    DTRAIN = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resume_is_bit_exact),
        cmocka_unit_test(corrupt_newest_is_skipped),
        cmocka_unit_test(hostile_manifest_is_skipped),
        cmocka_unit_test(edited_manifest_falls_back_naming_the_field),
        cmocka_unit_test(unsealed_and_reformatted_manifests_still_load),
        cmocka_unit_test(no_intact_checkpoint_left_is_refused),
        cmocka_unit_test(resume_at_or_past_the_last_step_does_nothing),
        cmocka_unit_test(another_seed_on_resume_is_refused),
        cmocka_unit_test(another_lr_schedule_on_resume_is_refused_unless_chosen),
        cmocka_unit_test(a_failed_final_checkpoint_exits_1_and_leaves_nothing),
        cmocka_unit_test(no_checkpoint_starts_fresh_and_old_ones_are_pruned),
        cmocka_unit_test(sigterm_writes_a_last_checkpoint),
    };
    char dir[] = "/tmp/test_checkpoint_XXXXXX";
    if (enter_private_dir(dir) != 0)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    leave_private_dir(dir);
    return rc;
}
