/* dtcal import-nccl-tests: logs written here from a known alpha-beta model (time = alpha +
 * factor x size / busbw), in both nccl-tests layouts (with and without the root column), come
 * back with that alpha and busbw; one host means NVLink, several the network; a truncated or
 * malformed log is refused with its line number; published 8 x H100 logs give back their own
 * bus bandwidth. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <stdlib.h>
#include <cmocka.h>
#include "../private_dir.h"
#include "nccl_import.h"

static void write_log(const char *path, int hosts, int with_root, double alpha_us, double busbw_gbs, int truncate)
{
    FILE *f = fopen(path, "w");
    fprintf(f, "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20\n#\n");
    fprintf(f, "# Using devices\n");
    for (int r = 0; r < 8 * hosts; r++)
        fprintf(f, "#  Rank %2d Group  0 Pid %6d on     node%d device  %d [0x%02x] NVIDIA H100 80GB HBM3\n", r, 1000 + r,
                r / 8, r % 8, r);
    fprintf(f, "#\n#                                                    out-of-place                       in-place\n");
    fprintf(f, "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw "
               "  busbw #wrong\n");
    int n = 8 * hosts;
    double factor = 2.0 * (n - 1) / n;
    for (double size = 8; size <= 8589934592.0; size *= 2) {
        double t = alpha_us + factor * size / (busbw_gbs * 1e3); /* us: bytes / (GB/s * 1e3) */
        double algbw = size / t / 1e3, busbw = algbw * factor;
        if (with_root)
            fprintf(f, "%12.0f %12.0f     float     sum      -1 %8.2f %7.2f %7.2f      0 %8.2f %7.2f %7.2f      0\n",
                    size, size / 4, t, algbw, busbw, t, algbw, busbw);
        else
            fprintf(f, "%12.0f %12.0f     float     sum %8.2f %7.2f %7.2f      0 %8.2f %7.2f %7.2f      0\n", size,
                    size / 4, t, algbw, busbw, t, algbw, busbw);
        if (truncate && size > 1e6) {
            fprintf(f, "  16777216       4194304     float\n");
            break;
        }
    }
    fprintf(f, "# Out of bounds values : 0 OK\n");
    fclose(f);
}

static void fits_come_back(void **state)
{
    const char *path = "dtcal_all_reduce_perf.log";
    for (int hosts = 1; hosts <= 4; hosts += 3)
        for (int root = 0; root < 2; root++) {
            write_log(path, hosts, root, 12.0, 300.0, 0);
            nccl_fit fit;
            char err[512];
            if (nccl_import_file(path, NULL, &fit, err, sizeof err) != 0)
                fail_msg("%s", err);
            assert_string_equal(fit.collective, "all_reduce");
            assert_int_equal(fit.ranks, 8 * hosts);
            assert_int_equal(fit.hosts, hosts);
            /* The latency floor: the smallest sizes' time is alpha plus a few ns. */
            assert_true(fabs(fit.alpha_us - 12.0) < 0.02 * 12.0);
            /* The plateau's busbw: within 2% of the model's (printing rounds to 0.01 GB/s). */
            print_message("hosts %d root %d: alpha %.3f us busbw %.2f GB/s\n", hosts, root, fit.alpha_us, fit.busbw_gbs);
            assert_true(fabs(fit.busbw_gbs - 300.0) < 0.02 * 300.0);
            assert_true(fit.points > 3 && fit.size[0] > 0 && fit.time_us[0] > 0);
            nccl_fit_free(&fit);
        }
}

static void bad_logs_are_refused_with_the_line(void **state)
{
    const char *path = "dtcal_all_reduce_perf.log";
    nccl_fit fit;
    char err[512];
    write_log(path, 1, 1, 12.0, 300.0, 1);
    assert_int_not_equal(nccl_import_file(path, NULL, &fit, err, sizeof err), 0);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "fields"));
    FILE *f = fopen("dtcal_unknown.log", "w");
    fprintf(f, "# out-of-place\n  8  2  float  sum  -1  10.0  0.00  0.00  0  10.0  0.00  0.00  0\n");
    fclose(f);
    assert_int_not_equal(nccl_import_file("dtcal_unknown.log", NULL, &fit, err, sizeof err), 0);
    assert_non_null(strstr(err, "which collective"));
    f = fopen("dtcal_x_all_gather.log", "w");
    fprintf(f, "# out-of-place\n  8  2  float  none  -1  abc  0.00  0.00  0  10.0  0.00  0.00  0\n");
    fclose(f);
    assert_int_not_equal(nccl_import_file("dtcal_x_all_gather.log", NULL, &fit, err, sizeof err), 0);
    assert_non_null(strstr(err, ":2:"));
    remove("dtcal_unknown.log");
    remove("dtcal_x_all_gather.log");
    remove(path);
}

/* Published single-node 8 x H100 logs (data/README.md): the fitted bus bandwidth is within 2% of
 * the largest message's out-of-place busbw as the log prints it; the latency floor is the
 * smallest messages' time. One log was collected with mpirun --tag-output and lists no ranks. */
static void published_h100_logs(void **state)
{
    static const struct {
        const char *file;
        int ranks, hosts;
        double busbw_16g, first_time_us;
    } logs[] = {{"dgxc-h100x8-all_reduce_perf.log", 8, 1, 479.90, 13.67},
                {"aws-p5-h100x8-all_reduce_perf.log", 0, 0, 483.05, 12.90}};
    for (size_t i = 0; i < sizeof logs / sizeof logs[0]; i++) {
        char path[4096], err[512];
        snprintf(path, sizeof path, "%s/tests/calibrate/data/%s", DTSIM_SOURCE_DIR, logs[i].file);
        nccl_fit fit;
        if (nccl_import_file(path, NULL, &fit, err, sizeof err) != 0)
            fail_msg("%s", err);
        print_message("%s: busbw %.2f GB/s (log at 16 GiB: %.2f), alpha %.2f us\n", logs[i].file, fit.busbw_gbs,
                      logs[i].busbw_16g, fit.alpha_us);
        assert_string_equal(fit.collective, "all_reduce");
        assert_int_equal(fit.ranks, logs[i].ranks);
        assert_int_equal(fit.hosts, logs[i].hosts);
        assert_int_equal(fit.points, 32); /* 8 B to 16 GiB */
        assert_true(fit.max_bytes == 17179869184.0);
        assert_true(fabs(fit.busbw_gbs - logs[i].busbw_16g) < 0.02 * logs[i].busbw_16g);
        assert_true(fabs(fit.alpha_us - logs[i].first_time_us) < 0.15 * logs[i].first_time_us);
        /* the points as the log prints them: the first (8 B) and the last out-of-place time */
        assert_true(fit.size[0] == 8 && fit.size[fit.points - 1] == 17179869184.0);
        assert_true(fabs(fit.time_us[0] - logs[i].first_time_us) < 1e-9);
        nccl_fit_free(&fit);
    }
}

/* mpirun --tag-output's "[job,rank]<stdout>:" prefix is read away: a tagged copy of a log fits
 * exactly as the plain one. */
static void tagged_lines_read_as_plain(void **state)
{
    write_log("dtcal_all_reduce_plain.log", 2, 1, 12.0, 300.0, 0);
    FILE *in = fopen("dtcal_all_reduce_plain.log", "r"), *out = fopen("dtcal_all_reduce_tagged.log", "w");
    char line[4096];
    while (fgets(line, sizeof line, in))
        fprintf(out, "[1,0]<stdout>:%s", line);
    fclose(in);
    fclose(out);
    nccl_fit plain, tagged;
    char err[512];
    assert_int_equal(nccl_import_file("dtcal_all_reduce_plain.log", NULL, &plain, err, sizeof err), 0);
    if (nccl_import_file("dtcal_all_reduce_tagged.log", NULL, &tagged, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(tagged.ranks, 16);
    assert_int_equal(tagged.hosts, 2);
    assert_int_equal(tagged.points, plain.points);
    assert_true(tagged.busbw_gbs == plain.busbw_gbs && tagged.alpha_us == plain.alpha_us);
    nccl_fit_free(&plain);
    nccl_fit_free(&tagged);
    remove("dtcal_all_reduce_plain.log");
    remove("dtcal_all_reduce_tagged.log");
}

/* The log's lines (at most 128, each under 512 characters), for the cases below to rearrange. */
typedef struct {
    char line[128][512];
    int n, first_result; /* first_result: the index of the first line that is not a comment */
} log_lines;

static void read_lines(const char *path, log_lines *l)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    l->n = 0;
    l->first_result = -1;
    while (l->n < 128 && fgets(l->line[l->n], sizeof l->line[0], f)) {
        if (l->first_result < 0 && l->line[l->n][0] != '#')
            l->first_result = l->n;
        l->n++;
    }
    assert_true(feof(f));
    fclose(f);
}

static void write_lines(const char *path, const log_lines *l)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < l->n; i++)
        fputs(l->line[i], f);
    fclose(f);
}

/* Line `i` with its whitespace-separated field `field` (from 0) replaced by `value`. */
static void set_field(log_lines *l, int i, int field, const char *value)
{
    char out[512] = "";
    const char *s = l->line[i];
    for (int k = 0;; k++) {
        s += strspn(s, " \t\n");
        size_t len = strcspn(s, " \t\n");
        if (!len)
            break;
        size_t used = strlen(out);
        snprintf(out + used, sizeof out - used, "  %.*s", k == field ? (int)strlen(value) : (int)len,
                 k == field ? value : s);
        s += len;
    }
    if ((size_t)snprintf(l->line[i], sizeof l->line[0], "%s\n", out) >= sizeof l->line[0])
        fail_msg("test line %d too long", i);
}

/* nccl_import_file refuses `path`, its message naming the file at `lineno` (0: no line) and
 * holding `what`. */
static void refused(const char *path, int lineno, const char *what)
{
    nccl_fit fit;
    char err[512] = "", at[600];
    if (nccl_import_file(path, NULL, &fit, err, sizeof err) == 0) {
        nccl_fit_free(&fit);
        fail_msg("%s was read (alpha %g us, busbw %g GB/s); expected a refusal with '%s'", path, fit.alpha_us,
                 fit.busbw_gbs, what);
    }
    print_message("  %s\n", err);
    if (lineno)
        snprintf(at, sizeof at, "%s:%d: ", path, lineno);
    else
        snprintf(at, sizeof at, "%s: ", path);
    assert_non_null(strstr(err, at));
    assert_non_null(strstr(err, what));
}

/* A log whose sizes do not ascend (its result lines reversed, as `sort -rn` leaves them) would
 * read its latency floor off the largest sizes: refused, naming the line and the one before. */
static void descending_sizes_are_refused(void **state)
{
    const char *path = "dtcal_all_reduce_desc.log";
    write_log(path, 1, 1, 12.0, 300.0, 0);
    log_lines l;
    read_lines(path, &l);
    int a = l.first_result, b = l.n - 2; /* the last line is the "# Out of bounds" footer */
    for (; a < b; a++, b--) {
        char tmp[512];
        memcpy(tmp, l.line[a], sizeof tmp);
        memcpy(l.line[a], l.line[b], sizeof tmp);
        memcpy(l.line[b], tmp, sizeof tmp);
    }
    write_lines(path, &l);
    char what[128];
    snprintf(what, sizeof what, "after 8589934592 at line %d", l.first_result + 1);
    refused(path, l.first_result + 2, what);
    remove(path);
}

/* A size given twice is a second sweep (two runs' lines in one file, or -o all sweeping every op):
 * refused with both lines. Two whole logs one after the other: refused at the second table. */
static void repeated_sizes_are_refused_with_both_lines(void **state)
{
    const char *path = "dtcal_all_reduce_twice.log";
    write_log(path, 1, 1, 12.0, 300.0, 0);
    log_lines l;
    read_lines(path, &l);
    int end = l.n - 1; /* the footer's place: the first three sizes again there */
    for (int i = 0; i < 3; i++)
        memcpy(l.line[end + i], l.line[l.first_result + i], sizeof l.line[0]);
    l.n = end + 3;
    write_lines(path, &l);
    char what[128];
    snprintf(what, sizeof what, "size 8 again (first at line %d)", l.first_result + 1);
    refused(path, end + 1, what);

    static log_lines two; /* twice the lines of one log */
    write_log(path, 1, 1, 12.0, 300.0, 0);
    read_lines(path, &l);
    two = l;
    for (int i = 0; i < l.n; i++)
        memcpy(two.line[l.n + i], l.line[i], sizeof l.line[0]);
    two.n = 2 * l.n;
    write_lines(path, &two);
    snprintf(what, sizeof what, "a second results table (the first at line %d)", l.first_result - 1);
    refused(path, l.n + l.first_result - 1, what);
    remove(path);
}

/* strtod reads "nan", "inf" and "-479.90": none is a size, time or bus bandwidth nccl-tests
 * prints, and each would reach the fit unseen (a NaN busbw dropped the collective from the
 * calibration with exit 0). Each is refused, naming the line and the field. */
static void non_finite_fields_are_refused(void **state)
{
    static const struct {
        int field; /* with the root column: 0 size, 5 time, 7 busbw */
        const char *value, *what;
    } bad[] = {{7, "nan", "busbw 'nan'"},  {7, "-479.90", "busbw '-479.90'"}, {7, "inf", "busbw 'inf'"},
               {5, "nan", "time 'nan'"},   {5, "inf", "time 'inf'"},         {5, "-inf", "time '-inf'"},
               {0, "nan", "size 'nan'"},   {0, "inf", "size 'inf'"},         {0, "1e400", "size '1e400'"},
               {0, "-8", "size '-8'"},     {0, "8.5", "size '8.5'"}};
    const char *path = "dtcal_all_reduce_bad.log";
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        write_log(path, 1, 1, 12.0, 300.0, 0);
        log_lines l;
        read_lines(path, &l);
        int at = l.n - 2; /* the largest size: its busbw counts in the plateau */
        set_field(&l, at, bad[k].field, bad[k].value);
        write_lines(path, &l);
        refused(path, at + 1, bad[k].what);
    }
    remove(path);
}

/* A fit with no bandwidth to price: every busbw 0.00 (a sweep that stops at small sizes), or
 * values whose sum overflows to infinity. Refused, not written as 0 or dropped. */
static void fit_without_a_bandwidth_is_refused(void **state)
{
    const char *path = "dtcal_all_reduce_nobw.log";
    for (int huge = 0; huge < 2; huge++) {
        write_log(path, 1, 1, 12.0, 300.0, 0);
        log_lines l;
        read_lines(path, &l);
        for (int i = l.first_result; i < l.n - 1; i++)
            set_field(&l, i, 7, huge ? "1e308" : "0.00");
        write_lines(path, &l);
        refused(path, 0, huge ? "sums past the largest number" : "is 0 GB/s");
    }
    remove(path);
}

/* all_gather from -b 8 on 8 ranks prints size 0 for the sizes under an element per rank: NCCL
 * returns from those calls at once, so their time (0.17 us here) is no latency. The fit is the
 * one of the same log without them. */
static void zero_byte_rows_are_not_the_latency(void **state)
{
    const char *path = "dtcal_all_reduce_zero.log";
    write_log(path, 1, 1, 12.0, 300.0, 0);
    nccl_fit plain, zeros;
    char err[512];
    assert_int_equal(nccl_import_file(path, NULL, &plain, err, sizeof err), 0);
    log_lines l;
    read_lines(path, &l);
    for (int i = l.n - 1; i >= l.first_result; i--) /* four rows of size 0 before the first */
        memcpy(l.line[i + 4], l.line[i], sizeof l.line[0]);
    for (int i = 0; i < 4; i++)
        snprintf(l.line[l.first_result + i], sizeof l.line[0],
                 "           0             0     float     sum      -1     0.17    0.00    0.00      0     0.17    "
                 "0.00    0.00      0\n");
    l.n += 4;
    write_lines(path, &l);
    if (nccl_import_file(path, NULL, &zeros, err, sizeof err) != 0)
        fail_msg("%s", err);
    print_message("alpha %.3f us (without the zero rows %.3f us)\n", zeros.alpha_us, plain.alpha_us);
    assert_true(zeros.alpha_us == plain.alpha_us && zeros.busbw_gbs == plain.busbw_gbs);
    assert_int_equal(zeros.points, plain.points);
    assert_true(zeros.size[0] == 8);
    nccl_fit_free(&plain);
    nccl_fit_free(&zeros);
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fits_come_back),
        cmocka_unit_test(bad_logs_are_refused_with_the_line),
        cmocka_unit_test(published_h100_logs),
        cmocka_unit_test(tagged_lines_read_as_plain),
        cmocka_unit_test(descending_sizes_are_refused),
        cmocka_unit_test(repeated_sizes_are_refused_with_both_lines),
        cmocka_unit_test(non_finite_fields_are_refused),
        cmocka_unit_test(fit_without_a_bandwidth_is_refused),
        cmocka_unit_test(zero_byte_rows_are_not_the_latency),
    };
    char dir[] = "/tmp/test_nccl_import_XXXXXX";
    if (enter_private_dir(dir) != 0)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    leave_private_dir(dir);
    return rc;
}
