/* The parameter-server simulation on SimGrid; see async_ps.h and docs/async.md.
 *
 * Platform: a generated SimGrid XML file (one zone, full routing): a host per worker with one
 * split-duplex link at its replica's aggregate NIC rate, a host per server with a link at its
 * NIC rate, and one split-duplex backbone link between them standing for the fabric's
 * bisection. Route worker -> server: worker link UP, backbone UP, server link DOWN; the reverse
 * uses the other directions, so pushes and pulls do not share a direction.
 *
 * Actors: a worker computes a step (a sleep: the time comes from the analytic or flow replay
 * of its replica) and then releases one channel actor per server; a channel pushes the
 * gradient shard (a network flow), queues the update at its server, waits for it to be
 * applied and pulls the fresh shard. A server applies the updates it receives one at a time,
 * in arrival order, each taking update_s of its CPU (memory-bound). Staleness of an update =
 * the server's version when it applies it minus the version the worker pulled. Actors run one
 * at a time, so the shared counters need no locks. SimGrid initialises once per process: the
 * simulation runs in a forked child, results come back through a pipe. */
#include <math.h>
#include <simgrid/actor.h>
#include <simgrid/engine.h>
#include <simgrid/exec.h>
#include <simgrid/host.h>
#include <simgrid/semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "async_ps.h"
#include "config_json.h"
#include "flow/flow_internal.h"
#include "wall_clock.h"

typedef struct ps_ctx ps_ctx;

typedef struct {
    ps_ctx *c;
    int w, j;
    int pulled_version;
    sg_sem_t go, reply;
} ps_channel;

typedef struct {
    ps_ctx *c;
    int j;
    int version;
    int *queue;                    /* channel indices, FIFO (each channel has <= 1 queued) */
    int head, count;
    sg_sem_t pending;
    double in_bytes, out_bytes;
} ps_server;

typedef struct {
    ps_ctx *c;
    int w;
    int completed;                 /* steps whose pulls have finished */
    int waiting_for;               /* SSP: the slowest must have finished this step (0: not waiting) */
    sg_sem_t done, ssp;
    unsigned long long rng;
    double finish;
} ps_worker;

struct ps_ctx {
    const ps_model *m;
    sg_host_t *whost, *shost;
    ps_worker *workers;
    ps_server *servers;
    ps_channel *channels;          /* [w * servers + j] */
    int *staleness;                /* [(w * servers + j) * steps + t] */
    int max_ahead;
    long steps_done;               /* worker steps completed, all workers together */
};

unsigned long long ps_worker_seed(unsigned long long seed, int worker)
{
    return seed * 0x100000001b3ULL + (unsigned long long)worker * 0x9e3779b97f4a7c15ULL + 1;
}

/* splitmix64: a worker's own stream, reproducible from the seed. */
static double uniform01(unsigned long long *state)
{
    unsigned long long z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return ((z >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
}

/* Lognormal factor of mean 1 and coefficient of variation cv. */
double ps_compute_factor(unsigned long long *state, double cv)
{
    if (cv <= 0)
        return 1;
    double sigma2 = log1p(cv * cv);
    double u1 = uniform01(state), u2 = uniform01(state);
    double z = sqrt(-2 * log(u1)) * cos(2 * 3.14159265358979323846 * u2);
    return exp(sqrt(sigma2) * z - sigma2 / 2);
}

/* A host-to-host flow with no receiving actor (a 2-host parallel task whose only non-zero
 * entry is src -> dst bytes), as the flow replay does. */
static void transfer(sg_host_t a, sg_host_t b, double bytes)
{
    if (bytes <= 0)
        return;
    sg_host_t hosts[2] = {a, b};
    double m[4] = {0, bytes, 0, 0};
    sg_exec_t e = sg_actor_parallel_exec_init(2, hosts, NULL, m);
    sg_exec_start(e);
    sg_exec_wait(e);
}

static int slowest_completed(const ps_ctx *c)
{
    int low = c->workers[0].completed;
    for (int w = 1; w < c->m->workers; w++)
        if (c->workers[w].completed < low)
            low = c->workers[w].completed;
    return low;
}

static void channel_actor(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    ps_channel *ch = sg_actor_self_get_data();
    ps_ctx *c = ch->c;
    const ps_model *m = c->m;
    ps_server *sv = &c->servers[ch->j];
    double push = m->push_bytes / m->servers, pull = m->pull_bytes / m->servers;
    for (int t = 0; t < m->steps; t++) {
        sg_sem_acquire(ch->go);
        transfer(c->whost[ch->w], c->shost[ch->j], push);
        sv->in_bytes += push;
        sv->queue[(sv->head + sv->count++) % m->workers] = ch->w;
        sg_sem_release(sv->pending);
        sg_sem_acquire(ch->reply);
        transfer(c->shost[ch->j], c->whost[ch->w], pull);
        sv->out_bytes += pull;
        sg_sem_release(c->workers[ch->w].done);
    }
}

static void server_actor(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    ps_server *sv = sg_actor_self_get_data();
    ps_ctx *c = sv->c;
    int j = sv->j;
    const ps_model *m = c->m;
    long total = (long)m->workers * m->steps;
    for (long k = 0; k < total; k++) {
        sg_sem_acquire(sv->pending);
        int w = sv->queue[sv->head];
        sv->head = (sv->head + 1) % m->workers;
        sv->count--;
        if (m->update_s > 0)
            sg_actor_sleep_for(m->update_s);
        ps_channel *ch = &c->channels[(size_t)w * m->servers + j];
        int t = c->workers[w].completed; /* the step being pushed: all earlier ones completed */
        c->staleness[((size_t)w * m->servers + j) * m->steps + t] = sv->version - ch->pulled_version;
        sv->version++;
        ch->pulled_version = sv->version;
        sg_sem_release(ch->reply);
    }
}

static void worker_actor(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    ps_worker *wk = sg_actor_self_get_data();
    ps_ctx *c = wk->c;
    const ps_model *m = c->m;
    double slow = m->worker_slowdown ? m->worker_slowdown[wk->w] : 1;
    for (int t = 1; t <= m->steps; t++) {
        if (m->max_staleness > 0 && slowest_completed(c) < t - m->max_staleness) {
            wk->waiting_for = t - m->max_staleness;
            sg_sem_acquire(wk->ssp);
        }
        int ahead = t - (slowest_completed(c) + 1);
        if (ahead > c->max_ahead)
            c->max_ahead = ahead;
        sg_actor_sleep_for(m->compute_s * slow * ps_compute_factor(&wk->rng, m->compute_cv));
        for (int j = 0; j < m->servers; j++)
            sg_sem_release(c->channels[(size_t)wk->w * m->servers + j].go);
        for (int j = 0; j < m->servers; j++)
            sg_sem_acquire(wk->done);
        wk->completed = t;
        /* progress in steps per worker: once per W completions, a clock read per mean step */
        if (++c->steps_done % m->workers == 0)
            progress_note(m->progress, (double)c->steps_done / m->workers, m->steps);
        int low = slowest_completed(c);
        for (int v = 0; v < m->workers; v++) {
            ps_worker *o = &c->workers[v];
            if (o->waiting_for > 0 && low >= o->waiting_for) {
                o->waiting_for = 0;
                sg_sem_release(o->ssp);
            }
        }
    }
    wk->finish = simgrid_get_clock();
}

/* The platform file (see the top of this file). */
static int write_platform(const ps_model *m, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
               "<platform version=\"4.1\">\n<zone id=\"ps\" routing=\"Full\">\n");
    for (int w = 0; w < m->workers; w++)
        fprintf(f, "<host id=\"w%d\" speed=\"1e9f\"/>\n", w);
    for (int j = 0; j < m->servers; j++)
        fprintf(f, "<host id=\"s%d\" speed=\"1e9f\"/>\n", j);
    for (int w = 0; w < m->workers; w++)
        fprintf(f, "<link id=\"wl%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\" sharing_policy=\"SPLITDUPLEX\"/>\n", w,
                m->worker_Bps, m->link_latency_s);
    for (int j = 0; j < m->servers; j++)
        fprintf(f, "<link id=\"sl%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\" sharing_policy=\"SPLITDUPLEX\"/>\n", j,
                m->server_Bps, m->link_latency_s);
    fprintf(f, "<link id=\"bb\" bandwidth=\"%.17gBps\" latency=\"%.17gs\" sharing_policy=\"SPLITDUPLEX\"/>\n",
            m->backbone_Bps, m->backbone_latency_s);
    for (int w = 0; w < m->workers; w++)
        for (int j = 0; j < m->servers; j++) {
            fprintf(f,
                    "<route src=\"w%d\" dst=\"s%d\" symmetrical=\"NO\"><link_ctn id=\"wl%d\" direction=\"UP\"/>"
                    "<link_ctn id=\"bb\" direction=\"UP\"/><link_ctn id=\"sl%d\" direction=\"DOWN\"/></route>\n",
                    w, j, w, j);
            fprintf(f,
                    "<route src=\"s%d\" dst=\"w%d\" symmetrical=\"NO\"><link_ctn id=\"sl%d\" direction=\"UP\"/>"
                    "<link_ctn id=\"bb\" direction=\"DOWN\"/><link_ctn id=\"wl%d\" direction=\"DOWN\"/></route>\n",
                    j, w, j, w);
        }
    fprintf(f, "</zone>\n</platform>\n");
    return fclose(f);
}

typedef struct {
    double makespan, steps_per_s, wall;
    int max_ahead;
} ps_header;

static int child_run(const ps_model *m, const char *platform, int fd)
{
    /* contexts/guard-size:0: one memory map an actor, as the flow replay (flow_platform.c), so
     * that async_ps_actors counts what flow_actors_fit checks */
    char *argv0[] = {"dtsim-async", "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
                     "--cfg=contexts/guard-size:0", "--log=root.thres:critical", NULL};
    int argc = 5;
    simgrid_init(&argc, argv0);
    simgrid_load_platform(platform);
    int W = m->workers, S = m->servers;
    ps_ctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.whost = calloc((size_t)W, sizeof *c.whost);
    c.shost = calloc((size_t)S, sizeof *c.shost);
    c.workers = calloc((size_t)W, sizeof *c.workers);
    c.servers = calloc((size_t)S, sizeof *c.servers);
    c.channels = calloc((size_t)W * S, sizeof *c.channels);
    size_t updates = (size_t)W * S * m->steps;
    c.staleness = calloc(updates, sizeof(int));
    char name[64];
    for (int w = 0; w < W; w++) {
        snprintf(name, sizeof name, "w%d", w);
        c.whost[w] = sg_host_by_name(name);
    }
    for (int j = 0; j < S; j++) {
        snprintf(name, sizeof name, "s%d", j);
        c.shost[j] = sg_host_by_name(name);
        c.servers[j].c = &c;
        c.servers[j].j = j;
        c.servers[j].queue = calloc((size_t)W, sizeof(int));
        c.servers[j].pending = sg_sem_init(0);
        sg_actor_t a = sg_actor_init(name, c.shost[j]);
        sg_actor_set_data(a, &c.servers[j]);
        sg_actor_start(a, server_actor, 0, NULL);
    }
    for (int w = 0; w < W; w++) {
        ps_worker *wk = &c.workers[w];
        wk->c = &c;
        wk->w = w;
        wk->done = sg_sem_init(0);
        wk->ssp = sg_sem_init(0);
        wk->rng = ps_worker_seed(m->seed, w);
        for (int j = 0; j < S; j++) {
            ps_channel *ch = &c.channels[(size_t)w * S + j];
            ch->c = &c;
            ch->w = w;
            ch->j = j;
            ch->go = sg_sem_init(0);
            ch->reply = sg_sem_init(0);
            snprintf(name, sizeof name, "w%d.s%d", w, j);
            sg_actor_t a = sg_actor_init(name, c.whost[w]);
            sg_actor_set_data(a, ch);
            sg_actor_start(a, channel_actor, 0, NULL);
        }
        snprintf(name, sizeof name, "w%d", w);
        sg_actor_t a = sg_actor_init(name, c.whost[w]);
        sg_actor_set_data(a, wk);
        sg_actor_start(a, worker_actor, 0, NULL);
    }
    double t0 = wall_clock_s();
    simgrid_run();
    progress_end(m->progress); /* the child's copy of the meter printed its lines */
    ps_header h = {0, 0, wall_clock_s() - t0, c.max_ahead};
    double *finish = calloc((size_t)W, sizeof(double)), *in = calloc((size_t)S, sizeof(double)),
           *out = calloc((size_t)S, sizeof(double));
    for (int w = 0; w < W; w++) {
        finish[w] = c.workers[w].finish;
        if (finish[w] > h.makespan)
            h.makespan = finish[w];
        if (c.workers[w].completed != m->steps)
            return 3; /* deadlock: a worker did not finish */
        h.steps_per_s += finish[w] > 0 ? m->steps / finish[w] : INFINITY;
    }
    for (int j = 0; j < S; j++) {
        in[j] = c.servers[j].in_bytes;
        out[j] = c.servers[j].out_bytes;
    }
    return flow_write_all(fd, &h, sizeof h) || flow_write_all(fd, finish, W * sizeof(double)) ||
           flow_write_all(fd, in, S * sizeof(double)) || flow_write_all(fd, out, S * sizeof(double)) ||
           flow_write_all(fd, c.staleness, updates * sizeof(int));
}

static int check_model(const ps_model *m, config_error *err)
{
    const char *why = NULL;
    if (m->workers < 1)
        why = "workers < 1";
    else if (m->servers < 1)
        why = "servers < 1";
    else if (m->steps < 1)
        why = "steps < 1";
    else if (m->max_staleness < 0)
        why = "max_staleness < 0";
    else if (!(m->compute_s >= 0) || !(m->update_s >= 0) || !(m->push_bytes >= 0) || !(m->pull_bytes >= 0))
        why = "a negative time or size";
    else if (!(m->worker_Bps > 0) || !(m->server_Bps > 0) || !(m->backbone_Bps > 0))
        why = "a bandwidth <= 0";
    else if (!(m->link_latency_s >= 0) || !(m->backbone_latency_s >= 0))
        why = "a negative latency";
    else if ((double)m->workers * m->servers * m->steps > PS_MAX_UPDATES)
        why = "workers x servers x steps > 2e8 updates";
    if (why)
        snprintf(err->msg, sizeof err->msg, "parameter server model: %s", why);
    return why ? -1 : 0;
}

/* The forked child (flow_run_child) runs the simulation; the parent reads its report. */
typedef struct {
    const ps_model *m;
    ps_result *r;
    ps_header h;
} ps_child_ctx;

static int ps_child(void *ctx, const char *platform, int fd)
{
    return child_run(((ps_child_ctx *)ctx)->m, platform, fd);
}

static int ps_reader(void *ctx, int fd)
{
    ps_child_ctx *x = ctx;
    ps_result *r = x->r;
    int W = x->m->workers, S = x->m->servers;
    return flow_read_all(fd, &x->h, sizeof x->h) || flow_read_all(fd, r->worker_finish_s, W * sizeof(double)) ||
           flow_read_all(fd, r->server_in_bytes, S * sizeof(double)) ||
           flow_read_all(fd, r->server_out_bytes, S * sizeof(double)) ||
           flow_read_all(fd, r->staleness, (size_t)r->updates * sizeof(int));
}

double ps_actors(double workers, double servers)
{
    return workers * servers + workers + servers;
}

int ps_simulate(const ps_model *m, ps_result *r, config_error *err)
{
    memset(r, 0, sizeof *r);
    if (check_model(m, err))
        return -1;
    const char *tmp = getenv("TMPDIR");
    char dir[3000], platform[3100];
    snprintf(dir, sizeof dir, "%s/dtsim-ps-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        config_fail(err, "parameter server: cannot create a temporary folder %s", dir);
        return -1;
    }
    snprintf(platform, sizeof platform, "%s/platform.xml", dir);
    if (write_platform(m, platform) != 0) {
        unlink(platform);
        rmdir(dir);
        config_fail(err, "parameter server: cannot write %s", platform);
        return -1;
    }
    int W = m->workers, S = m->servers;
    r->updates = (long)W * S * m->steps;
    r->worker_finish_s = calloc((size_t)W, sizeof(double));
    r->server_in_bytes = calloc((size_t)S, sizeof(double));
    r->server_out_bytes = calloc((size_t)S, sizeof(double));
    r->staleness = calloc((size_t)r->updates, sizeof(int));
    ps_child_ctx x = {.m = m, .r = r};
    int rc = flow_run_child("parameter server", "the SimGrid simulation", platform, ps_child, ps_reader, &x, err);
    unlink(platform);
    rmdir(dir);
    if (rc != 0)
        return -1;
    ps_header h = x.h;
    r->makespan_s = h.makespan;
    r->steps_per_s = h.steps_per_s;
    r->max_steps_ahead = h.max_ahead;
    r->sim_wall_s = h.wall;
    return 0;
}

void ps_result_free(ps_result *r)
{
    free(r->worker_finish_s);
    free(r->server_in_bytes);
    free(r->server_out_bytes);
    free(r->staleness);
    memset(r, 0, sizeof *r);
}

void ps_staleness_stats(const ps_result *r, ps_staleness *st)
{
    memset(st, 0, sizeof *st);
    if (r->updates <= 0)
        return;
    int max = 0;
    double sum = 0;
    for (long i = 0; i < r->updates; i++) {
        if (r->staleness[i] > max)
            max = r->staleness[i];
        sum += r->staleness[i];
    }
    st->mean = sum / r->updates;
    st->max = max;
    st->hist_len = max + 1;
    st->hist = calloc((size_t)st->hist_len, sizeof(long));
    for (long i = 0; i < r->updates; i++)
        st->hist[r->staleness[i]]++;
    /* nearest rank: the smallest value with at least ceil(q * n) updates at or below it */
    double q[3] = {0.5, 0.9, 0.99};
    int *out[3] = {&st->p50, &st->p90, &st->p99};
    for (int k = 0; k < 3; k++) {
        long need = (long)ceil(q[k] * r->updates), seen = 0;
        for (int v = 0; v <= max; v++) {
            seen += st->hist[v];
            if (seen >= need) {
                *out[k] = v;
                break;
            }
        }
    }
}
