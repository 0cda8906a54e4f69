/* Test double for <nccl.h>: the calls engine/comm_nccl.c makes, carried out by MPI on host
 * memory (nccl_standin.c), so its buffer logic runs in CI on the CPU backend. Only the test
 * binary dtrain_nccl_standin includes this header (it comes before the CUDA toolkit's on the
 * include path); the names are mapped to standin_* so nothing clashes with a real libnccl. */
#ifndef DTSIM_TESTS_NCCL_STANDIN_NCCL_H
#define DTSIM_TESTS_NCCL_STANDIN_NCCL_H
#include <stddef.h>

typedef enum { ncclSuccess = 0, ncclSystemError = 2, ncclInvalidUsage = 5 } ncclResult_t;
typedef enum { ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct standin_comm *ncclComm_t;
typedef void *cudaStream_t;

#define ncclGetUniqueId standin_ncclGetUniqueId
#define ncclCommInitRank standin_ncclCommInitRank
#define ncclCommDestroy standin_ncclCommDestroy
#define ncclGetErrorString standin_ncclGetErrorString
#define ncclAllReduce standin_ncclAllReduce
#define ncclReduceScatter standin_ncclReduceScatter
#define ncclAllGather standin_ncclAllGather
#define ncclReduce standin_ncclReduce
#define ncclBroadcast standin_ncclBroadcast
#define ncclGroupStart standin_ncclGroupStart
#define ncclGroupEnd standin_ncclGroupEnd
#define ncclSend standin_ncclSend
#define ncclRecv standin_ncclRecv

ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
const char *ncclGetErrorString(ncclResult_t r);
/* As NCCL defines them, in place included: all-reduce with send == recv; reduce-scatter with
 * recv == send + rank * recvcount; all-gather with send == recv + rank * sendcount. Any other
 * overlap of the two buffers is a usage error: the standin aborts the job naming it. */
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream);
/* Reduce with send == recv is in place; on other ranks than root recv is not touched. Group calls
 * run each operation at once: every rank makes the same calls in the same order. */
ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream);
/* Broadcast from root's send into every rank's recv; send == recv is in place. */
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
/* Point-to-point: inside a group they are posted (non-blocking) and completed by the outermost
 * ncclGroupEnd, as NCCL runs a group's sends and receives together; outside one, each waits. */
ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream);
#endif
