/* Data-loader stalls: the queue model of one reader, the Monte Carlo over readers and steps,
 * and the expected maximum over readers (see data_loader.h for the model and its choices). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data_loader.h"

/* ---- random numbers: splitmix64 (as faults.c), one stream per reader ------------------- */
static unsigned long long mix64(unsigned long long z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct {
    unsigned long long s;
    int has_spare;
    double spare;
} dl_rng;

static double dl_uniform(dl_rng *r)
{
    unsigned long long z = mix64(r->s += 0x9e3779b97f4a7c15ull);
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0; /* (0, 1): log() is safe */
}

static double dl_normal(dl_rng *r) /* Box-Muller, both values used */
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u = dl_uniform(r), v = dl_uniform(r);
    double rad = sqrt(-2 * log(u)), ang = 6.283185307179586 * v;
    r->spare = rad * sin(ang);
    r->has_spare = 1;
    return rad * cos(ang);
}

/* The seed of reader `reader` of kind `kind`: independent of how many readers are simulated. */
static unsigned long long reader_seed(unsigned long long seed, int kind, long long reader)
{
    return mix64(mix64(seed + 0x9e3779b97f4a7c15ull) ^ mix64(((unsigned long long)kind << 48) + (unsigned long long)reader + 1));
}

/* ---- the scenario's readers and load time ---------------------------------------------- */
long long data_loader_readers(const scenario_config *s, int *kinds)
{
    int k = s->parallel.pp > 1 ? 2 : 1; /* first stage (tokens) and last stage (labels) */
    if (kinds)
        *kinds = k;
    return (long long)k * s->parallel.dp * (s->parallel.cp > 0 ? s->parallel.cp : 1);
}

double data_loader_load_s(const scenario_config *s, long long readers)
{
    const platform_config *p = &s->platform;
    double gbs = p->storage.dataset_read_gbs > 0 ? p->storage.dataset_read_gbs : p->storage.checkpoint_read_gbs;
    double mb = (double)s->training.micro_batch_size;
    double share = gbs * 1e9 / (double)(readers > 0 ? readers : 1); /* B/s of one reader */
    int workers = s->training.data_loader.workers > 0 ? s->training.data_loader.workers : 1;
    return mb * s->training.data_loader.sample_bytes / share +
           mb * s->training.data_loader.decode_ms_per_sample * 1e-3 / workers;
}

/* ---- one reader ------------------------------------------------------------------------- */
/* A reader's loader between steps: when it is free, when each of the last P micro-batches was
 * consumed (a load may start once micro-batch j - P has been), its random stream. */
typedef struct {
    const dl_reader_kind *k;
    double loader_free;
    double *consumed;      /* ring of P */
    long long j;           /* micro-batches loaded so far */
    dl_rng rng;
    double mu, sigma;      /* lognormal of mean 1 and the kind's cv */
} dl_reader;

static int reader_init(dl_reader *r, const dl_reader_kind *k, unsigned long long seed)
{
    memset(r, 0, sizeof *r);
    r->k = k;
    r->loader_free = -INFINITY;
    r->rng.s = seed;
    r->sigma = sqrt(log1p(k->cv * k->cv));
    r->mu = -0.5 * r->sigma * r->sigma;
    if (k->prefetch > 0) {
        r->consumed = malloc((size_t)k->prefetch * sizeof *r->consumed);
        if (!r->consumed)
            return -1;
        for (int i = 0; i < k->prefetch; i++)
            r->consumed[i] = -INFINITY; /* the job has run long before: the queue starts full */
    }
    return 0;
}

/* One step of the reader starting at step_start: its stall (the waits of its forward passes),
 * and in *loaded the time its loader spent on the step's micro-batches. The stall is at most that:
 * a forward waits only on a load of its own step under way (every earlier one was consumed), and
 * the loader works through them in order without a pause while it does. */
static double reader_step(dl_reader *r, double step_start, double *loaded)
{
    const dl_reader_kind *k = r->k;
    int P = k->prefetch;
    double delay = 0; /* this reader's stall so far in the step */
    *loaded = 0;
    for (int i = 0; i < k->m; i++, r->j++) {
        double demand = step_start + k->demand[i] + delay;
        double gate = P > 0 ? r->consumed[r->j % P] : demand; /* micro-batch j - P consumed */
        double start = fmax(r->loader_free, gate);
        double load = k->cv > 0 ? k->load_s * exp(r->mu + r->sigma * dl_normal(&r->rng)) : k->load_s;
        double ready = start + load;
        double wait = ready > demand ? ready - demand : 0;
        *loaded += load;
        r->loader_free = ready;
        delay += wait;
        if (P > 0)
            r->consumed[r->j % P] = demand + wait;
    }
    return delay;
}

int data_loader_simulate_reader(const dl_reader_kind *k, int warmup, int steps, unsigned long long seed,
                                double *stall, double *loaded)
{
    dl_reader r;
    if (reader_init(&r, k, seed) != 0)
        return -1;
    double step_start = 0;
    for (int s = 0; s < warmup + steps; s++) {
        double load;
        double delay = reader_step(&r, step_start, &load);
        if (s >= warmup) {
            stall[s - warmup] = delay;
            if (loaded)
                loaded[s - warmup] = load;
        }
        /* alone, the next step begins when this one ends: its stall-free time plus this stall */
        step_start += k->step_s + delay;
    }
    free(r.consumed);
    return 0;
}

/* ---- expected maximum over readers ------------------------------------------------------ */
/* Sorts non-negative doubles ascending: their bit patterns sort as unsigned integers, so an
 * LSD radix sort (8 passes of a byte) does it in linear time; qsort dominated the run time. */
static int sort_nonnegative(double *x, long long n)
{
    unsigned long long *a = malloc((size_t)n * sizeof *a), *tmp = malloc((size_t)n * sizeof *tmp);
    if (!a || !tmp) {
        free(a);
        free(tmp);
        return -1;
    }
    memcpy(a, x, (size_t)n * sizeof *a); /* the bits, without aliasing a double as an integer */
    for (int shift = 0; shift < 64; shift += 8) {
        long long count[257] = {0};
        for (long long i = 0; i < n; i++)
            count[((a[i] >> shift) & 255) + 1]++;
        if (count[((a[0] >> shift) & 255) + 1] == n)
            continue; /* every key has this byte alike */
        for (int b = 0; b < 256; b++)
            count[b + 1] += count[b];
        for (long long i = 0; i < n; i++)
            tmp[count[(a[i] >> shift) & 255]++] = a[i];
        unsigned long long *swap = a;
        a = tmp;
        tmp = swap;
    }
    memcpy(x, a, (size_t)n * sizeof *a);
    free(a);
    free(tmp);
    return 0;
}

/* Estimate of P(all R draws <= x) from k of n samples <= x. */
static double max_cdf(long long k, long long n, long long R)
{
    if (k >= n)
        return 1;
    if (n < R)
        return pow((double)k / (double)n, (double)R);
    if (k < R)
        return 0;
    /* C(k, R) / C(n, R): the chance that R of the n samples, drawn without replacement, are all
     * among the k smallest: the unbiased (U-statistic) estimate of F(x)^R */
    double l = lgamma((double)k + 1) - lgamma((double)(k - R) + 1) - lgamma((double)n + 1) +
               lgamma((double)(n - R) + 1);
    return exp(l);
}

double data_loader_expected_max(double *const *samples, const long long *n, const long long *readers, int groups)
{
    long long pos[8];
    if (groups > 8)
        groups = 8;
    for (int g = 0; g < groups; g++) {
        for (long long i = 0; i < n[g]; i++)
            samples[g][i] = samples[g][i] > 0 ? samples[g][i] : 0; /* also turns -0 into +0 */
        if (n[g] > 0 && sort_nonnegative(samples[g], n[g]) != 0)
            return NAN;
        pos[g] = 0;
    }
    /* E[max] = integral over x >= 0 of 1 - prod_g F_g(x)^R_g, a step function of x */
    double x = 0, integral = 0;
    for (;;) {
        double H = 1, next = INFINITY;
        for (int g = 0; g < groups; g++) {
            while (pos[g] < n[g] && samples[g][pos[g]] <= x)
                pos[g]++;
            if (readers[g] > 0 && n[g] > 0)
                H *= max_cdf(pos[g], n[g], readers[g]);
            if (pos[g] < n[g] && samples[g][pos[g]] < next)
                next = samples[g][pos[g]];
        }
        if (next == INFINITY)
            break;
        integral += (1 - H) * (next - x);
        x = next;
    }
    return integral;
}

/* ---- Monte Carlo ------------------------------------------------------------------------ */
/* Every reader simulated, together: a step's stall is the largest of its readers' (the step is
 * synchronous), and every reader's next step starts after it, so the faster readers use the
 * slowest one's stall to load ahead, as they do in a real job. The mean over steps of that. */
static int evaluate_all(const dl_reader_kind *kinds, int n_kinds, long long per_kind_cap, unsigned long long seed,
                        int steps, data_loader_result *out)
{
    long long total = 0;
    for (int k = 0; k < n_kinds; k++)
        total += kinds[k].readers < per_kind_cap ? kinds[k].readers : per_kind_cap;
    dl_reader *readers = calloc((size_t)total, sizeof *readers);
    int rc = readers ? 0 : -1;
    long long n = 0;
    for (int k = 0; k < n_kinds && rc == 0; k++) {
        long long R = kinds[k].readers < per_kind_cap ? kinds[k].readers : per_kind_cap;
        for (long long r = 0; r < R && rc == 0; r++)
            rc = reader_init(&readers[n++], &kinds[k], reader_seed(seed, k, r));
    }
    double step_start = 0, sum = 0, sum_input = 0;
    for (int s = 0; s < DL_WARMUP_STEPS + steps && rc == 0; s++) {
        double worst = 0, most = 0, loaded;
        for (long long r = 0; r < n; r++) {
            worst = fmax(worst, reader_step(&readers[r], step_start, &loaded));
            most = fmax(most, loaded);
        }
        if (s >= DL_WARMUP_STEPS) {
            sum += worst;
            sum_input += most;
        }
        step_start += kinds[0].step_s + worst;
    }
    out->simulated_readers = n;
    out->exposed_s = steps > 0 ? sum / steps : 0;
    out->input_s = steps > 0 ? sum_input / steps : 0;
    out->steps = steps;
    for (long long r = 0; r < n; r++)
        free(readers[r].consumed);
    free(readers);
    return rc;
}

/* Some readers simulated: the expected maximum over all from the order statistics of their
 * per-step stalls (readers independent and alike; one reader's steps taken as independent).
 * Each reader then runs alone, its next step after its own stall rather than the slowest
 * reader's: conservative (less time to load ahead) where readers are too many to run jointly. */
static int evaluate_sampled(const dl_reader_kind *kinds, int n_kinds, unsigned long long seed, int steps,
                            const long long *sampled, data_loader_result *out)
{
    double *samples[8] = {0}, *loads[8] = {0};
    long long n[8] = {0}, R[8] = {0};
    int rc = 0;
    for (int k = 0; k < n_kinds && rc == 0; k++) {
        n[k] = sampled[k] * steps;
        R[k] = kinds[k].readers;
        samples[k] = malloc((size_t)n[k] * sizeof(double));
        loads[k] = malloc((size_t)n[k] * sizeof(double));
        if (!samples[k] || !loads[k])
            rc = -1;
        for (long long r = 0; r < sampled[k] && rc == 0; r++) {
            rc = data_loader_simulate_reader(&kinds[k], DL_WARMUP_STEPS, steps, reader_seed(seed, k, r),
                                             samples[k] + r * steps, loads[k] + r * steps);
            out->simulated_readers++;
        }
    }
    if (rc == 0) {
        out->exposed_s = data_loader_expected_max(samples, n, R, n_kinds);
        out->input_s = data_loader_expected_max(loads, n, R, n_kinds);
        rc = isnan(out->exposed_s) || isnan(out->input_s) ? -1 : 0;
    }
    out->steps = steps;
    for (int k = 0; k < n_kinds; k++) {
        free(samples[k]);
        free(loads[k]);
    }
    return rc;
}

int data_loader_evaluate(const dl_reader_kind *kinds, int n_kinds, unsigned long long seed, data_loader_result *out)
{
    memset(out, 0, sizeof *out);
    if (n_kinds < 1 || n_kinds > 8)
        return -1;
    int m = 1;
    double cv = 0;
    for (int k = 0; k < n_kinds; k++) {
        out->readers += kinds[k].readers;
        m = kinds[k].m > m ? kinds[k].m : m;
        cv = fmax(cv, kinds[k].cv);
    }
    out->kinds = n_kinds;
    out->load_s = kinds[0].load_s;
    int rc;
    if (cv <= 0) {
        /* deterministic: the readers of a kind are alike, one of each tells the step */
        rc = evaluate_all(kinds, n_kinds, 1, seed, DL_STEPS, out);
    } else if (out->readers * (long long)(DL_STEPS + DL_WARMUP_STEPS) * m <= DL_BUDGET) {
        rc = evaluate_all(kinds, n_kinds, 1LL << 62, seed, DL_STEPS, out);
    } else {
        /* fewer steps when a step has many micro-batches (its stall already averages many loads),
         * then as many readers as the budget allows, and enough steps for n >= R samples */
        long long steps = DL_BUDGET / ((long long)n_kinds * m * 32) - DL_WARMUP_STEPS;
        steps = steps < 16 ? 16 : steps > DL_STEPS ? DL_STEPS : steps;
        long long sampled[8];
        for (int k = 0; k < n_kinds; k++) {
            long long r = DL_BUDGET / ((long long)n_kinds * (steps + DL_WARMUP_STEPS) * m);
            r = r < 1 ? 1 : r > kinds[k].readers ? kinds[k].readers : r;
            sampled[k] = r;
            long long need = (kinds[k].readers + r - 1) / r;
            if (need > steps)
                steps = need;
        }
        rc = evaluate_sampled(kinds, n_kinds, seed, (int)steps, sampled, out);
    }
    out->hidden_fraction = out->input_s > 0 ? fmin(1, fmax(0, 1 - out->exposed_s / out->input_s)) : 1;
    return rc;
}

/* ---- the scenario ----------------------------------------------------------------------- */
int data_loader_demand_times(const step_workload *w, const replay_times *t, int stage, int chunk, int m,
                             double *out)
{
    for (int i = 0; i < m; i++)
        out[i] = INFINITY;
    for (int i = 0; i < w->n_tasks; i++) {
        const sim_task *k = &w->tasks[i];
        if (k->kind == TASK_COMPUTE && k->phase == PIPE_FORWARD && k->stage == stage && k->chunk == chunk &&
            k->micro_batch >= 0 && k->micro_batch < m)
            out[k->micro_batch] = fmin(out[k->micro_batch], t->start[i]);
    }
    for (int i = 0; i < m; i++)
        if (out[i] == INFINITY)
            return -1;
    return 0;
}

int data_loader_run(const scenario_config *s, const step_workload *w, const replay_times *t, double step_s,
                    data_loader_result *out, config_error *err)
{
    int n_kinds;
    long long readers = data_loader_readers(s, &n_kinds);
    int m = (int)scenario_micro_batches(s);
    int P = s->parallel.pp, V = s->parallel.vpp > 0 ? s->parallel.vpp : 1;
    double *demand = malloc((size_t)2 * m * sizeof *demand);
    if (!demand) {
        snprintf(err->msg, sizeof err->msg, "out of memory for the data loader's demand times");
        return -1;
    }
    dl_reader_kind kinds[2];
    for (int k = 0; k < n_kinds; k++) {
        int stage = k == 0 ? 0 : P - 1, chunk = k == 0 ? 0 : V - 1;
        if (data_loader_demand_times(w, t, stage, chunk, m, demand + (size_t)k * m) != 0) {
            snprintf(err->msg, sizeof err->msg, "data loader: stage %d has no forward pass for some micro-batch",
                     stage);
            free(demand);
            return -1;
        }
        kinds[k] = (dl_reader_kind){.m = m,
                                    .demand = demand + (size_t)k * m,
                                    .step_s = step_s,
                                    .load_s = data_loader_load_s(s, readers),
                                    .cv = s->training.data_loader.cv,
                                    .prefetch = s->training.data_loader.prefetch_batches,
                                    .readers = readers / n_kinds};
    }
    int rc = data_loader_evaluate(kinds, n_kinds, s->faults.seed, out);
    free(demand);
    if (rc != 0)
        snprintf(err->msg, sizeof err->msg, "out of memory simulating the data loader");
    return rc;
}
