/* NCCL on device buffers (dtrain --comm nccl): one NCCL communicator per process group (TP, DP,
 * the tied embedding's two ends), its unique id broadcast over the group's MPI communicator, one
 * GPU per rank (the node-local rank picks it, before any allocation). The collectives run in
 * place on the device (the all-to-all from one buffer to another), on the default stream the
 * kernels use, and return when the result is there (comm_nccl_set_stream changes both, for dtcal
 * overlap). dtrain's pipeline transfers stay on MPI (host-staged): the schedule posts them one at
 * a time, and a blocking NCCL send meeting the peer's own send would deadlock without grouping
 * them; comm_nccl_sendrecv groups one send with one receive (dtcal times it).
 * Builds without CUDA or NCCL keep the interface: comm_nccl_select_device and comm_nccl_create
 * fail with the reason. NCCL refuses two ranks on one GPU; --comm mpi stages device buffers
 * through the host instead. */
#ifndef DTSIM_ENGINE_COMM_NCCL_H
#define DTSIM_ENGINE_COMM_NCCL_H
#include <stddef.h>
#include "comm.h"

typedef struct comm_nccl comm_nccl; /* opaque */

/* Makes this rank's GPU current: the node-local rank's. Call before the model allocates. Every
 * rank of the world calls it; 0, or -1 with err on every rank (fewer GPUs than ranks on a node,
 * no GPU, no NCCL in this build). */
int comm_nccl_select_device(comm_ctx *c, char *err, size_t errlen);
/* A communicator over g's ranks (collective over g). NULL with err on every rank of g. */
comm_nccl *comm_nccl_create(comm_group *g, char *err, size_t errlen);
/* In-place sum of n floats of device memory over the group; returns when the sum is there. Also
 * adds the ring's bytes (2(n-1)/n of the buffer) to the group's wire tally. */
void comm_nccl_allreduce_sum(comm_nccl *n, float *device_buf, size_t count);
/* As comm.h's host versions, on device memory: count is the whole buffer, a multiple of the
 * group size, rank i owning the i-th 1/size. Reduce-scatter leaves the sum of this rank's part
 * in that part; all-gather fills the buffer from every rank's part. Each adds (n-1)/n of the
 * buffer to the wire tally. */
void comm_nccl_reduce_scatter_sum(comm_nccl *n, float *device_buf, size_t count);
void comm_nccl_allgather(comm_nccl *n, float *device_buf, size_t count);
/* Reduce-scatter with a count per rank (counts[size]): buf holds the parts one after another in
 * rank order, and rank r's part receives the group's sum of it (one NCCL reduce to each owner,
 * grouped). Adds (n-1)/n of the buffer to the wire tally. */
void comm_nccl_reduce_to_owners(comm_nccl *n, float *device_buf, const size_t *counts);
/* All-gather with a count per rank: buf holds the parts in rank order, rank r's part is read
 * from rank r and every part is filled on every rank (one NCCL broadcast from each owner,
 * grouped). Adds (n-1)/n of the buffer to the wire tally. */
void comm_nccl_gather_from_owners(comm_nccl *n, float *device_buf, const size_t *counts);
/* All-to-all: send holds count floats (a multiple of the group size) as size blocks in rank
 * order; block j goes to rank j, which receives it as block `this rank` of recv. NCCL has no
 * all-to-all: one ncclSend and one ncclRecv to and from every rank, grouped. send and recv must
 * not overlap. Adds (n-1)/n of the buffer to the wire tally. */
void comm_nccl_alltoall(comm_nccl *n, const float *send, float *recv, size_t count);
/* Point-to-point: count floats of send to group rank dest and count floats from group rank src
 * into recv, grouped, so two ranks sending to each other at once cannot deadlock; dest or src
 * < 0 leaves that half out. Adds the bytes sent to the wire tally. */
void comm_nccl_sendrecv(comm_nccl *n, int dest, const float *send, int src, float *recv, size_t count);
/* Where the calls run. NULL (the default, as the engine runs them): on the default stream, each
 * call returning when its result is there. Otherwise on cuda_stream (a cudaStream_t), each call
 * returning once it is enqueued, so it can run beside the caller's kernels (dtcal overlap);
 * comm_nccl_wait waits for them. */
void comm_nccl_set_stream(comm_nccl *n, void *cuda_stream);
/* Waits for every call enqueued on the communicator's stream, under the watchdog. */
void comm_nccl_wait(comm_nccl *n);
void comm_nccl_free(comm_nccl *n);
#endif
