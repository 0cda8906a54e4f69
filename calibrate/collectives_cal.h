/* dtcal collectives: times the collectives the parallel engine uses, under mpirun, and writes
 * each as an nccl-tests style log (the same table all_reduce_perf and friends print), which
 * nccl_import then fits exactly as it fits logs from a cluster. */
#ifndef DTSIM_CALIBRATE_COLLECTIVES_CAL_H
#define DTSIM_CALIBRATE_COLLECTIVES_CAL_H
#include <stddef.h>

typedef struct {
    double max_bytes;   /* largest message (the sweep goes from 8 B up by x4) */
    int iters;          /* timed calls per size (fewer for large sizes, at least 2) */
    const char *log_dir;/* where the logs go */
} coll_cal_options;

/* Collective: every rank calls it. Writes LOG_DIR/<kind>_perf.log on rank 0 for all_reduce,
 * all_gather, reduce_scatter, alltoall and sendrecv (pairs 0<->1, 2<->3, ...). Returns 0, or
 * -1 with err (on every rank). */
int collectives_measure_mpi(const coll_cal_options *o, char *err, size_t errlen);
#endif
