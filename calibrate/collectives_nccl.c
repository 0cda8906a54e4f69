/* The NCCL backend of dtcal collectives (see collectives_cal.h): device buffers, one GPU per
 * rank (the node-local rank picks the device: gpu_pick.h), the NCCL unique id broadcast over
 * MPI, and the calls timed with CUDA events on the communicator's stream, as nccl-tests does;
 * dtcal overlap starts calls on that stream (non-blocking) to run beside the engine's GEMM.
 * Built only where CUDA and NCCL are found. NCCL refuses two ranks on one GPU; then the error
 * says so and points to --backend mpi. */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collectives_cal.h"
#include "gpu_pick.h"

typedef struct {
    float *a, *b;          /* device */
    int n, rank, device;
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t start, stop;
    int comm_ok;
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
    ncclUniqueId id;
    ncclResult_t r = ncclSuccess;
    if (rank == 0)
        r = ncclGetUniqueId(&id);
    int id_ok = r == ncclSuccess;
    MPI_Bcast(&id_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!id_ok) {
        snprintf(err, errlen, "ncclGetUniqueId: %s", ncclGetErrorString(r));
        return -1;
    }
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    r = ncclCommInitRank(&c->comm, n, id, rank);
    c->comm_ok = r == ncclSuccess;
    ok = c->comm_ok;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) {
        snprintf(err, errlen, "ncclCommInitRank: %s", c->comm_ok ? "failed on another rank" : ncclGetErrorString(r));
        return -1;
    }
    return 0;
}

static ncclResult_t nccl_call(nccl_ctx *c, int kind, size_t bytes)
{
    size_t count = bytes / sizeof(float), part = count / (size_t)c->n;
    switch (kind) {
    case COLL_CAL_ALL_REDUCE: return ncclAllReduce(c->a, c->b, count, ncclFloat, ncclSum, c->comm, c->stream);
    case COLL_CAL_ALL_GATHER: return ncclAllGather(c->a, c->b, part, ncclFloat, c->comm, c->stream);
    case COLL_CAL_REDUCE_SCATTER: return ncclReduceScatter(c->a, c->b, part, ncclFloat, ncclSum, c->comm, c->stream);
    case COLL_CAL_ALLTOALL: {
        ncclResult_t r = ncclGroupStart();
        for (int p = 0; p < c->n && r == ncclSuccess; p++) {
            r = ncclSend(c->a + (size_t)p * part, part, ncclFloat, p, c->comm, c->stream);
            if (r == ncclSuccess)
                r = ncclRecv(c->b + (size_t)p * part, part, ncclFloat, p, c->comm, c->stream);
        }
        ncclResult_t e = ncclGroupEnd();
        return r != ncclSuccess ? r : e;
    }
    default: {
        int peer = c->rank ^ 1;
        if (peer >= c->n)
            return ncclSuccess; /* an odd rank out sits this one out */
        ncclResult_t r = ncclGroupStart();
        if (r == ncclSuccess)
            r = ncclSend(c->a, count, ncclFloat, peer, c->comm, c->stream);
        if (r == ncclSuccess)
            r = ncclRecv(c->b, count, ncclFloat, peer, c->comm, c->stream);
        ncclResult_t e = ncclGroupEnd();
        return r != ncclSuccess ? r : e;
    }
    }
}

static double nccl_time_calls(coll_cal_backend *be, int kind, size_t bytes, int iters)
{
    nccl_ctx *c = be->ctx;
    if (cudaEventRecord(c->start, c->stream) != cudaSuccess)
        return -1;
    for (int i = 0; i < iters; i++) {
        ncclResult_t r = nccl_call(c, kind, bytes);
        if (r != ncclSuccess) {
            fprintf(stderr, "dtcal collectives: rank %d: NCCL: %s\n", c->rank, ncclGetErrorString(r));
            return -1;
        }
    }
    float ms = 0;
    if (cudaEventRecord(c->stop, c->stream) != cudaSuccess || cudaEventSynchronize(c->stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, c->start, c->stop) != cudaSuccess)
        return -1;
    return (double)ms * 1e3 / iters;
}

static int nccl_start_calls(coll_cal_backend *be, int kind, size_t bytes, int iters)
{
    nccl_ctx *c = be->ctx;
    for (int i = 0; i < iters; i++) {
        ncclResult_t r = nccl_call(c, kind, bytes);
        if (r != ncclSuccess) {
            fprintf(stderr, "dtcal: rank %d: NCCL: %s\n", c->rank, ncclGetErrorString(r));
            return -1;
        }
    }
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
    return cudaStreamSynchronize(c->stream) == cudaSuccess ? 0 : -1;
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
    if (c->comm_ok)
        ncclCommDestroy(c->comm);
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
