/* The rank grid: where each rank of a job sits in its parallel dimensions, one function that the
 * engine and the simulator both ask (as Megatron-Core's parallel_state is for Megatron). Ranks
 * are ordered as Megatron-Core orders them by default ("tp-cp-ep-dp-pp", parallel_state's
 * RankGenerator; DeepSpeed's PipeModelDataParallelTopology nests model, data, pipe alike): TP
 * innermost, then CP, then DP (expert parallelism is carved from it, its innermost ranks), then PP
 * outermost:
 *
 *     rank = tp_rank + tp (cp_rank + cp (dp_rank + dp pp_rank))
 *
 * so a TP group is consecutive ranks (one node when TP <= GPUs per node), a node that TP does not
 * fill holds data-parallel (and expert-parallel) neighbours, and pipeline stages are the most
 * spread out. Pure C: no MPI, no CUDA. */
#ifndef DTSIM_ENGINE_RANK_GRID_H
#define DTSIM_ENGINE_RANK_GRID_H

typedef enum { GRID_TP = 0, GRID_CP, GRID_PP, GRID_DP, GRID_DIMS } grid_dim;

typedef struct {
    int size[GRID_DIMS]; /* degree of each dimension, >= 1 */
} rank_grid;

/* A grid of the given degrees (any below 1 taken as 1). */
rank_grid rank_grid_make(int tp, int cp, int pp, int dp);
/* Ranks in the job: the product of the degrees. */
long rank_grid_ranks(const rank_grid *g);
/* The global rank of coordinates (each in 0 .. size-1). */
long rank_grid_rank(const rank_grid *g, int tp_rank, int cp_rank, int pp_rank, int dp_rank);
/* The coordinate of a global rank along one dimension. */
int rank_grid_coord(const rank_grid *g, long rank, grid_dim d);
/* The distance in ranks between neighbours of a dimension's groups (TP 1, CP tp, DP tp cp,
 * PP tp cp dp). */
long rank_grid_stride(const rank_grid *g, grid_dim d);

#endif
