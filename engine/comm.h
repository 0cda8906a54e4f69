/* The engine's communicator: process groups and the collectives the parallel layouts need,
 * behind one interface. Backends: MPI on host buffers (the CPU engine, and device buffers staged
 * through the host so several ranks can share one GPU); "single" when not launched by mpirun.
 * NCCL for device buffers is the next backend (it needs a GPU to test).
 *
 * Rank grid (DESIGN.md): TP fastest, then PP, then DP: world = tp x pp x dp. */
#ifndef DTSIM_ENGINE_COMM_H
#define DTSIM_ENGINE_COMM_H
#include <stddef.h>

typedef struct comm_group comm_group; /* opaque */

typedef struct {
    int world_rank, world_size;
    int tp, pp, dp;
    int tp_rank, pp_rank, dp_rank;
    comm_group *world, *dp_group;
    int mpi;                   /* launched under MPI */
} comm_ctx;

/* Starts the communicator (MPI_Init when launched by mpirun). Returns 0. */
int comm_start(comm_ctx *c, int *argc, char ***argv);
/* Checks world = tp x pp x dp and builds the groups. Every rank sees the same layout, so on a
 * bad one every rank fails here, before any allocation: no rank waits for another. */
int comm_layout(comm_ctx *c, int tp, int pp, int dp, char *err, size_t errlen);
void comm_finish(comm_ctx *c);

/* Collectives on host float buffers (sum). n counts floats; for reduce-scatter and all-gather
 * `n` is the whole buffer, a multiple of the group size, rank i owning the i-th 1/size. */
void comm_allreduce_sum(comm_group *g, float *buf, size_t n);
void comm_reduce_scatter_sum(comm_group *g, float *buf, size_t n); /* result in this rank's part of buf */
void comm_allgather(comm_group *g, float *buf, size_t n);           /* from each rank's part of buf */
double comm_allreduce_sum_double(comm_group *g, double x);
int comm_allreduce_max_int(comm_group *g, int x);
int comm_group_size(const comm_group *g);
int comm_group_rank(const comm_group *g);
/* Bytes this rank has sent through collectives of the group (for the wire-volume checks). */
double comm_bytes_sent(const comm_group *g);
#endif
