/* dtcal overlap: overlap_slowdown = the mean over ranks of (GEMM time beside an all-reduce) /
 * (GEMM time alone), at least 1, checked on closed forms; the sources line carries every rank's
 * two times so that anyone can recompute it; and, through mpirun, two CPU ranks write a
 * calibration the simulator reads whose overlap_slowdown is what the times in its sources give,
 * recomputed here from the definition. One rank and bad options exit 2 and write nothing (the
 * reason said once); --into keeps every other key of the calibration. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>
#include "../private_dir.h"
#include "overlap.h"
#include "rank_gemm_test.h"

/* alone {1, 2} s, beside {1.5, 2.5} s: ratios 1.5 and 1.25, mean 1.375 (the ratio of the mean
 * times would be 4/3, the median ratio over two ranks the same 1.375, so a third rank tells them
 * apart: 1.5, 1.25, 3 -> mean 1.91666..., median 1.5). */
static void slowdown_closed_forms(void **state)
{
    (void)state;
    overlap_stats s;
    const double alone2[] = {1, 2}, beside2[] = {1.5, 2.5};
    assert_int_equal(overlap_slowdown(alone2, beside2, 2, &s), 0);
    assert_int_equal(s.n, 2);
    close_to(s.mean, 1.375, 1e-15);
    close_to(s.slowdown, 1.375, 1e-15);
    const double alone3[] = {2e-3, 4e-3, 1e-4}, beside3[] = {3e-3, 5e-3, 3e-4};
    assert_int_equal(overlap_slowdown(alone3, beside3, 3, &s), 0);
    close_to(s.slowdown, (1.5 + 1.25 + 3) / 3, 1e-14);
    /* no slowdown at all, and a mean below 1 (noise): the figure is 1, the mean kept */
    const double same[] = {7e-4, 7e-4};
    assert_int_equal(overlap_slowdown(same, same, 2, &s), 0);
    assert_true(s.slowdown == 1 && s.mean == 1);
    const double faster[] = {0.5e-3, 0.9e-3}, base[] = {1e-3, 1e-3};
    assert_int_equal(overlap_slowdown(base, faster, 2, &s), 0);
    close_to(s.mean, 0.7, 1e-15);
    assert_true(s.slowdown == 1);
    /* one rank is a mean too (the command needs two, the arithmetic does not) */
    const double one_a[] = {2}, one_b[] = {5};
    assert_int_equal(overlap_slowdown(one_a, one_b, 1, &s), 0);
    close_to(s.slowdown, 2.5, 1e-15);
}

static void slowdown_refuses_what_is_not_a_time(void **state)
{
    (void)state;
    overlap_stats s = {0};
    const double ok[] = {1, 1}, zero[] = {1, 0}, neg[] = {1, -2}, nan_[] = {1, NAN}, inf[] = {1, INFINITY};
    assert_int_equal(overlap_slowdown(ok, ok, 0, &s), -1);
    const double *bad[] = {zero, neg, nan_, inf};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(overlap_slowdown(bad[i], ok, 2, &s), -1);
        assert_int_equal(overlap_slowdown(ok, bad[i], 2, &s), -1);
    }
    assert_int_equal(s.n, 0); /* untouched */
}

/* The mean slowdown from the definition, independently of overlap_slowdown. */
static double slowdown_by_hand(const double *alone, const double *beside, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += beside[i] / alone[i];
    return sum / n > 1 ? sum / n : 1;
}

/* The sources line's times; their count (the same in both lists), or -1. */
static int times_of_line(const char *line, double *alone, double *beside, int max)
{
    int a = list_after(line, "seconds by rank, alone: ", alone, max), b = list_after(line, "beside: ", beside, max);
    return a == b ? a : -1;
}

static void source_line_gives_back_the_times(void **state)
{
    (void)state;
    char hosts[4][16] = {"node0", "node0", "node1", "node1"};
    const double alone[] = {1.0 / 3 * 1e-3, 1.1e-3, 1.2e-3, 0.9e-3}, beside[] = {2.0 / 7 * 1e-3, 1.5e-3, 1.3e-3, 1e-3};
    overlap_record r = {"2026-11-25", "NVIDIA H100 80GB HBM3", "bf16", 4096, 4096, 4096, 21,
                        "NCCL on a second, non-blocking CUDA stream", 268435456, 3, hosts[0], 16, alone, beside, {0}};
    assert_int_equal(overlap_slowdown(alone, beside, 4, &r.stats), 0);
    char *line = overlap_source_line(&r);
    print_message("  %s\n", line);
    double a[8], b[8];
    assert_int_equal(times_of_line(line, a, b, 8), 4);
    for (int i = 0; i < 4; i++) {
        assert_true(fabs(a[i] - alone[i]) <= 5e-9 * alone[i]); /* 9 significant digits */
        assert_true(fabs(b[i] - beside[i]) <= 5e-9 * beside[i]);
    }
    static const char *const says[] = {"2026-11-25", "over 4 ranks", "(NVIDIA H100 80GB HBM3)",
                                       "on 2 hosts (node0, node1)", "4096 x 4096 x 4096 bf16 GEMM",
                                       "median of 21 repeats", "all-reduce of 268435456 bytes",
                                       "NCCL on a second, non-blocking CUDA stream", "3 calls started",
                                       "dtcal overlap"};
    for (size_t i = 0; i < sizeof says / sizeof says[0]; i++)
        if (!strstr(line, says[i]))
            fail_msg("the line does not say '%s'", says[i]);
    char figure[64];
    snprintf(figure, sizeof figure, "= %.6g", slowdown_by_hand(alone, beside, 4));
    assert_non_null(strstr(line, figure));
    assert_null(strstr(line, "below 1"));
    free(line);
    /* a mean below 1 is written as 1 and says so */
    r.beside_s = alone;
    r.alone_s = beside;
    assert_int_equal(overlap_slowdown(r.alone_s, r.beside_s, 4, &r.stats), 0);
    line = overlap_source_line(&r);
    assert_non_null(strstr(line, "beside / alone = 1 (the mean, "));
    free(line);
}

/* dtcal overlap under mpirun; what it said on stderr when it failed. */
static int run(int ranks, const char *args)
{
    int rc = dtcal_mpirun("overlap", ranks, args);
    char *err = rc ? read_all("stderr.txt") : NULL;
    if (err)
        print_message("  exit %d: %s", rc, err);
    free(err);
    return rc;
}

/* The file's overlap_slowdown is at least 1, and what its sources line's times give (to the 6
 * significant digits the calibration keeps); the simulator reads the same figure. */
static double check_slowdown_is_the_times(json_t *doc, const char *path, int ranks)
{
    json_t *v = json_object_get(doc, "overlap_slowdown");
    assert_true(json_is_number(v));
    double x = json_number_value(v), alone[64], beside[64];
    assert_true(isfinite(x) && x >= 1 && x <= 100);
    const char *line = last_source(doc);
    print_message("  %s\n", line);
    assert_int_equal(times_of_line(line, alone, beside, 64), ranks);
    for (int r = 0; r < ranks; r++)
        assert_true(alone[r] > 0 && beside[r] > 0);
    close_to(x, slowdown_by_hand(alone, beside, ranks), 5e-6 * x);
    calibration_config c;
    simulator_reads(path, &c);
    close_to(c.overlap_slowdown, x, 1e-12 * x);
    calibration_free(&c);
    return x;
}

static void two_cpu_ranks_write_the_slowdown_of_their_times(void **state)
{
    (void)state;
    assert_int_equal(run(2, "--device cpu --m 128 --n 128 --k 128 --bytes 1048576 --repeats 5 -o cal.json"), 0);
    char *err = read_all("stderr.txt");
    print_message("%s", err);
    json_error_t je;
    json_t *doc = json_load_file("cal.json", 0, &je);
    assert_non_null(doc);
    check_slowdown_is_the_times(doc, "cal.json", 2);
    /* the simulator's keys only: provenance, the figure, its sources line, the seal */
    static const char *const keys[] = {"device", "source", "date", "host", "command", "overlap_slowdown", "sources",
                                       "calibration_crc32"};
    assert_int_equal(json_object_size(doc), sizeof keys / sizeof keys[0]);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_non_null(json_object_get(doc, keys[i]));
    assert_string_equal(json_string_value(json_object_get(doc, "source")), "measured");
    assert_non_null(strstr(json_string_value(json_object_get(doc, "command")), "overlap --device cpu"));
    const char *line = last_source(doc);
    char date[32];
    today(date, sizeof date);
    static const char *const says[] = {"over 2 ranks", "128 x 128 x 128 fp32 GEMM", "median of 5 repeats",
                                       "all-reduce of 1048576 bytes", "MPI_Allreduce", "second thread"};
    for (size_t i = 0; i < sizeof says / sizeof says[0]; i++)
        if (!strstr(line, says[i]))
            fail_msg("the line does not say '%s'", says[i]);
    assert_non_null(strstr(line, date));
    assert_non_null(strstr(err, "overlap_slowdown "));
    json_decref(doc);
    free(err);
}

static void one_rank_exits_2(void **state)
{
    (void)state;
    dtcal_refuses("overlap", 1, "--device cpu --m 64 --n 64 --k 64 --bytes 4096", "needs at least 2 ranks");
}

/* Exit 2, the reason said once, nothing on stdout, no -o file, the --into calibration as it was. */
static void bad_options_exit_2_and_write_nothing(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"--bytes 0", "--bytes 0"},          {"--bytes 6", "4-byte"},        {"--bytes x", "--bytes x"},
        {"--bytes 8589934592", "4294967296"}, {"--backend tcp", "not mpi or nccl"},
        {"--backend nccl", "--device cuda"}, {"--device tpu", "not cpu or cuda"},
        {"--m 0", "--m"},                    {"--precision fp64", "fp64"}, {"--bogus 1", "unknown option"},
    };
    dtcal_refuses_bad_options("overlap", "--device cpu --m 64 --n 64 --k 64 --bytes 4096", bad,
                              sizeof bad / sizeof bad[0]);
}

/* --into: every key of the calibration as it was but source (datasheet + a measurement = mixed),
 * the new overlap_slowdown before the sources and one more sources line; a second run replaces
 * the figure. */
static void into_keeps_every_other_key(void **state)
{
    (void)state;
    char *shipped = read_all(DTSIM_SOURCE_DIR "/calibrate/data/h100-sxm5-80gb.json");
    assert_non_null(shipped);
    write_file("base.json", shipped);
    const char *args = "--device cpu --m 96 --n 64 --k 128 --bytes 65536 --repeats 3 --into %s -o %s";
    char cmd[512];
    snprintf(cmd, sizeof cmd, args, "base.json", "merged.json");
    assert_int_equal(run(2, cmd), 0);
    char *base_after = read_all("base.json");
    assert_string_equal(base_after, shipped); /* --into is read, -o written */
    json_error_t je;
    json_t *after = json_load_file("merged.json", 0, &je);
    assert_non_null(after);
    into_kept_every_other_key(shipped, after, "overlap_slowdown");
    /* the figure stands before the sources, as the shipped files end with theirs */
    const char *last = NULL, *key;
    json_t *v;
    json_object_foreach(after, key, v) {
        if (!strcmp(key, "sources"))
            assert_string_equal(last, "overlap_slowdown");
        last = key;
    }
    assert_non_null(strstr(last_source(after), "96 x 64 x 128 fp32 GEMM"));
    check_slowdown_is_the_times(after, "merged.json", 2);
    snprintf(cmd, sizeof cmd, args, "merged.json", "again.json");
    assert_int_equal(run(2, cmd), 0);
    json_t *again = json_load_file("again.json", 0, &je);
    assert_non_null(again);
    char *merged = read_all("merged.json");
    into_kept_every_other_key(merged, again, "overlap_slowdown");
    check_slowdown_is_the_times(again, "again.json", 2);
    free(merged);
    free(shipped);
    free(base_after);
    json_decref(after);
    json_decref(again);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(slowdown_closed_forms),
        cmocka_unit_test(slowdown_refuses_what_is_not_a_time),
        cmocka_unit_test(source_line_gives_back_the_times),
        cmocka_unit_test(two_cpu_ranks_write_the_slowdown_of_their_times),
        cmocka_unit_test(one_rank_exits_2),
        cmocka_unit_test(bad_options_exit_2_and_write_nothing),
        cmocka_unit_test(into_keeps_every_other_key),
    };
    char dir[] = "/tmp/test_overlap_XXXXXX";
    if (enter_private_dir(dir) != 0)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    leave_private_dir(dir);
    return rc;
}
