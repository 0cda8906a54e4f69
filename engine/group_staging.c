/* The model's collectives over one comm group; see group_staging.h. */
#include <stdlib.h>
#include "group_staging.h"

void tp_staging_free(tp_staging *t)
{
    free(t->host);
    free(t->ring_send);
    free(t->ring_recv);
    comm_nccl_free(t->nccl);
}

/* buf's n floats in the host staging buffer (grown as needed); returns it. */
static float *tp_stage_in(tp_staging *t, const float *buf, size_t n)
{
    if (n > t->cap) {
        free(t->host);
        t->host = malloc(n * sizeof(float));
        t->cap = n;
    }
    t->k->copy_to_host(t->host, buf, n * sizeof(float));
    return t->host;
}

/* One in-place collective on a backend buffer: NCCL's on the device where the group has a
 * communicator, else MPI's on a host copy, copied back. */
static void staged(tp_staging *t, float *buf, size_t n, void (*nccl)(comm_nccl *, float *, size_t),
                   void (*mpi)(comm_group *, float *, size_t))
{
    if (t->nccl) {
        nccl(t->nccl, buf, n);
        return;
    }
    mpi(t->group, tp_stage_in(t, buf, n), n);
    t->k->copy_to_device(buf, t->host, n * sizeof(float));
}

void tp_allreduce_staged(float *buf, size_t n, void *ctx)
{
    staged(ctx, buf, n, comm_nccl_allreduce_sum, comm_allreduce_sum);
}

/* Sequence parallelism's two collectives, in place on a whole-sequence backend buffer: all-gather
 * from each rank's block, reduce-scatter into it. */
void tp_allgather_staged(float *buf, size_t n, void *ctx)
{
    staged(ctx, buf, n, comm_nccl_allgather, comm_allgather);
}

void tp_reduce_scatter_staged(float *buf, size_t n, void *ctx)
{
    staged(ctx, buf, n, comm_nccl_reduce_scatter_sum, comm_reduce_scatter_sum);
}

/* Expert parallelism's exchanges over the EP group (gpt_shard.ep_*; host buffers, as the MoE
 * layer routes on host copies on every backend). */
void ep_alltoall_int(const int *send, int *recv, size_t n, void *ctx)
{
    comm_alltoall_int(ctx, send, recv, n);
}

void ep_alltoallv(const float *send, const size_t *send_counts, float *recv, const size_t *recv_counts,
                         void *ctx)
{
    comm_alltoallv(ctx, send, send_counts, recv, recv_counts);
}

/* --tp-comm-overlap: one ring step over the TP group (gpt_shard.tp_ring_start), its send staged
 * through the host and its receive copied back to the device when waited for. */
void *tp_ring_start(const float *send, float *recv, size_t n, void *ctx)
{
    tp_staging *t = ctx;
    if (n > t->ring_cap) {
        free(t->ring_send);
        free(t->ring_recv);
        t->ring_send = malloc(n * sizeof(float));
        t->ring_recv = malloc(n * sizeof(float));
        t->ring_cap = n;
    }
    t->k->copy_to_host(t->ring_send, send, n * sizeof(float));
    t->ring = (tp_ring_step){comm_iring_step(t->group, t->ring_send, t->ring_recv, n), recv, n};
    return &t->ring;
}

void tp_ring_wait(void *step, void *ctx)
{
    tp_staging *t = ctx;
    tp_ring_step *s = step;
    comm_request_wait(s->req);
    t->k->copy_to_device(s->device_recv, t->ring_recv, s->n * sizeof(float));
}

void tp_allreduce_host(float *buf, size_t n, int max, void *ctx)
{
    tp_staging *t = ctx;
    if (max)
        comm_allreduce_max(t->group, buf, n);
    else
        comm_allreduce_sum(t->group, buf, n);
}

void tp_alltoall_host(const float *send, float *recv, size_t n, void *ctx)
{
    tp_staging *t = ctx;
    comm_alltoall(t->group, send, recv, n);
}
