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
#include "flow_internal.h"
#include "host_offload.h"
#include "wall_clock.h"

#define FLOW_MAX_PARALLEL 64 /* flows one actor starts at once (one per lockstep GPU x channel) */
/* memory maps one SimGrid actor's stack takes: its mmap, no guard page (flow_simgrid_start) */
#define FLOW_MAPS_PER_ACTOR 1

typedef struct {
    const scenario_config *s;
    const step_workload *w;
    int P, R, tp, cp, gpn;
    rank_grid grid;            /* the scenario's (config.h): where each (tp, cp, stage, replica) sits */
    sg_host_t *hosts;          /* by global rank */
    workload_index index;      /* each lane's tasks, each task's dependents (workload_graph.h) */
    sg_sem_t *done;            /* [task * R + replica], created on first use */
    sg_bar_t *bar_in, *bar_out;/* per task (collectives), created on first use */
    double *slow;              /* [stage * R + replica]: straggler slowdown of the lockstep group */
    double *start, *finish;    /* per task: the replica that finished last */
    double *contention;        /* per task: what communication beside it added to its compute */
    double beside_share;       /* of a GPU host, what a running collective takes (0: none) */
    long flows, flows_all, waits;
    int fine;                  /* TP communication as NVLink flows */
    int *rail_on;              /* [local GPU index]: its rail's flows are simulated */
    int rails_simulated;       /* 0 when every rail is */
    /* the longest communication so far and its flows' end points */
    double slowest_s;
    int slowest_task, slowest_stage, slowest_n;
    sg_host_t slowest_src[FLOW_MAX_PARALLEL], slowest_dst[FLOW_MAX_PARALLEL];
    int flapping;              /* flapping links (faults.degraded_links with a period) */
    struct flap_arg *flaps;    /* the flapping links' state, flapping of them */
    sg_host_t *cpu, *mem, *nvme; /* ZeRO-Offload: per node (railzone.cpp), NULL without offload */
    int failed;                /* faults.step_failure has happened */
    double failed_at, detected_at;
} flow_ctx;

typedef struct {
    flow_ctx *c;
    int stage, replica, lane;
} actor_arg;

static int rank_of(const flow_ctx *c, int stage, int replica, int t, int cpi)
{
    return (int)rank_grid_rank(&c->grid, t, cpi, stage, replica);
}

/* Whether the flows leaving this rank are simulated (flow_options.all_rails). */
static int simulated(const flow_ctx *c, int rank)
{
    return c->rail_on[rank % c->gpn];
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
    sg_sem_t *s = &c->done[(size_t)task * c->R + replica];
    if (!*s)
        *s = sg_sem_init(0); /* actors run one at a time: lazy creation is race-free */
    return *s;
}

/* Starts a host-to-host transfer with no receiving actor (a 2-host parallel task whose only
 * non-zero entry is src -> dst bytes: a plain network flow under the default host model). */
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

static double flap_next_up(const flow_ctx *c);

/* Moves `bytes` from src[i] to dst[i] for each of the n flows of one communication and waits
 * for all; returns the flows started. SimGrid's CM02 caps a flow at its route's bandwidth as it
 * stands when the flow starts (network_cm02.cpp, comm_action_set_bounds): a flow started while a
 * flapping link is down would keep the degraded rate after the link comes back. So while some
 * flapping link is down, each flow first moves what its route's slowest link carries until that
 * link is back up, then the rest, starting afresh on the route as it is then (links that go down
 * later slow it through their capacity, as they should). */
static int run_flows(const flow_ctx *c, sg_host_t *src, sg_host_t *dst, int n, double bytes)
{
    double left[FLOW_MAX_PARALLEL], piece[FLOW_MAX_PARALLEL];
    for (int i = 0; i < n; i++)
        left[i] = bytes;
    int started = 0;
    for (int more = n > 0; more;) {
        double until = flap_next_up(c) - simgrid_get_clock();
        sg_exec_t e[FLOW_MAX_PARALLEL];
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
    return started;
}

/* Counts the flows of one communication (task) started at t0 between src[i] and dst[i], and
 * remembers the longest communication of the step and its end points. */
static void note_flows(flow_ctx *c, int flows, int n, int task, int stage, double t0, sg_host_t *src, sg_host_t *dst)
{
    c->flows += flows;
    double d = simgrid_get_clock() - t0;
    if (src && d > c->slowest_s) {
        c->slowest_s = d;
        c->slowest_task = task;
        c->slowest_stage = stage;
        c->slowest_n = n;
        memcpy(c->slowest_src, src, (size_t)n * sizeof *src);
        memcpy(c->slowest_dst, dst, (size_t)n * sizeof *dst);
    }
}

/* Waits for n started flows, then notes them (note_flows). */
static void wait_all(flow_ctx *c, sg_exec_t *e, int n, int task, int stage, double t0, sg_host_t *src, sg_host_t *dst)
{
    for (int i = 0; i < n; i++)
        sg_exec_wait(e[i]);
    note_flows(c, n, n, task, stage, t0, src, dst);
}

static void p2p(flow_ctx *c, int task, const sim_task *k, int stage, int d)
{
    sg_host_t src[FLOW_MAX_PARALLEL], dst[FLOW_MAX_PARALLEL];
    int n = 0;
    double t0 = simgrid_get_clock();
    for (int ci = 0; ci < c->cp; ci++)
        for (int t = 0; t < c->tp && n < FLOW_MAX_PARALLEL; t++) {
            int ra = rank_of(c, stage, d, t, ci);
            sg_host_t a = c->hosts[ra], b = c->hosts[rank_of(c, k->peer_stage, d, t, ci)];
            if (a != b)
                c->flows_all++;
            if (a != b && simulated(c, ra)) {
                src[n] = a;
                dst[n] = b;
                n++;
            }
        }
    note_flows(c, run_flows(c, src, dst, n, k->bytes), n, task, stage, t0, src, dst);
    /* the call's fixed cost, as the analytic replay charges it (the links add their latency) */
    int cross = rank_of(c, stage, d, 0, 0) / c->gpn != rank_of(c, k->peer_stage, d, 0, 0) / c->gpn;
    double alpha = collective_alpha_s(&c->s->calibration, cross ? LINK_NETWORK : LINK_NVLINK, COLL_SEND_RECV);
    if (alpha > 0)
        sg_actor_sleep_for(alpha);
}

/* A DP / ZeRO collective over the R replicas of this stage (times their CP ranks), with the
 * algorithm the analytic replay picks (sim/step/collective.h): every replica starts the node-crossing
 * edges of its rings (one ring per lockstep GPU, each split over `channels` rings that cross
 * nodes through different NICs when the group shares nodes), each carrying the bytes that
 * algorithm sends through a NIC; all wait for the slowest; then the algorithm's fixed terms (per
 * call) and its NVLink time are added as the analytic model has them. Uncontended, flows and
 * formula agree; contention stretches only the network part. */
static void collective(flow_ctx *c, int task, const sim_task *k, int stage, int d)
{
    int R = c->R;
    if (!c->bar_in[task]) {
        c->bar_in[task] = sg_barrier_init((unsigned)R);
        c->bar_out[task] = sg_barrier_init((unsigned)R);
    }
    coll_group whole = {k->group, k->span_nodes, k->group / (k->span_nodes > 0 ? k->span_nodes : 1)};
    coll_split split = collective_split(&c->s->platform, &c->s->calibration, k->coll, k->bytes, whole);
    sg_barrier_wait(c->bar_in[task]);
    double t0 = simgrid_get_clock();
    sg_host_t src[FLOW_MAX_PARALLEL], dst[FLOW_MAX_PARALLEL];
    int n = 0;
    if (c->cp > 1 && split.net_bytes > 0) {
        /* Gradients are reduced over DP x CP (sim/step/workload.c): one ring per TP rank through the
         * R x cp GPUs, visiting a replica's CP ranks in turn, then the next replica's. */
        for (int ci = 0; ci < c->cp; ci++)
            for (int t = 0; t < c->tp && n < FLOW_MAX_PARALLEL; t++) {
                int nd = ci + 1 < c->cp ? d : (d + 1) % R, nci = (ci + 1) % c->cp;
                c->flows_all++;
                int ra = rank_of(c, stage, d, t, ci), rb = rank_of(c, stage, nd, t, nci);
                if (!simulated(c, ra) || ra / c->gpn == rb / c->gpn) /* NVLink hops: in nvlink_s */
                    continue;
                src[n] = c->hosts[ra];
                dst[n] = c->hosts[rb];
                n++;
            }
    } else if (R > 1 && split.net_bytes > 0) {
        coll_group g = coll_group_of(R, c->tp * c->P, c->gpn);
        int nics = c->s->platform.node.nics > 0 ? c->s->platform.node.nics : 1;
        int channels = g.per_node > 1 ? (g.per_node < nics ? g.per_node : nics) : 1;
        for (int t = 0; t < c->tp; t++)
            for (int ch = 0; ch < channels && n < FLOW_MAX_PARALLEL; ch++) {
                /* Channel ch visits each node's members rotated by ch, so its node-to-node
                 * edge leaves from a different GPU (and NIC) than the other channels'. */
                int per = g.per_node, node = d / per, pos = d % per;
                int me = node * per + (pos + ch) % per;
                int next_pos = (pos + 1) % per, next_node = next_pos == 0 ? (node + 1) % g.nodes : node;
                int peer = next_node * per + (next_pos + ch) % per;
                if (me >= R || peer >= R || next_node == node) /* NVLink hops: in nvlink_s */
                    continue;
                c->flows_all++;
                int ra = rank_of(c, stage, me, t, 0);
                if (!simulated(c, ra))
                    continue;
                sg_host_t a = c->hosts[ra], b = c->hosts[rank_of(c, stage, peer, t, 0)];
                src[n] = a;
                dst[n] = b;
                n++;
            }
    }
    note_flows(c, run_flows(c, src, dst, n, split.net_bytes), n, task, stage, t0, src, dst);
    sg_barrier_wait(c->bar_out[task]);
    /* A gradient bucket here may stand for several of the scenario's (run.c coarsens them to
     * bound the flows): each of those would have paid the fixed cost of a collective call. */
    double calls = k->calls > 1 ? k->calls : 1;
    double rest = split.fixed_s * calls + split.nvlink_s;
    if (isfinite(rest) && rest > 0)
        sg_actor_sleep_for(rest);
}

/* ZeRO-Offload: one flow per GPU of the lockstep group between the GPU, its node's CPU, DRAM and
 * NVMe (host_offload.h says which), every GPU simulated: they share the node's DRAM and NVMe links,
 * whatever the rails do. */
static void host_transfer(flow_ctx *c, int task, const sim_task *k, offload_route route, int stage, int d)
{
    sg_exec_t e[FLOW_MAX_PARALLEL];
    sg_host_t src[FLOW_MAX_PARALLEL], dst[FLOW_MAX_PARALLEL];
    int n = 0;
    double t0 = simgrid_get_clock();
    for (int ci = 0; ci < c->cp; ci++)
        for (int t = 0; t < c->tp && n < FLOW_MAX_PARALLEL; t++) {
            int r = rank_of(c, stage, d, t, ci), node = r / c->gpn;
            sg_host_t gpu = c->hosts[r], a = c->cpu[node], b = gpu;
            switch (route) {
            case OFFLOAD_ROUTE_GPU_TO_CPU: a = gpu; b = c->cpu[node]; break;
            case OFFLOAD_ROUTE_CPU_TO_GPU: break;
            case OFFLOAD_ROUTE_NVME_TO_CPU: a = c->nvme[node]; b = c->cpu[node]; break;
            case OFFLOAD_ROUTE_CPU_TO_NVME: b = c->nvme[node]; break;
            case OFFLOAD_ROUTE_NVME_TO_GPU: a = c->nvme[node]; break;
            default: b = c->mem[node]; break; /* the CPU step's DRAM traffic */
            }
            src[n] = a;
            dst[n] = b;
            e[n++] = transfer(a, b, k->bytes);
            c->flows_all++;
        }
    wait_all(c, e, n, task, stage, t0, src, dst);
}

/* A flapping link: up for flap_period_s - flap_down_s, then down (at its degraded bandwidth)
 * for flap_down_s, over and over until the step ends (a daemon: it does not keep the
 * simulation alive). SimGrid's CM02 model caps a flow at its route's bandwidth when the flow
 * starts, so a flow that starts while the link is down keeps the degraded rate until it ends;
 * starting each period up keeps the flows that start with the step exact. */
typedef struct flap_arg {
    sg_link_t link[2];
    double up_Bps[2];
    const degraded_link *d;
    double up_at; /* while down: when it comes back up; else INFINITY */
} flap_arg;

/* When the first flapping link now down comes back up; INFINITY while none is down. */
static double flap_next_up(const flow_ctx *c)
{
    double up = INFINITY;
    for (int i = 0; c->flapping > 0 && i < c->s->faults.degraded_count; i++)
        if (c->flaps[i].d && c->flaps[i].up_at < up)
            up = c->flaps[i].up_at;
    return up;
}

static void flapper_actor(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    flap_arg *f = sg_actor_self_get_data();
    for (;;) {
        sg_actor_sleep_for(f->d->flap_period_s - f->d->flap_down_s);
        for (int k = 0; k < 2; k++)
            if (f->link[k])
                sg_link_set_bandwidth(f->link[k], f->up_Bps[k] * f->d->bandwidth_factor);
        f->up_at = simgrid_get_clock() + f->d->flap_down_s;
        sg_actor_sleep_for(f->d->flap_down_s);
        for (int k = 0; k < 2; k++)
            if (f->link[k])
                sg_link_set_bandwidth(f->link[k], f->up_Bps[k]);
        f->up_at = INFINITY;
    }
}

/* faults.step_failure: the GPU's host goes off; every lane stalls at its next task (a
 * synchronous job cannot go on without a rank) until the watchdog fires detect_s later and the
 * job is stopped: the step is lost. A daemon: when the step ends first, nothing happens. */
static void failure_actor(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    flow_ctx *c = sg_actor_self_get_data();
    sg_actor_sleep_for(c->s->faults.step_failure_at_s);
    c->failed = 1;
    c->failed_at = simgrid_get_clock();
    sg_host_turn_off(c->hosts[c->s->faults.step_failure_gpu]);
    sg_actor_sleep_for(c->s->faults.detect_s);
    c->detected_at = simgrid_get_clock();
    sg_actor_kill_all();
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
            host_transfer(c, i, k, route, a->stage, a->replica);
        } else if (k->kind == TASK_COMPUTE && c->fine && k->tp_ring_bytes > 0 && c->tp > 1) {
            /* compute, then the TP ring as flows (one per GPU of the group) */
            double bw = c->s->platform.node.nvlink_bandwidth_gbs * 1e9;
            double work = (k->duration_s - k->comm_inside_s) * c->slow[a->stage * c->R + a->replica];
            contention = compute_for(work) - work;
            double d = k->comm_inside_s - k->tp_ring_bytes / bw; /* latencies stay analytic */
            if (d > 0)
                sg_actor_sleep_for(d);
            sg_exec_t e[FLOW_MAX_PARALLEL];
            int n = 0;
            for (int ci = 0; ci < c->cp; ci++)
                for (int tt = 0; tt < c->tp && n < FLOW_MAX_PARALLEL; tt++, c->flows_all++)
                    e[n++] = transfer(c->hosts[rank_of(c, a->stage, a->replica, tt, ci)],
                                      c->hosts[rank_of(c, a->stage, a->replica, (tt + 1) % c->tp, ci)],
                                      k->tp_ring_bytes);
            wait_all(c, e, n, i, a->stage, 0, NULL, NULL);
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
                p2p(c, i, k, a->stage, a->replica);
            else
                collective(c, i, k, a->stage, a->replica);
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
    /* Degraded NICs: both directions of the NIC link at a fraction of their bandwidth. */
    flap_arg *flaps = calloc((size_t)s->faults.degraded_count + 1, sizeof *flaps);
    c.flaps = flaps;
    for (int i = 0; i < s->faults.degraded_count; i++) {
        const degraded_link *d = &s->faults.degraded[i];
        const char *dir[2] = {"UP", "DOWN"};
        for (int k = 0; k < 2; k++) {
            snprintf(name, sizeof name, "nic_n%dg%d_%s", d->node, d->nic, dir[k]);
            sg_link_t l = sg_link_by_name(name);
            if (l && d->flap_period_s > 0) {
                flaps[i].link[k] = l;
                flaps[i].up_Bps[k] = sg_link_get_bandwidth(l);
            } else if (l) {
                sg_link_set_bandwidth(l, sg_link_get_bandwidth(l) * d->bandwidth_factor);
            }
        }
        flaps[i].up_at = INFINITY;
        if (d->flap_period_s > 0 && (flaps[i].link[0] || flaps[i].link[1])) {
            flaps[i].d = d;
            snprintf(name, sizeof name, "flap%d", i);
            sg_actor_t act = sg_actor_init(name, c.hosts[0]);
            sg_actor_set_data(act, &flaps[i]);
            sg_actor_daemonize(act);
            sg_actor_start(act, flapper_actor, 0, NULL);
            c.flapping++;
        }
    }
    if (s->faults.step_failure) {
        sg_actor_t act = sg_actor_init("failure", c.hosts[0]);
        sg_actor_set_data(act, &c);
        sg_actor_daemonize(act);
        sg_actor_start(act, failure_actor, 0, NULL);
    }
    /* Rails: independent and identical when every flow is rail-aligned and no link joins two
     * rails (see flow_options); rail 0 then stands for all, beside any rail with a fault. */
    c.rail_on = calloc((size_t)c.gpn, sizeof *c.rail_on);
    /* A TP group filling whole nodes keeps every transfer and ring edge between GPUs of the
     * same index (the CP-extended gradient ring too). */
    int aligned = c.tp % c.gpn == 0 && s->platform.network.topology != TOPO_FAT_TREE;
    int one_rail = aligned && !o->fine && !o->all_rails;
    for (int g = 0; g < c.gpn; g++)
        c.rail_on[g] = !one_rail || g == 0;
    for (int i = 0; i < s->faults.degraded_count; i++)
        if (s->faults.degraded[i].nic >= 0 && s->faults.degraded[i].nic < c.gpn)
            c.rail_on[s->faults.degraded[i].nic] = 1;
    for (int g = 0; one_rail && g < c.gpn; g++)
        c.rails_simulated += c.rail_on[g];
    c.slow = malloc((size_t)c.P * c.R * sizeof *c.slow);
    for (int i = 0; i < c.P * c.R; i++)
        c.slow[i] = 1;
    for (int i = 0; i < s->faults.straggler_count; i++) {
        int r = s->faults.stragglers[i].gpu;
        int stage = rank_grid_coord(&c.grid, r, GRID_PP), replica = rank_grid_coord(&c.grid, r, GRID_DP);
        double *sl = &c.slow[stage * c.R + replica];
        if (s->faults.stragglers[i].slowdown > *sl) /* the lockstep group goes at its slowest GPU */
            *sl = s->faults.stragglers[i].slowdown;
    }

    int n = w->n_tasks;
    if (workload_index_build(w, &c.index) != 0) {
        fprintf(stderr, "dtsim flow: out of memory indexing %d tasks\n", n);
        return 1;
    }
    c.done = calloc((size_t)n * c.R, sizeof *c.done);
    c.bar_in = calloc((size_t)n, sizeof *c.bar_in);
    c.bar_out = calloc((size_t)n, sizeof *c.bar_out);
    c.start = calloc((size_t)n, sizeof(double));
    c.finish = calloc((size_t)n, sizeof(double));
    c.contention = calloc((size_t)n, sizeof(double));
    c.beside_share = cost_overlap_comm_share(w->overlap_slowdown);

    long actors = 0;
    actor_arg *args = calloc((size_t)c.P * c.R * LANE_COUNT, sizeof *args);
    for (int p = 0; p < c.P; p++)
        for (int d = 0; d < c.R; d++)
            for (int l = 0; l < LANE_COUNT; l++) {
                if (c.index.lane_begin[p * LANE_COUNT + l + 1] == c.index.lane_begin[p * LANE_COUNT + l])
                    continue;
                actor_arg *a = &args[actors];
                a->c = &c;
                a->stage = p;
                a->replica = d;
                a->lane = l;
                snprintf(name, sizeof name, "s%d.r%d.l%d", p, d, l);
                sg_actor_t act = sg_actor_init(name, c.hosts[rank_of(&c, p, d, 0, 0)]);
                sg_actor_set_data(act, a);
                sg_actor_start(act, lane_actor, 0, NULL);
                actors++;
            }
    double t1 = wall_clock_s();
    simgrid_run();
    double t_run = wall_clock_s() - t1;

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
            sg_link_t l = route_slowest_link(c.slowest_src[i], c.slowest_dst[i]);
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

/* Lines of a text file (the memory maps of this process), or -1. */
static long count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long n = 0;
    int ch;
    while ((ch = getc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

int flow_fits(const scenario_config *s, const step_workload *w, long max_map_count, config_error *err)
{
    if (max_map_count <= 0) {
        FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
        if (!f || fscanf(f, "%ld", &max_map_count) != 1)
            max_map_count = 0;
        if (f)
            fclose(f);
        if (max_map_count <= 0)
            return 0; /* no such limit here */
    }
    /* the lane actors of child_run: a (stage, lane) with tasks, once per replica; the flappers
     * and the failure actor beside them */
    long lanes = 0;
    unsigned char *used = calloc((size_t)(w->stages > 0 ? w->stages : 1) * LANE_COUNT, 1);
    for (int i = 0; used && i < w->n_tasks; i++) {
        unsigned char *u = &used[(size_t)w->tasks[i].stage * LANE_COUNT + w->tasks[i].lane];
        lanes += !*u;
        *u = 1;
    }
    free(used);
    long actors = lanes * (long)(s->parallel.dp > 0 ? s->parallel.dp : 1) + s->faults.degraded_count + 1;
    long in_use = count_lines("/proc/self/maps");
    /* what SimGrid, its platform module and the child's own allocations map besides the stacks
     * (measured: a small replay's child holds under 1,000 maps) */
    long margin = 2048, need = FLOW_MAPS_PER_ACTOR * actors + (in_use > 0 ? in_use : 0) + margin;
    if (need <= max_map_count)
        return 0;
    snprintf(err->msg, sizeof err->msg,
             "flow fidelity needs about %ld SimGrid actors (%ld stage lanes with work x %lld data-parallel replicas), "
             "each a context stack in %d memory map(s): %ld maps with those in use, over this machine's "
             "vm.max_map_count of %ld. Run it at analytic fidelity (--fidelity analytic), simulate fewer ranks, or "
             "raise the limit (sysctl -w vm.max_map_count=%ld)",
             actors, lanes, (long long)s->parallel.dp, FLOW_MAPS_PER_ACTOR, need, max_map_count, need + need / 4);
    return FLOW_REFUSED;
}

int replay_flow_with(const scenario_config *s, const step_workload *w, const flow_options *o, replay_times *t,
                     flow_report *r, config_error *err)
{
    if (s->parallel.tp * s->parallel.cp * FLOW_MAX_PARALLEL < 1) {
        snprintf(err->msg, sizeof err->msg, "flow fidelity: empty layout");
        return -1;
    }
    if (flow_fits(s, w, 0, err) != 0)
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
    flow_options o = {0, 0};
    return replay_flow_with(s, w, &o, t, r, err);
}

int replay_flow_fine(const scenario_config *s, const step_workload *w, replay_times *t, flow_report *r,
                     config_error *err)
{
    flow_options o = {1, 0};
    return replay_flow_with(s, w, &o, t, r, err);
}
