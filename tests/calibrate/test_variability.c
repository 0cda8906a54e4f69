/* dtcal variability: cv = sample standard deviation / mean of the devices' rates, checked on
 * closed forms; the sources line carries the rates so that anyone can recompute cv; and, through
 * mpirun, two CPU ranks write a calibration whose compute_variability_cv is exactly what the
 * rates they printed (and wrote into its sources) give, recomputed here from the definition. One
 * rank, bad options and a bad --into exit 2 and write nothing; --into keeps every other key of the
 * calibration; the simulator reads both results. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>
#include "../private_dir.h"
#include "cal_writer.h"
#include "rank_gemm_test.h"
#include "variability.h"

/* {1, 3}: mean 2, sample variance ((1-2)^2 + (3-2)^2) / (2-1) = 2, sd sqrt(2), cv sqrt(2)/2. The
 * population formula (divide by n) would give cv 0.5. */
static void cv_closed_forms(void **state)
{
    (void)state;
    variability_stats s;
    const double two[] = {1, 3};
    assert_int_equal(variability_cv(two, 2, &s), 0);
    assert_int_equal(s.n, 2);
    close_to(s.mean, 2, 1e-15);
    close_to(s.sd, sqrt(2.0), 1e-15);
    close_to(s.cv, 0.70710678118654752, 1e-15);
    /* mean 5, squared deviations 9+1+1+1+0+0+4+16 = 32, sample variance 32/7 */
    const double eight[] = {2, 4, 4, 4, 5, 5, 7, 9};
    assert_int_equal(variability_cv(eight, 8, &s), 0);
    close_to(s.mean, 5, 1e-15);
    close_to(s.sd, sqrt(32.0 / 7), 1e-14);
    close_to(s.cv, sqrt(32.0 / 7) / 5, 1e-15);
    /* the same rate everywhere: no spread; large rates close together lose nothing to cancellation */
    const double same[] = {612.5, 612.5, 612.5};
    assert_int_equal(variability_cv(same, 3, &s), 0);
    assert_true(s.cv == 0);
    const double close[] = {1e9 + 1, 1e9 + 3};
    assert_int_equal(variability_cv(close, 2, &s), 0);
    close_to(s.sd, sqrt(2.0), 1e-6);
}

static void cv_refuses_what_is_not_a_spread(void **state)
{
    (void)state;
    variability_stats s = {0};
    const double one[] = {5}, zero[] = {1, 0}, neg[] = {1, -2}, nan_[] = {1, NAN}, inf[] = {1, INFINITY};
    assert_int_equal(variability_cv(one, 1, &s), -1);
    assert_int_equal(variability_cv(one, 0, &s), -1);
    assert_int_equal(variability_cv(zero, 2, &s), -1);
    assert_int_equal(variability_cv(neg, 2, &s), -1);
    assert_int_equal(variability_cv(nan_, 2, &s), -1);
    assert_int_equal(variability_cv(inf, 2, &s), -1);
    assert_int_equal(s.n, 0); /* untouched */
}

/* The rates of the sources line; their count, or -1. */
static int rates_of_line(const char *line, double *out, int max)
{
    return list_after(line, "rates in TFLOP/s by rank: ", out, max);
}

/* cv from the definition, independently of variability_cv. */
static double cv_by_hand(const double *r, int n)
{
    double sum = 0, ss = 0;
    for (int i = 0; i < n; i++)
        sum += r[i];
    double mean = sum / n;
    for (int i = 0; i < n; i++)
        ss += (r[i] - mean) * (r[i] - mean);
    return sqrt(ss / (n - 1)) / mean;
}

static void source_line_gives_back_the_rates(void **state)
{
    (void)state;
    char hosts[10][16];
    for (int i = 0; i < 10; i++)
        snprintf(hosts[i], sizeof hosts[i], "node%d", i / 2); /* two ranks a host: 5 hosts */
    double rates[10];
    for (int i = 0; i < 10; i++)
        rates[i] = 600 + 1.0 / 3 * i;
    variability_record r = {"2026-11-25", "NVIDIA H100 80GB HBM3", "bf16", 4096, 4096, 4096, 21, hosts[0], 16, rates,
                            {0}};
    assert_int_equal(variability_cv(rates, 10, &r.stats), 0);
    char *line = variability_source_line(&r);
    print_message("  %s\n", line);
    double back[16];
    assert_int_equal(rates_of_line(line, back, 16), 10);
    for (int i = 0; i < 10; i++)
        assert_true(fabs(back[i] - rates[i]) <= 1e-9 * rates[i]);
    assert_non_null(strstr(line, "2026-11-25"));
    assert_non_null(strstr(line, "over 10 ranks"));
    assert_non_null(strstr(line, "NVIDIA H100 80GB HBM3"));
    assert_non_null(strstr(line, "4096 x 4096 x 4096 bf16 GEMM"));
    assert_non_null(strstr(line, "median of 21 repeats"));
    assert_non_null(strstr(line, "on 5 hosts (node0, node1, node2, node3, node4)"));
    free(line);
    /* many hosts: the first 8 and a count */
    char many[20][16];
    for (int i = 0; i < 20; i++)
        snprintf(many[i], sizeof many[i], "h%02d", i);
    double r20[20];
    for (int i = 0; i < 20; i++)
        r20[i] = 1 + i;
    variability_record m = {"2026-11-25", "X", "fp32", 8, 8, 8, 5, many[0], 16, r20, {0}};
    assert_int_equal(variability_cv(r20, 20, &m.stats), 0);
    line = variability_source_line(&m);
    assert_non_null(strstr(line, "on 20 hosts (h00, h01, h02, h03, h04, h05, h06, h07 and 12 more)"));
    free(line);
    char one[64];
    assert_int_equal(cal_hosts(many[0], 16, 20, 1, one, sizeof one), 20);
    assert_string_equal(one, "h00 and 19 more");
}

static int run(int ranks, const char *args)
{
    return dtcal_mpirun("variability", ranks, args);
}

/* The table's rows on stderr ("  rank  host  device  TFLOP/s  vs mean"): each row's rate (the
 * last but one field) by rank; the number of rows. */
static int rates_of_table(const char *err, double *out, int max)
{
    int n = 0;
    for (const char *line = err; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        int rank;
        char rest;
        if (sscanf(buf, " %d %c", &rank, &rest) != 2 || rank != n || n == max)
            continue;
        char *tok[64];
        int ntok = 0;
        for (char *t = strtok(buf, " "); t && ntok < 64; t = strtok(NULL, " "))
            tok[ntok++] = t;
        if (ntok < 5 || tok[ntok - 1][strlen(tok[ntok - 1]) - 1] != '%')
            continue;
        out[n++] = strtod(tok[ntok - 2], NULL);
    }
    return n;
}

/* The printed rates and the file's sources line agree, and give the file's cv (to the 6
 * significant digits the calibration keeps). */
static double check_cv_is_the_rates(json_t *doc, const char *stderr_text, int ranks)
{
    json_t *cv = json_object_get(doc, "compute_variability_cv");
    assert_true(json_is_number(cv));
    double x = json_number_value(cv);
    assert_true(isfinite(x) && x >= 0 && x < 1);
    double sourced[64], printed[64];
    const char *line = last_source(doc);
    print_message("  %s\n", line);
    assert_int_equal(rates_of_line(line, sourced, 64), ranks);
    assert_int_equal(rates_of_table(stderr_text, printed, 64), ranks);
    for (int r = 0; r < ranks; r++) {
        assert_true(sourced[r] > 0);
        assert_true(fabs(printed[r] - sourced[r]) <= 1e-8 * sourced[r]);
    }
    close_to(x, cv_by_hand(sourced, ranks), 5e-6 * x + 1e-9);
    return x;
}

static void two_cpu_ranks_write_the_cv_of_their_rates(void **state)
{
    (void)state;
    assert_int_equal(run(2, "--device cpu --m 128 --n 128 --k 128 --repeats 5 -o cal.json"), 0);
    char *err = read_all("stderr.txt");
    print_message("%s", err);
    json_error_t je;
    json_t *doc = json_load_file("cal.json", 0, &je);
    assert_non_null(doc);
    check_cv_is_the_rates(doc, err, 2);
    /* the simulator's keys only: provenance, the figure, its sources line, the seal */
    static const char *const keys[] = {"device", "source", "date", "host", "command", "compute_variability_cv",
                                       "sources", "calibration_crc32"};
    assert_int_equal(json_object_size(doc), sizeof keys / sizeof keys[0]);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_non_null(json_object_get(doc, keys[i]));
    assert_string_equal(json_string_value(json_object_get(doc, "source")), "measured");
    assert_non_null(strstr(json_string_value(json_object_get(doc, "command")), "variability --device cpu"));
    const char *line = last_source(doc);
    assert_non_null(strstr(line, "over 2 ranks"));
    assert_non_null(strstr(line, "128 x 128 x 128 fp32 GEMM"));
    assert_non_null(strstr(line, "median of 5 repeats"));
    char date[32];
    today(date, sizeof date);
    assert_non_null(strstr(line, date));
    simulator_reads("cal.json", NULL);
    json_decref(doc);
    free(err);
}

static void one_rank_exits_2(void **state)
{
    (void)state;
    dtcal_refuses("variability", 1, "--device cpu --m 64 --n 64 --k 64", "needs at least 2 ranks");
}

/* Exit 2, the reason said once, nothing on stdout, no -o file, the --into calibration as it was. */
static void bad_options_exit_2_and_write_nothing(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"--m 0", "--m"},          {"--n x", "--n"},          {"--k 65537", "--k"},
        {"--repeats 0", "--repeats"}, {"--precision fp64", "fp64"}, {"--precision fp32,bf16", "fp32,bf16"},
        {"--device tpu", "tpu"},   {"--bogus 1", "unknown option"}, {"--m 65536 --n 65536", NULL},
    };
    dtcal_refuses_bad_options("variability", "--device cpu --m 64 --n 64 --k 64", bad, sizeof bad / sizeof bad[0]);
}

/* --into: every key of the calibration as it was, but source (datasheet + a measurement = mixed),
 * the new compute_variability_cv and one more sources line; a second run replaces the figure. */
static void into_keeps_every_other_key(void **state)
{
    (void)state;
    char *shipped = read_all(DTSIM_SOURCE_DIR "/calibrate/data/h100-sxm5-80gb.json");
    assert_non_null(shipped);
    write_file("base.json", shipped);
    assert_int_equal(run(2, "--device cpu --m 96 --n 64 --k 128 --repeats 3 --into base.json -o merged.json"), 0);
    char *err = read_all("stderr.txt"), *base_after = read_all("base.json");
    assert_string_equal(base_after, shipped); /* --into is read, -o written */
    json_error_t je;
    json_t *after = json_load_file("merged.json", 0, &je);
    assert_non_null(after);
    into_kept_every_other_key(shipped, after, "compute_variability_cv");
    assert_non_null(strstr(last_source(after), "96 x 64 x 128 fp32 GEMM"));
    check_cv_is_the_rates(after, err, 2);
    simulator_reads("merged.json", NULL);
    free(err);
    /* again into the result: the figure replaced, not repeated; one more line */
    assert_int_equal(run(2, "--device cpu --m 64 --n 64 --k 64 --repeats 3 --into merged.json -o again.json"), 0);
    err = read_all("stderr.txt");
    json_t *again = json_load_file("again.json", 0, &je);
    assert_non_null(again);
    assert_int_equal(json_object_size(again), json_object_size(after));
    char *merged = read_all("merged.json");
    into_kept_every_other_key(merged, again, "compute_variability_cv");
    free(merged);
    check_cv_is_the_rates(again, err, 2);
    simulator_reads("again.json", NULL);
    free(err);
    free(shipped);
    free(base_after);
    json_decref(after);
    json_decref(again);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cv_closed_forms),
        cmocka_unit_test(cv_refuses_what_is_not_a_spread),
        cmocka_unit_test(source_line_gives_back_the_rates),
        cmocka_unit_test(two_cpu_ranks_write_the_cv_of_their_rates),
        cmocka_unit_test(one_rank_exits_2),
        cmocka_unit_test(bad_options_exit_2_and_write_nothing),
        cmocka_unit_test(into_keeps_every_other_key),
    };
    char dir[] = "/tmp/test_variability_XXXXXX";
    if (enter_private_dir(dir) != 0)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    leave_private_dir(dir);
    return rc;
}
