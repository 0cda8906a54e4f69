/* dtcal variability: how much the sustained compute rate of devices of one kind differs from
 * device to device. A synchronous training job runs at the pace of its slowest device, so the
 * simulator stretches every compute op by (1 + cv x E[max of N standard normals]), cv being the
 * calibration's compute_variability_cv: the coefficient of variation (sample standard deviation
 * / mean) of the devices' rates (Sinha et al., "Not All GPUs Are Created Equal", SC'22, measured
 * it across clusters). dtcal measures it on the machine at hand: every MPI rank times the same
 * GEMM on its own device and rank 0 computes cv over the rates.
 *
 * This part is the arithmetic and the calibration's sources line (no MPI, no kernels); the
 * measurement is variability_cal.c. */
#ifndef DTSIM_CALIBRATE_VARIABILITY_H
#define DTSIM_CALIBRATE_VARIABILITY_H
#include <stddef.h>

typedef struct {
    int n;
    double mean, sd, cv; /* sd: the sample standard deviation (n - 1 in the denominator) */
} variability_stats;

/* mean, sample standard deviation and cv = sd / mean of n rates. 0, or -1 when n < 2 or a rate
 * is not a finite positive number (s untouched). */
int variability_cv(const double *rates, int n, variability_stats *s);

/* What the sources line says about one measurement. */
typedef struct {
    const char *date;      /* YYYY-MM-DD */
    const char *device;    /* the devices' kind, e.g. "NVIDIA H100 80GB HBM3" */
    const char *precision; /* fp32, bf16, fp16 */
    int m, n, k, repeats;
    const char *hosts;     /* n host names, host_stride bytes apart, in rank order */
    int host_stride;
    const double *rates;   /* n rates, TFLOP/s, in rank order */
    variability_stats stats;
} variability_record;

/* The calibration's "sources" line for compute_variability_cv (malloc'd, NULL without memory):
 * the date, the ranks, the GEMM (shape, precision, repeats), the device kind, the hosts (as
 * cal_hosts lists them: each once, in rank order, the first 8 and a count of the rest), the
 * rates by rank (%.9g, between "rates in TFLOP/s by rank: [" and "]", ", " apart), mean, sample
 * standard deviation and cv. */
char *variability_source_line(const variability_record *r);

/* dtcal variability's measurement (variability_cal.c), run by every rank under mpirun with the
 * options every rank-GEMM command takes (rank_gemm.h; into: a calibration to add
 * compute_variability_cv to). MPI_Init to MPI_Finalize: every rank times the GEMM on its own
 * device (on a GPU the node-local rank picks it) at the same time, rank 0 gathers the rates,
 * prints them with cv on stderr and writes the calibration. The exit status, the same on every
 * rank: 0; 2 for fewer than 2 ranks, more ranks than GPUs on a node, devices of different kinds,
 * or a bad --into; 1 when the measurement or the write failed. Nothing is written unless
 * everything succeeded. */
struct rank_gemm_options;
int variability_run(const struct rank_gemm_options *o);
#endif
