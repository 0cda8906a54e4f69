/* Runs the dtrain binary for the engine's CLI tests and reads its --log-json output. */
#ifndef DTSIM_TESTS_RUN_DTRAIN_H
#define DTSIM_TESTS_RUN_DTRAIN_H
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../private_dir.h"

/* DTRAIN_TEST_DEVICE=cuda (the gpu_ variants of the multi-rank suites: every rank on the one GPU,
 * the MPI host-staged communicator) adds "--device cuda" to every run. */
static inline const char *dtrain_test_device_flag(void)
{
    const char *d = getenv("DTRAIN_TEST_DEVICE");
    return d && !strcmp(d, "cuda") ? "--device cuda" : "";
}

/* Such a variant is skipped (CTest's 77) where no GPU answers. */
static inline int dtrain_test_device_missing(void)
{
    return *dtrain_test_device_flag() && system("nvidia-smi -L >/dev/null 2>&1") != 0;
}

/* How every multi-rank engine suite starts: argv[1] is dtrain, argv[2] mpirun (at least `need`
 * words in all), mpirun may run as root (CI does), and a gpu_ variant without a GPU is skipped.
 * Returns -1 to go on, else the exit code to return (2: called wrongly; 77: skipped). */
static inline int dtrain_suite_begin(int argc, char **argv, int need, const char **dtrain, const char **mpirun)
{
    if (argc < need || argc < 3)
        return 2;
    *dtrain = argv[1];
    *mpirun = argv[2];
    if (dtrain_test_device_missing()) {
        fprintf(stderr, "DTRAIN_TEST_DEVICE=%s but no GPU answers: skipped\n", getenv("DTRAIN_TEST_DEVICE"));
        return 77;
    }
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    return -1;
}

#ifdef cmocka_unit_test
/* The suite's tests in a private scratch folder /tmp/NAME_XXXXXX, removed after; cmocka's exit
 * code (1 where the folder could not be made). */
#define dtrain_suite_run_private(name, tests) \
    dtrain_suite_run_private_n((name), (tests), sizeof(tests) / sizeof((tests)[0]))
static inline int dtrain_suite_run_private_n(const char *name, const struct CMUnitTest *tests, size_t n)
{
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/%s_XXXXXX", name);
    if (enter_private_dir(dir) != 0)
        return 1;
    int rc = _cmocka_run_group_tests(name, tests, n, NULL, NULL);
    leave_private_dir(dir);
    return rc;
}

/* snprintf into the array buf, whole or the test fails: a path or command line cut short would
 * run, or remove, something else. */
#define format_whole(buf, ...)                                                                       \
    do {                                                                                             \
        if (snprintf((buf), sizeof(buf), __VA_ARGS__) >= (int)sizeof(buf))                           \
            fail_msg("%s: %s passes its %zu bytes", __func__, #buf, sizeof(buf));                    \
    } while (0)
#endif

/* A run's stderr file into text (NUL-terminated, cut to len - 1). */
static inline void read_stderr_file(const char *path, char *text, size_t len)
{
    FILE *e = fopen(path, "r");
    size_t got = e ? fread(text, 1, len - 1, e) : 0;
    text[got] = 0;
    if (e)
        fclose(e);
}

/* Runs "DTRAIN [--device D] ARGS --log-json LOG 2>ERR"; returns the exit code; lines[] gets the
 * parsed log lines (caller json_decref's them), *n their count. -1 (no lines) where it could not
 * run: a command line too long is said in stderr_text, not run cut. */
static inline int run_dtrain(const char *dtrain, const char *args, json_t **lines, int max, int *n, char *stderr_text,
                      size_t stderr_len)
{
    *n = 0;
    char log[] = "/tmp/dtrain_log_XXXXXX", errf[] = "/tmp/dtrain_err_XXXXXX";
    int fd1 = mkstemp(log), fd2 = mkstemp(errf);
    if (fd1 < 0 || fd2 < 0)
        return -1;
    char cmd[16384];
    if (snprintf(cmd, sizeof cmd, "'%s' %s %s --log-json %s 2>%s", dtrain, dtrain_test_device_flag(), args, log,
                 errf) >= (int)sizeof cmd) {
        snprintf(stderr_text, stderr_len, "the dtrain command line passes %zu bytes: not run", sizeof cmd);
        remove(log);
        remove(errf);
        close(fd1);
        close(fd2);
        return -1;
    }
    int status = system(cmd);
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    FILE *f = fopen(log, "r");
    char buf[8192];
    while (f && *n < max && fgets(buf, sizeof buf, f)) {
        json_error_t je;
        json_t *j = json_loads(buf, 0, &je);
        if (!j) {
            fprintf(stderr, "unparseable log line: %s", buf);
            rc = -2;
            break;
        }
        lines[(*n)++] = j;
    }
    if (f)
        fclose(f);
    read_stderr_file(errf, stderr_text, stderr_len);
    remove(log);
    remove(errf);
    close(fd1);
    close(fd2);
    return rc;
}

/* Runs "PREFIX 'DTRAIN' ARGS 2>ERR" through sh, adding no --log-json: for a run whose outputs
 * the test names itself (a log on /dev/full) or whose limits the shell sets first ("trap ''
 * XFSZ; ulimit -f N;": a file growing past N blocks fails with EFBIG, as on a full disk, and
 * the ignored signal lets dtrain report it). Returns the exit code; stderr_text its stderr. */
static inline int run_dtrain_sh(const char *prefix, const char *dtrain, const char *args, char *stderr_text,
                                size_t stderr_len)
{
    char errf[] = "/tmp/dtrain_err_XXXXXX";
    int fd = mkstemp(errf);
    if (fd < 0)
        return -1;
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s '%s' %s %s 2>%s", prefix, dtrain, dtrain_test_device_flag(), args, errf);
    int status = system(cmd);
    read_stderr_file(errf, stderr_text, stderr_len);
    remove(errf);
    close(fd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static inline void free_lines(json_t **lines, int n)
{
    for (int i = 0; i < n; i++)
        json_decref(lines[i]);
}
/* A --dump-params file: fp32 parameters in the single-rank layout (malloc'd; NULL if unreadable). */
static inline float *load_params(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *p = malloc((size_t)bytes > 0 ? (size_t)bytes : 1);
    *n = bytes > 0 ? fread(p, sizeof(float), (size_t)bytes / sizeof(float), f) : 0;
    fclose(f);
    return p;
}
#endif
