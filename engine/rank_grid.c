/* See rank_grid.h. */
#include "rank_grid.h"

rank_grid rank_grid_make(int tp, int cp, int pp, int dp)
{
    rank_grid g = {{tp > 0 ? tp : 1, cp > 0 ? cp : 1, pp > 0 ? pp : 1, dp > 0 ? dp : 1}};
    return g;
}

/* The dimensions from innermost to outermost (rank_grid.h). */
static const grid_dim nesting[GRID_DIMS] = {GRID_TP, GRID_CP, GRID_DP, GRID_PP};

long rank_grid_ranks(const rank_grid *g)
{
    return (long)g->size[GRID_TP] * g->size[GRID_CP] * g->size[GRID_DP] * g->size[GRID_PP];
}

long rank_grid_stride(const rank_grid *g, grid_dim d)
{
    long stride = 1;
    for (int k = 0; k < GRID_DIMS && nesting[k] != d; k++)
        stride *= g->size[nesting[k]];
    return stride;
}

long rank_grid_rank(const rank_grid *g, int tp_rank, int cp_rank, int pp_rank, int dp_rank)
{
    return tp_rank + (long)g->size[GRID_TP] *
                         (cp_rank + (long)g->size[GRID_CP] * (dp_rank + (long)g->size[GRID_DP] * pp_rank));
}

int rank_grid_coord(const rank_grid *g, long rank, grid_dim d)
{
    return (int)((rank / rank_grid_stride(g, d)) % g->size[d]);
}
