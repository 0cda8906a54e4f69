/* Host memory and the monotonic clock: the CPU backend's "device". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cpu_internal.h"

struct kernels_event {
    double t;
};

void *cpu_alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "kernels(cpu): out of memory allocating %zu bytes\n", bytes);
        abort();
    }
    return p;
}

void cpu_free(void *p) { free(p); }
void cpu_memset_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
void cpu_copy(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
void cpu_synchronize(void) {}

kernels_event *cpu_event_create(void) { return cpu_alloc(sizeof(kernels_event)); }
void cpu_event_destroy(kernels_event *e) { free(e); }

void cpu_event_record(kernels_event *e)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->t = ts.tv_sec + ts.tv_nsec * 1e-9;
}

double cpu_event_elapsed_s(kernels_event *start, kernels_event *end) { return end->t - start->t; }
