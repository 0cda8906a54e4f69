/* What the tests of dtcal's rank-GEMM commands (variability, overlap) share: running the command
 * under mpirun, reading and writing files, the numbers of a sources line, the simulator reading
 * the result, and --into keeping every other key. Include after cmocka.h and jansson.h; needs
 * DTCAL_BIN and DTCAL_MPIEXEC. */
#ifndef DTSIM_TESTS_CALIBRATE_RANK_GEMM_TEST_H
#define DTSIM_TESTS_CALIBRATE_RANK_GEMM_TEST_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "config.h"
#include "test_files.h"

static void close_to(double got, double want, double tol)
{
    print_message("  %.12g (expected %.12g)\n", got, want);
    assert_true(fabs(got - want) <= tol);
}

/* mpirun -np ranks dtcal COMMAND ARGS, stdout and stderr into stdout.txt and stderr.txt; the
 * exit status. Skips the test where the build has no mpirun. */
static int dtcal_mpirun(const char *command, int ranks, const char *args)
{
    if (!DTCAL_MPIEXEC[0])
        skip();
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' --oversubscribe -np %d '%s' %s %s >stdout.txt 2>stderr.txt", DTCAL_MPIEXEC,
             ranks, DTCAL_BIN, command, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The numbers of the list "[a, b, ...]" that follows `label` in line; their count, or -1. */
static int list_after(const char *line, const char *label, double *out, int max)
{
    const char *p = strstr(line, label);
    if (!p || p[strlen(label)] != '[')
        return -1;
    p += strlen(label) + 1;
    int n = 0;
    while (n < max) {
        char *end;
        out[n++] = strtod(p, &end);
        if (end == p)
            return -1;
        p = end;
        if (*p == ']')
            return n;
        if (strncmp(p, ", ", 2))
            return -1;
        p += 2;
    }
    return -1;
}

/* The last line of the calibration's sources. */
static const char *last_source(json_t *doc)
{
    json_t *s = json_object_get(doc, "sources");
    assert_true(json_is_array(s) && json_array_size(s) > 0);
    return json_string_value(json_array_get(s, json_array_size(s) - 1));
}

static void simulator_reads(const char *path, calibration_config *out)
{
    calibration_config c;
    config_error err;
    if (calibration_load(path, &c, &err) != 0)
        fail_msg("%s", err.msg);
    if (out)
        *out = c;
    else
        calibration_free(&c);
}

static void today(char *out, size_t len)
{
    time_t now = time(NULL);
    strftime(out, len, "%Y-%m-%d", gmtime(&now));
}

/* after, the result of --into a calibration whose text was `before`: every key as it was but
 * source (a datasheet one becomes mixed) and sources (one line more, the old ones kept), plus
 * `key` where it was not there. */
static void into_kept_every_other_key(const char *before, json_t *after, const char *key)
{
    json_error_t je;
    json_t *old = json_loads(before, 0, &je);
    assert_non_null(old);
    const char *k;
    json_t *v;
    json_object_foreach(old, k, v) {
        if (!strcmp(k, "source") || !strcmp(k, "sources") || !strcmp(k, key) || !strcmp(k, "calibration_crc32"))
            continue; /* the seal is dtcal's own of the new content */
        if (!json_equal(v, json_object_get(after, k)))
            fail_msg("--into changed %s", k);
    }
    assert_true(json_is_number(json_object_get(after, key)));
    assert_int_equal(json_object_size(after), json_object_size(old) + !json_object_get(old, key) +
                                                  !json_object_get(old, "calibration_crc32"));
    assert_true(json_is_string(json_object_get(after, "calibration_crc32")));
    assert_string_equal(json_string_value(json_object_get(after, "source")), "mixed");
    json_t *old_sources = json_object_get(old, "sources"), *new_sources = json_object_get(after, "sources");
    assert_int_equal(json_array_size(new_sources), json_array_size(old_sources) + 1);
    for (size_t i = 0; i < json_array_size(old_sources); i++)
        assert_true(json_equal(json_array_get(old_sources, i), json_array_get(new_sources, i)));
    json_decref(old);
}

/* mpirun -np ranks dtcal COMMAND "-o bad.json ARGS": refused with exit 2, "dtcal COMMAND: "
 * said once on stderr with `reason` (where not NULL), nothing on stdout, no bad.json. */
static void dtcal_refuses(const char *command, int ranks, const char *args, const char *reason)
{
    unlink("bad.json");
    char with_out[1024], prefix[64];
    snprintf(with_out, sizeof with_out, "-o bad.json %s", args); /* a flag without its value last */
    snprintf(prefix, sizeof prefix, "dtcal %s: ", command);
    int rc = dtcal_mpirun(command, ranks, with_out);
    char *out = read_all("stdout.txt"), *err = read_all("stderr.txt");
    print_message("  %s: exit %d: %s", args, rc, err);
    assert_int_equal(rc, 2);
    assert_string_equal(out, "");
    const char *said = strstr(err, prefix);
    assert_non_null(said);
    assert_null(strstr(said + 1, prefix));
    if (reason && !strstr(err, reason))
        fail_msg("no '%s'", reason);
    assert_int_equal(access("bad.json", F_OK), -1);
    free(out);
    free(err);
}

/* Every bad option line (base options, then bad[i][0]) is refused naming bad[i][1]; --into files
 * that are missing, not JSON or whose sources are not a list are refused too and left as they
 * were. */
static void dtcal_refuses_bad_options(const char *command, const char *base, const char *const (*bad)[2],
                                      size_t n)
{
    const char *into = "{ \"device\": \"X\", \"source\": \"datasheet\", \"sources\": 5 }\n";
    const char *not_json = "{ \"device\": \n";
    write_file("bad-sources.json", into);
    write_file("not-json.json", not_json);
    static const char *const bad_into[][2] = {
        {"--into missing.json", "missing.json"},
        {"--into bad-sources.json", "is not a list"},
        {"--into not-json.json", "not-json.json"},
        {"--repeats", "needs a value"},
    };
    char args[512];
    for (size_t i = 0; i < n + sizeof bad_into / sizeof bad_into[0]; i++) {
        const char *const *b = i < n ? bad[i] : bad_into[i - n];
        snprintf(args, sizeof args, "%s %s", base, b[0]);
        dtcal_refuses(command, 2, args, b[1]);
    }
    char *after = read_all("bad-sources.json"), *after_not_json = read_all("not-json.json");
    assert_string_equal(after, into);
    assert_string_equal(after_not_json, not_json);
    free(after);
    free(after_not_json);
}
#endif
