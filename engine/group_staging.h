/* The model's collectives over one comm group (the callbacks gpt_shard takes for TP, SP, CP
 * and EP): on backend buffers, staged through host memory over MPI, or with NCCL in device
 * memory. Each group's state is one tp_staging, its buffers grown as needed. */
#ifndef DTSIM_ENGINE_GROUP_STAGING_H
#define DTSIM_ENGINE_GROUP_STAGING_H
#include <stddef.h>
#include "comm.h"
#include "comm_nccl.h"
#include "kernels.h"

typedef struct {
    comm_request *req;
    float *device_recv;
    size_t n;
} tp_ring_step;

typedef struct {
    comm_group *group;
    const kernels_backend *k;
    float *host;
    size_t cap;
    comm_nccl *nccl; /* NULL: MPI */
    /* --tp-comm-overlap's ring step in flight (gpt_sp.c's rings wait for each before starting the
     * next, so one set of host buffers serves them all) */
    float *ring_send, *ring_recv;
    size_t ring_cap;
    tp_ring_step ring;
} tp_staging;

/* Frees what the staging grew and its NCCL communicator (NULL: none). */
void tp_staging_free(tp_staging *t);
/* TP (or CP) all-reduce, and sequence parallelism's all-gather and reduce-scatter, in place on a
 * backend buffer; ctx: the group's tp_staging. */
void tp_allreduce_staged(float *buf, size_t n, void *ctx);
void tp_allgather_staged(float *buf, size_t n, void *ctx);
void tp_reduce_scatter_staged(float *buf, size_t n, void *ctx);
/* Expert parallelism's exchanges over the EP group (ctx: the comm_group). */
void ep_alltoall_int(const int *send, int *recv, size_t n, void *ctx);
void ep_alltoallv(const float *send, const size_t *send_counts, float *recv, const size_t *recv_counts, void *ctx);
/* One ring step over the group (--tp-comm-overlap, CP's ring): started, then waited for. */
void *tp_ring_start(const float *send, float *recv, size_t n, void *ctx);
void tp_ring_wait(void *step, void *ctx);
/* An all-reduce (sum, or max) of host floats over the group. */
void tp_allreduce_host(float *buf, size_t n, int max, void *ctx);
/* An all-to-all of host floats over the group: n in all, equal blocks in rank order (comm_alltoall). */
void tp_alltoall_host(const float *send, float *recv, size_t n, void *ctx);
#endif
