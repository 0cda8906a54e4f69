/* See atomic_file.h. */
#define _DEFAULT_SOURCE /* realpath */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "atomic_file.h"

/* Where a chain of symbolic links ends, whether or not a file is there yet (realpath needs one):
 * each link's text, relative to the folder of the link. 0 with out, or -1 (not a link, a loop,
 * too long). */
#define LINK_HOPS_MAX 40 /* as the kernel's own limit on following links (ELOOP) */
static int link_target(const char *path, char *out, size_t n)
{
    char cur[PATH_MAX], text[PATH_MAX];
    struct stat st;
    if (strlen(path) >= sizeof cur || lstat(path, &st) != 0 || !S_ISLNK(st.st_mode))
        return -1;
    snprintf(cur, sizeof cur, "%s", path);
    for (int hop = 0; hop < LINK_HOPS_MAX; hop++) {
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) { /* the end: absent, or not a link */
            if (strlen(cur) >= n)
                return -1;
            snprintf(out, n, "%s", cur);
            return 0;
        }
        ssize_t len = readlink(cur, text, sizeof text - 1);
        if (len < 0)
            return -1;
        text[len] = 0;
        if (text[0] == '/') {
            snprintf(cur, sizeof cur, "%s", text);
        } else {
            char *slash = strrchr(cur, '/');
            size_t keep = slash ? (size_t)(slash - cur) + 1 : 0;
            if (keep + (size_t)len >= sizeof cur)
                return -1;
            memcpy(cur + keep, text, (size_t)len + 1);
        }
    }
    return -1;
}

int atomic_file_open(atomic_file *a, const char *path, char *why, size_t len)
{
    memset(a, 0, sizeof *a);
    if (strlen(path) >= sizeof a->path) {
        snprintf(why, len, "%.200s...: path too long", path);
        return -1;
    }
    snprintf(a->path, sizeof a->path, "%s", path);
    /* A symbolic link stays a link: the file it names is the one replaced whole (renaming over
     * the link would put a regular file in its place), or made, when the link points where no
     * file is yet. */
    struct stat st;
    char target[PATH_MAX];
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) &&
        ((realpath(path, target) && strlen(target) < sizeof a->path) || link_target(path, target, sizeof target) == 0))
        snprintf(a->path, sizeof a->path, "%s", target);
    path = a->path;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) { /* a device or a pipe: in place */
        a->f = fopen(path, "w");
    } else {
        snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid());
        a->f = fopen(a->tmp, "w");
    }
    if (!a->f) {
        int err = errno; /* kept for the caller (atomic_file_check) past snprintf */
        snprintf(why, len, "cannot write %s: %s", a->tmp[0] ? a->tmp : path, strerror(err));
        errno = err;
        a->tmp[0] = 0;
        return -1;
    }
    return 0;
}

int atomic_file_commit(atomic_file *a, int durable, char *why, size_t len)
{
    /* The first failing call's errno, taken at once: a later call (or an earlier, unrelated one)
     * would leave another errno behind, and the reason would name the wrong failure. */
    int err = 0;
    if (fflush(a->f) != 0)
        err = errno;
    else if (ferror(a->f))
        err = EIO; /* an earlier write failed unchecked: its errno is gone */
    if (!err && durable && a->tmp[0] && fsync(fileno(a->f)) != 0)
        err = errno;
    if (fclose(a->f) != 0 && !err) /* some file systems report a full disk only here */
        err = errno;
    a->f = NULL;
    if (!err && a->tmp[0] && rename(a->tmp, a->path) != 0)
        err = errno;
    if (err) {
        snprintf(why, len, "cannot write %s: %s", a->path, strerror(err));
        if (a->tmp[0])
            unlink(a->tmp);
    }
    a->tmp[0] = 0;
    return err ? -1 : 0;
}

void atomic_file_abort(atomic_file *a)
{
    if (a->f)
        fclose(a->f);
    a->f = NULL;
    if (a->tmp[0])
        unlink(a->tmp);
    a->tmp[0] = 0;
}

int atomic_file_check(const char *path, char *why, size_t len)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(why, len, "cannot write %s: it is a folder", path);
        return -1;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return 0;
    atomic_file a;
    char inner[4400];
    if (atomic_file_open(&a, path, inner, sizeof inner) != 0) {
        int err = errno;
        snprintf(why, len, "cannot write %s: %s", path, strerror(err));
        errno = err; /* for a caller that words its own message */
        return -1;
    }
    atomic_file_abort(&a);
    return 0;
}

int atomic_file_write(const char *path, const void *data, size_t n, int durable, char *why, size_t len)
{
    atomic_file a;
    if (atomic_file_open(&a, path, why, len) != 0)
        return -1;
    if (n > 0 && fwrite(data, 1, n, a.f) != n) {
        snprintf(why, len, "cannot write %s: %s", path, strerror(errno));
        atomic_file_abort(&a);
        return -1;
    }
    return atomic_file_commit(&a, durable, why, len);
}
