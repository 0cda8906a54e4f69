/* The NCCL backend of dtcal collectives (see collectives_cal.h): the engine's NCCL communicator
 * (engine/comm_nccl.h) on device buffers, one GPU per rank (the node-local rank picks the device:
 * gpu_pick.h). Timed calls run as the engine runs them, on the default stream, each returning
 * when its result is there, between two CUDA events; dtcal overlap starts calls on a second,
 * non-blocking stream of this backend to run beside the engine's GEMM. Built only where CUDA and
 * NCCL are found. NCCL refuses two ranks on one GPU; then the error says so and points to
 * --backend mpi. */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collectives_cal.h"
#include "comm.h"
#include "comm_nccl.h"
#include "gpu_pick.h"

typedef struct {
    float *a, *b;          /* device */
    int n, rank, device;
    comm_ctx comm;         /* over dtcal's MPI, a flat layout (every rank a replica) */
    int comm_up;
    comm_nccl *nccl;       /* over the whole world */
    cudaStream_t stream;   /* where started calls run */
    cudaEvent_t start, stop;
} nccl_ctx;

static int cuda_fail(cudaError_t e, const char *what, char *err, size_t errlen)
{
    if (e == cudaSuccess)
        return 0;
    snprintf(err, errlen, "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

static int nccl_setup(coll_cal_backend *be, size_t max_bytes, int n, int rank, char *err, size_t errlen)
{
    nccl_ctx *c = calloc(1, sizeof *c);
    be->ctx = c;
    gpu_pick pick;
    int picked = gpu_pick_device(&pick); /* collective: every rank learns whether all have a GPU */
    int ok = c != NULL && picked == 0;
    if (picked == -1)
        snprintf(err, errlen, "%s%s", pick.why,
                 pick.short_of_gpus ? ": NCCL needs one GPU per rank (use --backend mpi to share a GPU through host "
                                      "memory)" : "");
    if (ok) {
        c->n = n;
        c->rank = rank;
        c->device = pick.device;
        ok = !cuda_fail(cudaMalloc((void **)&c->a, max_bytes), "cudaMalloc", err, errlen) &&
             !cuda_fail(cudaMalloc((void **)&c->b, max_bytes), "cudaMalloc", err, errlen) &&
             !cuda_fail(cudaMemset(c->a, 0, max_bytes), "cudaMemset", err, errlen) &&
             !cuda_fail(cudaDeviceSynchronize(), "cudaDeviceSynchronize", err, errlen) &&
             /* non-blocking: calls started here run beside the engine's kernels, which are on
              * the legacy default stream (a blocking stream would wait for them) */
             !cuda_fail(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate", err,
                        errlen) &&
             !cuda_fail(cudaEventCreate(&c->start), "cudaEventCreate", err, errlen) &&
             !cuda_fail(cudaEventCreate(&c->stop), "cudaEventCreate", err, errlen);
    }
    /* every rank must agree before the collective communicator set-up, or some would wait */
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) {
        if (!err[0])
            snprintf(err, errlen, "another rank could not set up its GPU");
        return -1;
    }
    comm_attach(&c->comm);
    c->comm_up = 1;
    if (comm_layout(&c->comm, 1, 1, n, err, errlen) != 0)
        return -1;
    c->nccl = comm_nccl_create(c->comm.world, err, errlen); /* NULL on every rank on failure */
    static const char engine_option[] = "--comm nccl: "; /* dtrain's prefix, not an option here */
    if (!c->nccl && !strncmp(err, engine_option, sizeof engine_option - 1))
        memmove(err, err + sizeof engine_option - 1, strlen(err) - (sizeof engine_option - 1) + 1);
    return c->nccl ? 0 : -1;
}

/* One call of `kind` through the engine's communicator. The all-reduce, all-gather and
 * reduce-scatter run in place on a, as the engine's do (a holds zeros: its sums stay zero); the
 * all-to-all goes from a to b; send/recv exchanges a for the peer's b. A failed call stops the
 * rank with the reason (the engine's check). */
static void nccl_call(nccl_ctx *c, int kind, size_t bytes)
{
    size_t count = bytes / sizeof(float);
    switch (kind) {
    case COLL_CAL_ALL_REDUCE: comm_nccl_allreduce_sum(c->nccl, c->a, count); break;
    case COLL_CAL_ALL_GATHER: comm_nccl_allgather(c->nccl, c->a, count); break;
    case COLL_CAL_REDUCE_SCATTER: comm_nccl_reduce_scatter_sum(c->nccl, c->a, count); break;
    case COLL_CAL_ALLTOALL: comm_nccl_alltoall(c->nccl, c->a, c->b, count); break;
    default: {
        int peer = c->rank ^ 1;
        if (peer < c->n) /* an odd rank out sits this one out */
            comm_nccl_sendrecv(c->nccl, peer, c->a, peer, c->b, count);
    }
    }
}

static double nccl_time_calls(coll_cal_backend *be, int kind, size_t bytes, int iters)
{
    nccl_ctx *c = be->ctx;
    comm_nccl_set_stream(c->nccl, NULL); /* the engine's: default stream, each call waited for */
    if (cudaEventRecord(c->start, 0) != cudaSuccess)
        return -1;
    for (int i = 0; i < iters; i++)
        nccl_call(c, kind, bytes);
    float ms = 0;
    if (cudaEventRecord(c->stop, 0) != cudaSuccess || cudaEventSynchronize(c->stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, c->start, c->stop) != cudaSuccess)
        return -1;
    return (double)ms * 1e3 / iters;
}

static int nccl_start_calls(coll_cal_backend *be, int kind, size_t bytes, int iters)
{
    nccl_ctx *c = be->ctx;
    comm_nccl_set_stream(c->nccl, c->stream); /* enqueued, not waited for */
    for (int i = 0; i < iters; i++)
        nccl_call(c, kind, bytes);
    return 0;
}

static int nccl_calls_running(coll_cal_backend *be)
{
    nccl_ctx *c = be->ctx;
    return cudaStreamQuery(c->stream) == cudaErrorNotReady;
}

static int nccl_finish_calls(coll_cal_backend *be)
{
    nccl_ctx *c = be->ctx;
    comm_nccl_wait(c->nccl); /* a failure stops the rank with the reason */
    comm_nccl_set_stream(c->nccl, NULL);
    return 0;
}

static void nccl_describe(coll_cal_backend *be, char *out, size_t n)
{
    nccl_ctx *c = be->ctx;
    struct cudaDeviceProp p;
    if (!c || cudaGetDeviceProperties(&p, c->device) != cudaSuccess)
        snprintf(out, n, " %d [0x00] unknown GPU", c ? c->device : -1);
    else
        snprintf(out, n, " %d [0x%02x] %s", c->device, p.pciBusID, p.name);
}

static void nccl_teardown(coll_cal_backend *be)
{
    nccl_ctx *c = be->ctx;
    if (!c)
        return;
    if (c->stream)
        cudaStreamSynchronize(c->stream); /* calls started and not finished */
    comm_nccl_free(c->nccl);
    if (c->comm_up)
        comm_finish(&c->comm);
    if (c->start)
        cudaEventDestroy(c->start);
    if (c->stop)
        cudaEventDestroy(c->stop);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    cudaFree(c->a);
    cudaFree(c->b);
    free(c);
    be->ctx = NULL;
}

int coll_cal_nccl(coll_cal_backend *b)
{
    *b = (coll_cal_backend){.name = "nccl", .setup = nccl_setup, .time_calls = nccl_time_calls,
                            .start_calls = nccl_start_calls, .calls_running = nccl_calls_running,
                            .finish_calls = nccl_finish_calls, .describe = nccl_describe, .teardown = nccl_teardown};
    return 0;
}
