/* Checkpoints: resume is bit-exact (same per-step losses and params_crc32 as an uninterrupted
 * run) in fp32, bf16 and fp16; a corrupt or truncated newest shard is skipped by name and the
 * previous checkpoint still ends equal; so is one whose manifest lies about sizes, names or
 * layout; no checkpoint starts fresh; only the newest K are kept;
 * SIGTERM writes a last checkpoint and exits 0. argv[1]: dtrain. */
#include <dirent.h>
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

/* A manifest that lies: a byte count far beyond the file (it must not be allocated), a shard name
 * that climbs out of the step folder, a layout whose rank count overflows an int. Each is skipped
 * with its reason and the previous checkpoint resumes. */
static void hostile_manifest_is_skipped(void **state)
{
    const char *edit[3][2] = {{"/shards/0/bytes", "1000000000000000"},
                              {"/shards/0/file", "../step-00000004/shard-00000.bin"},
                              {"/layout/tp", "65536"}};
    const char *why[3] = {"the manifest says 1000000000000000", "no plain file name", "inconsistent layout"};
    for (int k = 0; k < 3; k++) {
        int nb;
        reset_dir();
        assert_int_equal(run_dtrain(DTRAIN, "--steps 8 --micro-batch 2 --ckpt-dir " DIR_ " --ckpt-every 2 --stop-after 6",
                                    B, 64, &nb, ERR, sizeof ERR), 0);
        free_lines(B, nb);
        const char *man = DIR_ "/step-00000006/manifest.json";
        json_error_t je;
        json_t *m = json_load_file(man, 0, &je);
        assert_non_null(m);
        json_t *target = m;
        char key[64];
        const char *p = edit[k][0] + 1;
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
        json_t *v = k == 1 ? json_string(edit[k][1]) : json_integer(strtoll(edit[k][1], NULL, 10));
        if (k == 2) /* tp x pp: 65536 x 65536 overflows a 32-bit product */
            json_object_set_new(target, "pp", json_integer(65536));
        json_object_set_new(target, key, v);
        assert_int_equal(json_dump_file(m, man, 0), 0);
        json_decref(m);
        assert_int_equal(run_dtrain(DTRAIN, "--steps 8 --micro-batch 2 --ckpt-dir " DIR_ " --resume", B, 64, &nb, ERR,
                                    sizeof ERR), 0);
        if (!strstr(ERR, "skipping checkpoint " DIR_ "/step-00000006") || !strstr(ERR, why[k]) ||
            !strstr(ERR, "step-00000004 (step 4 done)"))
            fail_msg("%s: stderr was: %s", edit[k][0], ERR);
        assert_int_equal(nb, 5); /* steps 5..8 and the final line */
        free_lines(B, nb);
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
