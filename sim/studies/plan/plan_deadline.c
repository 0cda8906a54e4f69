/* The cluster that meets a deadline (plan.h: plan_deadline). */
#include <math.h>
#include <stdatomic.h>
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

static int by_batch(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int plan_batches(const scenario_config *s, double lo, double hi, long long out[PLAN_MAX_BATCHES])
{
    double seq = (double)s->model.seq_length;
    long long all[4096];
    int n = 0;
    for (long long p2 = 1; p2 * seq <= hi && n < 4096; p2 *= 2)
        for (long long b = p2; b * seq <= hi && n < 4096; b *= 3)
            if (b * seq >= lo)
                all[n++] = b;
    long long own = s->training.global_batch_size;
    int has_own = own * seq >= lo && own * seq <= hi;
    for (int i = 0; i < n; i++)
        if (all[i] == own)
            has_own = 0; /* already there */
    if (has_own && n < 4096)
        all[n++] = own;
    if (n > 1)
        qsort(all, (size_t)n, sizeof *all, by_batch);
    if (n <= PLAN_MAX_BATCHES) {
        memcpy(out, all, (size_t)n * sizeof *all);
        return n;
    }
    /* More than a search can afford: evenly spread picks over the sorted list, both ends kept
     * (and the scenario's own, in place of its nearest pick). */
    int k = 0;
    for (int i = 0; i < PLAN_MAX_BATCHES; i++) {
        long long b = all[(long)i * (n - 1) / (PLAN_MAX_BATCHES - 1)];
        if (k == 0 || out[k - 1] != b)
            out[k++] = b;
    }
    if (own * seq >= lo && own * seq <= hi) {
        int near = 0;
        for (int i = 1; i < k; i++)
            if (llabs(out[i] - own) < llabs(out[near] - own))
                near = i;
        out[near] = own;
        qsort(out, (size_t)k, sizeof *out, by_batch);
    }
    return k;
}

/* Searches one size at one global batch, adding its layouts to all. */
static int search_batch(const scenario_config *s, int gpus, long long batch, const plan_deadline_input *in,
                        plan_result *all, config_error *err)
{
    scenario_config b = *s;
    if (batch > 0)
        b.training.global_batch_size = batch;
    plan_result p;
    /* at one size and batch the cheapest are the fastest: the best keep_per_size are exact */
    if (plan_search_threads(&b, gpus, in->threads, in->keep_per_size, in->limits, &p, err, NULL) != 0)
        return -1;
    all->bounded += p.bounded;
    if (p.count > 0) {
        plan_layout *grown = realloc(all->layouts, (size_t)(all->count + p.count) * sizeof *grown);
        if (!grown) {
            plan_result_free(&p);
            snprintf(err->msg, sizeof err->msg, "out of host memory");
            return -1;
        }
        all->layouts = grown;
        memcpy(all->layouts + all->count, p.layouts, (size_t)p.count * sizeof *p.layouts);
        all->count += p.count;
    }
    plan_result_free(&p);
    return 0;
}

static int by_days(const void *a, const void *b)
{
    double x = ((const plan_layout *)a)->to_train.days, y = ((const plan_layout *)b)->to_train.days;
    return (x > y) - (x < y);
}

/* One cluster size: its layouts searched (at each global batch the range allows, or the
 * scenario's), those within the deadline kept (at most keep of them, cheapest first). Returns 0
 * (size->feasible says whether any met it), or -1 with err. */
static int search_size(const scenario_config *base, int nodes, const plan_deadline_input *in, plan_deadline_result *out,
                       config_error *err)
{
    scenario_config s = *base;
    int gpus = nodes * base->platform.node.gpus;
    if (s.platform.network.nodes < nodes) /* the fabric grown to the size asked */
        s.platform.network.nodes = nodes;
    long long batches[PLAN_MAX_BATCHES] = {0};
    int nb = in->batch_tokens_max > 0 ? plan_batches(base, in->batch_tokens_min, in->batch_tokens_max, batches) : 1;
    plan_result p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < nb; i++)
        if (search_batch(&s, gpus, batches[i], in, &p, err) != 0) {
            plan_result_free(&p);
            return -1;
        }
    plan_size *z = &out->sizes[out->size_count++];
    memset(z, 0, sizeof *z);
    z->gpus = gpus;
    z->fitting = p.count + p.bounded;
    if (p.count > 0) /* qsort takes no NULL, even for nothing */
        qsort(p.layouts, (size_t)p.count, sizeof *p.layouts, by_days);
    z->fastest_days = p.count > 0 ? p.layouts[0].to_train.days : 0;
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
    long long batches[PLAN_MAX_BATCHES];
    if (in->batch_tokens_max > 0 &&
        (in->batch_tokens_min <= 0 || in->batch_tokens_min > in->batch_tokens_max ||
         plan_batches(base, in->batch_tokens_min, in->batch_tokens_max, batches) == 0)) {
        snprintf(err->msg, sizeof err->msg,
                 "--batch-tokens %.6g:%.6g: no global batch of 2^a 3^b sequences of %lld tokens lies in it",
                 in->batch_tokens_min, in->batch_tokens_max, base->model.seq_length);
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

/* One size's part of the estimate: what search_size would take there, at every batch it searches
 * (plan_estimate_batches: the candidates enumerated once for all), summed; the largest memory. */
typedef struct {
    int nodes;
    int between;               /* a size plan_deadline may search between two (3 x 2^k nodes) */
    double seconds, bytes;
    long fitting;
    int failed;                /* out of memory */
} size_price;

typedef struct {
    const scenario_config *base;
    const plan_deadline_input *in;
    const long long *batches;  /* NULL: the scenario's own */
    int nb;
    size_price *size;
    int count;
    atomic_int next;           /* the next size to price */
} size_prices;

static void estimate_size(const size_prices *job, size_price *z)
{
    int gpn = job->base->platform.node.gpus > 0 ? job->base->platform.node.gpus : 1;
    scenario_config *s = malloc(sizeof *s);
    work_estimate each[PLAN_MAX_BATCHES];
    long fit[PLAN_MAX_BATCHES];
    z->failed = !s;
    if (s) {
        *s = *job->base;
        if (s->platform.network.nodes < z->nodes) /* the fabric grown, as search_size grows it */
            s->platform.network.nodes = z->nodes;
        z->failed = plan_estimate_batches(s, z->nodes * gpn, job->in->threads, job->batches, job->nb, each, fit) != 0;
    }
    free(s);
    for (int b = 0; b < job->nb && !z->failed; b++) {
        z->seconds += each[b].seconds;
        z->fitting += fit[b];
        z->bytes = fmax(z->bytes, each[b].bytes);
    }
}

static void *estimate_sizes(void *arg)
{
    size_prices *job = arg;
    for (int i; (i = atomic_fetch_add(&job->next, 1)) < job->count;)
        estimate_size(job, &job->size[i]);
    return NULL;
}

int plan_deadline_estimate(const scenario_config *base, const plan_deadline_input *in, work_estimate *e)
{
    int gpn = base->platform.node.gpus > 0 ? base->platform.node.gpus : 1;
    int max_nodes = in->max_gpus > 0 ? in->max_gpus / gpn : base->platform.network.nodes;
    if (max_nodes < 1)
        max_nodes = 1;
    /* every batch priced, as search_size searches every one: one of few factors of two admits
     * other layouts than the others (pricing the range's largest for each batch had GPT-3 175B's
     * 30-day search of 2,097,152 to 2,985,984 tokens a batch at 988 layouts and 4.43 s, where the
     * search finds 15,123 fitting and took 3.4-6.7 s; docs/planning.md) */
    long long batches[PLAN_MAX_BATCHES] = {0};
    int nb = in->batch_tokens_max > 0 ? plan_batches(base, in->batch_tokens_min, in->batch_tokens_max, batches) : 0;
    size_prices job = {.base = base, .in = in, .batches = nb > 0 ? batches : NULL, .nb = nb > 0 ? nb : 1};
    /* the scenario's own batch where there is no range (one with none in it is refused by
     * plan_deadline) */
    size_price size[2 * PLAN_MAX_SIZES];
    memset(size, 0, sizeof size);
    job.size = size;
    /* the sizes plan_deadline may search: 1, 2, 4, ... nodes up to the largest, and between two of
     * them the one of 3 x 2^k nodes (other layouts than either, and maybe more), at most one of
     * those: the costliest counts */
    int sizes = 0;
    for (int lo = 0, nodes = 1;; lo = nodes, nodes = nodes * 2 < max_nodes ? nodes * 2 : max_nodes) {
        size[job.count++].nodes = nodes;
        int mid = lo * 3 / 2;
        if (lo > 0 && lo % 2 == 0 && mid > lo && mid < nodes)
            size[job.count++] = (size_price){.nodes = mid, .between = 1};
        sizes++;
        if (nodes == max_nodes || sizes == PLAN_MAX_SIZES - 1)
            break;
    }
    /* the sizes are independent: priced on the search's threads, each its own */
    int threads = in->threads > 0 ? in->threads : plan_default_threads();
    atomic_init(&job.next, 0);
    plan_run_threads(threads < job.count ? threads : job.count, estimate_sizes, &job, 0);
    double seconds = 0, bytes = 0;
    long fitting = 0;
    const size_price *between = NULL;
    for (int i = 0; i < job.count; i++) {
        const size_price *z = &size[i];
        if (z->failed)
            return -1;
        bytes = fmax(bytes, z->bytes);
        if (!z->between) {
            seconds += z->seconds;
            fitting += z->fitting;
        } else if (!between || z->seconds > between->seconds) {
            between = z;
        }
    }
    if (between) {
        seconds += between->seconds;
        fitting += between->fitting;
    }
    snprintf(e->work, sizeof e->work, "up to %d cluster sizes of 1 to %d nodes x %d global batch%s, %ld fitting "
             "layouts priced as simulated at their first replays", sizes + (between != NULL), max_nodes, job.nb,
             job.nb == 1 ? "" : "es", fitting);
    e->seconds = seconds;
    e->bytes = bytes;
    return 0;
}

void plan_deadline_free(plan_deadline_result *r)
{
    free(r->layouts);
    memset(r, 0, sizeof *r);
}
