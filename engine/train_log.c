/* The --log-json stream; see train_log.h. */
#include <errno.h>
#include <math.h>
#include <string.h>
#include "train_log.h"

int train_log_open(train_log *l, const char *path)
{
    memset(l, 0, sizeof *l);
    l->path = path;
    if (!path)
        return 0;
    l->f = strcmp(path, "-") ? fopen(path, "w") : stdout;
    if (!l->f) {
        fprintf(stderr, "dtrain: --log-json %s: cannot open for writing: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Reports the failure of errno e once and stops the log. */
static void fail(train_log *l, int e, const char *then)
{
    fprintf(stderr, "dtrain: --log-json %s: cannot write: %s%s\n", l->path, strerror(e), then);
    if (l->f != stdout)
        fclose(l->f);
    l->f = NULL;
    l->failed = 1;
}

json_t *train_log_number(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

void train_log_line(train_log *l, json_t *obj)
{
    if (l->f && obj) {
        /* errno is taken right after the call that failed; ferror without one (a write that
         * failed inside an earlier call) has lost its errno: say I/O error */
        errno = 0;
        if (json_dumpf(obj, l->f, JSON_COMPACT | JSON_REAL_PRECISION(9)) != 0 || fputc('\n', l->f) == EOF ||
            fflush(l->f) != 0 || ferror(l->f))
            fail(l, errno ? errno : EIO, " (the log stops; training goes on)");
    }
    json_decref(obj);
}

int train_log_close(train_log *l)
{
    if (l->f) {
        errno = 0;
        int bad = fflush(l->f) != 0 || ferror(l->f);
        int e = errno;
        if (l->f != stdout && fclose(l->f) != 0 && !bad) {
            bad = 1;
            e = errno;
        }
        l->f = NULL;
        if (bad) {
            fprintf(stderr, "dtrain: --log-json %s: cannot write: %s\n", l->path, strerror(e ? e : EIO));
            l->failed = 1;
        }
    }
    return l->failed ? -1 : 0;
}
