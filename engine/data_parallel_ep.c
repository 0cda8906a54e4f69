/* Data parallelism with expert parallelism; see data_parallel_ep.h. */
#include <stdlib.h>
#include <string.h>
#include "data_parallel_ep.h"

void gpt_ep_shards_of(const gpt_model *m, int dp, int dp_rank, int ep, gpt_ep_shards *s)
{
    memset(s, 0, sizeof *s);
    for (int t = 0; t < m->num_tensors; t++)
        s->n[m->tensors[t].expert ? 1 : 0] += m->tensors[t].count;
    gpt_dp_shard_range(s->n[0], dp, dp_rank, &s->lo[0], &s->hi[0]);
    /* the expert-DP group: the dp / ep ranks with this rank's ep_rank, in dp_rank order */
    gpt_dp_shard_range(s->n[1], dp / ep, dp_rank / ep, &s->lo[1], &s->hi[1]);
}

size_t gpt_ep_shards_floats(const gpt_ep_shards *s)
{
    return (s->hi[0] - s->lo[0]) + (s->hi[1] - s->lo[1]);
}

void gpt_ep_pack_shards(const gpt_model *m, const gpt_ep_shards *s, float *flat)
{
    size_t n = gpt_ep_shards_floats(s), pos[2] = {0, 0}, base[2] = {0, s->hi[0] - s->lo[0]};
    float *packed = malloc((n ? n : 1) * sizeof(float));
    for (int t = 0; t < m->num_tensors; t++) {
        const gpt_tensor *g = &m->tensors[t];
        int k = g->expert ? 1 : 0;
        size_t x = pos[k] > s->lo[k] ? pos[k] : s->lo[k], y = pos[k] + g->count < s->hi[k] ? pos[k] + g->count : s->hi[k];
        if (y > x)
            memcpy(packed + base[k] + (x - s->lo[k]), flat + g->offset + (x - pos[k]), (y - x) * sizeof(float));
        pos[k] += g->count;
    }
    memcpy(flat, packed, n * sizeof(float));
    free(packed);
}

int dp_ep_sharded(const dp_state *d)
{
    return d->ep > 1 && d->zero >= 1 && d->dp > 1;
}

void dp_ep_init(dp_state *d, const gpt_model *m)
{
    gpt_ep_shards_of(m, d->dp, d->rank, d->ep, &d->eps);
    size_t most = d->eps.n[0] > d->eps.n[1] ? d->eps.n[0] : d->eps.n[1];
    d->packed = malloc((most ? most : 1) * sizeof(float));
}

/* How packing moves floats: memcpy between host buffers, or the backend's device-to-device copy
 * (--comm nccl, whose collectives read and write device memory). */
typedef void (*copy_fn)(void *dst, const void *src, size_t bytes);

static void host_copy(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
}

/* The tensors of one kind (expert 1, dense 0) packed one after another from the flat copy `flat`
 * (pack = 1) or back into it (0), both host or both device memory as `copy` moves them. The
 * tensors tile the flat buffer, so the two kinds together are all of it. Returns the floats
 * packed. */
static size_t pack_kind_by(const gpt_model *m, float *flat, float *packed, int expert, int pack, copy_fn copy)
{
    size_t at = 0;
    for (int t = 0; t < m->num_tensors; t++) {
        const gpt_tensor *g = &m->tensors[t];
        if ((g->expert ? 1 : 0) != expert || g->count == 0)
            continue;
        if (pack)
            copy(packed + at, flat + g->offset, g->count * sizeof(float));
        else
            copy(flat + g->offset, packed + at, g->count * sizeof(float));
        at += g->count;
    }
    return at;
}

static size_t pack_kind(const gpt_model *m, float *flat, float *packed, int expert, int pack)
{
    return pack_kind_by(m, flat, packed, expert, pack, host_copy);
}

/* The group a kind reduces and shards over, and its NCCL communicator under --comm nccl. */
static comm_group *group_of(const dp_state *d, int expert)
{
    return expert ? d->comm->edp_group : d->comm->dp_group;
}

static comm_nccl *nccl_of(const dp_state *d, int expert)
{
    return expert ? d->edp_nccl : d->nccl;
}

/* --grad-reduce bf16 (compression by precision, Megatron-LM's --grad-reduce-in-bf16): a kind's
 * packed floats [0, n) as bf16 for the wire, and back (from `from` on, `count` of them). */
static uint16_t *to_bf16(dp_state *d, const float *packed, size_t n)
{
    if (!d->host16)
        d->host16 = malloc(d->padded * sizeof(uint16_t)); /* a kind's packed floats are fewer */
    for (size_t i = 0; i < n; i++)
        d->host16[i] = comm_bf16_from_float(packed[i]);
    return d->host16;
}

static void from_bf16(const dp_state *d, float *packed, size_t from, size_t count)
{
    for (size_t i = from; i < from + count; i++)
        packed[i] = comm_float_from_bf16(d->host16[i]);
}

/* An expert's gradient, on the rank that holds the expert, already sums what every EP rank's
 * tokens gave it (their rows came to it), so it is summed over the expert-DP group alone: the
 * same sum as with EP 1. */
void dp_ep_reduce_gradients(dp_state *d, gpt_model *m)
{
    if (d->nccl) { /* each kind packed, summed and put back in device memory */
        for (int expert = 0; expert < 2; expert++) {
            size_t n = pack_kind_by(m, m->grads, d->dev, expert, 1, m->k->copy);
            if (n) /* alike on every rank of the group: the kinds are the model's */
                comm_nccl_allreduce_sum(nccl_of(d, expert), d->dev, n);
            pack_kind_by(m, m->grads, d->dev, expert, 0, m->k->copy);
        }
        return;
    }
    m->k->copy_to_host(d->host, m->grads, d->n * sizeof(float));
    for (int expert = 0; expert < 2; expert++) {
        size_t n = pack_kind(m, d->host, d->packed, expert, 1);
        if (d->bf16) { /* the gradients travel, and are summed, as bf16 */
            comm_allreduce_sum_bf16(group_of(d, expert), to_bf16(d, d->packed, n), n);
            from_bf16(d, d->packed, 0, n);
        } else {
            comm_allreduce_sum(group_of(d, expert), d->packed, n);
        }
        pack_kind(m, d->host, d->packed, expert, 0);
    }
    m->k->copy_to_device(m->grads, d->host, d->n * sizeof(float));
}

/* AdamW on the part of tensor i that lies in its kind's shard. p: the tensor's first packed
 * position; base: where the kind's shard starts in the moments. */
static void update_owned(dp_state *d, gpt_model *m, int i, size_t p, size_t base, float lr, float weight_decay,
                         int t, float grad_scale)
{
    const gpt_tensor *g = &m->tensors[i];
    int k = g->expert ? 1 : 0;
    size_t x = p > d->eps.lo[k] ? p : d->eps.lo[k], y = p + g->count < d->eps.hi[k] ? p + g->count : d->eps.hi[k];
    if (y <= x)
        return;
    size_t a = g->offset + (x - p), mo = base + (x - d->eps.lo[k]);
    float *grads = dp_ep_grads_packed(d) ? m->grads + mo : m->grads + a;
    float *params = d->zero >= 3 ? m->params + mo : m->params + a; /* ZeRO-3: the packed shards */
    m->k->adamw_update(params, grads, m->m + mo, m->v + mo, y - x, lr, 0.9f, 0.95f, 1e-8f,
                       g->decay ? weight_decay : 0.0f, t, grad_scale);
}

/* Each kind's updated shard to the other ranks of its group: the packed sequence, each rank's
 * part at its place (an all-gather with the shards' counts), then back into the flat copy. */
static void gather_kind(dp_state *d, const gpt_model *m, int expert)
{
    comm_group *g = group_of(d, expert);
    int ranks = comm_group_size(g);
    size_t *counts = malloc((size_t)ranks * sizeof *counts);
    for (int r = 0; r < ranks; r++) {
        size_t lo, hi;
        gpt_dp_shard_range(d->eps.n[expert], ranks, r, &lo, &hi);
        counts[r] = hi > lo ? hi - lo : 0;
    }
    if (d->nccl) { /* the same on the device: m->params holds the updated shards */
        pack_kind_by(m, m->params, d->dev, expert, 1, m->k->copy);
        comm_nccl_gather_from_owners(nccl_of(d, expert), d->dev, counts);
        pack_kind_by(m, m->params, d->dev, expert, 0, m->k->copy);
    } else {
        pack_kind(m, d->host, d->packed, expert, 1);
        comm_allgather_counts(g, d->packed, counts);
        pack_kind(m, d->host, d->packed, expert, 0);
    }
    free(counts);
}

static size_t packed_span(const gpt_model *m, size_t lo, size_t hi, int k, const float *host, float *packed,
                          size_t *plo, copy_fn copy);
static void unpack_span(const gpt_model *m, size_t lo, size_t hi, int k, const float *packed, float *host,
                        copy_fn copy);
static void span_parts(const dp_state *d, int k, size_t plo, size_t n, size_t *counts, size_t *x, size_t *y);

void dp_ep_optimizer_step(dp_state *d, gpt_model *m, float lr, float weight_decay, int t, float grad_scale)
{
    size_t pos[2] = {0, 0}, base[2] = {0, d->eps.hi[0] - d->eps.lo[0]};
    for (int i = 0; i < m->num_tensors; i++) {
        int k = m->tensors[i].expert ? 1 : 0;
        update_owned(d, m, i, pos[k], base[k], lr, weight_decay, t, grad_scale);
        pos[k] += m->tensors[i].count;
    }
    if (d->zero >= 3) /* ZeRO-3 keeps its shards: the next pass gathers what it reads */
        return;
    if (d->nccl) {
        for (int expert = 0; expert < 2; expert++)
            gather_kind(d, m, expert);
        return;
    }
    m->k->copy_to_host(d->host, m->params, d->n * sizeof(float));
    if (d->overlap_params) { /* each bucket's two all-gathers start now; the next forward lands them */
        for (int k = 0; k < 2; k++)
            pack_kind(m, d->host, d->param_packed[k], k, 1);
        for (int b = 0; b < d->n_param_buckets; b++)
            for (int k = 0; k < 2; k++) {
                const size_t *counts = d->param_bucket_counts + (size_t)(2 * b + k) * d->dp;
                size_t len = 0;
                for (int r = 0; r < d->dp; r++)
                    len += counts[r];
                if (len) /* a kind the bucket has no tensor of: nothing to gather (alike on every rank) */
                    d->param_requests[2 * b + k] =
                        comm_iallgather_counts(group_of(d, k), d->param_packed[k] + d->param_span[2 * b + k], counts);
            }
        return;
    }
    for (int expert = 0; expert < 2; expert++)
        gather_kind(d, m, expert);
    m->k->copy_to_device(m->params, d->host, d->n * sizeof(float));
}

void dp_ep_param_buckets(dp_state *d, const gpt_model *m)
{
    int n = d->n_param_buckets;
    free(d->param_bucket_counts);
    free(d->param_requests);
    d->param_bucket_counts = calloc((size_t)n * 2 * d->dp, sizeof(size_t));
    d->param_requests = calloc((size_t)n * 2, sizeof *d->param_requests);
    d->param_span = calloc((size_t)n * 2, sizeof(size_t));
    for (int k = 0; k < 2; k++)
        d->param_packed[k] = calloc(d->eps.n[k] ? d->eps.n[k] : 1, sizeof(float));
    for (int b = 0; b < n; b++)
        for (int k = 0; k < 2; k++) { /* a kind's tensors of a bucket are consecutive in its order */
            size_t plo, x, y;
            size_t len = packed_span(m, d->param_bucket_lo[b], d->param_bucket_hi[b], k, NULL, NULL, &plo, NULL);
            d->param_span[2 * b + k] = plo;
            if (len) /* none: every count 0, an all-gather of nothing */
                span_parts(d, k, plo, len, d->param_bucket_counts + (size_t)(2 * b + k) * d->dp, &x, &y);
        }
}

void dp_ep_land_param_bucket(dp_state *d, const gpt_model *m, int b)
{
    size_t lo = d->param_bucket_lo[b], hi = d->param_bucket_hi[b];
    for (int k = 0; k < 2; k++) {
        comm_request_wait(d->param_requests[2 * b + k]);
        d->param_requests[2 * b + k] = NULL;
    }
    for (int k = 0; k < 2; k++) /* the bucket's tensors from their kinds' packed orders to their flat places */
        unpack_span(m, lo, hi, k, d->param_packed[k] + d->param_span[2 * b + k], d->host_params + lo, host_copy);
    m->k->copy_to_device(m->params + lo, d->host_params + lo, (hi - lo) * sizeof(float));
}

/* ZeRO-2 with EP: m->grads holds the gradient shards packed as the moments are (the dense shard,
 * then the expert shard), so a backward pass's window is reduce-scattered per kind over its own
 * group, and the shards' gradients sit at the moments' offsets. */
int dp_ep_grads_packed(const dp_state *d)
{
    return dp_ep_sharded(d) && d->zero >= 2;
}

/* The packed positions [*plo, *plo + n) of kind k's tensors in the flat range [lo, hi) (whole
 * tensors, so consecutive in the packed order); with host (indexed from lo) and packed given,
 * the floats are packed too, moved by `copy` (host and packed: host memory, or both device
 * memory). Returns n. */
static size_t packed_span(const gpt_model *m, size_t lo, size_t hi, int k, const float *host, float *packed,
                          size_t *plo, copy_fn copy)
{
    size_t pos = 0, n = 0;
    *plo = 0;
    for (int t = 0; t < m->num_tensors; t++) {
        const gpt_tensor *g = &m->tensors[t];
        if ((g->expert ? 1 : 0) != k)
            continue;
        if (g->count && g->offset >= lo && g->offset + g->count <= hi) {
            if (!n)
                *plo = pos;
            if (host)
                copy(packed + n, host + (g->offset - lo), g->count * sizeof(float));
            n += g->count;
        }
        pos += g->count;
    }
    return n;
}

/* packed_span's inverse: kind k's tensors in the flat range [lo, hi) from packed (indexed from
 * the span's first packed position) to host (indexed from lo). */
static void unpack_span(const gpt_model *m, size_t lo, size_t hi, int k, const float *packed, float *host,
                        copy_fn copy)
{
    size_t n = 0;
    for (int t = 0; t < m->num_tensors; t++) {
        const gpt_tensor *g = &m->tensors[t];
        if ((g->expert ? 1 : 0) == k && g->count && g->offset >= lo && g->offset + g->count <= hi) {
            copy(host + (g->offset - lo), packed + n, g->count * sizeof(float));
            n += g->count;
        }
    }
}

/* Each rank's part of kind k's packed range [plo, plo + n) (counts over the kind's group), and
 * this rank's own part [*x, *y). */
static void span_parts(const dp_state *d, int k, size_t plo, size_t n, size_t *counts, size_t *x, size_t *y)
{
    int ranks = comm_group_size(group_of(d, k));
    for (int r = 0; r < ranks; r++) {
        size_t lo, hi;
        gpt_dp_shard_range(d->eps.n[k], ranks, r, &lo, &hi);
        size_t a = lo > plo ? lo : plo, b = hi < plo + n ? hi : plo + n;
        counts[r] = b > a ? b - a : 0;
    }
    *x = d->eps.lo[k] > plo ? d->eps.lo[k] : plo;
    *y = d->eps.hi[k] < plo + n ? d->eps.hi[k] : plo + n;
    if (*y < *x)
        *y = *x;
}

/* Where kind k's packed position x lives in the packed shards (gradients and moments). */
static size_t shard_at(const dp_state *d, int k, size_t x)
{
    return (k ? d->eps.hi[0] - d->eps.lo[0] : 0) + (x - d->eps.lo[k]);
}

void dp_ep_reduce_window(dp_state *d, gpt_model *m, size_t lo, size_t hi, float *win)
{
    size_t *counts = malloc((size_t)d->dp * sizeof *counts);
    if (!d->nccl)
        m->k->copy_to_host(d->host, win, (hi - lo) * sizeof(float));
    for (int k = 0; k < 2; k++) {
        size_t plo, x, y, n = d->nccl ? packed_span(m, lo, hi, k, win, d->dev, &plo, m->k->copy)
                                      : packed_span(m, lo, hi, k, d->host, d->packed, &plo, host_copy);
        if (!n)
            continue;
        span_parts(d, k, plo, n, counts, &x, &y);
        if (d->nccl) { /* on the device: this rank's sum lands in its part of the staging */
            comm_nccl_reduce_to_owners(nccl_of(d, k), d->dev, counts);
            if (y > x) {
                float *g = m->grads + shard_at(d, k, x);
                m->k->residual_forward(g, g, d->dev + (x - plo), y - x, KPREC_FP32);
            }
            continue;
        }
        if (d->bf16) { /* as bf16 on the wire, this rank's sum back to fp32 */
            comm_reduce_scatter_sum_counts_bf16(group_of(d, k), to_bf16(d, d->packed, n), counts);
            from_bf16(d, d->packed, x - plo, y - x);
        } else {
            comm_reduce_scatter_sum_counts(group_of(d, k), d->packed, counts);
        }
        if (y > x) { /* the window is free now: it carries this rank's sum to the device */
            float *g = m->grads + shard_at(d, k, x);
            m->k->copy_to_device(win, d->packed + (x - plo), (y - x) * sizeof(float));
            m->k->residual_forward(g, g, win, y - x, KPREC_FP32);
        }
    }
    free(counts);
}

/* Tensor t's place in its kind's packed order (dense or expert): where it starts (plo), its
 * length (returned), its kind (k), each rank's part of it (counts, d->dp entries) and this rank's
 * [x, y). */
static size_t tensor_parts(const dp_state *d, const gpt_model *m, int t, int *k, size_t *counts, size_t *plo,
                           size_t *x, size_t *y)
{
    const gpt_tensor *g = &m->tensors[t];
    *k = g->expert ? 1 : 0;
    size_t n = packed_span(m, g->offset, g->offset + g->count, *k, NULL, NULL, plo, NULL);
    span_parts(d, *k, *plo, n, counts, x, y);
    return n;
}

void dp_ep_gather_grad(dp_state *d, gpt_model *m, int t, float *win)
{
    int k;
    size_t *counts = malloc((size_t)d->dp * sizeof *counts);
    size_t plo, x, y, n = tensor_parts(d, m, t, &k, counts, &plo, &x, &y);
    if (d->nccl) { /* one tensor is one run in both orders: gathered straight into the window */
        if (y > x)
            m->k->copy(win + (x - plo), m->grads + shard_at(d, k, x), (y - x) * sizeof(float));
        comm_nccl_gather_from_owners(nccl_of(d, k), win, counts);
        free(counts);
        return;
    }
    if (y > x)
        m->k->copy_to_host(d->packed + (x - plo), m->grads + shard_at(d, k, x), (y - x) * sizeof(float));
    comm_allgather_counts(group_of(d, k), d->packed, counts);
    m->k->copy_to_device(win, d->packed, n * sizeof(float));
    free(counts);
}

void dp_ep_gather_window(dp_state *d, const gpt_model *m, size_t lo, size_t hi, float *win)
{
    size_t *counts = malloc((size_t)d->dp * sizeof *counts);
    for (int k = 0; k < 2; k++) {
        size_t plo, x, y, n = packed_span(m, lo, hi, k, NULL, NULL, &plo, NULL);
        if (!n) /* alike on every rank: the window's tensors are the layout's */
            continue;
        span_parts(d, k, plo, n, counts, &x, &y);
        if (d->nccl) { /* the same on the device, through its staging */
            if (y > x)
                m->k->copy(d->dev + (x - plo), m->params + shard_at(d, k, x), (y - x) * sizeof(float));
            comm_nccl_gather_from_owners(nccl_of(d, k), d->dev, counts);
            unpack_span(m, lo, hi, k, d->dev, win, m->k->copy);
            continue;
        }
        if (y > x)
            m->k->copy_to_host(d->packed + (x - plo), m->params + shard_at(d, k, x), (y - x) * sizeof(float));
        comm_allgather_counts(group_of(d, k), d->packed, counts);
        unpack_span(m, lo, hi, k, d->packed, d->host, host_copy);
    }
    if (!d->nccl)
        m->k->copy_to_device(win, d->host, (hi - lo) * sizeof(float));
    free(counts);
}

void dp_ep_params_to_host(dp_state *d, const gpt_model *m, float *host)
{
    size_t *counts = malloc((size_t)d->dp * sizeof *counts), x, y;
    for (int k = 0; k < 2; k++) {
        if (!d->eps.n[k])
            continue;
        span_parts(d, k, 0, d->eps.n[k], counts, &x, &y);
        if (y > x)
            m->k->copy_to_host(d->packed + x, m->params + shard_at(d, k, x), (y - x) * sizeof(float));
        comm_allgather_counts(group_of(d, k), d->packed, counts);
        pack_kind(m, host, d->packed, k, 0);
    }
    free(counts);
}

void dp_ep_keep_grad(dp_state *d, gpt_model *m, int t, const float *win)
{
    int k;
    size_t *counts = malloc((size_t)d->dp * sizeof *counts);
    size_t plo, x, y;
    tensor_parts(d, m, t, &k, counts, &plo, &x, &y);
    if (y > x)
        m->k->copy(m->grads + shard_at(d, k, x), win + (x - plo), (y - x) * sizeof(float));
    free(counts);
}

double dp_ep_grad_sum_squares(dp_state *d, const gpt_model *m)
{
    size_t pos[2] = {0, 0};
    grad_ranges r;
    grad_ranges_init(&r, m->num_tensors);
    for (int i = 0; i < m->num_tensors; i++) {
        const gpt_tensor *g = &m->tensors[i];
        int k = g->expert ? 1 : 0;
        size_t x = pos[k] > d->eps.lo[k] ? pos[k] : d->eps.lo[k];
        size_t y = pos[k] + g->count < d->eps.hi[k] ? pos[k] + g->count : d->eps.hi[k];
        if (y > x && g->counted)
            grad_ranges_add(&r, m->grads + shard_at(d, k, x), y - x, 0); /* dense and experts alike */
        pos[k] += g->count;
    }
    double total[2];
    grad_ranges_sum(&r, m->k, total);
    /* every dense float is in one DP rank's shard, every expert float in one rank's expert shard */
    return comm_allreduce_sum_double(d->comm->dp_group, total[0]);
}

/* --overlap-grad-reduce with EP (ZeRO-0/1, whose gradients are reduced whole): a bucket [lo, hi)
 * of whole tensors, already copied to d->host at its offsets, starts one all-reduce per kind,
 * each over its own group, on the kind's packed copy (its tensors are consecutive there). The
 * packed copies hold every bucket of the step until dp_ep_land_buckets. */
void dp_ep_start_bucket(dp_state *d, gpt_model *m, size_t lo, size_t hi)
{
    for (int k = 0; k < 2; k++) {
        if (!d->bucket_packed[k])
            d->bucket_packed[k] = malloc((d->eps.n[k] ? d->eps.n[k] : 1) * sizeof(float));
        size_t plo, n = packed_span(m, lo, hi, k, NULL, NULL, &plo, NULL);
        if (!n)
            continue;
        packed_span(m, lo, hi, k, d->host + lo, d->bucket_packed[k] + plo, &plo, host_copy);
        comm_iallreduce_sum(group_of(d, k), d->bucket_packed[k] + plo, n);
    }
}

void dp_ep_land_buckets(dp_state *d, gpt_model *m)
{
    comm_wait_started(d->comm->edp_group); /* the caller waited for the DP group's */
    for (int k = 0; k < 2; k++)
        if (d->bucket_packed[k])
            pack_kind(m, d->host, d->bucket_packed[k], k, 0);
    m->k->copy_to_device(m->grads, d->host, d->n * sizeof(float));
}
