/* nccl-tests log import; see nccl_import.h. */
#include <ctype.h>
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
    int nhosts = 0, lineno = 0, cap = 64, n = 0, in_table = 0;
    double *size = malloc((size_t)cap * sizeof(double)), *time_us = malloc((size_t)cap * sizeof(double)),
           *busbw = malloc((size_t)cap * sizeof(double));
    int rc = -1;
    if (!size || !time_us || !busbw) {
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
            if (strstr(line, "out-of-place"))
                in_table = 1;
            continue;
        }
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (!*p || !in_table)
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
        char *end1, *end2, *end3;
        double sz = strtod(tok[0], &end1), tm = t < nt ? strtod(tok[t], &end2) : 0,
               bb = t + 2 < nt ? strtod(tok[t + 2], &end3) : 0;
        if (*end1 || t + 2 >= nt || *end2 || *end3 || sz < 0 || tm <= 0) {
            snprintf(err, errlen, "%s:%d: cannot read size, time and busbw from this result line", path, lineno);
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
            if (!a || !b || !c) {
                snprintf(err, errlen, "%s:%d: out of memory for %d result lines", path, lineno, cap);
                goto out;
            }
        }
        size[n] = sz;
        time_us[n] = tm;
        busbw[n] = bb;
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
        snprintf(err, errlen, "%s:%d: %d result lines, need at least 3 (truncated log?)", path, lineno, n);
        goto out;
    }
    snprintf(out->collective, sizeof out->collective, "%s", kind);
    out->hosts = nhosts;
    out->points = n;
    double smallest[3] = {time_us[0], time_us[1], time_us[2]};
    qsort(smallest, 3, sizeof(double), cmp_double);
    out->alpha_us = smallest[1];
    double maxb = 0, sum = 0;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (size[i] > maxb)
            maxb = size[i];
    for (int i = 0; i < n; i++)
        if (size[i] >= maxb / 4) {
            sum += busbw[i];
            m++;
        }
    out->busbw_gbs = sum / m;
    out->max_bytes = maxb;
    out->size = size; /* the caller's now (nccl_fit_free) */
    out->time_us = time_us;
    size = time_us = NULL;
    rc = 0;
out:
    fclose(f);
    free(size);
    free(time_us);
    free(busbw);
    return rc;
}

void nccl_fit_free(nccl_fit *fit)
{
    free(fit->size);
    free(fit->time_us);
    fit->size = fit->time_us = NULL;
}
