/* dtcal variability's measurement; see variability.h. Every rank times the same GEMM on its own
 * device at the same time (as a synchronous job runs them: a node's shared power and cooling are
 * part of what differs), through the engine's kernel interface as dtcal kernels times it; rank 0
 * gathers the rates (MPI_Gather), prints them with cv on stderr and writes the calibration. The
 * session (ranks, devices, hosts, --into) and the write are rank_gemm.h's. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "kernels.h"
#include "kernels_cal.h"
#include "rank_gemm.h"
#include "variability.h"

/* Rank 0: the table, cv and the calibration. 0, or the exit status. */
static int report(const rank_gemm_session *s, const rank_gemm_options *o, const double *rates)
{
    variability_stats st;
    for (int r = 0; r < s->size; r++)
        if (!(rates[r] > 0)) {
            fprintf(stderr, "dtcal variability: rank %d (%s) measured no rate\n", r, rank_gemm_host(s, r));
            return 1;
        }
    if (variability_cv(rates, s->size, &st) != 0) {
        fprintf(stderr, "dtcal variability: the rates are not finite positive numbers\n");
        return 1;
    }
    int host_w, dev_w;
    rank_gemm_widths(s, &host_w, &dev_w);
    fprintf(stderr, "dtcal variability: %d ranks, each timing the engine's %d x %d x %d %s GEMM (median of %d "
                    "repeats) at the same time\n", s->size, o->m, o->n, o->k, rank_gemm_precision(o->precision),
            o->repeats);
    fprintf(stderr, "  %4s  %-*s  %-*s  %16s  %9s\n", "rank", host_w, "host", dev_w, "device", "TFLOP/s", "vs mean");
    for (int r = 0; r < s->size; r++) {
        char dev[RANK_GEMM_DESC_LEN + 64];
        rank_gemm_device(s, r, dev, sizeof dev);
        fprintf(stderr, "  %4d  %-*s  %-*s  %16.9g  %+8.2f%%\n", r, host_w, rank_gemm_host(s, r), dev_w, dev,
                rates[r], (rates[r] - st.mean) / st.mean * 100);
    }
    fprintf(stderr, "  mean %.6g TFLOP/s, sample standard deviation %.6g TFLOP/s\n", st.mean, st.sd);
    fprintf(stderr, "compute_variability_cv %.6g (sample standard deviation / mean over %d devices)\n", st.cv, s->size);
    if (!(st.cv < 1)) {
        fprintf(stderr, "dtcal variability: cv %.6g is not below 1 (the simulator takes 0 <= cv < 1): the rates differ "
                        "by more than their mean; did ranks share a device or cores? Nothing written\n", st.cv);
        return 1;
    }
    char date[32];
    rank_gemm_date(date, sizeof date);
    variability_record rec = {date, s->kind, rank_gemm_precision(o->precision), o->m, o->n, o->k, o->repeats,
                              s->hosts, s->host_stride, rates, st};
    char *line = variability_source_line(&rec);
    int rc = !line ? 1 : rank_gemm_write(s, o, "compute_variability_cv", st.cv, line);
    free(line);
    return rc;
}

int variability_run(const rank_gemm_options *o)
{
    rank_gemm_session s;
    int rc = rank_gemm_open(&s, "dtcal variability", o, MPI_THREAD_SINGLE, "the spread of the devices' rates");
    if (rc)
        return rank_gemm_close(&s, rc);
    double *rates = s.rank == 0 ? calloc((size_t)s.size, sizeof *rates) : NULL;
    if (!rank_gemm_all_ok(&s, s.rank != 0 || rates, "dtcal variability: out of memory")) {
        free(rates);
        return rank_gemm_close(&s, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* all at once, as a training step runs them */
    double rate = kernels_gemm_tflops(s.k, (kernels_precision)o->precision, o->m, o->n, o->k, o->repeats);
    MPI_Gather(&rate, 1, MPI_DOUBLE, rates, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (s.rank == 0)
        rc = report(&s, o, rates);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(rates);
    return rank_gemm_close(&s, rc);
}
