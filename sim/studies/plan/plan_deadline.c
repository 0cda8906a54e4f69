/* The cluster that meets a deadline (plan.h: plan_deadline). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "plan.h"

/* Best first: fewer GPU-hours (the same order as cost, at one price per GPU-hour), then fewer
 * days, then fewer GPUs. */
static int by_gpu_hours(const void *a, const void *b)
{
    const plan_layout *p = a, *q = b;
    double x = p->to_train.gpu_hours, y = q->to_train.gpu_hours;
    if (x != y)
        return x < y ? -1 : 1;
    if (p->to_train.days != q->to_train.days)
        return p->to_train.days < q->to_train.days ? -1 : 1;
    return (p->result.gpus > q->result.gpus) - (p->result.gpus < q->result.gpus);
}

/* One cluster size: its layouts searched, those within the deadline kept (at most keep of them,
 * cheapest first). Returns 0 (size->feasible says whether any met it), or -1 with err. */
static int search_size(const scenario_config *base, int nodes, const plan_deadline_input *in, plan_deadline_result *out,
                       config_error *err)
{
    scenario_config s = *base;
    int gpus = nodes * base->platform.node.gpus;
    if (s.platform.network.nodes < nodes) /* the fabric grown to the size asked */
        s.platform.network.nodes = nodes;
    plan_result p;
    if (plan_search_threads(&s, gpus, in->threads, &p, err, NULL) != 0)
        return -1;
    plan_size *z = &out->sizes[out->size_count++];
    memset(z, 0, sizeof *z);
    z->gpus = gpus;
    z->fitting = p.count;
    z->fastest_days = p.count > 0 ? p.layouts[0].to_train.days : 0; /* ranked by step time */
    int kept = 0;
    if (p.count > 0) /* qsort takes no NULL, even for nothing */
        qsort(p.layouts, (size_t)p.count, sizeof *p.layouts, by_gpu_hours);
    for (int i = 0; i < p.count && kept < in->keep_per_size; i++) {
        if (p.layouts[i].to_train.days > in->deadline_days)
            continue;
        if (!z->feasible) {
            z->feasible = 1;
            z->best_gpu_hours = p.layouts[i].to_train.gpu_hours;
            z->best_days = p.layouts[i].to_train.days;
        }
        if (out->count == out->cap) {
            out->cap = out->cap ? 2 * out->cap : 64;
            out->layouts = realloc(out->layouts, (size_t)out->cap * sizeof *out->layouts);
        }
        out->layouts[out->count++] = p.layouts[i];
        kept++;
    }
    plan_result_free(&p);
    if (in->progress)
        in->progress(z);
    return 0;
}

static int searched(const plan_deadline_result *out, int gpus)
{
    for (int i = 0; i < out->size_count; i++)
        if (out->sizes[i].gpus == gpus)
            return i;
    return -1;
}

int plan_deadline(const scenario_config *base, const plan_deadline_input *in, plan_deadline_result *out,
                  config_error *err)
{
    memset(out, 0, sizeof *out);
    err->msg[0] = 0;
    int gpn = base->platform.node.gpus > 0 ? base->platform.node.gpus : 1;
    if (base->training.tokens <= 0) {
        snprintf(err->msg, sizeof err->msg, "--deadline-days needs what is trained: training.tokens, train_iters or "
                                            "train_samples");
        return -1;
    }
    int max_nodes = in->max_gpus > 0 ? in->max_gpus / gpn : base->platform.network.nodes;
    if (max_nodes < 1) {
        snprintf(err->msg, sizeof err->msg, "--max-gpus %d: fewer than one node of %d GPUs", in->max_gpus, gpn);
        return -1;
    }
    /* Nodes 1, 2, 4, ... up to the largest, until one meets the deadline (more GPUs finish sooner
     * and, past that point, cost more GPU-hours); then the size between the last two of the form
     * 3 x 2^k. Not a bisection over every node count: with the global batch fixed, most counts
     * admit no layout at all (DP must divide the batch), so the sizes a batch of 2^a 3^b sequences
     * splits into evenly are the ones worth a search. */
    int lo = 0, hi = 0; /* the largest size that missed, the smallest that met */
    for (int nodes = 1;; nodes = nodes * 2 < max_nodes ? nodes * 2 : max_nodes) {
        if (out->size_count == PLAN_MAX_SIZES || search_size(base, nodes, in, out, err) != 0)
            break;
        if (out->sizes[out->size_count - 1].feasible) {
            hi = nodes;
            break;
        }
        lo = nodes;
        if (nodes == max_nodes)
            break;
    }
    if (err->msg[0])
        return -1;
    int mid = lo * 3 / 2;
    if (hi > 0 && lo > 0 && lo % 2 == 0 && mid > lo && mid < hi && searched(out, mid * gpn) < 0 &&
        out->size_count < PLAN_MAX_SIZES && search_size(base, mid, in, out, err) != 0)
        return -1;
    if (out->count > 0)
        qsort(out->layouts, (size_t)out->count, sizeof *out->layouts, by_gpu_hours);
    out->deadline_days = in->deadline_days;
    out->max_nodes = max_nodes;
    return 0;
}

void plan_deadline_free(plan_deadline_result *r)
{
    free(r->layouts);
    memset(r, 0, sizeof *r);
}
