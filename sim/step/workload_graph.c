/* The step graph: growable task and dependency storage, and a blank task (workload_graph.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "workload_graph.h"

static void *grow(void *p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return p;
    int ncap = *cap ? *cap : 256;
    while (ncap < need)
        ncap *= 2;
    void *q = realloc(p, (size_t)ncap * elem);
    if (!q) {
        fprintf(stderr, "dtsim: out of memory growing the step workload to %d entries\n", ncap);
        exit(1);
    }
    *cap = ncap;
    return q;
}

int workload_add_task(step_workload *w, const sim_task *t)
{
    return workload_add_task_parts(w, t, NULL);
}

/* How many of the newest parts an added task's are compared with: a pass's tasks repeat a few
 * patterns (forward, backward, with the embedding or the head, a received activation's gather). */
#define PARTS_LOOKBACK 8

/* What a task without parts reads, and what parts equal to it are stored as: none. */
static const task_comm_parts no_parts;

int workload_add_task_parts(step_workload *w, const sim_task *t, const task_comm_parts *parts)
{
    int at = -1;
    if (parts && memcmp(parts, &no_parts, sizeof no_parts) != 0) {
        for (int j = w->n_parts - 1; j >= 0 && j >= w->n_parts - PARTS_LOOKBACK && at < 0; j--)
            if (memcmp(&w->parts[j], parts, sizeof *parts) == 0)
                at = j;
        if (at < 0) {
            w->parts = grow(w->parts, &w->cap_parts, w->n_parts + 1, sizeof *w->parts);
            w->parts[w->n_parts] = *parts;
            at = w->n_parts++;
        }
    }
    w->tasks = grow(w->tasks, &w->cap_tasks, w->n_tasks + 1, sizeof *w->tasks);
    sim_task *dst = &w->tasks[w->n_tasks];
    *dst = *t;
    dst->parts = at;
    dst->dep_begin = w->n_deps;
    dst->dep_count = 0;
    return w->n_tasks++;
}

const task_comm_parts *workload_task_parts(const step_workload *w, const sim_task *k)
{
    return k->parts >= 0 && k->parts < w->n_parts ? &w->parts[k->parts] : &no_parts;
}

double workload_task_calls(const sim_task *k)
{
    return k->calls > 1 ? k->calls : 1;
}

coll_split workload_task_call_split(const scenario_config *s, const sim_task *k)
{
    int span = k->span_nodes > 0 ? k->span_nodes : 1;
    coll_group g = {k->group, span, (k->group + span - 1) / span};
    return collective_split(&s->platform, &s->calibration, k->coll, k->bytes / workload_task_calls(k), g);
}

void workload_add_dep(step_workload *w, int task, int dep)
{
    /* Dependencies are appended contiguously, so only the newest task may receive them, and
     * a dependency must come earlier in the array (the array is a topological order). */
    if (task != w->n_tasks - 1 || dep < 0 || dep >= task) {
        fprintf(stderr, "dtsim: internal error: dependency %d -> %d breaks the workload order\n",
                dep, task);
        abort();
    }
    w->deps = grow(w->deps, &w->cap_deps, w->n_deps + 1, sizeof *w->deps);
    w->deps[w->n_deps++] = dep;
    w->tasks[task].dep_count++;
}

void workload_free(step_workload *w)
{
    free(w->tasks);
    free(w->deps);
    free(w->parts);
    memset(w, 0, sizeof *w);
}

int workload_index_build(const step_workload *w, workload_index *x)
{
    int n = w->n_tasks, nl = w->stages * LANE_COUNT;
    x->lane_begin = calloc((size_t)nl + 1, sizeof(int));
    x->lane_task = malloc(((size_t)n + 1) * sizeof(int));
    x->dependent_begin = calloc((size_t)n + 1, sizeof(int));
    x->dependent = malloc(((size_t)w->n_deps + 1) * sizeof(int));
    x->lane_of = malloc(((size_t)n + 1) * sizeof(int));
    int *fill_lane = calloc((size_t)nl + 1, sizeof(int)), *fill_dep = calloc((size_t)n + 1, sizeof(int));
    if (!x->lane_begin || !x->lane_task || !x->dependent_begin || !x->dependent || !x->lane_of || !fill_lane || !fill_dep) {
        free(fill_lane);
        free(fill_dep);
        workload_index_free(x);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const sim_task *k = &w->tasks[i];
        x->lane_begin[k->stage * LANE_COUNT + k->lane + 1]++;
        for (int d = 0; d < k->dep_count; d++)
            x->dependent_begin[w->deps[k->dep_begin + d] + 1]++;
    }
    for (int q = 0; q < nl; q++)
        x->lane_begin[q + 1] += x->lane_begin[q];
    for (int i = 0; i < n; i++)
        x->dependent_begin[i + 1] += x->dependent_begin[i];
    for (int i = 0; i < n; i++) { /* in index order: each lane's and each list's entries ascend */
        const sim_task *k = &w->tasks[i];
        int q = k->stage * LANE_COUNT + k->lane;
        x->lane_of[i] = q;
        x->lane_task[x->lane_begin[q] + fill_lane[q]++] = i;
        for (int d = 0; d < k->dep_count; d++) {
            int j = w->deps[k->dep_begin + d];
            x->dependent[x->dependent_begin[j] + fill_dep[j]++] = i;
        }
    }
    free(fill_lane);
    free(fill_dep);
    return 0;
}

void workload_index_free(workload_index *x)
{
    free(x->lane_begin);
    free(x->lane_task);
    free(x->dependent_begin);
    free(x->dependent);
    free(x->lane_of);
    memset(x, 0, sizeof *x);
}
