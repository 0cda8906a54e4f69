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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fits_come_back),
        cmocka_unit_test(bad_logs_are_refused_with_the_line),
        cmocka_unit_test(published_h100_logs),
        cmocka_unit_test(tagged_lines_read_as_plain),
    };
    char dir[] = "/tmp/test_nccl_import_XXXXXX";
    if (enter_private_dir(dir) != 0)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    leave_private_dir(dir);
    return rc;
}
