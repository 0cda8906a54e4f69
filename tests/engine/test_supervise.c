/* Failure and recovery under mpirun (CPU, 8 ranks: TP 2 x PP 2 x DP 2):
 *  - one rank SIGKILLed after the job's third checkpoint (step 7, checkpoints every 2 steps):
 *    dtrain-supervise relaunches from step 6 and the job ends with the same params_crc32 as an
 *    uninterrupted run; the supervisor logs the failure (checkpoint 6, 1 step lost), the restart
 *    and the finish;
 *  - one rank hung (SIGSTOP) instead: the other ranks stop on --comm-timeout within a bound,
 *    naming what they waited for, and the supervised job still ends equal;
 *  - a job that fails every time is given up after --max-restarts; one that rejects its input
 *    (exit 2) or whose loss diverges (exit 3) is not restarted.
 * argv[1]: dtrain, argv[2]: dtrain-supervise, argv[3]: mpirun, argv[4]: a scratch folder. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "run_dtrain.h"

static const char *DTRAIN, *SUPERVISE, *MPIRUN, *DIR;
static char MODEL[4096], REFERENCE_CRC[16];
static const char *JOB = "--tp 2 --pp 2 --dp 2 --steps 10 --micro-batch 2 --global-batch 8 --seed 11";

static void sh(const char *fmt, ...)
{
    char cmd[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

/* The params_crc32 of the final line of a --log-json file ("" if none). */
static void final_crc(const char *path, char *out)
{
    out[0] = 0;
    FILE *f = fopen(path, "r");
    char line[8192];
    while (f && fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        const char *crc = json_string_value(json_object_get(j, "params_crc32"));
        if (crc && json_object_get(j, "final"))
            snprintf(out, 16, "%s", crc);
        json_decref(j);
    }
    if (f)
        fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(MODEL, sizeof MODEL, "%s/sup_model.json", DIR);
    FILE *f = fopen(MODEL, "w");
    if (!f)
        return -1;
    fprintf(f, "{\"num_layers\": 4, \"hidden\": 64, \"heads\": 4, \"seq_len\": 32}\n");
    fclose(f);
    char cmd[16384], log[4096];
    snprintf(log, sizeof log, "%s/sup_reference.jsonl", DIR);
    snprintf(cmd, sizeof cmd, "'%s' --oversubscribe -np 8 '%s' --model %s %s --log-json %s 2>/dev/null", MPIRUN, DTRAIN,
             MODEL, JOB, log);
    if (system(cmd) != 0)
        return -1;
    final_crc(log, REFERENCE_CRC);
    remove(log);
    return REFERENCE_CRC[0] ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    remove(MODEL);
    return 0;
}

/* Runs the supervised job with `fault` added; returns the supervisor's exit code and its events. */
static int supervised(const char *fault, int max_restarts, json_t **events, int *n, char *crc, double *wall)
{
    char cmd[16384], ck[4096], log[4096], sup[4096], mark[4096];
    snprintf(ck, sizeof ck, "%s/sup_ckpt", DIR);
    snprintf(log, sizeof log, "%s/sup_job.jsonl", DIR);
    snprintf(sup, sizeof sup, "%s/sup_events.jsonl", DIR);
    snprintf(mark, sizeof mark, "%s/sup_marker", DIR);
    sh("rm -rf '%s' '%s' '%s'* '%s'", ck, mark, log, sup);
    char faultx[4096];
    snprintf(faultx, sizeof faultx, fault, mark);
    format_whole(cmd,
                 "timeout 300 '%s' --max-restarts %d --log %s -- '%s' --oversubscribe -np 8 '%s' --model %s %s "
                 "--ckpt-dir %s --ckpt-every 2 --log-json %s %s 2>%s/sup_stderr.txt",
                 SUPERVISE, max_restarts, sup, MPIRUN, DTRAIN, MODEL, JOB, ck, log, faultx, DIR);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = system(cmd);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *wall = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    *n = 0;
    FILE *f = fopen(sup, "r");
    char line[8192];
    while (f && *n < 16 && fgets(line, sizeof line, f))
        events[(*n)++] = json_loads(line, 0, NULL);
    if (f)
        fclose(f);
    final_crc(log, crc);
    sh("rm -rf '%s' '%s' '%s'* '%s'", ck, mark, log, sup);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *kind(json_t *e)
{
    return json_string_value(json_object_get(e, "event"));
}

static void killed_rank_is_survived(void **state)
{
    (void)state;
    json_t *ev[16];
    int n;
    char crc[16];
    double wall;
    int rc = supervised("--test-kill 3:7:%s", 2, ev, &n, crc, &wall);
    assert_int_equal(rc, 0);
    assert_int_equal(n, 3);
    assert_string_equal(kind(ev[0]), "failure");
    assert_int_equal(json_integer_value(json_object_get(ev[0], "checkpoint_step")), 6);
    assert_int_equal(json_integer_value(json_object_get(ev[0], "last_step")), 7);
    assert_int_equal(json_integer_value(json_object_get(ev[0], "lost_steps")), 1);
    assert_true(json_number_value(json_object_get(ev[0], "detect_s")) >= 0);
    assert_string_equal(kind(ev[1]), "restarted");
    assert_int_equal(json_integer_value(json_object_get(ev[1], "resumed_from_step")), 6);
    assert_true(json_number_value(json_object_get(ev[1], "restart_s")) > 0);
    assert_string_equal(kind(ev[2]), "finished");
    assert_string_equal(crc, REFERENCE_CRC);
    print_message("rank 3 killed after step 7: detected in %.2f s, restarted in %.2f s, 1 step redone; "
                  "params_crc32 %s as uninterrupted (%.1f s in all)\n",
                  json_number_value(json_object_get(ev[0], "detect_s")),
                  json_number_value(json_object_get(ev[1], "restart_s")), crc, wall);
    for (int i = 0; i < n; i++)
        json_decref(ev[i]);
}

static void hung_rank_times_out(void **state)
{
    (void)state;
    json_t *ev[16];
    int n;
    char crc[16], errf[4096];
    double wall;
    int rc = supervised("--comm-timeout 3 --test-hang 5:5:%s", 2, ev, &n, crc, &wall);
    assert_int_equal(rc, 0);
    assert_true(n == 3 && !strcmp(kind(ev[0]), "failure") && !strcmp(kind(ev[2]), "finished"));
    double detect = json_number_value(json_object_get(ev[0], "detect_s"));
    assert_true(detect >= 3 && detect < 30); /* the timeout, plus the launcher tearing down */
    assert_string_equal(crc, REFERENCE_CRC);
    snprintf(errf, sizeof errf, "%s/sup_stderr.txt", DIR);
    FILE *f = fopen(errf, "r");
    static char text[1 << 16];
    size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[got] = 0;
    if (f)
        fclose(f);
    assert_non_null(strstr(text, "no progress for 3 s"));
    print_message("rank 5 hung after step 5: the others stopped on --comm-timeout 3 (detected in %.1f s); ended "
                  "equal\n", detect);
    for (int i = 0; i < n; i++)
        json_decref(ev[i]);
}

static void gives_up_and_does_not_retry_bad_input(void **state)
{
    (void)state;
    json_t *ev[16];
    int n;
    char crc[16];
    double wall;
    /* a marker in a folder that does not exist: the rank dies on every attempt */
    int rc = supervised("--test-kill 0:1:/nonexistent/%s", 1, ev, &n, crc, &wall);
    assert_int_equal(rc, 1);
    assert_string_equal(kind(ev[n - 1]), "gave_up");
    for (int i = 0; i < n; i++)
        json_decref(ev[i]);
    rc = supervised("--precision fp8 %s", 3, ev, &n, crc, &wall);
    assert_int_equal(rc, 2);
    assert_int_equal(n, 0);
    /* a diverged loss (exit 3) would diverge again from the checkpoint: not restarted either */
    rc = supervised("--inject-nan 3", 3, ev, &n, crc, &wall);
    assert_int_equal(rc, 3);
    assert_int_equal(n, 0);
}

int main(int argc, char **argv)
{
    if (argc < 5)
        return 2;
    DTRAIN = argv[1];
    SUPERVISE = argv[2];
    MPIRUN = argv[3];
    DIR = argv[4];
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(killed_rank_is_survived),
        cmocka_unit_test(hung_rank_times_out),
        cmocka_unit_test(gives_up_and_does_not_retry_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
