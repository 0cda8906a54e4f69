/* See overlap.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "cal_writer.h"
#include "overlap.h"

int overlap_slowdown(const double *alone_s, const double *beside_s, int n, overlap_stats *s)
{
    if (n < 1)
        return -1;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(alone_s[i]) || !(alone_s[i] > 0) || !isfinite(beside_s[i]) || !(beside_s[i] > 0))
            return -1;
        sum += beside_s[i] / alone_s[i];
    }
    s->n = n;
    s->mean = sum / n;
    s->slowdown = s->mean > 1 ? s->mean : 1;
    return 0;
}

/* ", "-separated %.9g values between "[" and "]" */
static size_t list(char *s, size_t used, size_t len, const double *v, int n)
{
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(s + used, len - used, "%s%.9g", i ? ", " : "[", v[i]);
    if (used < len)
        used += (size_t)snprintf(s + used, len - used, n > 0 ? "]" : "[]");
    return used;
}

char *overlap_source_line(const overlap_record *r)
{
    int n = r->stats.n;
    size_t len = 4096 + (size_t)n * 64;
    char *s = malloc(len), hosts[8 * 300];
    if (!s)
        return NULL;
    int nhosts = cal_hosts(r->hosts, r->host_stride, n, 8, hosts, sizeof hosts);
    size_t used = (size_t)snprintf(s, len,
                                   "overlap_slowdown: measured by 'dtcal overlap' on %s over %d ranks, one device each "
                                   "(%s), on %d host%s (%s): each timed the engine's %d x %d x %d %s GEMM (median of "
                                   "%d repeats after a warm-up) alone, then beside an all-reduce of %.0f bytes over "
                                   "the %d ranks (%s), %d call%s started right before each GEMM and still running when "
                                   "it ended; seconds by rank, alone: ",
                                   r->date, n, r->device, nhosts, nhosts == 1 ? "" : "s", hosts, r->m, r->n, r->k,
                                   r->precision, r->repeats, r->bytes, n, r->backend, r->calls,
                                   r->calls == 1 ? "" : "s");
    used = list(s, used, len, r->alone_s, n);
    if (used < len)
        used += (size_t)snprintf(s + used, len - used, "; beside: ");
    used = list(s, used, len, r->beside_s, n);
    if (used < len)
        used += (size_t)snprintf(s + used, len - used, "; overlap_slowdown = mean over ranks of beside / alone = %.6g",
                                 r->stats.slowdown);
    if (used < len && r->stats.mean < 1)
        snprintf(s + used, len - used, " (the mean, %.6g, is below 1: no slowdown)", r->stats.mean);
    return s;
}
