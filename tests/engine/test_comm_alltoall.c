/* The communicator's all-to-all, run under mpirun -np 4 (tests/engine/CMakeLists.txt): on every
 * group of a TP 2 x DP 2 layout (the world, a TP pair, a DP pair) and for several block sizes,
 * rank r's block j arrives at group rank j as its block r, in order, each element where the
 * reference below puts it, and the wire tally grows by (size-1)/size of the buffer.
 *
 * Built three ways: the MPI backend (engine/comm.h, host buffers); with TEST_COMM_NCCL, the NCCL
 * backend's all-to-all and send/receive (engine/comm_nccl.h) over the standin nccl.h
 * (DTRAIN_NCCL_STANDIN: host memory, MPI underneath), or over the real NCCL on one GPU per rank,
 * which exits 77 where the ranks have no GPU each. Exit 0 when every rank agrees. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm.h"
#ifdef TEST_COMM_NCCL
#include "comm_nccl.h"
#ifndef DTRAIN_NCCL_STANDIN
#include <cuda_runtime.h>
#endif
#endif

/* The value rank `from` puts at element i of the block it sends to rank `to`: exact in a float. */
static float value(int from, int to, size_t i)
{
    return (float)(from * 100000 + to * 1000 + (int)(i % 1000));
}

/* The buffers a backend moves: host memory, or device memory with copies in and out. */
static float *buf_new(size_t n)
{
#if defined(TEST_COMM_NCCL) && !defined(DTRAIN_NCCL_STANDIN)
    float *d = NULL;
    return cudaMalloc((void **)&d, (n ? n : 1) * sizeof(float)) == cudaSuccess ? d : NULL;
#else
    return malloc((n ? n : 1) * sizeof(float));
#endif
}

static void buf_free(float *b)
{
#if defined(TEST_COMM_NCCL) && !defined(DTRAIN_NCCL_STANDIN)
    cudaFree(b);
#else
    free(b);
#endif
}

static void copy(float *dst, const float *src, size_t n, int to_device)
{
#if defined(TEST_COMM_NCCL) && !defined(DTRAIN_NCCL_STANDIN)
    cudaMemcpy(dst, src, n * sizeof(float), to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
#else
    (void)to_device;
    memcpy(dst, src, n * sizeof(float));
#endif
}

/* One all-to-all of `part` floats per block on g; 0 when this rank received what the reference
 * says (and the tally grew as it should). */
static int check_alltoall(comm_group *g, const char *name, size_t part)
{
    int size = comm_group_size(g), rank = comm_group_rank(g), bad = 0;
    size_t n = part * (size_t)size;
    float *host = malloc((n ? n : 1) * sizeof(float)), *send = buf_new(n), *recv = buf_new(n);
    for (int j = 0; j < size; j++)
        for (size_t i = 0; i < part; i++)
            host[(size_t)j * part + i] = value(rank, j, i);
    copy(send, host, n, 1);
    double before = comm_bytes_sent(g);
#ifdef TEST_COMM_NCCL
    char err[256];
    comm_nccl *nc = comm_nccl_create(g, err, sizeof err);
    if (!nc) {
        fprintf(stderr, "%s: %s\n", name, err);
        bad = 1;
        goto out;
    }
    comm_nccl_alltoall(nc, send, recv, n);
#else
    comm_alltoall(g, send, recv, n);
#endif
    double sent = comm_bytes_sent(g) - before, want = (double)(size - 1) / size * (double)n * sizeof(float);
    copy(host, recv, n, 0);
    for (int s = 0; s < size && !bad; s++)
        for (size_t i = 0; i < part && !bad; i++)
            if (host[(size_t)s * part + i] != value(s, rank, i)) {
                fprintf(stderr, "%s, %zu per block: group rank %d, block %d, element %zu: %g, expected %g\n", name,
                        part, rank, s, i, host[(size_t)s * part + i], value(s, rank, i));
                bad = 1;
            }
    if (!bad && (sent < want - 0.5 || sent > want + 0.5)) {
        fprintf(stderr, "%s, %zu per block: the tally grew by %.0f bytes, expected %.0f\n", name, part, sent, want);
        bad = 1;
    }
#ifdef TEST_COMM_NCCL
    /* send/receive in a ring: this rank's first block to the next rank, the previous one's in */
    if (!bad && part) {
        int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        comm_nccl_sendrecv(nc, next, send, prev, recv, part);
        copy(host, recv, part, 0);
        for (size_t i = 0; i < part && !bad; i++)
            if (host[i] != value(prev, 0, i)) {
                fprintf(stderr, "%s, send/receive of %zu: element %zu from rank %d: %g, expected %g\n", name, part, i,
                        prev, host[i], value(prev, 0, i));
                bad = 1;
            }
    }
    comm_nccl_free(nc);
out:
#endif
    buf_free(send);
    buf_free(recv);
    free(host);
    return bad;
}

int main(int argc, char **argv)
{
    comm_ctx c;
    comm_start(&c, &argc, &argv);
    char err[256];
    if (c.world_size != 4 || comm_layout(&c, 2, 1, 2, err, sizeof err) != 0) {
        fprintf(stderr, "run under mpirun -np 4 (%d rank(s))\n", c.world_size);
        comm_finish(&c);
        return 1;
    }
#ifdef TEST_COMM_NCCL
    if (comm_nccl_select_device(&c, err, sizeof err) != 0) {
        if (c.world_rank == 0)
            fprintf(stderr, "skipped: %s\n", err);
        comm_finish(&c);
        return 77;
    }
#endif
    static const size_t parts[] = {1, 3, 1000, 65537};
    int bad = 0;
    for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
        bad |= check_alltoall(c.world, "world", parts[k]);
        bad |= check_alltoall(c.tp_group, "TP group", parts[k]);
        bad |= check_alltoall(c.dp_group, "DP group", parts[k]);
    }
    bad = comm_allreduce_max_int(c.world, bad);
    if (c.world_rank == 0)
        printf("all-to-all over 4 ranks, TP and DP pairs: %s\n", bad ? "FAILED" : "every block where it belongs");
    comm_finish(&c);
    return bad;
}
