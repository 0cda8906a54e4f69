/* See variability.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cal_writer.h"
#include "variability.h"

int variability_cv(const double *rates, int n, variability_stats *s)
{
    if (n < 2)
        return -1;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(rates[i]) || !(rates[i] > 0))
            return -1;
        sum += rates[i];
    }
    double mean = sum / n, ss = 0;
    for (int i = 0; i < n; i++) /* two passes: no cancellation between large rates */
        ss += (rates[i] - mean) * (rates[i] - mean);
    s->n = n;
    s->mean = mean;
    s->sd = sqrt(ss / (n - 1));
    s->cv = s->sd / mean;
    return 0;
}

char *variability_source_line(const variability_record *r)
{
    int n = r->stats.n;
    size_t len = 4096 + (size_t)n * 32;
    char *s = malloc(len), hosts[8 * 300];
    if (!s)
        return NULL;
    int nhosts = cal_hosts(r->hosts, r->host_stride, n, 8, hosts, sizeof hosts);
    size_t used = (size_t)snprintf(s, len,
                                   "compute_variability_cv: measured by 'dtcal variability' on %s over %d ranks, one "
                                   "device each (%s), on %d host%s (%s): each timed the engine's %d x %d x %d %s GEMM "
                                   "at once (median of %d repeats after a warm-up); rates in TFLOP/s by rank: [",
                                   r->date, n, r->device, nhosts, nhosts == 1 ? "" : "s", hosts, r->m, r->n, r->k,
                                   r->precision, r->repeats);
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(s + used, len - used, "%s%.9g", i ? ", " : "", r->rates[i]);
    if (used < len)
        snprintf(s + used, len - used, "]; mean %.6g, sample standard deviation %.6g, cv = standard deviation / mean "
                                       "= %.6g", r->stats.mean, r->stats.sd, r->stats.cv);
    return s;
}
