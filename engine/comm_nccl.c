/* See comm_nccl.h. */
#include <stdio.h>
#include <stdlib.h>
#include "comm_nccl.h"

#ifdef DTRAIN_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

struct comm_nccl {
    ncclComm_t comm;
    comm_group *group;
    cudaStream_t stream; /* 0: the default stream the kernels use */
    int enqueue_only;    /* on a stream of the caller's: return once enqueued (comm_nccl_set_stream) */
};

int comm_nccl_select_device(comm_ctx *c, char *err, size_t errlen)
{
    int local_rank = 0, local_size = 1, gpus = 0;
    comm_node_local(c, &local_rank, &local_size);
    cudaError_t e = cudaGetDeviceCount(&gpus);
    int ok = e == cudaSuccess && local_size <= gpus;
    if (ok)
        ok = cudaSetDevice(local_rank) == cudaSuccess;
    if (comm_allreduce_max_int(c->world, !ok)) {
        snprintf(err, errlen, "--comm nccl: %d rank(s) on this node but %d GPU(s)%s%s: NCCL needs one GPU per rank "
                              "(--comm mpi stages device buffers through the host, so ranks can share a GPU)",
                 local_size, e == cudaSuccess ? gpus : 0, e == cudaSuccess ? "" : ": ",
                 e == cudaSuccess ? "" : cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

comm_nccl *comm_nccl_create(comm_group *g, char *err, size_t errlen)
{
    ncclUniqueId id;
    ncclResult_t r = ncclSuccess;
    if (comm_group_rank(g) == 0)
        r = ncclGetUniqueId(&id);
    if (comm_allreduce_max_int(g, r != ncclSuccess)) {
        snprintf(err, errlen, "--comm nccl: ncclGetUniqueId failed on the group's first rank");
        return NULL;
    }
    comm_bcast_bytes(g, &id, sizeof id, 0);
    comm_nccl *n = calloc(1, sizeof *n);
    r = n ? ncclCommInitRank(&n->comm, comm_group_size(g), id, comm_group_rank(g)) : ncclSystemError;
    if (comm_allreduce_max_int(g, r != ncclSuccess)) {
        snprintf(err, errlen, "--comm nccl: ncclCommInitRank: %s",
                 r != ncclSuccess ? ncclGetErrorString(r) : "failed on another rank");
        if (n && r == ncclSuccess)
            ncclCommDestroy(n->comm);
        free(n);
        return NULL;
    }
    n->group = g;
    return n;
}

/* Waits for the collective on the kernels' stream, under the communicator's watchdog (a peer that
 * died or hangs stops this rank after --comm-timeout, naming the collective); a failure ends the
 * rank with the reason. */
static void finish(comm_nccl *n, ncclResult_t r, const char *what, size_t count)
{
    cudaError_t e = cudaSuccess;
    if (r == ncclSuccess && !n->enqueue_only) {
        comm_watch_enter(n->group, what);
        e = cudaStreamSynchronize(n->stream);
        comm_watch_leave(n->group);
    }
    if (r != ncclSuccess || e != cudaSuccess) {
        fprintf(stderr, "dtrain: %s of %zu floats failed: %s\n", what, count,
                r != ncclSuccess ? ncclGetErrorString(r) : cudaGetErrorString(e));
        exit(1);
    }
}

void comm_nccl_allreduce_sum(comm_nccl *n, float *device_buf, size_t count)
{
    finish(n, ncclAllReduce(device_buf, device_buf, count, ncclFloat, ncclSum, n->comm, n->stream),
           "an NCCL all-reduce", count);
    int size = comm_group_size(n->group);
    comm_add_bytes_sent(n->group, 2.0 * (size - 1) / size * (double)count * sizeof(float));
}

/* In place, as NCCL defines it: this rank's part of the buffer is the receive (reduce-scatter)
 * or send (all-gather) buffer. */
void comm_nccl_reduce_scatter_sum(comm_nccl *n, float *device_buf, size_t count)
{
    int size = comm_group_size(n->group);
    size_t part = count / (size_t)size;
    float *mine = device_buf + part * (size_t)comm_group_rank(n->group);
    finish(n, ncclReduceScatter(device_buf, mine, part, ncclFloat, ncclSum, n->comm, n->stream),
           "an NCCL reduce-scatter", count);
    comm_add_bytes_sent(n->group, (double)(size - 1) / size * (double)count * sizeof(float));
}

void comm_nccl_allgather(comm_nccl *n, float *device_buf, size_t count)
{
    int size = comm_group_size(n->group);
    size_t part = count / (size_t)size;
    const float *mine = device_buf + part * (size_t)comm_group_rank(n->group);
    finish(n, ncclAllGather(mine, device_buf, part, ncclFloat, n->comm, n->stream), "an NCCL all-gather", count);
    comm_add_bytes_sent(n->group, (double)(size - 1) / size * (double)count * sizeof(float));
}

/* One NCCL call per owner of the parts of buf (counts[size], in rank order), grouped: a reduce to
 * each owner (reduce-scatter with counts), or a broadcast from each (all-gather with counts). */
static void per_owner(comm_nccl *n, float *device_buf, const size_t *counts, int broadcast, const char *what)
{
    int size = comm_group_size(n->group);
    size_t off = 0;
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; i < size && r == ncclSuccess; i++) {
        float *part = device_buf + off;
        if (counts[i])
            r = broadcast ? ncclBroadcast(part, part, counts[i], ncclFloat, i, n->comm, n->stream)
                          : ncclReduce(part, part, counts[i], ncclFloat, ncclSum, i, n->comm, n->stream);
        off += counts[i];
    }
    ncclResult_t end = ncclGroupEnd();
    finish(n, r != ncclSuccess ? r : end, what, off);
    comm_add_bytes_sent(n->group, (double)(size - 1) / size * (double)off * sizeof(float));
}

void comm_nccl_reduce_to_owners(comm_nccl *n, float *device_buf, const size_t *counts)
{
    per_owner(n, device_buf, counts, 0, "NCCL reduces to the shards' owners");
}

void comm_nccl_gather_from_owners(comm_nccl *n, float *device_buf, const size_t *counts)
{
    per_owner(n, device_buf, counts, 1, "NCCL broadcasts from the shards' owners");
}

void comm_nccl_alltoall(comm_nccl *n, const float *send, float *recv, size_t count)
{
    int size = comm_group_size(n->group);
    size_t part = count / (size_t)size;
    ncclResult_t r = ncclGroupStart();
    for (int p = 0; p < size && r == ncclSuccess; p++) {
        r = ncclSend(send + (size_t)p * part, part, ncclFloat, p, n->comm, n->stream);
        if (r == ncclSuccess)
            r = ncclRecv(recv + (size_t)p * part, part, ncclFloat, p, n->comm, n->stream);
    }
    ncclResult_t end = ncclGroupEnd();
    finish(n, r != ncclSuccess ? r : end, "an NCCL all-to-all", count);
    comm_add_bytes_sent(n->group, (double)(size - 1) / size * (double)count * sizeof(float));
}

void comm_nccl_sendrecv(comm_nccl *n, int dest, const float *send, int src, float *recv, size_t count)
{
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess && dest >= 0)
        r = ncclSend(send, count, ncclFloat, dest, n->comm, n->stream);
    if (r == ncclSuccess && src >= 0)
        r = ncclRecv(recv, count, ncclFloat, src, n->comm, n->stream);
    ncclResult_t end = ncclGroupEnd();
    finish(n, r != ncclSuccess ? r : end, "an NCCL send/receive", count);
    if (dest >= 0 && dest != comm_group_rank(n->group))
        comm_add_bytes_sent(n->group, (double)count * sizeof(float));
}

void comm_nccl_set_stream(comm_nccl *n, void *cuda_stream)
{
    n->stream = (cudaStream_t)cuda_stream;
    n->enqueue_only = cuda_stream != NULL;
}

void comm_nccl_wait(comm_nccl *n)
{
    comm_watch_enter(n->group, "NCCL calls on the communicator's stream");
    cudaError_t e = cudaStreamSynchronize(n->stream);
    comm_watch_leave(n->group);
    if (e != cudaSuccess) {
        fprintf(stderr, "dtrain: NCCL calls on the communicator's stream failed: %s\n", cudaGetErrorString(e));
        exit(1);
    }
}

void comm_nccl_free(comm_nccl *n)
{
    if (n)
        ncclCommDestroy(n->comm);
    free(n);
}

#else /* no CUDA or no NCCL in this build */

struct comm_nccl {
    int unused;
};

int comm_nccl_select_device(comm_ctx *c, char *err, size_t errlen)
{
    (void)c;
    snprintf(err, errlen, "--comm nccl: this build has no NCCL (it needs the CUDA toolkit with NCCL when cmake "
                          "configures); use --comm mpi");
    return -1;
}

comm_nccl *comm_nccl_create(comm_group *g, char *err, size_t errlen)
{
    (void)g;
    snprintf(err, errlen, "--comm nccl: this build has no NCCL");
    return NULL;
}

/* Unreachable: comm_nccl_create never returns a communicator in this build. */
void comm_nccl_allreduce_sum(comm_nccl *n, float *device_buf, size_t count)
{
    (void)n;
    (void)device_buf;
    (void)count;
}

void comm_nccl_reduce_scatter_sum(comm_nccl *n, float *device_buf, size_t count)
{
    comm_nccl_allreduce_sum(n, device_buf, count);
}

void comm_nccl_allgather(comm_nccl *n, float *device_buf, size_t count)
{
    comm_nccl_allreduce_sum(n, device_buf, count);
}

void comm_nccl_reduce_to_owners(comm_nccl *n, float *device_buf, const size_t *counts)
{
    (void)counts;
    comm_nccl_allreduce_sum(n, device_buf, 0);
}

void comm_nccl_gather_from_owners(comm_nccl *n, float *device_buf, const size_t *counts)
{
    (void)counts;
    comm_nccl_allreduce_sum(n, device_buf, 0);
}

void comm_nccl_alltoall(comm_nccl *n, const float *send, float *recv, size_t count)
{
    (void)send;
    (void)recv;
    comm_nccl_allreduce_sum(n, NULL, count);
}

void comm_nccl_sendrecv(comm_nccl *n, int dest, const float *send, int src, float *recv, size_t count)
{
    (void)dest;
    (void)send;
    (void)src;
    (void)recv;
    comm_nccl_allreduce_sum(n, NULL, count);
}

void comm_nccl_set_stream(comm_nccl *n, void *cuda_stream)
{
    (void)n;
    (void)cuda_stream;
}

void comm_nccl_wait(comm_nccl *n)
{
    (void)n;
}

void comm_nccl_free(comm_nccl *n)
{
    free(n);
}
#endif
