/* MPI collective timing for dtcal; see collectives_cal.h. Bus bandwidth as nccl-tests defines it
 * (its PERFORMANCE.md): busbw = algbw x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather,
 * reduce-scatter and all-to-all, x 1 for send/recv; algbw = size / time, where size is the
 * whole buffer of one rank (all-gather: its output, reduce-scatter: its input). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "collectives_cal.h"

enum { K_ALL_REDUCE, K_ALL_GATHER, K_REDUCE_SCATTER, K_ALLTOALL, K_SENDRECV, K_COUNT };
static const char *const kind_file[K_COUNT] = {"all_reduce_perf", "all_gather_perf", "reduce_scatter_perf",
                                               "alltoall_perf", "sendrecv_perf"};

static double bus_factor(int kind, int n)
{
    switch (kind) {
    case K_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case K_SENDRECV: return 1.0;
    default: return (double)(n - 1) / n;
    }
}

/* One call of `kind` on `bytes` (a multiple of 4 x n). */
static int call(int kind, float *a, float *b, size_t bytes, int n, int rank)
{
    int count = (int)(bytes / sizeof(float)), part = count / n;
    switch (kind) {
    case K_ALL_REDUCE: return MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    case K_ALL_GATHER: return MPI_Allgather(a, part, MPI_FLOAT, b, part, MPI_FLOAT, MPI_COMM_WORLD);
    case K_REDUCE_SCATTER: return MPI_Reduce_scatter_block(a, b, part, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    case K_ALLTOALL: return MPI_Alltoall(a, part, MPI_FLOAT, b, part, MPI_FLOAT, MPI_COMM_WORLD);
    default: {
        int peer = rank ^ 1;
        if (peer >= n)
            return MPI_SUCCESS; /* an odd rank out sits this one out */
        return MPI_Sendrecv(a, count, MPI_FLOAT, peer, 7, b, count, MPI_FLOAT, peer, 7, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE);
    }
    }
}

int collectives_measure_mpi(const coll_cal_options *o, char *err, size_t errlen)
{
    int n, rank;
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
    float *a = calloc(max / sizeof(float), sizeof(float)), *b = calloc(max / sizeof(float), sizeof(float));
    int ok = a && b;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) {
        snprintf(err, errlen, "cannot allocate two buffers of %zu bytes", max);
        free(a);
        free(b);
        return -1;
    }
    char host[MPI_MAX_PROCESSOR_NAME];
    int hlen = 0;
    MPI_Get_processor_name(host, &hlen);
    char *hosts = rank == 0 ? malloc((size_t)n * MPI_MAX_PROCESSOR_NAME) : NULL;
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    int pid = (int)getpid(), *pids = rank == 0 ? malloc((size_t)n * sizeof(int)) : NULL;
    MPI_Gather(&pid, 1, MPI_INT, pids, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int rc = 0;
    for (int kind = 0; kind < K_COUNT && rc == 0; kind++) {
        FILE *f = NULL;
        char path[4096];
        if (rank == 0) {
            snprintf(path, sizeof path, "%s/%s.log", o->log_dir, kind_file[kind]);
            f = fopen(path, "w");
            if (f) {
                fprintf(f, "# dtcal collectives --backend mpi: %s over %d ranks, minBytes %zu maxBytes %zu step: "
                           "4(factor) iters: %d\n#\n# Using devices\n", kind_file[kind], n, align, max, o->iters);
                for (int r = 0; r < n; r++)
                    fprintf(f, "#  Rank %2d Group  0 Pid %6d on %s device  0 [0x00] CPU (MPI host memory)\n", r,
                            pids[r], hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME);
                fprintf(f, "#\n#                                                       out-of-place                  "
                           "     in-place\n#       size         count      type   redop    root     time   algbw   "
                           "busbw #wrong     time   algbw   busbw #wrong\n#        (B)    (elements)               "
                           "              (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n");
            }
        }
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
            for (int w = 0; w < 2 && rc == 0; w++) /* warm-up */
                rc = call(kind, a, b, bytes, n, rank) != MPI_SUCCESS;
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < iters && rc == 0; i++)
                rc = call(kind, a, b, bytes, n, rank) != MPI_SUCCESS;
            double us = (MPI_Wtime() - t0) / iters * 1e6, worst = 0;
            MPI_Reduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0) {
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
        MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (rc)
            snprintf(err, errlen, "%s failed", kind_file[kind]);
    }
    free(hosts);
    free(pids);
    free(a);
    free(b);
    return rc ? -1 : 0;
}
