/* Token files and the loader: dtok's output read back byte for byte, the header checks (each
 * rejection names the file and what is wrong), and the loader's determinism. The expected
 * header bytes are written out by hand here from data/README.md, not by data_write.
 * argv[1]: the dtok binary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "data.h"

static const char *DTOK;
static char TXT[64], TOK[64]; /* per process, so concurrent build trees do not collide */

static void write_bytes(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

static void dtok_writes_the_documented_format(void **state)
{
    const char *text = "Hello, world.\n\xff\x00 bytes";
    size_t n = 21; /* includes the NUL and the 0xff byte: every byte value is a token */
    write_bytes(TXT, text, n);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' %s %s 2>/dev/null", DTOK, TXT, TOK);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    FILE *f = fopen(TOK, "rb");
    assert_non_null(f);
    unsigned char buf[256];
    size_t got = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_int_equal(got, 24 + 2 * n);
    const unsigned char header[24] = {'D', 'T', 'O', 'K', 1, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0, 0, (unsigned char)n};
    assert_memory_equal(buf, header, 24);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(buf[24 + 2 * i], (unsigned char)text[i]);
        assert_int_equal(buf[24 + 2 * i + 1], 0);
    }

    data_loader d;
    char err[512];
    assert_int_equal(data_open(&d, TOK, 1, err, sizeof err), 0);
    assert_int_equal(d.count, n);
    assert_int_equal(d.vocab, 256);
    assert_int_equal(d.tokens[14], 0xff);
    data_close(&d);

    /* dtok: a missing input is bad input (exit 2). */
    snprintf(cmd, sizeof cmd, "'%s' /nonexistent/in.txt %s 2>/dev/null", DTOK, TOK);
    st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    remove(TXT);
    remove(TOK);
}

/* A valid file of 40 tokens, vocab 64, that each case below breaks in one place. */
static size_t good_file(unsigned char *b)
{
    const unsigned char h[24] = {'D', 'T', 'O', 'K', 1, 0, 0, 0, 2, 0, 0, 0, 64, 0, 0, 0, 40};
    memcpy(b, h, 24);
    for (int i = 0; i < 40; i++) {
        b[24 + 2 * i] = (unsigned char)(i % 64);
        b[24 + 2 * i + 1] = 0;
    }
    return 24 + 80;
}

static void expect_rejected(const unsigned char *b, size_t n, const char *why)
{
    write_bytes(TOK, b, n);
    data_loader d;
    char err[512] = "";
    assert_int_equal(data_open(&d, TOK, 1, err, sizeof err), -1);
    if (!strstr(err, TOK) || !strstr(err, why))
        fail_msg("expected '%s' naming %s, got: %s", why, TOK, err);
}

static void every_header_rule_rejects(void **state)
{
    unsigned char b[128];
    size_t n = good_file(b);
    write_bytes(TOK, b, n);
    data_loader d;
    char err[512];
    assert_int_equal(data_open(&d, TOK, 1, err, sizeof err), 0); /* the base case is valid */
    data_close(&d);

    n = good_file(b); b[3] = 'X';            expect_rejected(b, n, "magic");
    n = good_file(b); b[4] = 2;              expect_rejected(b, n, "version");
    n = good_file(b); b[8] = 4;              expect_rejected(b, n, "width");
    n = good_file(b); b[12] = 1;             expect_rejected(b, n, "vocabulary size 1");
    n = good_file(b); b[16] = 41;            expect_rejected(b, n, "truncated");  /* count > data */
    n = good_file(b);                        expect_rejected(b, n - 1, "truncated");
    n = good_file(b);                        expect_rejected(b, 10, "truncated header");
    n = good_file(b); b[24 + 2 * 7] = 64;    expect_rejected(b, n, "token 7 is 64");
    n = good_file(b); b[24 + 2 * 39 + 1] = 1; expect_rejected(b, n, "token 39 is 295");
    remove(TOK);
}

static void loader_is_deterministic_and_shifted_by_one(void **state)
{
    enum { COUNT = 1000, B = 3, T = 16 };
    uint16_t *tok = malloc(COUNT * sizeof *tok);
    for (int i = 0; i < COUNT; i++)
        tok[i] = (uint16_t)(i % 251); /* position i holds i mod 251: windows are checkable */
    char err[512];
    assert_int_equal(data_write(TOK, tok, COUNT, 256, err, sizeof err), 0);
    free(tok);

    data_loader a, b, c;
    assert_int_equal(data_open(&a, TOK, 7, err, sizeof err), 0);
    assert_int_equal(data_open(&b, TOK, 7, err, sizeof err), 0);
    assert_int_equal(data_open(&c, TOK, 8, err, sizeof err), 0);
    int ta[B * T], ga[B * T], tb[B * T], gb[B * T], tc[B * T], gc[B * T];
    int differ = 0;
    for (int step = 0; step < 5; step++) {
        data_next_batch(&a, B, T, ta, ga);
        data_next_batch(&b, B, T, tb, gb);
        data_next_batch(&c, B, T, tc, gc);
        assert_memory_equal(ta, tb, sizeof ta);
        assert_memory_equal(ga, gb, sizeof ga);
        differ |= memcmp(ta, tc, sizeof ta) != 0;
        for (int s = 0; s < B; s++)
            for (int t = 0; t < T; t++) {
                /* a contiguous window, and the target is the next token of the file */
                assert_int_equal(ga[s * T + t], (ta[s * T + t] + 1) % 251);
                if (t > 0)
                    assert_int_equal(ta[s * T + t], ga[s * T + t - 1]);
            }
    }
    assert_true(differ); /* another seed, another order */
    assert_int_equal(a.position, 5 * B);

    /* Resuming at a saved position gives the batch the uninterrupted run saw next. */
    data_loader r;
    assert_int_equal(data_open(&r, TOK, 7, err, sizeof err), 0);
    r.position = a.position;
    data_next_batch(&a, B, T, ta, ga);
    data_next_batch(&r, B, T, tb, gb);
    assert_memory_equal(ta, tb, sizeof ta);
    data_close(&a);
    data_close(&b);
    data_close(&c);
    data_close(&r);
    remove(TOK);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    DTOK = argv[1];
    snprintf(TXT, sizeof TXT, "/tmp/dtrain_test_data_%ld.txt", (long)getpid());
    snprintf(TOK, sizeof TOK, "/tmp/dtrain_test_data_%ld.tok", (long)getpid());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dtok_writes_the_documented_format),
        cmocka_unit_test(every_header_rule_rejects),
        cmocka_unit_test(loader_is_deterministic_and_shifted_by_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
