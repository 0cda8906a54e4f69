/* Failure traces for `dtsim faults`: read, validate, resolve the path. See faults.h. */
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "faults.h"

void faults_trace_free(faults_trace *t)
{
    free(t->events);
    t->events = NULL;
    t->count = 0;
}

void faults_trace_path(const scenario_config *s, char *out, size_t size)
{
    const char *p = s->faults.failure_trace;
    snprintf(out, size, "%s", p);
    if (!p[0] || p[0] == '/' || !s->path[0])
        return;
    /* Relative paths: the scenario's folder first, like the scenario's platform. */
    const char *slash = strrchr(s->path, '/');
    if (!slash)
        return;
    char cand[CFG_PATH_MAX + CFG_PATH_MAX];
    snprintf(cand, sizeof cand, "%.*s/%s", (int)(slash - s->path), s->path, p);
    if (access(cand, R_OK) == 0)
        snprintf(out, size, "%s", cand);
}

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static int fail(config_error *err, const char *path, int line, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(err->msg, sizeof err->msg, "faults.failure_trace: %s:%d: %s", path, line, why);
    return -1;
}

int faults_trace_load(const char *path, int gpus, int nodes, faults_trace *out, config_error *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err->msg, sizeof err->msg, "faults.failure_trace: cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    int cap = 0, line_no = 0, rc = 0;
    char line[1024];
    double prev = 0;
    while (fgets(line, sizeof line, f)) {
        line_no++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = fail(err, path, line_no, "line longer than 1023 characters");
            break;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *tok[4] = {0};
        int n = 0;
        for (char *t = strtok(line, " \t\r\n,"); t; t = strtok(NULL, " \t\r\n,"))
            if (n < 4)
                tok[n++] = t;
            else
                n = 5;
        if (n == 0)
            continue;
        if (n != 3) {
            rc = fail(err, path, line_no, "expected 'time_hours kind index' (3 fields)");
            break;
        }
        char *end;
        errno = 0;
        double h = strtod(tok[0], &end);
        if (*end || errno || !isfinite(h) || h < 0) {
            rc = fail(err, path, line_no, "time_hours '%s' is not a finite number >= 0", tok[0]);
            break;
        }
        if (h < prev) {
            rc = fail(err, path, line_no, "time_hours %s is before the previous failure's %g (keep times in order)",
                      tok[0], prev);
            break;
        }
        int node;
        if (!strcmp(tok[1], "gpu"))
            node = 0;
        else if (!strcmp(tok[1], "node"))
            node = 1;
        else {
            rc = fail(err, path, line_no, "kind '%s' is neither gpu nor node", tok[1]);
            break;
        }
        errno = 0;
        long idx = strtol(tok[2], &end, 10);
        int limit = node ? nodes : gpus;
        if (*end || errno || idx < 0 || idx >= limit) {
            rc = fail(err, path, line_no, "index '%s' is not a %s number in 0..%d", tok[2], node ? "node" : "GPU",
                      limit - 1);
            break;
        }
        if (out->count == cap) {
            cap = cap ? 2 * cap : 64;
            faults_event *e = realloc(out->events, (size_t)cap * sizeof *e);
            if (!e) {
                rc = fail(err, path, line_no, "out of memory");
                break;
            }
            out->events = e;
        }
        out->events[out->count++] = (faults_event){h * 3600, node, (int)idx};
        prev = h;
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err->msg, sizeof err->msg, "faults.failure_trace: reading '%s' failed", path);
        rc = -1;
    }
    fclose(f);
    if (rc != 0)
        faults_trace_free(out);
    return rc;
}
