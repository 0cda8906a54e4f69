/* The progress meter of long commands (sim/progress.h) on a clock the test moves: a line only
 * once PROGRESS_INTERVAL_S has passed, never two within a second, the text users read, in
 * place on a terminal and ended by a newline; nothing when off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_at_the_interval),
        cmocka_unit_test(test_at_least_a_second_apart),
        cmocka_unit_test(test_off_and_null_print_nothing),
        cmocka_unit_test(test_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
