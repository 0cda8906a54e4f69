/* Data parallelism with ZeRO; see data_parallel.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data_parallel.h"
#include "data_parallel_ep.h"
#include "wall_clock.h"

/* The tensors [first, first + count) occupy one contiguous range of the flat buffer. */
static void tensor_range(const gpt_model *m, int first, int count, size_t *lo, size_t *hi)
{
    *lo = m->tensors[first].offset;
    *hi = m->tensors[first + count - 1].offset + m->tensors[first + count - 1].count;
}

/* How much of [lo, hi) lies in [a, b): the count, and where it starts (*from). */
static size_t overlap(size_t lo, size_t hi, size_t a, size_t b, size_t *from)
{
    size_t x = lo > a ? lo : a, y = hi < b ? hi : b;
    *from = x;
    return y > x ? y - x : 0;
}

/* How much of the flat range [lo, hi) each DP rank's shard holds (counts[dp]). The shards are
 * contiguous and in rank order, so the parts follow each other through the range. */
static void shard_parts(const dp_state *d, size_t lo, size_t hi, size_t *counts)
{
    for (int r = 0; r < d->dp; r++) {
        size_t slo, shi, from;
        gpt_dp_shard_range(d->n, d->dp, r, &slo, &shi);
        counts[r] = overlap(lo, hi, slo, shi, &from);
    }
}

/* Fills dst (backend memory, dst[0] is element lo) with the flat range [lo, hi) from the shards
 * that hold it: `base` holds this rank's shard (r, the resident range, is the shard), and each
 * rank's part of the range goes to the others (an all-gather with the parts' counts). Parameters
 * (ZeRO-3) and reduced gradients (ZeRO-2/3, for the tied embedding) are gathered alike. */
static void gather_range(dp_state *d, const gpt_range *r, const float *base, size_t lo, size_t hi, float *dst)
{
    size_t n = hi - lo, a, mine = overlap(lo, hi, d->shard_lo, d->shard_hi, &a);
    if (r->lo != d->shard_lo || r->n != d->shard_hi - d->shard_lo) {
        fprintf(stderr, "dtrain: ZeRO gather: the resident range [%zu, +%zu) is not the DP shard [%zu, %zu)\n", r->lo,
                r->n, d->shard_lo, d->shard_hi);
        abort();
    }
    shard_parts(d, lo, hi, d->part_counts);
    if (d->nccl) { /* the same gather in device memory */
        if (mine)
            d->k->copy(dst + (a - lo), base + (a - r->lo), mine * sizeof(float));
        comm_nccl_gather_from_owners(d->nccl, dst, d->part_counts);
        return;
    }
    if (mine)
        d->k->copy_to_host(d->host + (a - lo), base + (a - r->lo), mine * sizeof(float));
    comm_allgather_counts(d->comm->dp_group, d->host, d->part_counts);
    d->k->copy_to_device(dst, d->host, n * sizeof(float));
}

/* ZeRO-2/3: a backward pass's gradient window [lo, hi) is summed over the DP group straight into
 * the shards that own it (a reduce-scatter with the shards' counts) and added to this rank's
 * gradients. The window is then free: no rank holds more than its shard between passes. */
static void reduce_window_into_shard(dp_state *d, gpt_model *m, size_t lo, size_t hi, float *win)
{
    size_t n = hi - lo, a, mine = overlap(lo, hi, d->shard_lo, d->shard_hi, &a);
    size_t *counts = d->part_counts;
    shard_parts(d, lo, hi, counts);
    if (d->nccl) {
        comm_nccl_reduce_to_owners(d->nccl, win, counts);
    } else {
        m->k->copy_to_host(d->host, win, n * sizeof(float));
        if (d->bf16) { /* compression by precision: the gradients travel (and are summed) as bf16 */
            if (!d->host16)
                d->host16 = malloc(d->padded * sizeof(uint16_t));
            for (size_t i = 0; i < n; i++)
                d->host16[i] = comm_bf16_from_float(d->host[i]);
            comm_reduce_scatter_sum_counts_bf16(d->comm->dp_group, d->host16, counts);
            for (size_t i = a - lo; i < a - lo + mine; i++)
                d->host[i] = comm_float_from_bf16(d->host16[i]);
        } else {
            comm_reduce_scatter_sum_counts(d->comm->dp_group, d->host, counts);
        }
        if (mine)
            m->k->copy_to_device(win + (a - lo), d->host + (a - lo), mine * sizeof(float));
    }
    if (mine) {
        float *g = m->grads + (a - m->grad_range.lo);
        m->k->residual_forward(g, g, win + (a - lo), mine, KPREC_FP32);
    }
}

/* A window of the pool for [lo, hi) (allocated on first use, window_floats each). */
static float *take_window(dp_state *d, dp_window_pool *p, size_t lo, size_t hi)
{
    int i = 0;
    while (i < DP_WINDOWS && p->busy[i])
        i++;
    if (i == DP_WINDOWS || hi - lo > d->window_floats) {
        fprintf(stderr, "dtrain: ZeRO window of %zu floats: none free (%d of %zu floats)\n", hi - lo, DP_WINDOWS,
                d->window_floats);
        abort();
    }
    if (!p->buf[i])
        p->buf[i] = d->k->alloc(d->window_floats * sizeof(float));
    p->busy[i] = 1;
    p->lo[i] = lo;
    return p->buf[i];
}

/* The pool's busy window that holds the range starting at lo, or NULL. */
static float *held_window(const dp_window_pool *p, size_t lo)
{
    for (int i = 0; i < DP_WINDOWS; i++)
        if (p->busy[i] && p->lo[i] == lo)
            return p->buf[i];
    return NULL;
}

/* Gives back the pool's window that holds the range starting at lo; returns it. */
static float *give_window(dp_window_pool *p, size_t lo)
{
    for (int i = 0; i < DP_WINDOWS; i++)
        if (p->busy[i] && p->lo[i] == lo) {
            p->busy[i] = 0;
            return p->buf[i];
        }
    fprintf(stderr, "dtrain: no ZeRO window holds the range at %zu\n", lo);
    abort();
}

/* Records, when profiling, a collective over the flat range [lo, hi) that took `seconds`, for the
 * pass starting at tensor `first` (a layer's, or -1: the embedding's, the head's, a bucket). */
static void profile_pass(gpt_model *m, const char *op, int first, size_t lo, size_t hi, double seconds)
{
    if (!m->prof)
        return;
    int layer = -1;
    for (int l = 0; l < m->cfg.num_layers && layer < 0; l++)
        if (gpt_layer_tensor(m, l, 0) == first)
            layer = l;
    char shape[48];
    snprintf(shape, sizeof shape, "%zu floats", hi - lo);
    profiler_record(m->prof, op, layer, shape, seconds, (double)(hi - lo) * sizeof(float));
}

/* A pass is about to use (before) or has used tensors [first, first + count). ZeRO-3 gathers
 * their parameters into a window for the pass; ZeRO-2/3 give a backward pass a zeroed gradient
 * window and reduce it into the shards after. Both windows go back to their pools, so the device
 * keeps its shards plus the windows of the passes under way. A layer's re-run under full
 * recomputation keeps its parameter window for its backward, which then gathers nothing: one
 * gather serves both, as PyTorch FSDP and Megatron-FSDP do (sim/step/zero3.h; DeepSpeed gathers
 * again, which dtsim models with parallel.pipeline_engine deepspeed). */
static void zero_pass_hook(gpt_model *m, int first, int count, int before, int backward, void *ctx)
{
    dp_state *d = ctx;
    size_t lo, hi;
    tensor_range(m, first, count, &lo, &hi);
    if (hi <= lo)
        return;
    int params = d->zero >= 3, grads = backward;
    /* Timed by the wall clock: each collective returns with its result in place (the host-staged
     * copies and NCCL's wait synchronise), so the profile shows the pass's ZeRO traffic. */
    double t0 = wall_clock_s();
    if (before) {
        if (params && !(backward && held_window(&d->param_windows, lo))) {
            float *w = take_window(d, &d->param_windows, lo, hi);
            if (d->ep > 1) /* dense over DP, experts over the expert-DP group, from packed shards */
                dp_ep_gather_window(d, m, lo, hi, w);
            else
                gather_range(d, &m->param_range, m->params, lo, hi, w);
            gpt_map_range(&m->param_range, w, lo, hi);
            profile_pass(m, "zero_param_allgather", first, lo, hi, wall_clock_s() - t0);
        }
        if (grads) {
            float *w = take_window(d, &d->grad_windows, lo, hi);
            m->k->memset_zero(w, (hi - lo) * sizeof(float));
            gpt_map_range(&m->grad_range, w, lo, hi);
        }
        return;
    }
    if (grads) {
        float *w = give_window(&d->grad_windows, lo);
        gpt_unmap_range(&m->grad_range, w);
        if (d->ep > 1)
            dp_ep_reduce_window(d, m, lo, hi, w);
        else
            reduce_window_into_shard(d, m, lo, hi, w);
        profile_pass(m, "dp_grad_reduce_scatter", first, lo, hi, wall_clock_s() - t0);
    }
    if (params && !(m->recomputing && !backward)) /* a re-run's window waits for its backward */
        gpt_unmap_range(&m->param_range, give_window(&d->param_windows, lo));
}

/* The largest range a pass uses at once: a layer, wte with wpe, or the final norm with an untied head. */
static size_t largest_pass_range(const gpt_model *m)
{
    size_t lo, hi, most = 0;
    for (int l = 0; l < m->cfg.num_layers; l++) {
        tensor_range(m, gpt_layer_tensor(m, l, 0), LAYER_TENSORS, &lo, &hi);
        if (hi > lo && hi - lo > most)
            most = hi - lo;
    }
    int ends[2] = {GPT_WTE, gpt_lnf_w(m)}, counts[2] = {2, GPT_HEAD_TENSORS};
    for (int e = 0; e < 2; e++) {
        tensor_range(m, ends[e], counts[e], &lo, &hi);
        if (hi > lo && hi - lo > most)
            most = hi - lo;
    }
    return most;
}

int dp_grads_sharded(const dp_state *d)
{
    return d->zero >= 2 && d->dp > 1;
}

float *dp_grad_gather(dp_state *d, gpt_model *m, int t)
{
    size_t lo, hi;
    tensor_range(m, t, 1, &lo, &hi);
    if (!dp_grads_sharded(d) || hi <= lo)
        return gpt_grad(m, t);
    float *w = take_window(d, &d->grad_windows, lo, hi);
    if (d->ep > 1)
        dp_ep_gather_grad(d, m, t, w);
    else
        gather_range(d, &m->grad_range, m->grads, lo, hi, w);
    gpt_map_range(&m->grad_range, w, lo, hi);
    return w;
}

void dp_grad_scatter(dp_state *d, gpt_model *m, int t)
{
    size_t lo, hi, a;
    tensor_range(m, t, 1, &lo, &hi);
    if (!dp_grads_sharded(d) || hi <= lo)
        return;
    float *w = give_window(&d->grad_windows, lo);
    gpt_unmap_range(&m->grad_range, w);
    if (d->ep > 1) {
        dp_ep_keep_grad(d, m, t, w);
        return;
    }
    size_t mine = overlap(lo, hi, d->shard_lo, d->shard_hi, &a);
    if (mine)
        m->k->copy(m->grads + (a - m->grad_range.lo), w + (a - lo), mine * sizeof(float));
}

/* The reduced gradients back on the device (ZeRO-0/1, gradients held whole), from `sums`, a host
 * buffer indexed like the flat buffer: all of them (ZeRO-0), or only this rank's shard (ZeRO-1),
 * the rest zeroed: ZeRO-1 would keep a stale copy of it, and nothing must read that by mistake. */
static void grads_from_host(dp_state *d, gpt_model *m, const float *sums)
{
    if (d->zero == 0) {
        m->k->copy_to_device(m->grads, sums, d->n * sizeof(float));
        return;
    }
    m->k->memset_zero(m->grads, d->n * sizeof(float));
    if (d->shard_hi > d->shard_lo)
        m->k->copy_to_device(m->grads + d->shard_lo, sums + d->shard_lo, (d->shard_hi - d->shard_lo) * sizeof(float));
}

/* Starts the DP reduction of the gradients [lo, hi) (whole on this rank: ZeRO-0/1) from their
 * host copy: an all-reduce in place (ZeRO-0), or a reduce-scatter whose part for this rank
 * lands in host_recv at its own offset (ZeRO-1). Completed by dp_reduce_gradients. */
static void start_bucket(dp_state *d, gpt_model *m, size_t lo, size_t hi)
{
    if (hi <= lo)
        return;
    profile_pass(m, "dp_grad_bucket_start", -1, lo, hi, 0);
    m->k->copy_to_host(d->host + lo, m->grads + lo, (hi - lo) * sizeof(float));
    if (d->ep > 1) { /* dense and expert parts over their own groups */
        dp_ep_start_bucket(d, m, lo, hi);
        return;
    }
    if (d->zero == 0) {
        comm_iallreduce_sum(d->comm->dp_group, d->host + lo, hi - lo);
        return;
    }
    size_t a;
    overlap(lo, hi, d->shard_lo, d->shard_hi, &a);
    shard_parts(d, lo, hi, d->part_counts);
    comm_ireduce_scatter_sum_counts(d->comm->dp_group, d->host + lo, d->host_recv + a, d->part_counts);
}

/* The all-gathers a parameter bucket has in flight: one, or under EP one per kind. */
static int param_gathers(const dp_state *d)
{
    return d->ep > 1 ? 2 : 1;
}

/* Parameter bucket b's all-gather(s) waited for and its parameters on the device. */
static void land_param_bucket(dp_state *d, const gpt_model *m, int b)
{
    int g = param_gathers(d);
    if (!d->param_requests || (!d->param_requests[g * b] && !d->param_requests[g * b + g - 1]))
        return;
    double t0 = wall_clock_s();
    size_t lo = d->param_bucket_lo[b], hi = d->param_bucket_hi[b];
    if (g > 1) {
        dp_ep_land_param_bucket(d, m, b);
    } else {
        comm_request_wait(d->param_requests[b]);
        d->param_requests[b] = NULL;
        m->k->copy_to_device(m->params + lo, d->host_params + lo, (hi - lo) * sizeof(float));
    }
    if (m->prof)
        profiler_record(m->prof, "dp_param_gather_wait", -1, "bucket", wall_clock_s() - t0, (double)(hi - lo) * 4);
}

void dp_finish_param_gather(dp_state *d, const gpt_model *m)
{
    for (int b = 0; b < d->n_param_buckets; b++)
        land_param_bucket(d, m, b);
}

/* --overlap-grad-reduce: a backward pass over [first, first + count) has ended. Once it was the
 * tensors' last pass of the step (the accum-th) their gradients are final and join the open
 * bucket; a bucket is started when full, or when the next final range does not adjoin it. The
 * tied embedding (the embedding's and the head's passes start at wte) waits for the step's end:
 * its two uses, and under PP its two stages, are summed first. Every call lets MPI advance the
 * buckets in flight. Under --overlap-param-gather a forward pass first lands the parameter buckets
 * it reads, and lets the others advance. */
static void bucket_pass_hook(gpt_model *m, int first, int count, int before, int backward, void *ctx)
{
    dp_state *d = ctx;
    size_t lo, hi;
    tensor_range(m, first, count, &lo, &hi);
    if (before && !backward && d->overlap_params) { /* the pass reads these: their buckets land */
        for (int b = 0; b < d->n_param_buckets; b++) {
            if (d->param_bucket_lo[b] < hi && lo < d->param_bucket_hi[b])
                land_param_bucket(d, m, b);
            else
                for (int i = 0; i < param_gathers(d); i++) /* the others advance */
                    comm_request_test(d->param_requests[param_gathers(d) * b + i]);
        }
    }
    if (!before && backward && first != GPT_WTE && hi > lo && ++d->passes_done[first] == d->accum) {
        if (d->open_hi > d->open_lo && hi != d->open_lo && lo != d->open_hi) {
            start_bucket(d, m, d->open_lo, d->open_hi);
            d->open_lo = d->open_hi = 0;
        }
        if (d->open_hi > d->open_lo) {
            d->open_lo = lo < d->open_lo ? lo : d->open_lo;
            d->open_hi = hi > d->open_hi ? hi : d->open_hi;
        } else {
            d->open_lo = lo;
            d->open_hi = hi;
        }
        for (int t = first; t < first + count; t++)
            d->started[t] = 1;
        if (d->open_hi - d->open_lo >= d->bucket_floats) {
            start_bucket(d, m, d->open_lo, d->open_hi);
            d->open_lo = d->open_hi = 0;
        }
    }
    comm_progress(d->comm->dp_group);
}

int dp_overlap_applies(int zero, int bf16, int compress, int nccl, char *err, size_t errlen)
{
    if (zero <= 1 && !bf16 && !compress && !nccl)
        return 0;
    snprintf(err, errlen, "--overlap-grad-reduce overlaps the ZeRO-0/1 gradient reduction over MPI in fp32: not with "
                          "%s (ZeRO-2/3 reduce each backward pass as it ends already)",
             zero > 1 ? "--zero 2/3" : bf16 ? "--grad-reduce bf16" : compress ? "--grad-compress" : "--comm nccl");
    return -1;
}

int dp_enable_overlap(dp_state *d, gpt_model *m, int accum, double bucket_mb, char *err, size_t errlen)
{
    if (dp_overlap_applies(d->zero, d->bf16, d->powersgd != NULL, d->nccl != NULL, err, errlen) != 0)
        return -1;
    if (d->dp == 1)
        return 0; /* nothing to reduce */
    d->overlap = 1;
    d->accum = accum;
    d->bucket_floats = (size_t)(bucket_mb * 1048576.0 / sizeof(float));
    if (d->bucket_floats < 1)
        d->bucket_floats = 1;
    d->passes_done = calloc((size_t)m->num_tensors, sizeof *d->passes_done);
    d->started = calloc((size_t)m->num_tensors, 1);
    if (d->zero == 1)
        d->host_recv = calloc(d->padded, sizeof(float));
    m->pass_hook = bucket_pass_hook;
    m->pass_hook_ctx = d;
    return 0;
}

int dp_param_gather_overlap_applies(int zero, int overlap_grad_reduce, int nccl, int offload, char *err,
                                    size_t errlen)
{
    if (zero == 1 && overlap_grad_reduce && !nccl && !offload)
        return 0;
    snprintf(err, errlen, "--overlap-param-gather overlaps the ZeRO-1 parameter all-gather over MPI with the next "
                          "forward: it needs --zero 1 and --overlap-grad-reduce, not %s",
             zero != 1 ? "this --zero" : nccl ? "--comm nccl" : offload ? "--offload-optimizer"
                                                             : "a run without --overlap-grad-reduce");
    return -1;
}

int dp_enable_overlap_param_gather(dp_state *d, gpt_model *m, double bucket_mb, char *err, size_t errlen)
{
    if (dp_param_gather_overlap_applies(d->zero, d->overlap, d->nccl != NULL, d->offload != NULL, err, errlen) != 0)
        return -1;
    size_t want = (size_t)(bucket_mb * 1048576.0 / sizeof(float));
    d->overlap_params = 1;
    d->param_bucket_lo = malloc((size_t)(m->num_tensors + 1) * sizeof(size_t));
    d->param_bucket_hi = malloc((size_t)(m->num_tensors + 1) * sizeof(size_t));
    for (int t = 0; t < m->num_tensors;) { /* whole tensors, in flat order, up to a bucket each */
        size_t lo, hi;
        int u = t;
        tensor_range(m, t, 1, &lo, &hi);
        while (u + 1 < m->num_tensors) {
            size_t a, b;
            tensor_range(m, t, u + 2 - t, &a, &b);
            if (b - a > want)
                break;
            u++;
            hi = b;
        }
        if (hi > lo) {
            d->param_bucket_lo[d->n_param_buckets] = lo;
            d->param_bucket_hi[d->n_param_buckets++] = hi;
        }
        t = u + 1;
    }
    d->param_bucket_counts = calloc((size_t)d->n_param_buckets * d->dp, sizeof(size_t));
    for (int b = 0; b < d->n_param_buckets; b++)
        shard_parts(d, d->param_bucket_lo[b], d->param_bucket_hi[b], d->param_bucket_counts + (size_t)b * d->dp);
    d->param_requests = calloc((size_t)d->n_param_buckets, sizeof *d->param_requests);
    d->host_params = calloc(d->padded, sizeof(float));
    if (d->ep > 1) /* each bucket's dense and expert parts over their own groups */
        dp_ep_param_buckets(d, m);
    return 0;
}

/* The step's end under --overlap-grad-reduce: the open bucket and every range no bucket took are
 * started too, all are waited for, and the sums go back to the device (ZeRO-1: the shard only,
 * the rest zeroed as without buckets). */
static void finish_buckets(dp_state *d, gpt_model *m)
{
    start_bucket(d, m, d->open_lo, d->open_hi);
    d->open_lo = d->open_hi = 0;
    for (int t = 0; t < m->num_tensors;) {
        int u = t;
        while (u < m->num_tensors && !d->started[u])
            u++;
        if (u > t) { /* tensors [t, u) are contiguous in the flat buffer */
            size_t lo, hi;
            tensor_range(m, t, u - t, &lo, &hi);
            start_bucket(d, m, lo, hi);
        }
        t = u + 1;
    }
    comm_wait_started(d->comm->dp_group);
    memset(d->passes_done, 0, (size_t)m->num_tensors * sizeof *d->passes_done);
    memset(d->started, 0, (size_t)m->num_tensors);
    if (d->ep > 1)
        dp_ep_land_buckets(d, m);
    else
        grads_from_host(d, m, d->zero == 0 ? d->host : d->host_recv);
}

void dp_init(dp_state *d, comm_ctx *c, int zero, gpt_model *m)
{
    memset(d, 0, sizeof *d);
    d->comm = c;
    d->zero = zero;
    d->dp = comm_group_size(c->dp_group);
    d->rank = comm_group_rank(c->dp_group);
    d->ep = c->ep > 1 ? c->ep : 1;
    d->k = m->k;
    d->n = m->num_params;
    d->padded = (d->n + d->dp - 1) / d->dp * d->dp;
    gpt_dp_shard_range(d->n, d->dp, d->rank, &d->shard_lo, &d->shard_hi);
    d->host = calloc(d->padded, sizeof(float));
    d->part_counts = malloc((size_t)d->dp * sizeof *d->part_counts);
    if (d->ep > 1)
        dp_ep_init(d, m); /* ZeRO >= 1: the model holds the moments of its dense and expert shards */
    else if (zero >= 1 && d->dp > 1)
        gpt_keep_moments(m, d->shard_lo, d->shard_hi); /* the optimizer state lives with its shard */
    if (dp_grads_sharded(d)) {
        /* the device keeps only the shards; passes use windows (zero_pass_hook) */
        d->window_floats = largest_pass_range(m);
        if (d->ep == 1) /* under EP the model holds its packed shards from the start */
            gpt_keep_grads(m, d->shard_lo, d->shard_hi);
        if (zero >= 3 && d->ep == 1) /* under EP the packed parameter shards too */
            gpt_keep_params(m, d->shard_lo, d->shard_hi);
        m->pass_hook = zero_pass_hook;
        m->pass_hook_ctx = d;
    }
}

void dp_enable_powersgd(dp_state *d, const gpt_model *m, int rank, uint64_t seed)
{
    if (rank < 1 || d->dp < 2 || d->zero != 0)
        return;
    d->powersgd = malloc(sizeof *d->powersgd);
    powersgd_init(d->powersgd, m, rank, d->dp, seed);
}

void dp_enable_offload(dp_state *d)
{
    size_t lo, hi;
    int sharded = d->zero >= 1 && d->dp > 1;
    lo = sharded ? d->shard_lo : 0;
    hi = sharded ? d->shard_hi : d->n;
    d->offload = malloc(sizeof *d->offload);
    offload_init(d->offload, lo, hi);
}

int dp_enable_nccl(dp_state *d, const gpt_model *m, char *err, size_t errlen)
{
    if (d->bf16 || d->powersgd) {
        snprintf(err, errlen, "--comm nccl: the NCCL path reduces fp32 gradients; bf16 and PowerSGD reductions "
                              "run on the host (--comm mpi)");
        return -1;
    }
    d->nccl = comm_nccl_create(d->comm->dp_group, err, errlen);
    /* under EP the expert-DP group's too, once the whole world has its DP communicator (a rank
     * whose creation failed must not leave the others waiting in the next one) */
    int bad = !d->nccl;
    if (d->ep > 1 && !comm_allreduce_max_int(d->comm->world, bad))
        bad = !(d->edp_nccl = comm_nccl_create(d->comm->edp_group, err, errlen));
    if (bad)
        return -1;
    /* a padded copy for the whole-buffer reduce-scatter (ZeRO >= 1 unless the passes reduce
     * their windows) and all-gather (ZeRO-1/2); ZeRO-0 all-reduces the gradient buffer itself.
     * Under EP each kind is packed there (data_parallel_ep.c): whole kinds up to ZeRO-2, a
     * pass's window of each kind under ZeRO-3. */
    if (d->ep > 1)
        d->dev = m->k->alloc((d->zero >= 3 && dp_grads_sharded(d) ? d->window_floats : d->padded) * sizeof(float));
    else if ((d->zero >= 1 && !dp_grads_sharded(d)) || d->zero == 1 || d->zero == 2)
        d->dev = m->k->alloc(d->padded * sizeof(float));
    return 0;
}

/* ZeRO >= 1 gradients held whole (ZeRO-1, or one rank) on the device: the padded copy
 * reduce-scattered, only the shard kept. */
static void reduce_scatter_on_device(dp_state *d, gpt_model *m)
{
    m->k->copy(d->dev, m->grads, d->n * sizeof(float));
    m->k->memset_zero(d->dev + d->n, (d->padded - d->n) * sizeof(float));
    comm_nccl_reduce_scatter_sum(d->nccl, d->dev, d->padded);
    m->k->memset_zero(m->grads, d->n * sizeof(float));
    if (d->shard_hi > d->shard_lo)
        m->k->copy(m->grads + d->shard_lo, d->dev + d->shard_lo, (d->shard_hi - d->shard_lo) * sizeof(float));
}

void dp_sync_optimizer_state(dp_state *d, gpt_model *m)
{
    dp_finish_param_gather(d, m);
    if (d->offload)
        offload_sync_moments(d->offload, m);
}

static void dp_sum(float *buf, size_t n, void *ctx)
{
    comm_allreduce_sum(((dp_state *)ctx)->comm->dp_group, buf, n);
}

/* PowerSGD in place of the all-reduce. A non-finite gradient on any rank (fp16 overflow) would
 * poison every residual: then nothing is reduced, the residuals stay as they are, and the
 * step-skipping check after the reduction sees the rank's inf. */
static void reduce_powersgd(dp_state *d, gpt_model *m)
{
    int bad = 0;
    for (size_t i = 0; i < d->n && !bad; i++)
        bad = !isfinite(d->host[i]);
    if (comm_allreduce_max_int(d->comm->dp_group, bad))
        return;
    powersgd_reduce(d->powersgd, d->host, dp_sum, d);
    m->k->copy_to_device(m->grads, d->host, d->n * sizeof(float));
}

void dp_free(dp_state *d)
{
    if (d->powersgd)
        powersgd_free(d->powersgd);
    if (d->offload)
        offload_free(d->offload);
    comm_nccl_free(d->nccl);
    comm_nccl_free(d->edp_nccl);
    if (d->dev)
        d->k->free(d->dev);
    for (int i = 0; i < DP_WINDOWS; i++) {
        if (d->param_windows.buf[i])
            d->k->free(d->param_windows.buf[i]);
        if (d->grad_windows.buf[i])
            d->k->free(d->grad_windows.buf[i]);
    }
    free(d->powersgd);
    free(d->offload);
    free(d->host);
    free(d->host16);
    free(d->part_counts);
    free(d->passes_done);
    free(d->started);
    free(d->host_recv);
    free(d->packed);
    free(d->bucket_packed[0]);
    free(d->bucket_packed[1]);
    for (int b = 0; b < d->n_param_buckets * param_gathers(d) && d->param_requests; b++)
        comm_request_wait(d->param_requests[b]);
    free(d->param_packed[0]);
    free(d->param_packed[1]);
    free(d->param_span);
    free(d->param_bucket_lo);
    free(d->param_bucket_hi);
    free(d->param_bucket_counts);
    free(d->param_requests);
    free(d->host_params);
    memset(d, 0, sizeof *d);
}

void dp_reduce_gradients(dp_state *d, gpt_model *m)
{
    if (dp_grads_sharded(d))
        return; /* each backward pass reduced its window into the shards */
    if (d->nccl && d->ep > 1) { /* each kind over its own group, in device memory */
        dp_ep_reduce_gradients(d, m);
        return;
    }
    if (d->nccl) { /* in device memory; the gradient never visits the host */
        if (d->zero == 0)
            comm_nccl_allreduce_sum(d->nccl, m->grads, d->n);
        else
            reduce_scatter_on_device(d, m);
        return;
    }
    if (d->dp == 1)
        return;
    if (d->overlap) {
        finish_buckets(d, m);
        return;
    }
    if (d->ep > 1) {
        dp_ep_reduce_gradients(d, m);
        return;
    }
    memset(d->host + d->n, 0, (d->padded - d->n) * sizeof(float));
    m->k->copy_to_host(d->host, m->grads, d->n * sizeof(float));
    if (d->powersgd) {
        reduce_powersgd(d, m);
        return;
    }
    if (d->bf16) {
        /* compression by precision: the gradients travel (and are summed) as bf16 */
        if (!d->host16)
            d->host16 = malloc(d->padded * sizeof(uint16_t));
        for (size_t i = 0; i < d->padded; i++)
            d->host16[i] = comm_bf16_from_float(d->host[i]);
        if (d->zero == 0)
            comm_allreduce_sum_bf16(d->comm->dp_group, d->host16, d->padded);
        else
            comm_reduce_scatter_sum_bf16(d->comm->dp_group, d->host16, d->padded);
        for (size_t i = 0; i < d->padded; i++)
            d->host[i] = comm_float_from_bf16(d->host16[i]);
    } else if (d->zero == 0) {
        comm_allreduce_sum(d->comm->dp_group, d->host, d->padded);
    } else {
        comm_reduce_scatter_sum(d->comm->dp_group, d->host, d->padded);
    }
    grads_from_host(d, m, d->host);
}

/* The flat range whose gradients this rank counts: its shard, or all (ZeRO-0, and EP, whose
 * ZeRO-1 reduces the gradients whole and shards only the update: data_parallel_ep.c). */
static void owned(const dp_state *d, size_t *lo, size_t *hi)
{
    int sharded = d->zero >= 1 && d->dp > 1 && d->ep == 1;
    *lo = sharded ? d->shard_lo : 0;
    *hi = sharded ? d->shard_hi : d->n;
}

static int dp_overflow(dp_state *d, const gpt_model *m)
{
    size_t lo, hi;
    owned(d, &lo, &hi);
    if (dp_ep_grads_packed(d)) /* the packed dense and expert shards, all of m->grads */
        lo = m->grad_range.lo, hi = lo + m->grad_range.n;
    int bad = hi > lo && m->k->has_inf_or_nan(m->grads + (lo - m->grad_range.lo), hi - lo);
    /* under EP the expert gradients differ between the EP ranks: every rank must skip alike */
    return d->zero >= 1 || d->ep > 1 ? comm_allreduce_max_int(d->comm->dp_group, bad) : bad;
}

static double dp_grad_sum_squares(dp_state *d, const gpt_model *m)
{
    size_t lo, hi;
    if (dp_ep_grads_packed(d))
        return dp_ep_grad_sum_squares(d, m);
    owned(d, &lo, &hi);
    /* Only the tensors this rank counts: a copy replicated over TP ranks, or the last stage's
     * copy of the tied embedding, would otherwise be counted more than once. */
    /* Under expert parallelism each EP rank holds its own experts: theirs are summed over the EP
     * group, so every rank counts every expert once, as with EP 1. */
    grad_ranges r;
    grad_ranges_init(&r, m->num_tensors);
    for (int i = 0; i < m->num_tensors; i++) {
        size_t a = m->tensors[i].offset, b = a + m->tensors[i].count;
        if (a < lo)
            a = lo;
        if (b > hi)
            b = hi;
        if (b > a && m->tensors[i].counted)
            grad_ranges_add(&r, m->grads + (a - m->grad_range.lo), b - a, d->ep > 1 && m->tensors[i].expert);
    }
    double total[2];
    grad_ranges_sum(&r, m->k, total);
    double s = total[0];
    if (d->ep > 1)
        s += comm_allreduce_sum_double(d->comm->ep_group, total[1]);
    return d->zero >= 1 && d->ep == 1 ? comm_allreduce_sum_double(d->comm->dp_group, s) : s;
}

double dp_grad_norm(dp_state *d, const gpt_model *m, int fp16, double scale, int *overflow)
{
    double norm = INFINITY;
    *overflow = fp16 ? comm_allreduce_max_int(d->comm->world, dp_overflow(d, m)) : 0;
    if (!*overflow) {
        norm = sqrt(comm_allreduce_sum_double(d->comm->mp_group, dp_grad_sum_squares(d, m))) / scale;
        *overflow = comm_allreduce_max_int(d->comm->world, !isfinite(norm));
    }
    return norm;
}

void dp_optimizer_step(dp_state *d, gpt_model *m, float lr, float weight_decay, int t, float grad_scale)
{
    size_t lo, hi;
    dp_finish_param_gather(d, m); /* a step whose forward did not read every bucket */
    if (dp_ep_sharded(d)) {
        dp_ep_optimizer_step(d, m, lr, weight_decay, t, grad_scale);
        return;
    }
    owned(d, &lo, &hi);
    if (d->offload)
        offload_step(d->offload, m, lr, weight_decay, t, grad_scale);
    /* AdamW per tensor (weight decay on matrices only), restricted to what this rank owns. */
    for (int i = 0; !d->offload && i < m->num_tensors; i++) {
        size_t a = m->tensors[i].offset, b = a + m->tensors[i].count;
        if (a < lo)
            a = lo;
        if (b > hi)
            b = hi;
        if (b <= a)
            continue;
        size_t mo = a - m->moments_lo; /* the moments cover what this rank owns */
        m->k->adamw_update(m->params + (a - m->param_range.lo), m->grads + (a - m->grad_range.lo), m->m + mo,
                           m->v + mo, b - a, lr, 0.9f, 0.95f, 1e-8f, m->tensors[i].decay ? weight_decay : 0.0f, t,
                           grad_scale);
    }
    if (d->zero < 1 || d->zero > 2) /* ZeRO-3 keeps only its shard; ZeRO-0 updated everything */
        return;
    if (d->nccl) {
        /* the same all-gather in device memory (also with one rank, where it is a copy) */
        m->k->memset_zero(d->dev, d->padded * sizeof(float));
        if (hi > lo)
            m->k->copy(d->dev + lo, m->params + lo, (hi - lo) * sizeof(float));
        comm_nccl_allgather(d->nccl, d->dev, d->padded);
        m->k->copy(m->params, d->dev, d->n * sizeof(float));
    } else if (d->overlap_params) {
        /* each bucket's all-gather starts now; the next forward waits for it (bucket_pass_hook) */
        if (hi > lo)
            m->k->copy_to_host(d->host_params + lo, m->params + lo, (hi - lo) * sizeof(float));
        for (int b = 0; b < d->n_param_buckets; b++)
            d->param_requests[b] = comm_iallgather_counts(d->comm->dp_group, d->host_params + d->param_bucket_lo[b],
                                                          d->param_bucket_counts + (size_t)b * d->dp);
    } else if (d->dp > 1) {
        /* all-gather the updated shards: each rank's part of the padded buffer */
        memset(d->host, 0, d->padded * sizeof(float));
        if (hi > lo)
            m->k->copy_to_host(d->host + lo, m->params + lo, (hi - lo) * sizeof(float));
        comm_allgather(d->comm->dp_group, d->host, d->padded);
        m->k->copy_to_device(m->params, d->host, d->n * sizeof(float));
    }
}

void dp_params_to_host(dp_state *d, const gpt_model *m, float *host)
{
    dp_finish_param_gather(d, m);
    if (d->zero < 3 || d->dp == 1) { /* every rank decides alike: the gather below is collective */
        m->k->copy_to_host(host, m->params, m->num_params * sizeof(float));
        return;
    }
    if (d->ep > 1) {
        dp_ep_params_to_host(d, m, host);
        return;
    }
    /* ZeRO-3: the DP group's shards tile the buffer; each rank's goes to the others */
    m->k->copy_to_host(host + m->param_range.lo, m->params, m->param_range.n * sizeof(float));
    shard_parts(d, 0, m->num_params, d->part_counts);
    comm_allgather_counts(d->comm->dp_group, host, d->part_counts);
}
