/* Monte Carlo of failures over a long run; see faults.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "faults.h"
#include "params.h"
#include "run.h"

const char *faults_loss_name(int cause)
{
    static const char *names[LOSS_COUNT] = {"detection", "restart", "restore", "lost_work", "checkpoint_save",
                                            "repair_wait"};
    return cause >= 0 && cause < LOSS_COUNT ? names[cause] : "?";
}

/* ---- random numbers (splitmix64; the state is one integer, runs are reproducible) ---- */
typedef struct {
    unsigned long long s;
} mc_rng;

static double mc_uniform(mc_rng *r)
{
    unsigned long long z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
}

/* A lifetime with the given mean: exponential for shape 1, else Weibull. */
static double lifetime(mc_rng *r, double mean, double shape)
{
    double u = -log(mc_uniform(r));
    if (shape == 1.0)
        return mean * u;
    return mean / tgamma(1.0 + 1.0 / shape) * pow(u, 1.0 / shape);
}

/* ---- a binary min-heap of component failure times (Weibull: components age separately) ---- */
typedef struct {
    double *t;
    int *kind; /* 0 GPU, 1 node */
    int n;
} heap;

static void heap_push(heap *h, double t, int kind)
{
    int i = h->n++;
    while (i > 0 && h->t[(i - 1) / 2] > t) {
        h->t[i] = h->t[(i - 1) / 2];
        h->kind[i] = h->kind[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->t[i] = t;
    h->kind[i] = kind;
}

static void heap_pop(heap *h, double *t, int *kind)
{
    *t = h->t[0];
    *kind = h->kind[0];
    double lt = h->t[--h->n];
    int lk = h->kind[h->n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->t[c + 1] < h->t[c])
            c++;
        if (h->t[c] >= lt)
            break;
        h->t[i] = h->t[c];
        h->kind[i] = h->kind[c];
        i = c;
    }
    h->t[i] = lt;
    h->kind[i] = lk;
}

typedef struct {
    int gpus, nodes_used, pool;
    double gpu_mean_s, node_mean_s, shape, rate_total;
} fleet;

static void fleet_of(const scenario_config *s, fleet *f)
{
    f->gpus = scenario_gpus(s);
    int gpn = s->platform.node.gpus;
    f->nodes_used = (f->gpus + gpn - 1) / gpn;
    f->pool = s->platform.network.nodes - f->nodes_used + s->faults.spare_nodes;
    if (f->pool < 0)
        f->pool = 0;
    f->gpu_mean_s = s->faults.gpu_mtbf_hours * 3600;
    f->node_mean_s = s->faults.node_mtbf_hours * 3600;
    f->shape = s->faults.weibull_shape > 0 ? s->faults.weibull_shape : 1;
    f->rate_total = (f->gpu_mean_s > 0 ? f->gpus / f->gpu_mean_s : 0) +
                    (f->node_mean_s > 0 ? f->nodes_used / f->node_mean_s : 0);
}

void faults_simulate_one(const scenario_config *s, const faults_report *P, double interval_s,
                         unsigned long long seed, faults_timeline *out)
{
    memset(out, 0, sizeof *out);
    fleet F;
    fleet_of(s, &F);
    mc_rng rng = {seed * 0x2545f4914f6cdd1dull + 0x632be59bd9b4e019ull};
    int weibull = F.shape != 1.0;
    heap h = {0};
    if (weibull) {
        int n = (F.gpu_mean_s > 0 ? F.gpus : 0) + (F.node_mean_s > 0 ? F.nodes_used : 0);
        h.t = malloc(((size_t)n + 1) * sizeof *h.t);
        h.kind = malloc(((size_t)n + 1) * sizeof *h.kind);
        if (F.gpu_mean_s > 0)
            for (int i = 0; i < F.gpus; i++)
                heap_push(&h, lifetime(&rng, F.gpu_mean_s, F.shape), 0);
        if (F.node_mean_s > 0)
            for (int i = 0; i < F.nodes_used; i++)
                heap_push(&h, lifetime(&rng, F.node_mean_s, F.shape), 1);
    }
    double next_fail = INFINITY;
    int next_kind = 0;
    if (weibull && h.n > 0)
        heap_pop(&h, &next_fail, &next_kind);
    else if (F.rate_total > 0)
        next_fail = -log(mc_uniform(&rng)) / F.rate_total;

    double t = 0, p = 0, durable = 0, ckpt_point = 0, pending_p = -1, pending_at = 0;
    double repairs[256];
    int n_repairs = 0, pool = F.pool, active = F.nodes_used;
    double repair_s = s->faults.repair_hours * 3600;
    for (;;) {
        double rate = (double)active / F.nodes_used;
        /* Repaired nodes come back: to the pool, or to the job if it shrank. */
        while (n_repairs > 0 && repairs[0] <= t) {
            if (active < F.nodes_used)
                active++;
            else
                pool++;
            memmove(repairs, repairs + 1, (size_t)(--n_repairs) * sizeof *repairs);
            rate = (double)active / F.nodes_used;
        }
        double to_ckpt = (ckpt_point + interval_s - p) / rate;
        double to_end = P->target_train_s > 0 ? (P->target_train_s - p) / rate : P->horizon_s - t;
        double to_fail = next_fail - t;
        double dt = fmin(to_ckpt, fmin(to_end, to_fail));
        if (dt < 0)
            dt = 0;
        t += dt;
        p += dt * rate;
        if (pending_p >= 0 && pending_at <= t) { /* an async checkpoint finished writing */
            durable = pending_p;
            pending_p = -1;
        }
        if (dt == to_end && to_end <= to_fail)
            break;
        if (dt == to_ckpt && to_ckpt < to_fail) {
            double block = s->faults.checkpoint_async ? P->checkpoint_block_s : P->checkpoint_write_s;
            t += block;
            out->lost_s[LOSS_CHECKPOINT] += block;
            if (s->faults.checkpoint_async) {
                pending_p = p;
                pending_at = t + P->checkpoint_write_s;
            } else {
                durable = p;
            }
            ckpt_point = p;
            continue;
        }
        /* A failure: roll back to the last durable checkpoint, detect, get a node, restart. */
        double fail_at = t;
        out->interruptions++;
        out->lost_s[LOSS_LOST_WORK] += (p - durable) / rate;
        p = durable;
        ckpt_point = durable;
        pending_p = -1;
        t += s->faults.detect_s;
        out->lost_s[LOSS_DETECTION] += s->faults.detect_s;
        if (pool > 0) {
            pool--;
        } else if (s->faults.elastic && active > 1) {
            active--;
        } else if (n_repairs > 0) {
            double wait = repairs[0] - t;
            if (wait > 0) {
                t += wait;
                out->lost_s[LOSS_WAIT_REPAIR] += wait;
            }
            memmove(repairs, repairs + 1, (size_t)(--n_repairs) * sizeof *repairs);
        } else {
            t += repair_s;
            out->lost_s[LOSS_WAIT_REPAIR] += repair_s;
        }
        if (n_repairs < 256) { /* the failed node comes back after repair */
            int i = n_repairs++;
            while (i > 0 && repairs[i - 1] > t + repair_s) {
                repairs[i] = repairs[i - 1];
                i--;
            }
            repairs[i] = t + repair_s;
        }
        t += s->faults.restart_s + P->restore_s;
        out->lost_s[LOSS_RESTART] += s->faults.restart_s;
        out->lost_s[LOSS_RESTORE] += P->restore_s;
        if (weibull) {
            heap_push(&h, t + lifetime(&rng, next_kind ? F.node_mean_s : F.gpu_mean_s, F.shape), next_kind);
            heap_pop(&h, &next_fail, &next_kind);
            if (next_fail < t)
                next_fail = t; /* it failed while the job was down: found at restart */
        } else {
            /* The fleet keeps failing while the job is down; such a failure is found at restart. */
            next_fail = fmax(t, fail_at + -log(mc_uniform(&rng)) / F.rate_total);
        }
        if (P->target_train_s <= 0 && t >= P->horizon_s)
            break;
        if (t > 1e10) /* a run that never finishes (e.g. failures faster than restarts) */
            break;
    }
    out->wall_s = t;
    out->train_s = p;
    free(h.t);
    free(h.kind);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static faults_stat stat_of(double *v, int n)
{
    faults_stat st = {0, 0, 0, 0};
    if (n == 0)
        return st;
    for (int i = 0; i < n; i++)
        st.mean += v[i] / n;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    st.p5 = v[(int)(0.05 * (n - 1) + 0.5)];
    st.p50 = v[(int)(0.50 * (n - 1) + 0.5)];
    st.p95 = v[(int)(0.95 * (n - 1) + 0.5)];
    return st;
}

/* Mean goodput over the runs for one interval (the same seeds for every interval). */
static double mean_goodput(const scenario_config *s, const faults_report *P, double interval, int runs)
{
    double g = 0;
    for (int r = 0; r < runs; r++) {
        faults_timeline tl;
        faults_simulate_one(s, P, interval, s->faults.seed + (unsigned long long)r, &tl);
        g += (tl.wall_s > 0 ? tl.train_s / tl.wall_s : 0) / runs;
    }
    return g;
}

int faults_run(const scenario_config *s, int runs, faults_report *out, config_error *err)
{
    memset(out, 0, sizeof *out);
    out->runs = runs;
    if (out->step_time_s <= 0) {
        run_result r;
        if (run_scenario(s, &r, err) != 0)
            return -1;
        out->step_time_s = r.step_time_s;
        out->tokens_per_s = r.tokens_per_s;
    }
    fleet F;
    fleet_of(s, &F);
    /* A checkpoint: bf16/fp16 weights (2 B) plus fp32 master weights and Adam moments (12 B)
     * per parameter; fp32 training: 4 + 8. */
    int half = s->training.precision != PREC_FP32 && s->training.precision != PREC_TF32;
    double bytes_per_param = half ? 14 : 12;
    out->checkpoint_bytes = params_total(s) * bytes_per_param;
    out->checkpoint_write_s = out->checkpoint_bytes / (s->platform.storage.checkpoint_write_gbs * 1e9);
    out->restore_s = out->checkpoint_bytes / (s->platform.storage.checkpoint_read_gbs * 1e9);
    /* Async: each GPU copies its shard to host memory over PCIe, then the step loop goes on. */
    out->checkpoint_block_s = s->faults.checkpoint_async
                                  ? out->checkpoint_bytes / F.gpus / (s->platform.node.pcie_bandwidth_gbs * 1e9)
                                  : out->checkpoint_write_s;
    out->horizon_s = s->faults.horizon_days * 86400;
    out->target_train_s = s->training.tokens > 0 ? s->training.tokens / out->tokens_per_s : 0;
    out->system_mtbf_hours = F.rate_total > 0 ? 1.0 / F.rate_total / 3600 : INFINITY;
    out->expected_failures = F.rate_total * out->horizon_s;

    double *v = malloc((size_t)runs * sizeof *v), *w = malloc((size_t)runs * sizeof *w);
    double *x = malloc((size_t)runs * sizeof *x), *d = malloc((size_t)runs * sizeof *d);
    double *loss = malloc((size_t)runs * LOSS_COUNT * sizeof *loss);
    for (int r = 0; r < runs; r++) {
        faults_timeline tl;
        faults_simulate_one(s, out, s->faults.checkpoint_interval_s, s->faults.seed + (unsigned long long)r, &tl);
        v[r] = tl.interruptions;
        w[r] = tl.wall_s > 0 ? tl.train_s / tl.wall_s : 0;
        d[r] = tl.wall_s / 86400;
        for (int c = 0; c < LOSS_COUNT; c++)
            loss[c * runs + r] = tl.lost_s[c] / 3600;
    }
    out->interruptions = stat_of(v, runs);
    out->goodput = stat_of(w, runs);
    out->goodput_at_scenario_interval = out->goodput.mean;
    out->days_to_train = out->target_train_s > 0 ? stat_of(d, runs) : (faults_stat){0, 0, 0, 0};
    for (int c = 0; c < LOSS_COUNT; c++)
        out->lost_hours[c] = stat_of(loss + c * runs, runs);

    /* The goodput-optimal interval: a log grid, then a finer grid around the best point. An
     * async checkpoint cannot be taken faster than it is written. */
    double cost = out->checkpoint_block_s;
    double lo = fmax(30.0, s->faults.checkpoint_async ? out->checkpoint_write_s : 0), hi = 7 * 86400.0;
    int search_runs = runs < 50 ? runs : 50;
    double best = lo, best_g = -1;
    int n = 0;
    for (double iv = lo; iv <= hi && n < 40; iv *= pow(hi / lo, 1.0 / 39), n++) {
        double g = mean_goodput(s, out, iv, search_runs);
        out->curve_interval_s[n] = iv;
        out->curve_goodput[n] = g;
        if (g > best_g) {
            best_g = g;
            best = iv;
        }
    }
    out->curve_points = n;
    double step = pow(hi / lo, 1.0 / 39);
    for (int k = -8; k <= 8; k++) {
        double iv = best * pow(step, k / 8.0);
        if (iv < lo)
            continue;
        double g = mean_goodput(s, out, iv, search_runs);
        if (g > best_g) {
            best_g = g;
            best = iv;
        }
    }
    out->optimal_checkpoint_interval_s = best;
    out->optimal_goodput = best_g;
    out->young_daly_interval_s = isfinite(out->system_mtbf_hours) ? sqrt(2 * cost * out->system_mtbf_hours * 3600) : 0;
    free(v);
    free(w);
    free(x);
    free(d);
    free(loss);
    return 0;
}
