/* NCCL and CUDA runtime calls of engine/comm_nccl.c carried out by MPI on host memory; see nccl.h. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_runtime.h"
#include "nccl.h"

struct standin_comm {
    MPI_Comm mpi;
    int rank, size;
};

/* What a unique id carries here: who collects the members, and a tag no other id uses. */
typedef struct {
    int root_world_rank;
    int serial;
} standin_id;

#define STANDIN_TAG_BASE 30000 /* above dtrain's pipeline tags */

/* dtrain started without mpirun does not initialise MPI: one rank, and everything is local. */
static int mpi_up(void)
{
    int up = 0;
    MPI_Initialized(&up);
    return up;
}

static int world_rank(void)
{
    int r = 0;
    if (mpi_up())
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

static void usage_error(const char *what)
{
    fprintf(stderr, "nccl standin: rank %d: %s\n", world_rank(), what);
    if (mpi_up())
        MPI_Abort(MPI_COMM_WORLD, 3);
    abort();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static int serial; /* only a group's first rank makes ids, in the same order on every rank */
    standin_id s;
    s.root_world_rank = world_rank();
    s.serial = serial++;
    memset(id, 0, sizeof *id);
    memcpy(id->internal, &s, sizeof s);
    return ncclSuccess;
}

/* The members tell the id's root their world ranks; the root answers with all of them in NCCL
 * rank order, and every member builds the MPI communicator of exactly that order. */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    standin_id s;
    memcpy(&s, id.internal, sizeof s);
    struct standin_comm *c = calloc(1, sizeof *c);
    if (!mpi_up()) {
        if (nranks != 1 || rank != 0)
            usage_error("a communicator of several ranks without MPI");
        c->mpi = MPI_COMM_NULL;
        c->size = 1;
        *comm = c;
        return ncclSuccess;
    }
    int me = world_rank(), tag = STANDIN_TAG_BASE + s.serial;
    int *worlds = malloc((size_t)nranks * sizeof(int));
    if (me == s.root_world_rank) {
        worlds[rank] = me;
        for (int i = 1; i < nranks; i++) {
            int pair[2];
            MPI_Recv(pair, 2, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            worlds[pair[0]] = pair[1];
        }
        for (int i = 0; i < nranks; i++)
            if (worlds[i] != me)
                MPI_Send(worlds, nranks, MPI_INT, worlds[i], tag, MPI_COMM_WORLD);
    } else {
        int pair[2] = {rank, me};
        MPI_Send(pair, 2, MPI_INT, s.root_world_rank, tag, MPI_COMM_WORLD);
        MPI_Recv(worlds, nranks, MPI_INT, s.root_world_rank, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Group world_group, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Group_incl(world_group, nranks, worlds, &group);
    MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &c->mpi);
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    free(worlds);
    MPI_Comm_rank(c->mpi, &c->rank);
    MPI_Comm_size(c->mpi, &c->size);
    if (c->rank != rank || c->size != nranks)
        usage_error("communicator rank or size differs from the one asked for");
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (comm->mpi != MPI_COMM_NULL)
        MPI_Comm_free(&comm->mpi);
    free(comm);
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    return r == ncclSuccess ? "no error" : "standin error";
}

static int overlaps(const float *a, size_t na, const float *b, size_t nb)
{
    return a < b + nb && b < a + na;
}

static void check_call(ncclDataType_t type, ncclComm_t comm)
{
    if (type != ncclFloat || !comm)
        usage_error("only float collectives on a live communicator are expected");
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream)
{
    (void)op;
    (void)stream;
    check_call(type, comm);
    if (send != recv && overlaps(send, count, recv, count))
        usage_error("all-reduce buffers overlap without being the same");
    if (send != recv)
        memcpy(recv, send, count * sizeof(float));
    if (comm->size > 1)
        MPI_Allreduce(MPI_IN_PLACE, recv, (int)count, MPI_FLOAT, MPI_SUM, comm->mpi);
    return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream)
{
    (void)op;
    (void)stream;
    check_call(type, comm);
    const float *s = send;
    float *r = recv;
    size_t total = recvcount * (size_t)comm->size;
    if (overlaps(s, total, r, recvcount) && r != s + (size_t)comm->rank * recvcount)
        usage_error("reduce-scatter: the receive buffer overlaps the send buffer but is not this rank's part");
    float *part = malloc((recvcount ? recvcount : 1) * sizeof(float));
    if (comm->size > 1)
        MPI_Reduce_scatter_block(s, part, (int)recvcount, MPI_FLOAT, MPI_SUM, comm->mpi);
    else
        memcpy(part, s, recvcount * sizeof(float));
    memcpy(r, part, recvcount * sizeof(float));
    free(part);
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream)
{
    (void)stream;
    check_call(type, comm);
    const float *s = send;
    float *r = recv;
    size_t total = sendcount * (size_t)comm->size;
    if (overlaps(s, sendcount, r, total) && s != r + (size_t)comm->rank * sendcount)
        usage_error("all-gather: the send buffer overlaps the receive buffer but is not this rank's part");
    float *mine = malloc((sendcount ? sendcount : 1) * sizeof(float));
    memcpy(mine, s, sendcount * sizeof(float));
    if (comm->size > 1)
        MPI_Allgather(mine, (int)sendcount, MPI_FLOAT, r, (int)sendcount, MPI_FLOAT, comm->mpi);
    else
        memcpy(r, mine, sendcount * sizeof(float));
    free(mine);
    return ncclSuccess;
}

static int group_depth; /* ncclGroupStart nesting; calls inside run at once (MPI keeps the order) */

ncclResult_t ncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}

/* Sends and receives posted inside a group, completed when the outermost group ends. */
static MPI_Request *p2p;
static int n_p2p, cap_p2p;

static void p2p_complete(void)
{
    MPI_Waitall(n_p2p, p2p, MPI_STATUSES_IGNORE);
    n_p2p = 0;
}

ncclResult_t ncclGroupEnd(void)
{
    if (group_depth == 0)
        usage_error("ncclGroupEnd without ncclGroupStart");
    if (--group_depth == 0)
        p2p_complete();
    return ncclSuccess;
}

static ncclResult_t p2p_post(int is_send, const void *send, void *recv, size_t count, ncclDataType_t type, int peer,
                             ncclComm_t comm)
{
    check_call(type, comm);
    if (peer < 0 || peer >= comm->size || comm->mpi == MPI_COMM_NULL)
        usage_error("send/receive: peer outside the communicator");
    if (n_p2p == cap_p2p) {
        cap_p2p = cap_p2p ? 2 * cap_p2p : 16;
        p2p = realloc(p2p, (size_t)cap_p2p * sizeof *p2p);
    }
    const int tag = STANDIN_TAG_BASE - 1; /* on the communicator's own MPI communicator */
    if (is_send)
        MPI_Isend(send, (int)count, MPI_FLOAT, peer, tag, comm->mpi, &p2p[n_p2p++]);
    else
        MPI_Irecv(recv, (int)count, MPI_FLOAT, peer, tag, comm->mpi, &p2p[n_p2p++]);
    if (group_depth == 0)
        p2p_complete();
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    (void)stream;
    return p2p_post(1, send, NULL, count, type, peer, comm);
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return p2p_post(0, NULL, recv, count, type, peer, comm);
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream)
{
    (void)op;
    (void)stream;
    check_call(type, comm);
    if (root < 0 || root >= comm->size)
        usage_error("reduce: root outside the communicator");
    int me = comm->rank == root;
    if (me && send != recv && overlaps(send, count, recv, count))
        usage_error("reduce: buffers overlap without being the same");
    if (me && send != recv)
        memcpy(recv, send, count * sizeof(float));
    if (comm->size > 1)
        MPI_Reduce(me ? MPI_IN_PLACE : send, me ? recv : NULL, (int)count, MPI_FLOAT, MPI_SUM, root, comm->mpi);
    return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    (void)stream;
    check_call(type, comm);
    if (root < 0 || root >= comm->size)
        usage_error("broadcast: root outside the communicator");
    if (comm->rank == root && send != recv) {
        if (overlaps(send, count, recv, count))
            usage_error("broadcast: buffers overlap without being the same");
        memcpy(recv, send, count * sizeof(float));
    }
    if (comm->size > 1)
        MPI_Bcast(recv, (int)count, MPI_FLOAT, root, comm->mpi);
    return ncclSuccess;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!mpi_up()) {
        *count = 1;
        return cudaSuccess;
    }
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, count);
    MPI_Comm_free(&node);
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    (void)device;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    (void)stream;
    return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e)
{
    return e == cudaSuccess ? "no error" : "standin error";
}
