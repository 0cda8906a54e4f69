/* The squares of a norm's gradient ranges, summed by the kernels' sum_squares in one call (one
 * wait) and added in the order given to their kind's total (0: dense, 1: experts). For
 * data_parallel.c and data_parallel_ep.c. */
#ifndef DTSIM_ENGINE_GRAD_RANGES_H
#define DTSIM_ENGINE_GRAD_RANGES_H
#include <stddef.h>
#include "kernels.h"

typedef struct {
    const float **x;
    size_t *n;
    int *kind;
    int count;
} grad_ranges;
void grad_ranges_init(grad_ranges *r, int cap); /* exits naming what ran out of memory */
void grad_ranges_add(grad_ranges *r, const float *x, size_t n, int kind);
void grad_ranges_sum(grad_ranges *r, const kernels_backend *k, double total[2]); /* and frees r */
#endif
