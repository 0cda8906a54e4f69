/* The flow replay; see flow.h. Runs in a forked child: SimGrid is initialised there, the task
 * times come back to the parent through a pipe. */
#include <math.h>
#include <simgrid/actor.h>
#include <simgrid/barrier.h>
#include <simgrid/engine.h>
#include <simgrid/exec.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <simgrid/semaphore.h>
#include <xbt/dynar.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "collective.h"
#include "cost.h"
#include "flow.h"
#include "flow_ctx.h"
#include "flow_internal.h"
#include "host_offload.h"
#include "wall_clock.h"

/* Room for n flows in f. Out of memory in the SimGrid child ends it (the parent reports it). */
static void flow_set_reserve(flow_set *f, int n)
{
    if (n <= f->cap)
        return;
    int cap = n > 2 * f->cap ? n : 2 * f->cap;
    sg_host_t *src = realloc(f->src, (size_t)cap * sizeof *src);
    f->src = src ? src : f->src;
    sg_host_t *dst = realloc(f->dst, (size_t)cap * sizeof *dst);
    f->dst = dst ? dst : f->dst;
    sg_exec_t *e = realloc(f->e, (size_t)cap * sizeof *e);
    f->e = e ? e : f->e;
    double *left = realloc(f->left, (size_t)cap * sizeof *left);
    f->left = left ? left : f->left;
    double *piece = realloc(f->piece, (size_t)cap * sizeof *piece);
    f->piece = piece ? piece : f->piece;
    if (!src || !dst || !e || !left || !piece) {
        fprintf(stderr, "dtsim flow: out of memory for %d flows of one communication\n", n);
        exit(1);
    }
    f->cap = cap;
}

/* Appends the flow a -> b to f's n flows. */
static void flow_add(flow_set *f, int *n, sg_host_t a, sg_host_t b)
{
    flow_set_reserve(f, *n + 1);
    f->src[*n] = a;
    f->dst[*n] = b;
    (*n)++;
}

/* Compute on the actor's host: an exec of `seconds` at the host's speed (the platform's
 * hosts run 1e12 flop/s, so the exec takes the task's analytic duration, longer while
 * collectives of the same GPU run beside it). Returns the seconds it took. */
static double compute_for(double seconds)
{
    double t0 = simgrid_get_clock();
    if (seconds > 0)
        sg_actor_execute(seconds * sg_host_get_speed(sg_host_self()));
    return simgrid_get_clock() - t0;
}

/* A collective or transfer kernel running on this GPU beside its compute stream: an exec on the
 * host bounded to c->beside_share of its speed, so SimGrid's max-min sharing leaves the compute
 * cost_overlap_compute_share (sim/step/cost.h). Cancelled when the communication ends; NULL when
 * overlap costs nothing. */
static sg_exec_t beside_start(const flow_ctx *c)
{
    if (c->beside_share <= 0)
        return NULL;
    double speed = sg_host_get_speed(sg_host_self());
    sg_exec_t x = sg_actor_exec_init(speed * 1e9); /* far longer than any step: ended by cancel */
    sg_exec_set_bound(x, c->beside_share * speed);
    sg_exec_start(x);
    return x;
}

static sg_sem_t done_sem(flow_ctx *c, int task, int replica)
{
    sg_sem_t *s = &c->done[(size_t)task * c->groups + c->group_of[replica]];
    if (!*s)
        *s = sg_sem_init(0); /* actors run one at a time: lazy creation is race-free */
    return *s;
}

/* Starts a host-to-host transfer with no receiving actor (a 2-host parallel task whose only
 * non-zero entry is src -> dst bytes: a plain network flow under the default host model). s4u's
 * Comm::sendto_async, C++ only in 3.32, costs the same (measured, 2026-11-27). */
static sg_exec_t transfer(sg_host_t a, sg_host_t b, double bytes)
{
    sg_host_t hosts[2] = {a, b};
    double m[4] = {0, bytes, 0, 0};
    sg_exec_t e = sg_actor_parallel_exec_init(2, hosts, NULL, m);
    sg_exec_start(e);
    return e;
}

/* The slowest link of the route from a to b as it stands now (the first of equals); NULL for an
 * empty route. */
static sg_link_t route_slowest_link(sg_host_t a, sg_host_t b)
{
    xbt_dynar_t links = xbt_dynar_new(sizeof(sg_link_t), NULL);
    sg_host_get_route(a, b, links);
    sg_link_t slowest = NULL, l;
    unsigned int it;
    xbt_dynar_foreach (links, it, l)
        if (!slowest || sg_link_get_bandwidth(l) < sg_link_get_bandwidth(slowest))
            slowest = l;
    xbt_dynar_free(&links);
    return slowest;
}

/* The latency of the route from a to b: the sum of its links' (railzone.cpp puts each switch's in
 * the links at its ends, and tells SimGrid none, so that flows share links alike). */
static double route_latency(sg_host_t a, sg_host_t b)
{
    xbt_dynar_t links = xbt_dynar_new(sizeof(sg_link_t), NULL);
    sg_host_get_route(a, b, links);
    double lat = 0;
    sg_link_t l;
    unsigned int it;
    xbt_dynar_foreach (links, it, l)
        lat += sg_link_get_latency(l);
    xbt_dynar_free(&links);
    return lat;
}

/* The longest route latency of f's first n flows. */
static double flows_latency(const flow_set *f, int n)
{
    double lat = 0;
    for (int i = 0; i < n; i++)
        lat = fmax(lat, route_latency(f->src[i], f->dst[i]));
    return lat;
}

/* Once the last bytes of f's first n flows are in: the communication ends after its longest
 * route's latency (latency; < 0: from the flows' routes). */
static void await_latency(const flow_set *f, int n, double latency)
{
    if (n <= 0)
        return;
    if (latency < 0)
        latency = flows_latency(f, n);
    if (latency > 0)
        sg_actor_sleep_for(latency);
}

/* Moves `bytes` from src[i] to dst[i] for each of the n flows of one communication and waits
 * for all, then the latency of their longest route (latency; < 0: from the flows' routes, the
 * communication done when its last byte is in); returns the flows started. SimGrid's CM02 caps a flow at its route's bandwidth as it
 * stands when the flow starts (network_cm02.cpp, comm_action_set_bounds): a flow started while a
 * flapping link is down would keep the degraded rate after the link comes back. So while some
 * flapping link is down, each flow first moves what its route's slowest link carries until that
 * link is back up, then the rest, starting afresh on the route as it is then (links that go down
 * later slow it through their capacity, as they should). */
static int run_flows(const flow_ctx *c, flow_set *f, int n, double bytes, double latency)
{
    sg_host_t *src = f->src, *dst = f->dst;
    sg_exec_t *e = f->e;
    double *left = f->left, *piece = f->piece;
    for (int i = 0; i < n; i++)
        left[i] = bytes;
    int started = 0;
    for (int more = n > 0; more;) {
        double until = flap_next_up(c) - simgrid_get_clock();
        for (int i = 0; i < n; i++) {
            piece[i] = left[i];
            sg_link_t slowest = until < INFINITY && left[i] > 0 ? route_slowest_link(src[i], dst[i]) : NULL;
            if (slowest) /* at least a microsecond's worth, to move on */
                piece[i] = fmin(left[i], sg_link_get_bandwidth(slowest) * fmax(until, 1e-6));
            e[i] = piece[i] > 0 ? transfer(src[i], dst[i], piece[i]) : NULL;
            started += piece[i] > 0;
        }
        more = 0;
        for (int i = 0; i < n; i++) {
            if (e[i])
                sg_exec_wait(e[i]);
            left[i] -= piece[i];
            more |= left[i] > 0;
        }
    }
    await_latency(f, n, latency);
    return started;
}

/* Counts the flows of one communication (task) started at t0 between src[i] and dst[i], and
 * remembers the longest communication of the step and its end points. */
static void note_flows(flow_ctx *c, int flows, int n, int task, int stage, double t0, const sg_host_t *src,
                       const sg_host_t *dst)
{
    c->flows += flows;
    double d = simgrid_get_clock() - t0;
    if (src && d > c->slowest_s) {
        c->slowest_s = d;
        c->slowest_task = task;
        c->slowest_stage = stage;
        c->slowest_n = n;
        flow_set_reserve(&c->slowest, n);
        memcpy(c->slowest.src, src, (size_t)n * sizeof *src);
        memcpy(c->slowest.dst, dst, (size_t)n * sizeof *dst);
    }
}

/* Waits for n started flows and their longest route's latency, then notes them (note_flows). */
static void wait_all(flow_ctx *c, const flow_set *f, int n, int task, int stage, double t0, int named)
{
    for (int i = 0; i < n; i++)
        sg_exec_wait(f->e[i]);
    await_latency(f, n, -1);
    note_flows(c, n, n, task, stage, t0, named ? f->src : NULL, f->dst);
}

/* Folded (flow_replicas_of): the longest route latency of a pipeline transfer from stage to peer
 * over every replica, the simulated ones and those they stand for (a crossing of the spines or of
 * pods the simulated ones may not make); cached per stage pair. */
static double p2p_latency_all(flow_ctx *c, int stage, int peer)
{
    double *x = &c->p2p_latency[stage * c->P + peer];
    if (isnan(*x)) {
        double all = 0;
        for (int d = 0; d < c->R; d++)
            for (int ci = 0; ci < c->cp; ci++)
                for (int t = 0; t < c->tp; t++) {
                    int ra = rank_of(c, stage, d, t, ci);
                    if (!simulated(c, ra))
                        continue;
                    all = fmax(all, route_latency(c->hosts[ra], c->hosts[rank_of(c, peer, d, t, ci)]));
                }
        *x = all;
    }
    return *x;
}

/* A pipeline transfer of the actor's replicas: one flow per simulated rail and replica. */
static void p2p(flow_ctx *c, actor_arg *x, int task, const sim_task *k)
{
    int n = 0, stage = x->stage, cross = 0;
    double t0 = simgrid_get_clock();
    for (int d = x->replica; d < x->replica_end; d++) {
        for (int ci = 0; ci < c->cp; ci++)
            for (int t = 0; t < c->tp; t++) {
                int ra = rank_of(c, stage, d, t, ci);
                sg_host_t a = c->hosts[ra], b = c->hosts[rank_of(c, k->peer_stage, d, t, ci)];
                if (a != b)
                    c->flows_all += c->represent;
                if (a != b && simulated(c, ra))
                    flow_add(&x->flows, &n, a, b);
            }
        cross |= rank_of(c, stage, d, 0, 0) / c->gpn != rank_of(c, k->peer_stage, d, 0, 0) / c->gpn;
    }
    double lat = c->fold && n > 0 ? p2p_latency_all(c, stage, k->peer_stage) : -1;
    int started = run_flows(c, &x->flows, n, k->bytes, lat);
    note_flows(c, started, n, task, stage, t0, x->flows.src, x->flows.dst);
    /* the call's fixed cost, as the analytic replay charges it (the links add their latency); in
     * lockstep, the replicas wait for one whose transfer leaves its node */
    double alpha = collective_alpha_s(&c->s->calibration, cross ? LINK_NETWORK : LINK_NVLINK, COLL_SEND_RECV);
    if (alpha > 0)
        sg_actor_sleep_for(alpha);
}

/* The DP ring's edges a replica starts: j < ring_ways(c) of them per TP rank (its CP ranks' edges,
 * or one per channel). */
static int ring_ways(const flow_ctx *c)
{
    if (c->cp > 1)
        return c->cp;
    coll_group g = coll_group_of(c->R, (int)rank_grid_stride(&c->grid, GRID_DP), c->gpn);
    int nics = c->s->platform.node.nics > 0 ? c->s->platform.node.nics : 1;
    return g.per_node > 1 ? (g.per_node < nics ? g.per_node : nics) : 1;
}

/* Edge j of replica d's TP rank t on a ring of `wrap` replicas (R; folded, the replicas simulated):
 * its end ranks ra -> rb. Returns -1 where there is no such edge, 0 for an edge that is no flow
 * (an NVLink hop, in node_s; a rail not simulated), 1 for a flow. */
static int ring_edge(const flow_ctx *c, int stage, int d, int t, int j, int wrap, int *ra, int *rb)
{
    if (c->cp > 1) {
        /* Gradients are reduced over DP x CP (sim/step/workload.c): one ring per TP rank through the
         * R x cp GPUs, visiting a replica's CP ranks in turn, then the next replica's. */
        int nd = j + 1 < c->cp ? d : (d + 1) % wrap;
        *ra = rank_of(c, stage, d, t, j);
        *rb = rank_of(c, stage, nd, t, (j + 1) % c->cp);
        return simulated(c, *ra) && *ra / c->gpn != *rb / c->gpn;
    }
    /* Channel j visits each node's members rotated by j, so its node-to-node edge leaves from a
     * different GPU (and NIC) than the other channels'. Folded, a replica fills its nodes
     * (per_node 1) and the ring closes over the simulated ones. */
    coll_group g = coll_group_of(c->R, (int)rank_grid_stride(&c->grid, GRID_DP), c->gpn);
    int per = g.per_node, node = d / per, pos = d % per, nodes = c->fold ? wrap : g.nodes;
    int me = node * per + (pos + j) % per;
    int next_pos = (pos + 1) % per, next_node = next_pos == 0 ? (node + 1) % nodes : node;
    int peer = next_node * per + (next_pos + j) % per;
    if (me >= c->R || peer >= c->R || next_node == node) /* NVLink hops: in node_s */
        return -1;
    *ra = rank_of(c, stage, me, t, 0);
    *rb = rank_of(c, stage, peer, t, 0);
    return simulated(c, *ra);
}

/* The node-crossing ring edges replica d starts for a collective (appended to the actor's
 * flows; n counts them). */
static void ring_edges(flow_ctx *c, actor_arg *x, const coll_split *split, int d, int *n)
{
    if (split->net_bytes <= 0 || (c->cp == 1 && c->R == 1))
        return;
    for (int t = 0; t < c->tp; t++)
        for (int j = 0, ways = ring_ways(c); j < ways; j++) {
            int ra, rb, e = ring_edge(c, x->stage, d, t, j, c->sim_R, &ra, &rb);
            c->flows_all += e >= 0 ? c->represent : 0;
            if (e > 0)
                flow_add(&x->flows, n, c->hosts[ra], c->hosts[rb]);
        }
}

/* A DP / ZeRO collective over the R replicas of this stage (times their CP ranks), with the
 * algorithm the analytic replay picks (sim/step/collective.h): every replica starts the node-crossing
 * edges of its rings (one ring per lockstep GPU, each split over `channels` rings that cross
 * nodes through different NICs when the group shares nodes), each carrying the bytes that
 * algorithm sends through a NIC; all wait for the slowest; then the algorithm's fixed terms (per
 * call) and its NVLink time are added as the analytic model has them. Uncontended, flows and
 * formula agree; contention stretches only the network part. The actors replaying the replicas
 * meet at barriers before and after the flows (none when one actor replays all). */
static void collective(flow_ctx *c, actor_arg *x, int task, const sim_task *k)
{
    unsigned actors = (unsigned)c->groups;
    if (actors > 1 && !c->bar_in[task]) {
        c->bar_in[task] = sg_barrier_init(actors);
        c->bar_out[task] = sg_barrier_init(actors);
    }
    /* A task may stand for several of the scenario's calls (run.c coarsens the buckets to bound
     * the flows; a long flush is grouped): each is a collective of its share, its algorithm chosen
     * for that size as the analytic replay chooses it for the scenario's own buckets, so the flows
     * carry `calls` times one call's NIC bytes and the fixed and NVLink parts are paid per call. */
    double calls = workload_task_calls(k);
    coll_split split = workload_task_call_split(c->s, k);
    if (actors > 1)
        sg_barrier_wait(c->bar_in[task]);
    double t0 = simgrid_get_clock();
    int n = 0;
    for (int d = x->replica; d < x->replica_end; d++)
        ring_edges(c, x, &split, d, &n);
    /* the ring's latency is in its fixed part (hops x the fabric's hop latency, collective.c), as
     * the analytic replay has it: the flows carry bandwidth only */
    int started = run_flows(c, &x->flows, n, split.net_bytes * calls, 0);
    note_flows(c, started, n, task, x->stage, t0, x->flows.src, x->flows.dst);
    if (actors > 1)
        sg_barrier_wait(c->bar_out[task]);
    double rest = (split.fixed_s + split.node_s) * calls;
    if (isfinite(rest) && rest > 0)
        sg_actor_sleep_for(rest);
}

/* ZeRO-Offload: one flow per GPU of the lockstep group between the GPU, its node's CPU, DRAM and
 * NVMe (host_offload.h says which), every GPU simulated: they share the node's DRAM and NVMe links,
 * whatever the rails do. */
static void host_transfer(flow_ctx *c, actor_arg *x, int task, const sim_task *k, offload_route route)
{
    flow_set *f = &x->flows;
    int n = 0;
    double t0 = simgrid_get_clock();
    for (int d = x->replica; d < x->replica_end; d++)
        for (int ci = 0; ci < c->cp; ci++)
            for (int t = 0; t < c->tp; t++) {
                int r = rank_of(c, x->stage, d, t, ci), node = r / c->gpn;
                sg_host_t gpu = c->hosts[r], a = c->cpu[node], b = gpu;
                switch (route) {
                case OFFLOAD_ROUTE_GPU_TO_CPU: a = gpu; b = c->cpu[node]; break;
                case OFFLOAD_ROUTE_CPU_TO_GPU: break;
                case OFFLOAD_ROUTE_NVME_TO_CPU: a = c->nvme[node]; b = c->cpu[node]; break;
                case OFFLOAD_ROUTE_CPU_TO_NVME: b = c->nvme[node]; break;
                case OFFLOAD_ROUTE_NVME_TO_GPU: a = c->nvme[node]; break;
                default: b = c->mem[node]; break; /* the CPU step's DRAM traffic */
                }
                flow_add(f, &n, a, b);
                f->e[n - 1] = transfer(a, b, k->bytes);
                c->flows_all += c->represent;
            }
    wait_all(c, f, n, task, x->stage, t0, 1);
}

static void lane_actor(int argc, char **argv)
{
    actor_arg *a = sg_actor_self_get_data();
    flow_ctx *c = a->c;
    const step_workload *w = c->w;
    int lane = a->stage * LANE_COUNT + a->lane;
    for (int at = c->index.lane_begin[lane]; at < c->index.lane_begin[lane + 1]; at++) {
        int i = c->index.lane_task[at];
        const sim_task *k = &w->tasks[i];
        for (int q = 0; q < k->dep_count; q++) {
            sg_sem_acquire(done_sem(c, w->deps[k->dep_begin + q], a->replica));
            c->waits++;
        }
        if (c->failed) /* a rank is gone: everything waits for the watchdog */
            sg_actor_suspend(sg_actor_self());
        double t0 = simgrid_get_clock(), contention = 0;
        offload_route route = c->cpu ? offload_task_route(c->s, k) : OFFLOAD_ROUTE_NONE;
        if (route != OFFLOAD_ROUTE_NONE) {
            host_transfer(c, a, i, k, route);
        } else if (k->kind == TASK_COMPUTE && c->fine && k->tp_ring_bytes > 0 && c->tp > 1) {
            /* compute, then the TP ring as flows (one per GPU of the group) */
            double bw = c->s->platform.node.nvlink_bandwidth_gbs * 1e9;
            double work = (k->duration_s - k->comm_inside_s) * c->slow[a->stage * c->R + a->replica];
            contention = compute_for(work) - work;
            double d = k->comm_inside_s - k->tp_ring_bytes / bw; /* latencies stay analytic */
            if (d > 0)
                sg_actor_sleep_for(d);
            int n = 0;
            for (int d = a->replica; d < a->replica_end; d++)
                for (int ci = 0; ci < c->cp; ci++)
                    for (int tt = 0; tt < c->tp; tt++, c->flows_all += c->represent) {
                        sg_host_t from = c->hosts[rank_of(c, a->stage, d, tt, ci)];
                        sg_host_t to = c->hosts[rank_of(c, a->stage, d, (tt + 1) % c->tp, ci)];
                        flow_add(&a->flows, &n, from, to);
                        a->flows.e[n - 1] = transfer(from, to, k->tp_ring_bytes);
                    }
            wait_all(c, &a->flows, n, i, a->stage, 0, 0);
        } else if (k->kind == TASK_COMPUTE) {
            double sl = c->slow[a->stage * c->R + a->replica];
            if (c->beside_share > 0 && a->lane == LANE_COMPUTE) {
                /* the compute shares the GPU with communication beside it; the communication
                 * folded into the task runs after it, unshared (as the analytic replay has it) */
                double inside = fmin(k->comm_inside_s, k->duration_s), work = (k->duration_s - inside) * sl;
                contention = compute_for(work) - work;
                if (inside > 0)
                    sg_actor_sleep_for(inside * sl);
            } else {
                compute_for(k->duration_s * sl);
            }
        } else {
            sg_exec_t beside = a->lane == LANE_COMM || a->lane == LANE_P2P ? beside_start(c) : NULL;
            if (k->kind == TASK_P2P)
                p2p(c, a, i, k);
            else
                collective(c, a, i, k);
            if (beside)
                sg_exec_cancel(beside);
        }
        double t1 = simgrid_get_clock();
        if (c->failed) /* what ran into the failure did not complete */
            sg_actor_suspend(sg_actor_self());
        if (t1 >= c->finish[i]) {
            c->finish[i] = t1;
            c->start[i] = t0;
            c->contention[i] = contention > 1e-12 ? contention : 0;
        }
        for (int q = c->index.dependent_begin[i]; q < c->index.dependent_begin[i + 1]; q++)
            sg_sem_release(done_sem(c, i, a->replica));
        progress_note(c->meter, (double)++c->tasks_done, (double)c->tasks_total);
    }
}

/* In the child: set up SimGrid, run, write the times and the report to fd. */
static int child_run(const scenario_config *s, const step_workload *w, const char *so, int fd, const flow_options *o)
{
    flow_ctx c;
    memset(&c, 0, sizeof c);
    c.fine = o->fine;
    c.s = s;
    c.w = w;
    c.P = s->parallel.pp;
    c.R = s->parallel.dp;
    c.tp = s->parallel.tp;
    c.cp = s->parallel.cp;
    c.grid = scenario_rank_grid(s);
    c.gpn = s->platform.node.gpus;
    flow_replicas plan = flow_replicas_of(s, o);
    c.sim_R = plan.simulated;
    c.fold = plan.fold;
    c.represent = c.fold ? c.R / c.sim_R : 1;
    c.group_begin = malloc(((size_t)c.sim_R + 1) * sizeof *c.group_begin);
    c.group_of = malloc((size_t)c.sim_R * sizeof *c.group_of);
    c.groups = c.group_begin && c.group_of ? flow_replica_groups(s, &plan, c.group_begin) : -1;
    if (c.groups < 0) {
        fprintf(stderr, "dtsim flow: out of memory grouping %d replicas\n", c.sim_R);
        return 1;
    }
    for (int g = 0; g < c.groups; g++)
        for (int d = c.group_begin[g]; d < c.group_begin[g + 1]; d++)
            c.group_of[d] = g;
    c.p2p_latency = malloc((size_t)c.P * c.P * sizeof *c.p2p_latency);
    if (!c.p2p_latency) {
        fprintf(stderr, "dtsim flow: out of memory for %d stages' transfer latencies\n", c.P);
        return 1;
    }
    for (int i = 0; i < c.P * c.P; i++)
        c.p2p_latency[i] = NAN;
    int gpus = scenario_gpus(s), nodes = (gpus + c.gpn - 1) / c.gpn;
    flow_platform_describe(&s->platform, &s->calibration, nodes);
    int offload = s->parallel.offload_optimizer != OFFLOAD_NONE;
    if (offload)
        flow_platform_describe_offload(&s->platform);

    double t_load = flow_simgrid_start("dtsim-flow", so);

    c.hosts = calloc((size_t)gpus, sizeof *c.hosts);
    char name[64];
    for (int r = 0; r < gpus; r++) {
        snprintf(name, sizeof name, "n%dg%d", r / c.gpn, r % c.gpn);
        c.hosts[r] = sg_host_by_name(name);
        if (!c.hosts[r]) {
            fprintf(stderr, "dtsim flow: the platform has no host %s\n", name);
            return 1;
        }
    }
    if (offload) {
        c.cpu = calloc((size_t)nodes, sizeof *c.cpu);
        c.mem = calloc((size_t)nodes, sizeof *c.mem);
        c.nvme = calloc((size_t)nodes, sizeof *c.nvme);
        for (int n = 0; n < nodes; n++) {
            snprintf(name, sizeof name, "n%dcpu", n);
            c.cpu[n] = sg_host_by_name(name);
            snprintf(name, sizeof name, "n%dmem", n);
            c.mem[n] = sg_host_by_name(name);
            snprintf(name, sizeof name, "n%dnvme", n);
            c.nvme[n] = sg_host_by_name(name);
            if (!c.cpu[n] || !c.mem[n] || !c.nvme[n]) {
                fprintf(stderr, "dtsim flow: the platform has no host %s (offload)\n", name);
                return 1;
            }
        }
    }
    flow_faults_start(&c);
    /* Rails: independent and identical when every flow is rail-aligned and no link joins two
     * rails (see flow_options); rail 0 then stands for all, beside any rail with a fault. */
    c.rail_on = calloc((size_t)c.gpn, sizeof *c.rail_on);
    int one_rail = flow_one_rail(s, o);
    for (int g = 0; g < c.gpn; g++)
        c.rail_on[g] = !one_rail || g == 0;
    for (int i = 0; i < s->faults.degraded_count; i++)
        if (s->faults.degraded[i].nic >= 0 && s->faults.degraded[i].nic < c.gpn)
            c.rail_on[s->faults.degraded[i].nic] = 1;
    for (int g = 0; one_rail && g < c.gpn; g++)
        c.rails_simulated += c.rail_on[g];
    int n = w->n_tasks;
    if (workload_index_build(w, &c.index) != 0) {
        fprintf(stderr, "dtsim flow: out of memory indexing %d tasks\n", n);
        return 1;
    }
    c.done = calloc((size_t)n * c.groups, sizeof *c.done);
    c.bar_in = calloc((size_t)n, sizeof *c.bar_in);
    c.bar_out = calloc((size_t)n, sizeof *c.bar_out);
    c.start = calloc((size_t)n, sizeof(double));
    c.finish = calloc((size_t)n, sizeof(double));
    c.contention = calloc((size_t)n, sizeof(double));
    c.beside_share = cost_overlap_comm_share(w->overlap_slowdown);

    long actors = 0;
    actor_arg *args = calloc((size_t)c.P * c.groups * LANE_COUNT, sizeof *args);
    for (int p = 0; p < c.P; p++)
        for (int g = 0; g < c.groups; g++)
            for (int l = 0; l < LANE_COUNT; l++) {
                if (c.index.lane_begin[p * LANE_COUNT + l + 1] == c.index.lane_begin[p * LANE_COUNT + l])
                    continue;
                actor_arg *a = &args[actors];
                a->c = &c;
                a->stage = p;
                int d = c.group_begin[g];
                a->replica = d;
                a->replica_end = c.group_begin[g + 1];
                a->lane = l;
                snprintf(name, sizeof name, "s%d.r%d.l%d", p, d, l);
                sg_actor_t act = sg_actor_init(name, c.hosts[rank_of(&c, p, d, 0, 0)]);
                sg_actor_set_data(act, a);
                sg_actor_start(act, lane_actor, 0, NULL);
                actors++;
            }
    progress_meter meter;
    if (s->run.flow_progress > 0) {
        progress_start(&meter, "dtsim run (flow)", "task", (progress_mode)(s->run.flow_progress - 1));
        c.meter = &meter;
        c.tasks_total = (long)n * c.groups;
    }
    double t1 = wall_clock_s();
    simgrid_run();
    double t_run = wall_clock_s() - t1;
    if (c.meter)
        progress_end(c.meter);

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    flow_report rep;
    memset(&rep, 0, sizeof rep);
    rep.wall_s = t_run;
    rep.platform_load_s = t_load;
    rep.actors = actors;
    rep.flows = c.flows;
    rep.flows_represented = c.flows_all;
    rep.rails_simulated = c.rails_simulated;
    rep.waits = c.waits;
    rep.peak_rss_mib = ru.ru_maxrss / 1024.0;
    rep.flapping_links = c.flapping;
    rep.failed = s->faults.step_failure ? (c.failed ? 1 : -1) : 0;
    rep.failed_at_s = c.failed_at;
    rep.detected_at_s = c.detected_at;
    if (c.slowest_n > 0) {
        /* The slowest link on the longest communication's routes: what it waited on. */
        snprintf(rep.slowest_comm, sizeof rep.slowest_comm, "%s", w->tasks[c.slowest_task].name);
        rep.slowest_comm_stage = c.slowest_stage;
        rep.slowest_comm_s = c.slowest_s;
        rep.slowest_link_gbs = INFINITY;
        for (int i = 0; i < c.slowest_n; i++) {
            sg_link_t l = route_slowest_link(c.slowest.src[i], c.slowest.dst[i]);
            if (l && sg_link_get_bandwidth(l) / 1e9 < rep.slowest_link_gbs) {
                rep.slowest_link_gbs = sg_link_get_bandwidth(l) / 1e9;
                snprintf(rep.slowest_link, sizeof rep.slowest_link, "%s", sg_link_get_name(l));
            }
        }
    }
    size_t bytes = (size_t)n * sizeof(double);
    return flow_write_all(fd, &rep, sizeof rep) || flow_write_all(fd, c.start, bytes) ||
           flow_write_all(fd, c.finish, bytes) || flow_write_all(fd, c.contention, bytes);
}

typedef struct {
    const scenario_config *s;
    const step_workload *w;
    const flow_options *o;
    replay_times *t;
    flow_report rep;
} replay_ctx;

static int child_replay(void *arg, const char *so, int fd)
{
    replay_ctx *x = arg;
    return child_run(x->s, x->w, so, fd, x->o);
}

static int read_replay(void *arg, int fd)
{
    replay_ctx *x = arg;
    size_t bytes = (size_t)x->w->n_tasks * sizeof(double);
    return flow_read_all(fd, &x->rep, sizeof x->rep) || flow_read_all(fd, x->t->start, bytes) ||
           flow_read_all(fd, x->t->finish, bytes) || flow_read_all(fd, x->t->contention, bytes);
}

int replay_flow_with(const scenario_config *s, const step_workload *w, const flow_options *o, replay_times *t,
                     flow_report *r, config_error *err)
{
    if (s->parallel.tp * s->parallel.cp < 1) {
        snprintf(err->msg, sizeof err->msg, "flow fidelity: empty layout");
        return -1;
    }
    if (flow_fits(s, w, o, 0, err) != 0)
        return FLOW_REFUSED;
    replay_ctx x = {.s = s, .w = w, .o = o, .t = t};
    if (flow_in_child("flow fidelity", "the SimGrid replay", child_replay, read_replay, &x, err) != 0)
        return -1;
    if (r)
        *r = x.rep;
    return 0;
}

int replay_flow(const scenario_config *s, const step_workload *w, replay_times *t, flow_report *r,
                config_error *err)
{
    flow_options o = {0};
    return replay_flow_with(s, w, &o, t, r, err);
}

int replay_flow_fine(const scenario_config *s, const step_workload *w, replay_times *t, flow_report *r,
                     config_error *err)
{
    flow_options o = {.fine = 1};
    return replay_flow_with(s, w, &o, t, r, err);
}
