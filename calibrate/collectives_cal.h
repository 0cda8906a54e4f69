/* dtcal collectives: times the collectives the parallel engine uses, under mpirun, and writes
 * each as an nccl-tests style log (the same table all_reduce_perf and friends print), which
 * nccl_import then fits exactly as it fits logs from a cluster.
 *
 * Two backends share one driver (sizes, warm-up, the slowest rank's time, the logs): MPI on host
 * buffers, and NCCL on device buffers (one GPU per rank, CUDA events), built where CUDA and
 * NCCL are found. Both time the engine's own calls (engine/comm.h, comm_nccl.h), so the figures
 * are those of the code path dtrain runs; MPI only coordinates the ranks here. */
#ifndef DTSIM_CALIBRATE_COLLECTIVES_CAL_H
#define DTSIM_CALIBRATE_COLLECTIVES_CAL_H
#include <stddef.h>

typedef struct {
    double max_bytes;   /* largest message (the sweep goes from 8 B up by x4) */
    int iters;          /* timed calls per size (fewer for large sizes, at least 2) */
    const char *log_dir;/* where the logs go */
} coll_cal_options;

enum { COLL_CAL_ALL_REDUCE, COLL_CAL_ALL_GATHER, COLL_CAL_REDUCE_SCATTER, COLL_CAL_ALLTOALL, COLL_CAL_SENDRECV,
       COLL_CAL_KINDS };

/* A backend: buffers of max_bytes on each rank, and `iters` calls of one collective timed. */
typedef struct coll_cal_backend {
    const char *name;                    /* "mpi" | "nccl" */
    void *ctx;
    /* rank's buffers and communicator; 0, or -1 with err (collective over MPI_COMM_WORLD) */
    int (*setup)(struct coll_cal_backend *b, size_t max_bytes, int n, int rank, char *err, size_t errlen);
    /* mean microseconds per call of `kind` on `bytes` over `iters` calls (after the driver's
     * barrier); < 0 on failure */
    double (*time_calls)(struct coll_cal_backend *b, int kind, size_t bytes, int iters);
    /* Starts `iters` calls of `kind` on `bytes` one after the other and returns without waiting
     * for them, so that they run beside what the caller does next (dtcal overlap): NCCL enqueues
     * them on the communicator's stream, a non-blocking one, which runs beside the engine's
     * kernels on the legacy default stream; MPI makes the calls (blocking) from a second thread,
     * which needs MPI_THREAD_SERIALIZED (the caller makes no MPI call until finish_calls).
     * Collective: every rank starts the same calls. 0, or -1 (nothing started). */
    int (*start_calls)(struct coll_cal_backend *b, int kind, size_t bytes, int iters);
    /* 1 while started calls are still running, 0 once all are done */
    int (*calls_running)(struct coll_cal_backend *b);
    /* waits for the started calls; 0, or -1 when one failed */
    int (*finish_calls)(struct coll_cal_backend *b);
    /* what the log's "Using devices" lines say after "device": e.g. "0 [0x00] CPU (MPI host memory)" */
    void (*describe)(struct coll_cal_backend *b, char *out, size_t n);
    void (*teardown)(struct coll_cal_backend *b);
} coll_cal_backend;

/* Collective: every rank calls it. Writes LOG_DIR/<kind>_perf.log on rank 0 for all_reduce,
 * all_gather, reduce_scatter, alltoall and sendrecv (pairs 0<->1, 2<->3, ...). Returns 0, or
 * -1 with err (on every rank). */
int collectives_measure(const coll_cal_options *o, coll_cal_backend *b, char *err, size_t errlen);

/* The backends. coll_cal_nccl returns 0 (and fills *b) only in builds with NCCL. */
void coll_cal_mpi(coll_cal_backend *b);
int coll_cal_nccl(coll_cal_backend *b);
#endif
