/* The engine's communicator: process groups and the collectives the parallel layouts need,
 * behind one interface. Backends: MPI on host buffers (the CPU engine, and device buffers staged
 * through the host so several ranks can share one GPU); "single" when not launched by mpirun.
 * NCCL on device buffers (TP, DP/ZeRO and tied-embedding collectives) is in comm_nccl.h
 * (dtrain --comm nccl).
 *
 * Rank grid (rank_grid.h): TP fastest, then CP, DP, PP: world = tp x cp x dp x pp. */
#ifndef DTSIM_ENGINE_COMM_H
#define DTSIM_ENGINE_COMM_H
#include <stddef.h>
#include <stdint.h>
#include "rank_grid.h"

typedef struct comm_group comm_group; /* opaque */
typedef struct comm_sends comm_sends; /* opaque: point-to-point sends not yet completed */
typedef struct comm_watchdog comm_watchdog; /* opaque: the blocked-call timer */

typedef struct {
    int world_rank, world_size;
    int tp, pp, dp, cp;
    int tp_rank, pp_rank, dp_rank, cp_rank;
    rank_grid grid; /* where each rank sits (rank_grid.h: TP innermost, then CP, DP, PP) */
    comm_group *world;
    comm_group *dp_group;      /* same (tp, pp) position, one rank per replica and CP rank: the
                                  gradients' group (Megatron's data-parallel group with context
                                  parallelism), ordered dp_rank x cp + cp_rank */
    comm_group *cp_group;      /* the cp ranks of one (tp, pp) position of one replica */
    comm_group *tp_group;      /* the tp ranks of one stage of one replica and CP rank */
    comm_group *mp_group;      /* the tp x pp ranks of one replica and CP rank (norms over the model) */
    comm_group *embed_group;   /* first and last stage, same tp rank, replica and CP rank (tied wte) */
    /* Expert parallelism (comm_layout_ep): the dp x cp ranks of one (tp, pp) position, by their
     * index in the gradients' group (replica = dp_rank x cp + cp_rank), split into groups of ep
     * consecutive ones, ep_rank = replica % ep (Megatron-Core's expert grid, "tp-ep-dp-pp" with
     * the expert tensor-parallel size tp: EP carved from CP and DP, CP first); the
     * expert-data-parallel group holds the ranks with the same ep_rank (the same experts),
     * edp_rank = replica / ep. */
    int ep, ep_rank, edp_rank;
    comm_group *ep_group;      /* ep ranks: the experts' all-to-all */
    comm_group *edp_group;     /* dp x cp / ep ranks: the expert gradients' reduction */
    comm_sends *sends;
    comm_watchdog *watchdog;
    int mpi;                   /* launched under MPI */
    int attached;              /* MPI started by the caller (comm_attach): comm_finish leaves it up */
} comm_ctx;

/* Starts the communicator (MPI_Init when launched by mpirun). Returns 0. */
int comm_start(comm_ctx *c, int *argc, char ***argv);
/* The same communicator over an MPI the caller has already started (MPI_Init or MPI_Init_thread,
 * its error handler left as it is): dtcal times the engine's collectives through it. Without MPI
 * running, one rank. comm_finish then leaves MPI to the caller. Returns 0. */
int comm_attach(comm_ctx *c);
/* Checks world = tp x pp x dp and builds the groups. Every rank sees the same layout, so on a
 * bad one every rank fails here, before any allocation: no rank waits for another. */
int comm_layout(comm_ctx *c, int tp, int pp, int dp, char *err, size_t errlen);
/* The same with context parallelism: tp x cp x pp x dp ranks. */
int comm_layout_cp(comm_ctx *c, int tp, int cp, int pp, int dp, char *err, size_t errlen);
/* After comm_layout_cp: the expert-parallel groups of ep ranks (ep divides dp x cp). Every rank
 * sees the same degrees, so all fail alike. 0, or -1 with err. Without it ep is 1 and both
 * groups are one rank. */
int comm_layout_ep(comm_ctx *c, int ep, char *err, size_t errlen);
void comm_finish(comm_ctx *c);
/* Starts the watchdog: a rank blocked in one collective or pipeline transfer for `seconds`
 * prints what it waited for and exits 1 (a peer died or hangs), so no rank waits for ever. */
void comm_set_timeout(comm_ctx *c, double seconds);

/* Collectives on host float buffers (sum). n counts floats; for reduce-scatter and all-gather
 * `n` is the whole buffer, a multiple of the group size, rank i owning the i-th 1/size. */
void comm_allreduce_sum(comm_group *g, float *buf, size_t n);
void comm_allreduce_max(comm_group *g, float *buf, size_t n);
/* The same sums on bf16 values (uint16 bit patterns): half the bytes on the wire; each partial
 * sum is formed in fp32 and rounded to bf16 (round to nearest even). */
void comm_allreduce_sum_bf16(comm_group *g, uint16_t *buf, size_t n);
void comm_reduce_scatter_sum_bf16(comm_group *g, uint16_t *buf, size_t n);
/* fp32 <-> bf16 bit patterns (round to nearest even; NaN stays NaN). */
uint16_t comm_bf16_from_float(float x);
float comm_float_from_bf16(uint16_t h);
void comm_reduce_scatter_sum(comm_group *g, float *buf, size_t n); /* result in this rank's part of buf */
void comm_allgather(comm_group *g, float *buf, size_t n);           /* from each rank's part of buf */
/* Reduce-scatter with a count per rank (counts[size]): buf holds the parts one after another in
 * rank order; this rank's part of buf receives its sum. */
void comm_reduce_scatter_sum_counts(comm_group *g, float *buf, const size_t *counts);
void comm_reduce_scatter_sum_counts_bf16(comm_group *g, uint16_t *buf, const size_t *counts);
/* All-gather with a count per rank (counts[size]): buf holds the parts one after another in rank
 * order; this rank's part is read, every part is filled (MPI_Allgatherv in place). */
void comm_allgather_counts(comm_group *g, float *buf, const size_t *counts);
/* All-to-all: send holds n floats (a multiple of the group size) as size blocks in rank order;
 * block j goes to rank j, which receives it as block `this rank` of recv (n floats). send and
 * recv must not overlap. Adds (size-1)/size of the buffer to the wire tally. */
void comm_alltoall(comm_group *g, const float *send, float *recv, size_t n);
/* All-to-all with a count per rank (floats; send_counts[size], recv_counts[size]): send holds
 * the blocks for rank 0, 1, ... one after another, recv receives rank 0's, 1's, ... likewise
 * (MPI_Alltoallv). send and recv must not overlap. Adds the floats sent to other ranks to the
 * wire tally. */
void comm_alltoallv(comm_group *g, const float *send, const size_t *send_counts, float *recv,
                    const size_t *recv_counts);
/* All-to-all of n ints per rank (block j of send to rank j, block i of recv from rank i). */
void comm_alltoall_int(comm_group *g, const int *send, int *recv, size_t n);
/* Collectives started now and completed later, so they can run while the rank computes (the
 * DP gradient buckets of --overlap-grad-reduce). The buffers must stay untouched until
 * comm_wait_started. The all-reduce sums n floats of buf in place; the reduce-scatter reads
 * the parts of send one after another in rank order (counts[size]) and writes this rank's sum
 * to recv (counts[rank] floats). comm_progress lets MPI advance them (it returns 1 when all have
 * ended); comm_wait_started waits for every one started on g, under the watchdog. */
void comm_iallreduce_sum(comm_group *g, float *buf, size_t n);
void comm_ireduce_scatter_sum_counts(comm_group *g, const float *send, float *recv, const size_t *counts);
int comm_progress(comm_group *g);
void comm_wait_started(comm_group *g);
/* One started collective waited for on its own (the parameter buckets of --overlap-param-gather,
 * each waited for by the first forward pass that reads it). comm_iallgather_counts starts
 * comm_allgather_counts' all-gather of buf (untouched until it is waited for); NULL when there
 * is nothing to wait for (one rank). comm_request_test lets MPI advance it (1: ended);
 * comm_request_wait waits under the watchdog and frees it (NULL: nothing). */
typedef struct comm_request comm_request;
comm_request *comm_iallgather_counts(comm_group *g, float *buf, const size_t *counts);
/* One step of a ring over g, started now: n floats of send to the next group rank, n floats
 * into recv from the previous one (both untouched until waited for); NULL with one rank. */
comm_request *comm_iring_step(comm_group *g, const float *send, float *recv, size_t n);
int comm_request_test(comm_request *r);
void comm_request_wait(comm_request *r);
/* Every rank's n bytes, in group-rank order, into all (size x n bytes). */
void comm_allgather_bytes(comm_group *g, const void *mine, size_t n, void *all);
double comm_allreduce_sum_double(comm_group *g, double x);
int comm_allreduce_max_int(comm_group *g, int x);
double comm_allreduce_max_double(comm_group *g, double x);
int comm_group_size(const comm_group *g);
/* World rank of grid position (tp_rank, pp_rank, dp_rank). */
/* The world rank at (tp_rank, pp_rank, dp_rank) with this rank's CP rank (pipeline peers share it). */
int comm_world_rank(const comm_ctx *c, int tp_rank, int pp_rank, int dp_rank);
/* Point-to-point on the world (pipeline transfers). The send copies buf and returns at once,
 * so two stages sending to each other cannot deadlock; comm_wait_sends completes them all. */
void comm_send(comm_ctx *c, int dest, int tag, const float *buf, size_t n);
void comm_recv(comm_ctx *c, int src, int tag, float *buf, size_t n);
void comm_wait_sends(comm_ctx *c);
int comm_group_rank(const comm_group *g);
/* Bytes this rank has sent through collectives of the group (for the wire-volume checks). */
double comm_bytes_sent(const comm_group *g);
/* What another transport (NCCL) sent on the group's behalf, so the tally stays whole. */
void comm_add_bytes_sent(comm_group *g, double bytes);
/* Another transport's blocking call on the group's behalf, under the same watchdog: a call that
 * makes no progress for --comm-timeout seconds stops the rank with `what` named. */
void comm_watch_enter(comm_group *g, const char *what);
void comm_watch_leave(comm_group *g);
/* root's n bytes to every rank of the group. */
void comm_bcast_bytes(comm_group *g, void *buf, size_t n, int root);
/* This rank's position among the world's ranks on its node (1 of 1 without MPI). */
void comm_node_local(const comm_ctx *c, int *local_rank, int *local_size);
#endif
