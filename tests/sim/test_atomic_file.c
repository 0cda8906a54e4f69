/* Output files are written whole or not at all (engine/atomic_file.h): a regular target is
 * replaced only by the complete new contents and no temporary is left; a failed write leaves
 * the old file as it was; a target that is not a regular file (a FIFO here, /dev/null for
 * users) is written in place and stays what it was, instead of being replaced by a file. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "atomic_file.h"

static char dir[] = "/tmp/test_atomic_file_XXXXXX";

static size_t entries(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", dir);
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    assert_int_equal(fscanf(p, "%zu", &n), 1);
    pclose(p);
    return n;
}

static void read_all(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
}

static void regular_target_is_replaced_whole(void **state)
{
    (void)state;
    char path[64], buf[64], why[256];
    snprintf(path, sizeof path, "%s/out.json", dir);
    assert_int_equal(atomic_file_write(path, "old", 3, 0, why, sizeof why), 0);
    atomic_file a;
    assert_int_equal(atomic_file_open(&a, path, why, sizeof why), 0);
    fputs("new contents", a.f);
    read_all(path, buf, sizeof buf); /* not yet committed: the old file stands */
    assert_string_equal(buf, "old");
    assert_int_equal(atomic_file_commit(&a, 1, why, sizeof why), 0);
    read_all(path, buf, sizeof buf);
    assert_string_equal(buf, "new contents");
    assert_int_equal(entries(), 1); /* no temporary left */
    /* abandoned: the old file stands, the temporary is gone */
    assert_int_equal(atomic_file_open(&a, path, why, sizeof why), 0);
    fputs("half", a.f);
    atomic_file_abort(&a);
    read_all(path, buf, sizeof buf);
    assert_string_equal(buf, "new contents");
    assert_int_equal(entries(), 1);
    unlink(path);
}

static void unwritable_target_fails_naming_it(void **state)
{
    (void)state;
    char path[96], why[256] = "";
    snprintf(path, sizeof path, "%s/no/such/folder/out.json", dir);
    assert_int_equal(atomic_file_write(path, "x", 1, 0, why, sizeof why), -1);
    assert_non_null(strstr(why, "no/such/folder"));
}

static void a_fifo_stays_a_fifo(void **state)
{
    (void)state;
    char fifo[64], got[64], why[256];
    snprintf(fifo, sizeof fifo, "%s/pipe", dir);
    snprintf(got, sizeof got, "%s/got", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    pid_t reader = fork();
    if (reader == 0) { /* the other end: copies what comes through into `got` */
        int in = open(fifo, O_RDONLY), out = open(got, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        char b[64];
        ssize_t n;
        while ((n = read(in, b, sizeof b)) > 0)
            if (write(out, b, (size_t)n) != n)
                _exit(1);
        _exit(0);
    }
    assert_int_equal(atomic_file_write(fifo, "through the pipe", 16, 1, why, sizeof why), 0);
    int status;
    waitpid(reader, &status, 0);
    struct stat st;
    assert_int_equal(stat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    char buf[64];
    read_all(got, buf, sizeof buf);
    assert_string_equal(buf, "through the pipe");
    unlink(fifo);
    unlink(got);
}

/* A symbolic link stays a link; the file it names gets the new bytes, whole. */
static void a_link_stays_a_link(void **state)
{
    (void)state;
    char real[64], link[64], why[256], buf[64];
    snprintf(real, sizeof real, "%s/real.json", dir);
    snprintf(link, sizeof link, "%s/link.json", dir);
    assert_int_equal(atomic_file_write(real, "old", 3, 0, why, sizeof why), 0);
    assert_int_equal(symlink("real.json", link), 0);
    assert_int_equal(atomic_file_write(link, "new bytes", 9, 1, why, sizeof why), 0);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    read_all(real, buf, sizeof buf);
    assert_string_equal(buf, "new bytes");
    unlink(link);
    unlink(real);
}

/* A link to a file not yet there (a link made ahead to where the results should go, or a
 * chain of them) stays a link too: the file is created where it points. */
static void a_dangling_link_stays_a_link(void **state)
{
    (void)state;
    char sub[64], real[80], link[64], link2[64], why[256], buf[64];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(real, sizeof real, "%s/later.json", sub);
    snprintf(link, sizeof link, "%s/out.json", dir);
    snprintf(link2, sizeof link2, "%s/out2.json", dir);
    assert_int_equal(symlink("sub/later.json", link), 0); /* relative to the link's folder */
    assert_int_equal(symlink("out.json", link2), 0);      /* a link to that link */
    assert_int_equal(atomic_file_write(link2, "first bytes", 11, 0, why, sizeof why), 0);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(lstat(link2, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    read_all(real, buf, sizeof buf);
    assert_string_equal(buf, "first bytes");
    unlink(link2);
    unlink(link);
    unlink(real);
    rmdir(sub);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(regular_target_is_replaced_whole),
        cmocka_unit_test(unwritable_target_fails_naming_it),
        cmocka_unit_test(a_fifo_stays_a_fifo),
        cmocka_unit_test(a_link_stays_a_link),
        cmocka_unit_test(a_dangling_link_stays_a_link),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(dir);
    return rc;
}
