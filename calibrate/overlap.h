/* dtcal overlap: how much longer a GEMM takes while a collective runs beside it on the same
 * device, the calibration's overlap_slowdown. The simulator stretches every GEMM chunk that runs
 * beside a TP collective by it (docs/model.md, "Overlap"): the collective takes SMs (NCCL's
 * kernels), memory bandwidth and, on a CPU, cores from the GEMM. dtcal measures it on the machine
 * at hand: every MPI rank times the same GEMM alone and beside an all-reduce over all ranks, and
 * the figure is the mean over ranks of beside / alone.
 *
 * This part is the arithmetic and the calibration's sources line (no MPI, no kernels); the
 * measurement is overlap_cal.c. */
#ifndef DTSIM_CALIBRATE_OVERLAP_H
#define DTSIM_CALIBRATE_OVERLAP_H
#include "rank_gemm.h"

typedef struct {
    int n;
    double mean;     /* the mean over ranks of beside / alone */
    double slowdown; /* the figure written: the mean, or 1 where the mean is below 1 (a GEMM beside a
                        collective is not faster than alone: below 1 is the timing's noise) */
} overlap_stats;

/* The mean over n ranks of beside_s[i] / alone_s[i] (each rank's median times, seconds) and the
 * figure, max(1, mean). 0, or -1 when n < 1 or a time is not a finite positive number (s
 * untouched). */
int overlap_slowdown(const double *alone_s, const double *beside_s, int n, overlap_stats *s);

/* What the sources line says about one measurement. */
typedef struct {
    const char *date;      /* YYYY-MM-DD */
    const char *device;    /* the devices' kind */
    const char *precision; /* fp32, bf16, fp16 */
    int m, n, k, repeats;
    const char *backend;   /* how the all-reduce ran beside the GEMM, in words */
    double bytes;          /* the all-reduce's size on each rank */
    int calls;             /* all-reduces started right before each GEMM */
    const char *hosts;     /* n host names, host_stride bytes apart, in rank order */
    int host_stride;
    const double *alone_s, *beside_s; /* n median times, seconds, in rank order */
    overlap_stats stats;
} overlap_record;

/* The calibration's "sources" line for overlap_slowdown (malloc'd, NULL without memory): the
 * date, the ranks, the device kind, the hosts (as cal_hosts lists them), the GEMM (shape,
 * precision, repeats), the all-reduce (bytes, backend, calls per GEMM), every rank's times
 * (%.9g seconds, between "seconds by rank, alone: [" and "]" and between "beside: [" and "]",
 * ", " apart) and the figure (with the mean where it was below 1). */
char *overlap_source_line(const overlap_record *r);

/* dtcal overlap's options: those of every rank-GEMM command (rank_gemm.h), and the all-reduce. */
typedef struct {
    rank_gemm_options g;
    const char *backend; /* "mpi" or "nccl" */
    double bytes;        /* the all-reduce's size on each rank, a multiple of 4 (fp32 elements) */
} overlap_options;

/* MPI_Init to MPI_Finalize (overlap_cal.c): every rank times the GEMM on its own device alone,
 * then beside all-reduces started right before each timed call and still running when it ends;
 * rank 0 gathers both times, prints them with the figure on stderr and writes the calibration.
 * The exit status, the same on every rank: 0; 2 as rank_gemm_open says; 1 when the measurement
 * failed, MPI lacks the thread level the mpi backend needs, the all-reduces could not be made to
 * outlast the GEMM, the figure is above 100 (the simulator's range) or the write failed. Nothing
 * is written unless everything succeeded. */
int overlap_run(const overlap_options *o);
#endif
