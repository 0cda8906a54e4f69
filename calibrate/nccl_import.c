/* nccl-tests log import; see nccl_import.h. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nccl_import.h"

static const char *const kinds[][2] = {{"all_reduce", "all_reduce"},     {"all_gather", "all_gather"},
                                       {"reduce_scatter", "reduce_scatter"}, {"alltoall", "all_to_all"},
                                       {"sendrecv", "send_recv"}};

static const char *kind_from(const char *text)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strstr(text, kinds[i][0]))
            return kinds[i][1];
    return NULL;
}

const char *nccl_kind_name(const char *name)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(name, kinds[i][0]) || !strcmp(name, kinds[i][1]))
            return kinds[i][1];
    return NULL;
}

/* Open MPI's mpirun --tag-output starts every line with "[job,rank]<stdout>:" (or <stderr>);
 * logs collected that way read as the plain output once it is gone. */
static void untag(char *line)
{
    if (line[0] != '[')
        return;
    char *close = strchr(line, ']');
    if (!close || (strncmp(close + 1, "<stdout>:", 9) && strncmp(close + 1, "<stderr>:", 9)))
        return;
    memmove(line, close + 10, strlen(close + 10) + 1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One result line's three fields, refused with the field named: nccl-tests prints a size in whole
 * bytes ("%12li"), a time and a bus bandwidth as plain decimals; strtod also takes "nan", "inf"
 * and a minus sign, which no run prints and which would reach the fit unseen. No upper bound on
 * busbw: NVLS reduces inside the switch, so a bus bandwidth past the links' own is a real
 * measurement (docs/model.md, "NVLS measured"); --platform bounds a ring's (collectives_import.c). */
static int read_fields(char *const *tok, int t, double *sz, double *tm, double *bb, char *why, size_t whylen)
{
    /* a field is quoted up to 64 characters, then "...": the message stays whole in err */
#define FIELD(s) 64, (s), strlen(s) > 64 ? "..." : ""
    char *end;
    *sz = strtod(tok[0], &end);
    if (*end || !isfinite(*sz) || *sz < 0 || *sz != floor(*sz)) {
        snprintf(why, whylen, "size '%.*s%s' is not a whole number of bytes", FIELD(tok[0]));
        return -1;
    }
    *tm = strtod(tok[t], &end);
    if (*end || !isfinite(*tm) || *tm <= 0) {
        snprintf(why, whylen, "out-of-place time '%.*s%s' is not a positive number of microseconds", FIELD(tok[t]));
        return -1;
    }
    *bb = strtod(tok[t + 2], &end);
    if (*end || !isfinite(*bb) || *bb < 0) {
        snprintf(why, whylen, "out-of-place busbw '%.*s%s' is not a bandwidth (a finite number of GB/s, 0 or more)",
                 FIELD(tok[t + 2]));
        return -1;
    }
#undef FIELD
    return 0;
}

int nccl_import_file(const char *path, const char *kind_hint, nccl_fit *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open", path);
        return -1;
    }
    const char *kind = kind_hint;
    char line[4096], hosts[64][128];
    int nhosts = 0, lineno = 0, cap = 64, n = 0, table_at = 0;
    double *size = malloc((size_t)cap * sizeof(double)), *time_us = malloc((size_t)cap * sizeof(double)),
           *busbw = malloc((size_t)cap * sizeof(double));
    int *at = malloc((size_t)cap * sizeof(int)); /* each point's line, for the refusals that name two */
    int rc = -1;
    if (!size || !time_us || !busbw || !at) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto out;
    }
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            snprintf(err, errlen, "%s:%d: line longer than %zu characters", path, lineno, sizeof line - 1);
            goto out;
        }
        untag(line);
        if (line[0] == '#') {
            const char *k;
            if (!kind && strstr(line, "Collective test starting") && (k = kind_from(line)))
                kind = k;
            char host[128];
            int r;
            if (sscanf(line, "# Rank %d Group %*d Pid %*d on %127s", &r, host) == 2 ||
                sscanf(line, "#  Rank %d Group %*d Pid %*d on %127s", &r, host) == 2 ||
                sscanf(line, "# Rank %d Pid %*d on %127s", &r, host) == 2) {
                out->ranks++;
                int seen = 0;
                for (int i = 0; i < nhosts; i++)
                    seen |= !strcmp(hosts[i], host);
                if (!seen && nhosts < 64)
                    snprintf(hosts[nhosts++], sizeof hosts[0], "%s", host);
            }
            /* nccl-tests prints its table's header once a run: a second is a second run (two logs
             * concatenated), whose ranks and sizes would be counted with the first's. */
            if (strstr(line, "out-of-place")) {
                if (table_at) {
                    snprintf(err, errlen, "%s:%d: a second results table (the first at line %d): one nccl-tests "
                                          "run per log, import each run's log on its own", path, lineno, table_at);
                    goto out;
                }
                table_at = lineno;
            }
            continue;
        }
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (!*p || !table_at)
            continue;
        /* size count type redop root time algbw busbw #wrong time algbw busbw #wrong (newer), or
         * without root (older): find the numeric fields after the type and redop words. */
        char *tok[20];
        int nt = 0;
        for (char *s = strtok(p, " \t\n"); s && nt < 20; s = strtok(NULL, " \t\n"))
            tok[nt++] = s;
        if (nt < 8) {
            snprintf(err, errlen, "%s:%d: a result line with %d fields, expected at least 8 (truncated log?)", path,
                     lineno, nt);
            goto out;
        }
        /* size count type redop [root] time algbw busbw #wrong (out-of-place), then in-place:
         * nccl-tests since 2.10 print the root column (13 fields), older ones do not (12). */
        int t = nt >= 13 ? 5 : 4;
        double sz, tm, bb;
        char why[256];
        if (read_fields(tok, t, &sz, &tm, &bb, why, sizeof why) != 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
            goto out;
        }
        /* A size of 0 is a call that moves nothing: nccl-tests prints one wherever a small size
         * splits into less than an element per rank (all_gather, reduce_scatter, alltoall from
         * -b 8 on 8 ranks), often several in a row. NCCL returns from it without communicating,
         * so its time is no message's latency; the fit reads the sizes above 0. */
        if (sz == 0)
            continue;
        /* One run's sizes ascend from -b to -e; the latency floor is read from the first three
         * and the plateau from the last, so a size at or below the one before (a second sweep:
         * two logs in one file, or -o all / -d all sweeping every op or type) is refused. */
        if (n > 0 && sz <= size[n - 1]) {
            int same = -1;
            for (int i = 0; i < n && same < 0; i++)
                if (size[i] == sz)
                    same = i;
            if (same >= 0)
                snprintf(err, errlen, "%s:%d: size %.0f again (first at line %d): a log holds one sweep of "
                                      "ascending sizes; import each run (each op and type) on its own",
                         path, lineno, sz, at[same]);
            else
                snprintf(err, errlen, "%s:%d: size %.0f after %.0f at line %d: nccl-tests prints the sizes "
                                      "ascending, from -b to -e; import its log as it printed it",
                         path, lineno, sz, size[n - 1], at[n - 1]);
            goto out;
        }
        if (n == cap) {
            cap *= 2;
            double *a = realloc(size, (size_t)cap * sizeof(double));
            size = a ? a : size;
            double *b = realloc(time_us, (size_t)cap * sizeof(double));
            time_us = b ? b : time_us;
            double *c = realloc(busbw, (size_t)cap * sizeof(double));
            busbw = c ? c : busbw;
            int *d = realloc(at, (size_t)cap * sizeof(int));
            at = d ? d : at;
            if (!a || !b || !c || !d) {
                snprintf(err, errlen, "%s:%d: out of memory for %d result lines", path, lineno, cap);
                goto out;
            }
        }
        size[n] = sz;
        time_us[n] = tm;
        busbw[n] = bb;
        at[n] = lineno;
        n++;
    }
    if (!kind)
        kind = kind_from(path);
    if (!kind) {
        snprintf(err, errlen, "%s: which collective is this? The log does not say and the file name names none "
                              "(give --kind)", path);
        goto out;
    }
    if (n < 3) {
        snprintf(err, errlen, "%s:%d: %d result lines with a size above 0, need at least 3 (truncated log?)", path,
                 lineno, n);
        goto out;
    }
    snprintf(out->collective, sizeof out->collective, "%s", kind);
    out->hosts = nhosts;
    out->points = n;
    /* the sizes ascend (refused above otherwise): the first three are the three smallest */
    double smallest[3] = {time_us[0], time_us[1], time_us[2]};
    qsort(smallest, 3, sizeof(double), cmp_double);
    out->alpha_us = smallest[1];
    double maxb = size[n - 1], sum = 0;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (size[i] >= maxb / 4) {
            sum += busbw[i];
            m++;
        }
    out->busbw_gbs = sum / m; /* m >= 1: the largest size is always counted */
    out->max_bytes = maxb;
    /* Every busbw is finite, but their sum can overflow; and a sweep that stops where nccl-tests
     * still prints 0.00 GB/s has no plateau to read: neither is a bandwidth to price a collective. */
    if (!isfinite(out->busbw_gbs)) {
        snprintf(err, errlen, "%s: the busbw of the sizes from %.0f to %.0f bytes sums past the largest number (its "
                              "mean is %g GB/s): no bandwidth a log of nccl-tests prints", path, maxb / 4, maxb,
                 out->busbw_gbs);
        goto out;
    }
    if (!(out->busbw_gbs > 0)) {
        snprintf(err, errlen, "%s: the busbw of the sizes from %.0f to %.0f bytes is 0 GB/s: the sweep stops before "
                              "the bandwidth plateau (run nccl-tests to -e 1G or more)", path, maxb / 4, maxb);
        goto out;
    }
    out->size = size; /* the caller's now (nccl_fit_free) */
    out->time_us = time_us;
    size = time_us = NULL;
    rc = 0;
out:
    fclose(f);
    free(size);
    free(time_us);
    free(busbw);
    free(at);
    return rc;
}

void nccl_fit_free(nccl_fit *fit)
{
    free(fit->size);
    free(fit->time_us);
    fit->size = fit->time_us = NULL;
}
