/* Data parallelism with ZeRO; see data_parallel.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data_parallel.h"

/* The tensors [first, first + count) occupy one contiguous range of the flat buffer. */
static void tensor_range(const gpt_model *m, int first, int count, size_t *lo, size_t *hi)
{
    *lo = m->tensors[first].offset;
    *hi = m->tensors[first + count - 1].offset + m->tensors[first + count - 1].count;
}

/* Keeps only [keep_lo, keep_hi) of the flat-buffer range [lo, hi), zeroing the rest; `window` is
 * the backend memory holding that range (window[0] is element lo). */
static void release_outside(const gpt_model *m, float *window, size_t lo, size_t hi, size_t keep_lo, size_t keep_hi)
{
    if (lo < keep_lo)
        m->k->memset_zero(window, ((keep_lo < hi ? keep_lo : hi) - lo) * sizeof(float));
    if (hi > keep_hi) {
        size_t from = keep_hi > lo ? keep_hi : lo;
        m->k->memset_zero(window + (from - lo), (hi - from) * sizeof(float));
    }
}

/* Gathers the parameter range [lo, hi) from the shards that own it: each rank contributes its
 * part (zeros elsewhere) and the all-reduce sums them. */
static void gather_range(dp_state *d, gpt_model *m, size_t lo, size_t hi)
{
    size_t n = hi - lo;
    if (d->nccl) { /* the same sum in device memory */
        m->k->copy(d->dev, m->params + lo, n * sizeof(float));
        release_outside(m, d->dev, lo, hi, d->shard_lo, d->shard_hi);
        comm_nccl_allreduce_sum(d->nccl, d->dev, n);
        m->k->copy(m->params + lo, d->dev, n * sizeof(float));
        return;
    }
    m->k->copy_to_host(d->host, m->params + lo, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        if (lo + i < d->shard_lo || lo + i >= d->shard_hi)
            d->host[i] = 0;
    comm_allreduce_sum(d->comm->dp_group, d->host, n);
    m->k->copy_to_device(m->params + lo, d->host, n * sizeof(float));
}

static void zero3_hook(gpt_model *m, int first, int count, int before, void *ctx)
{
    dp_state *d = ctx;
    size_t lo, hi;
    tensor_range(m, first, count, &lo, &hi);
    if (before)
        gather_range(d, m, lo, hi);
    else
        release_outside(m, m->params + lo, lo, hi, d->shard_lo, d->shard_hi);
}

void dp_shard_range(size_t n, int dp, int rank, size_t *lo, size_t *hi)
{
    size_t padded = (n + dp - 1) / dp * dp, part = padded / dp;
    *lo = part * rank;
    *hi = part * (rank + 1) < n ? part * (rank + 1) : n;
    if (*lo > n)
        *lo = n;
}

void dp_init(dp_state *d, comm_ctx *c, int zero, gpt_model *m)
{
    memset(d, 0, sizeof *d);
    d->comm = c;
    d->zero = zero;
    d->dp = comm_group_size(c->dp_group);
    d->rank = comm_group_rank(c->dp_group);
    d->n = m->num_params;
    d->padded = (d->n + d->dp - 1) / d->dp * d->dp;
    dp_shard_range(d->n, d->dp, d->rank, &d->shard_lo, &d->shard_hi);
    d->host = calloc(d->padded, sizeof(float));
    if (zero >= 1 && d->dp > 1)
        gpt_keep_moments(m, d->shard_lo, d->shard_hi); /* the optimizer state lives with its shard */
    if (zero >= 3 && d->dp > 1) {
        m->param_hook = zero3_hook;
        m->param_hook_ctx = d;
        release_outside(m, m->params, 0, d->n, d->shard_lo, d->shard_hi);
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
    if (!d->nccl)
        return -1;
    d->k = m->k;
    if (d->zero >= 1) /* ZeRO-0 all-reduces the gradient buffer itself */
        d->dev = m->k->alloc(d->padded * sizeof(float));
    return 0;
}

/* ZeRO 1-3 gradients on the device: the padded copy reduce-scattered, only the shard kept. */
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
    if (d->dev)
        d->k->free(d->dev);
    free(d->powersgd);
    free(d->offload);
    free(d->host);
    free(d->host16);
    memset(d, 0, sizeof *d);
}

void dp_reduce_gradients(dp_state *d, gpt_model *m)
{
    if (d->nccl) { /* in device memory; the gradient never visits the host */
        if (d->zero == 0)
            comm_nccl_allreduce_sum(d->nccl, m->grads, d->n);
        else
            reduce_scatter_on_device(d, m);
        return;
    }
    if (d->dp == 1)
        return;
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
    if (d->zero == 0) {
        m->k->copy_to_device(m->grads, d->host, d->n * sizeof(float));
        return;
    }
    /* Only the shard is meaningful now; the rest of the gradient is dropped (ZeRO-2/3 free it,
     * ZeRO-1 would keep a stale copy: zero it so nothing reads it by mistake). */
    m->k->memset_zero(m->grads, d->n * sizeof(float));
    if (d->shard_hi > d->shard_lo)
        m->k->copy_to_device(m->grads + d->shard_lo, d->host + d->shard_lo,
                             (d->shard_hi - d->shard_lo) * sizeof(float));
}

static void owned(const dp_state *d, size_t *lo, size_t *hi)
{
    int sharded = d->zero >= 1 && d->dp > 1;
    *lo = sharded ? d->shard_lo : 0;
    *hi = sharded ? d->shard_hi : d->n;
}

int dp_overflow(dp_state *d, const gpt_model *m)
{
    size_t lo, hi;
    owned(d, &lo, &hi);
    int bad = hi > lo && m->k->has_inf_or_nan(m->grads + lo, hi - lo);
    return d->zero >= 1 ? comm_allreduce_max_int(d->comm->dp_group, bad) : bad;
}

double dp_grad_sum_squares(dp_state *d, const gpt_model *m)
{
    size_t lo, hi;
    owned(d, &lo, &hi);
    /* Only the tensors this rank counts: a copy replicated over TP ranks, or the last stage's
     * copy of the tied embedding, would otherwise be counted more than once. */
    double s = 0;
    for (int i = 0; i < m->num_tensors; i++) {
        size_t a = m->tensors[i].offset, b = a + m->tensors[i].count;
        if (a < lo)
            a = lo;
        if (b > hi)
            b = hi;
        if (b > a && m->tensors[i].counted)
            s += m->k->sum_squares(m->grads + a, b - a);
    }
    return d->zero >= 1 ? comm_allreduce_sum_double(d->comm->dp_group, s) : s;
}

void dp_optimizer_step(dp_state *d, gpt_model *m, float lr, float weight_decay, int t, float grad_scale)
{
    size_t lo, hi;
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
        m->k->adamw_update(m->params + a, m->grads + a, m->m + mo, m->v + mo, b - a, lr, 0.9f, 0.95f, 1e-8f,
                           m->tensors[i].decay ? weight_decay : 0.0f, t, grad_scale);
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
    } else if (d->dp > 1) {
        /* all-gather the updated shards: each rank's part of the padded buffer */
        memset(d->host, 0, d->padded * sizeof(float));
        if (hi > lo)
            m->k->copy_to_host(d->host + lo, m->params + lo, (hi - lo) * sizeof(float));
        comm_allgather(d->comm->dp_group, d->host, d->padded);
        m->k->copy_to_device(m->params, d->host, d->n * sizeof(float));
    }
}

void dp_gather_all(dp_state *d, gpt_model *m)
{
    if (d->zero >= 3 && d->dp > 1) {
        gather_range(d, m, 0, d->n);
    }
}
