/* The gradient norm's sums of squares over many device ranges; see grad_ranges.h. */
#include <stdio.h>
#include <stdlib.h>
#include "grad_ranges.h"

void grad_ranges_init(grad_ranges *r, int cap)
{
    r->x = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *r->x);
    r->n = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *r->n);
    r->kind = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *r->kind);
    r->count = 0;
    if (!r->x || !r->n || !r->kind) {
        fprintf(stderr, "dtrain: out of memory for the gradient norm's %d tensors\n", cap);
        exit(1);
    }
}

void grad_ranges_add(grad_ranges *r, const float *x, size_t n, int kind)
{
    r->x[r->count] = x;
    r->n[r->count] = n;
    r->kind[r->count++] = kind;
}

void grad_ranges_sum(grad_ranges *r, const kernels_backend *k, double total[2])
{
    double *each = malloc((size_t)(r->count > 0 ? r->count : 1) * sizeof *each);
    if (!each) {
        fprintf(stderr, "dtrain: out of memory for the gradient norm's %d sums\n", r->count);
        exit(1);
    }
    k->sum_squares(r->x, r->n, r->count, each);
    total[0] = total[1] = 0;
    for (int c = 0; c < r->count; c++)
        total[r->kind[c]] += each[c];
    free(each);
    free(r->x);
    free(r->n);
    free(r->kind);
}
