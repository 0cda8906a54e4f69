/* The progress meter of long commands (sim/progress.h) on a clock the test moves: a line only
 * once PROGRESS_INTERVAL_S has passed, never two within a second, the text users read, in
 * place on a terminal and ended by a newline; nothing when off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "progress.h"

static double now_s; /* the clock the meters below read */

static double test_clock(void)
{
    return now_s;
}

/* A meter of `mode` on the test's clock, writing into a temporary file. */
static void start(progress_meter *p, progress_mode mode, FILE *out)
{
    progress_start(p, "dtsim async", "step", mode);
    p->clock = test_clock;
    p->out = out;
    p->in_place = 0;
    p->start_s = p->last_s = now_s = 100;
}

/* What was written to f, NUL-terminated, into buf. */
static const char *text_of(FILE *f, char *buf, size_t size)
{
    fflush(f);
    rewind(f);
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = 0;
    return buf;
}

static void test_lines_at_the_interval(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    progress_meter p;
    start(&p, PROGRESS_ON, f);
    now_s = 100 + PROGRESS_INTERVAL_S / 2; /* too soon */
    progress_note(&p, 10, 1000);
    now_s = 141; /* 41 s in, 12% done: 300 s to go */
    progress_note(&p, 120, 1000);
    now_s = 141.9; /* under a second after the last line: nothing */
    progress_note(&p, 121, 1000);
    char buf[512];
    assert_string_equal(text_of(f, buf, sizeof buf),
                        "dtsim async: step 120 of 1000 (12%), 41 s elapsed, about 5 min left\n");
    now_s = 141 + PROGRESS_INTERVAL_S;
    progress_note(&p, 999, 1000); /* 99.9%: not yet 100 */
    assert_non_null(strstr(text_of(f, buf, sizeof buf), "step 999 of 1000 (99%)"));
    fclose(f);
}

static void test_at_least_a_second_apart(void **state)
{
    (void)state;
    assert_true(PROGRESS_INTERVAL_S >= 1);
    FILE *f = tmpfile();
    progress_meter p;
    start(&p, PROGRESS_ON, f);
    int lines = 0;
    for (int i = 0; i < 1000; i++) { /* 100 s of notes every 0.1 s */
        now_s += 0.1;
        progress_note(&p, i, 1000);
    }
    char buf[8192];
    for (const char *c = text_of(f, buf, sizeof buf); *c; c++)
        lines += *c == '\n';
    assert_true(lines >= 1 && lines <= 100 / PROGRESS_INTERVAL_S);
    fclose(f);
}

static void test_off_and_null_print_nothing(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    progress_meter p;
    start(&p, PROGRESS_OFF, f);
    now_s += 60;
    progress_note(&p, 1, 2);
    progress_note(NULL, 1, 2);
    progress_end(&p);
    progress_end(NULL);
    char buf[64];
    assert_string_equal(text_of(f, buf, sizeof buf), "");
    assert_int_equal(progress_mode_of(1, 1), PROGRESS_OFF); /* --quiet wins */
    assert_int_equal(progress_mode_of(1, 0), PROGRESS_ON);
    assert_int_equal(progress_mode_of(0, 0), PROGRESS_AUTO);
    fclose(f);
}

/* On a terminal the line is rewritten in place, and progress_end gives it its newline. */
static void test_in_place(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    progress_meter p;
    start(&p, PROGRESS_ON, f);
    p.in_place = 1;
    now_s += 3600 * 2.5; /* 2.5 h, half done */
    progress_note(&p, 5, 10);
    progress_end(&p);
    progress_end(&p);
    char buf[256];
    assert_string_equal(text_of(f, buf, sizeof buf),
                        "\rdtsim async: step 5 of 10 (50%), 2.5 h elapsed, about 2.5 h left\033[K\n");
    fclose(f);
}

/* $DTSIM_PROGRESS_INTERVAL_S: unset, the default; a number of seconds in range, that; anything
 * else refused (-1). A meter started under a valid value prints at that interval. */
static void test_interval_from_the_environment(void **state)
{
    (void)state;
    double v = -1;
    unsetenv(PROGRESS_INTERVAL_ENV);
    assert_int_equal(progress_interval_env(&v), 0);
    assert_true(v == PROGRESS_INTERVAL_S);
    const char *good[][2] = {{"0.5", "0.5"}, {"0.01", "0.01"}, {"3600", "3600"}, {"1e1", "10"}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        setenv(PROGRESS_INTERVAL_ENV, good[i][0], 1);
        assert_int_equal(progress_interval_env(&v), 0);
        assert_true(v == strtod(good[i][1], NULL));
    }
    const char *bad[] = {"", "abc", "0", "-1", "0.001", "3601", "1e9", "nan", "inf", "2s", " "};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv(PROGRESS_INTERVAL_ENV, bad[i], 1);
        if (progress_interval_env(&v) != -1)
            fail_msg("'%s' was taken as %g seconds", bad[i], v);
    }
    setenv(PROGRESS_INTERVAL_ENV, "0.5", 1);
    FILE *f = tmpfile();
    progress_meter p;
    start(&p, PROGRESS_ON, f);
    now_s = 100.4; /* under 0.5 s: nothing */
    progress_note(&p, 1, 10);
    now_s = 100.6;
    progress_note(&p, 2, 10);
    char buf[256];
    assert_non_null(strstr(text_of(f, buf, sizeof buf), "step 2 of 10 (20%)"));
    assert_null(strstr(buf, "step 1 of"));
    fclose(f);
    unsetenv(PROGRESS_INTERVAL_ENV);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_at_the_interval),
        cmocka_unit_test(test_at_least_a_second_apart),
        cmocka_unit_test(test_off_and_null_print_nothing),
        cmocka_unit_test(test_in_place),
        cmocka_unit_test(test_interval_from_the_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
