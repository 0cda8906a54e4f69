/* The collective timing driver and its MPI backend; see collectives_cal.h. The MPI backend times
 * the engine's own calls (engine/comm.h) on host buffers, in place where the engine's are. Bus bandwidth as
 * nccl-tests defines it (its PERFORMANCE.md): busbw = algbw x 2(n-1)/n for all-reduce, x (n-1)/n
 * for all-gather, reduce-scatter and all-to-all, x 1 for send/recv; algbw = size / time, where
 * size is the whole buffer of one rank (all-gather: its output, reduce-scatter: its input). */
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "collectives_cal.h"
#include "comm.h"

static const char *const kind_file[COLL_CAL_KINDS] = {"all_reduce_perf", "all_gather_perf", "reduce_scatter_perf",
                                                      "alltoall_perf", "sendrecv_perf"};

static double bus_factor(int kind, int n)
{
    switch (kind) {
    case COLL_CAL_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case COLL_CAL_SENDRECV: return 1.0;
    default: return (double)(n - 1) / n;
    }
}

/* ---- MPI backend: the engine's communicator on host buffers, MPI_Wtime ---- */
typedef struct {
    float *a, *b;
    int n, rank;
    comm_ctx comm;         /* over dtcal's MPI, a flat layout (every rank a replica) */
    int comm_up;
    /* calls started by start_calls, made by `thread` */
    pthread_t thread;
    int started, kind, iters;
    size_t bytes;
    atomic_int done;
} mpi_ctx;

static int mpi_setup(coll_cal_backend *be, size_t max_bytes, int n, int rank, char *err, size_t errlen)
{
    mpi_ctx *c = calloc(1, sizeof *c);
    be->ctx = c;
    if (c) {
        c->n = n;
        c->rank = rank;
        c->a = calloc(max_bytes / sizeof(float), sizeof(float));
        c->b = calloc(max_bytes / sizeof(float), sizeof(float));
    }
    int ok = c && c->a && c->b;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) {
        snprintf(err, errlen, "cannot allocate two buffers of %zu bytes", max_bytes);
        return -1;
    }
    comm_attach(&c->comm);
    c->comm_up = 1;
    return comm_layout(&c->comm, 1, 1, n, err, errlen);
}

/* One call of `kind` through the engine's communicator. The all-reduce, all-gather and
 * reduce-scatter run in place on a, as the engine's do (the buffer holds zeros: its sums stay
 * zero); the all-to-all goes from a to b; send/recv is the pipeline's transfer (a copy of a sent
 * without blocking, the peer's into b, then the send completed). A failed call stops the rank
 * with the reason (the engine's check). */
static void mpi_call(mpi_ctx *c, int kind, size_t bytes)
{
    size_t count = bytes / sizeof(float);
    comm_group *w = c->comm.world;
    switch (kind) {
    case COLL_CAL_ALL_REDUCE: comm_allreduce_sum(w, c->a, count); break;
    case COLL_CAL_ALL_GATHER: comm_allgather(w, c->a, count); break;
    case COLL_CAL_REDUCE_SCATTER: comm_reduce_scatter_sum(w, c->a, count); break;
    case COLL_CAL_ALLTOALL: comm_alltoall(w, c->a, c->b, count); break;
    default: {
        int peer = c->rank ^ 1;
        if (peer >= c->n)
            break; /* an odd rank out sits this one out */
        comm_send(&c->comm, peer, 7, c->a, count);
        comm_recv(&c->comm, peer, 7, c->b, count);
        comm_wait_sends(&c->comm);
    }
    }
}

static double mpi_time_calls(coll_cal_backend *be, int kind, size_t bytes, int iters)
{
    mpi_ctx *c = be->ctx;
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++)
        mpi_call(c, kind, bytes);
    return (MPI_Wtime() - t0) / iters * 1e6;
}

static void *mpi_calls_thread(void *p)
{
    mpi_ctx *c = p;
    for (int i = 0; i < c->iters; i++)
        mpi_call(c, c->kind, c->bytes);
    atomic_store(&c->done, 1);
    return NULL;
}

static int mpi_start_calls(coll_cal_backend *be, int kind, size_t bytes, int iters)
{
    mpi_ctx *c = be->ctx;
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (c->started || level < MPI_THREAD_SERIALIZED)
        return -1;
    c->kind = kind;
    c->bytes = bytes;
    c->iters = iters;
    atomic_store(&c->done, 0);
    c->started = pthread_create(&c->thread, NULL, mpi_calls_thread, c) == 0;
    return c->started ? 0 : -1;
}

static int mpi_calls_running(coll_cal_backend *be)
{
    mpi_ctx *c = be->ctx;
    return c->started && !atomic_load(&c->done);
}

static int mpi_finish_calls(coll_cal_backend *be)
{
    mpi_ctx *c = be->ctx;
    if (!c->started)
        return -1;
    pthread_join(c->thread, NULL);
    c->started = 0;
    return 0; /* a failed call has stopped the rank */
}

static void mpi_describe(coll_cal_backend *be, char *out, size_t n)
{
    (void)be;
    snprintf(out, n, " 0 [0x00] CPU (MPI host memory)");
}

static void mpi_teardown(coll_cal_backend *be)
{
    mpi_ctx *c = be->ctx;
    if (c && c->started)
        mpi_finish_calls(be);
    if (c && c->comm_up)
        comm_finish(&c->comm);
    if (c) {
        free(c->a);
        free(c->b);
    }
    free(c);
    be->ctx = NULL;
}

void coll_cal_mpi(coll_cal_backend *b)
{
    *b = (coll_cal_backend){.name = "mpi", .setup = mpi_setup, .time_calls = mpi_time_calls,
                            .start_calls = mpi_start_calls, .calls_running = mpi_calls_running,
                            .finish_calls = mpi_finish_calls, .describe = mpi_describe, .teardown = mpi_teardown};
}

/* ---- the driver ---- */
static FILE *open_log(const coll_cal_options *o, coll_cal_backend *b, int kind, int n, size_t align, size_t max,
                      const char *hosts, const int *pids, const char *devices)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.log", o->log_dir, kind_file[kind]);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fprintf(f, "# dtcal collectives --backend %s: %s over %d ranks, minBytes %zu maxBytes %zu step: 4(factor) "
               "iters: %d\n#\n# Using devices\n", b->name, kind_file[kind], n, align, max, o->iters);
    for (int r = 0; r < n; r++)
        fprintf(f, "#  Rank %2d Group  0 Pid %6d on %s device %s\n", r, pids[r],
                hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME, devices + (size_t)r * 256);
    fprintf(f, "#\n#                                                       out-of-place                       in-place\n"
               "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
               "busbw #wrong\n#        (B)    (elements)                             (us)  (GB/s)  (GB/s)            "
               "(us)  (GB/s)  (GB/s)\n");
    return f;
}

int collectives_measure(const coll_cal_options *o, coll_cal_backend *b, char *err, size_t errlen)
{
    int n, rank;
    err[0] = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (n < 2) {
        snprintf(err, errlen, "collectives need at least 2 ranks (run under mpirun -np N)");
        return -1;
    }
    size_t align = 4 * (size_t)n, max = (size_t)o->max_bytes / align * align;
    if (max < align * 4) {
        snprintf(err, errlen, "--max-bytes %.0f is too small for %d ranks", o->max_bytes, n);
        return -1;
    }
    if (b->setup(b, max, n, rank, err, errlen) != 0) {
        b->teardown(b);
        return -1;
    }
    char host[MPI_MAX_PROCESSOR_NAME] = "", device[256];
    int hlen = 0;
    MPI_Get_processor_name(host, &hlen);
    b->describe(b, device, sizeof device);
    char *hosts = rank == 0 ? malloc((size_t)n * MPI_MAX_PROCESSOR_NAME) : NULL;
    char *devices = rank == 0 ? malloc((size_t)n * 256) : NULL;
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Gather(device, 256, MPI_CHAR, devices, 256, MPI_CHAR, 0, MPI_COMM_WORLD);
    int pid = (int)getpid(), *pids = rank == 0 ? malloc((size_t)n * sizeof(int)) : NULL;
    MPI_Gather(&pid, 1, MPI_INT, pids, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int rc = 0;
    for (int kind = 0; kind < COLL_CAL_KINDS && rc == 0; kind++) {
        FILE *f = rank == 0 ? open_log(o, b, kind, n, align, max, hosts, pids, devices) : NULL;
        int opened = rank != 0 || f;
        MPI_Bcast(&opened, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!opened) {
            snprintf(err, errlen, "%s/%s.log: cannot write", o->log_dir, kind_file[kind]);
            rc = -1;
            break;
        }
        for (size_t bytes = align; bytes <= max && rc == 0; bytes *= 4) {
            /* fewer calls for large messages: about the same time per size */
            int iters = bytes >= ((size_t)1 << 24) ? (o->iters > 4 ? 4 : o->iters) : o->iters;
            rc = b->time_calls(b, kind, bytes, 2) < 0; /* warm-up */
            MPI_Barrier(MPI_COMM_WORLD);
            double us = rc ? -1 : b->time_calls(b, kind, bytes, iters), worst = 0;
            rc = us < 0;
            MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            MPI_Reduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0 && !rc) {
                double algbw = bytes / (worst * 1e-6) / 1e9, busbw = algbw * bus_factor(kind, n);
                fprintf(f, "%12zu %12zu     float     sum      -1 %8.2f %7.2f %7.2f      0 %8.2f %7.2f %7.2f      0\n",
                        bytes, bytes / sizeof(float), worst, algbw, busbw, worst, algbw, busbw);
                fprintf(stderr, "  %-20s %12zu B  %10.2f us  busbw %7.2f GB/s\n", kind_file[kind], bytes, worst, busbw);
            }
        }
        if (f) {
            fprintf(f, "# Out of bounds values : 0 OK\n");
            fclose(f);
        }
        if (rc)
            snprintf(err, errlen, "%s failed (%s)", kind_file[kind], b->name);
    }
    b->teardown(b);
    free(hosts);
    free(devices);
    free(pids);
    return rc ? -1 : 0;
}

#ifndef DTCAL_HAVE_NCCL
int coll_cal_nccl(coll_cal_backend *b)
{
    (void)b;
    return -1;
}
#endif
