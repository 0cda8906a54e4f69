/* The flow replay's state in its SimGrid child, shared by flow_replay.c (the lane actors) and
 * flow_faults.c (what goes wrong inside the step). */
#ifndef DTSIM_SIM_FLOW_CTX_H
#define DTSIM_SIM_FLOW_CTX_H
#include <simgrid/forward.h>
#include "config.h"
#include "progress.h"
#include "workload_graph.h"

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

/* One communication's flows, grown to need: an actor waits on its own while others run. */
typedef struct {
    int cap;
    sg_host_t *src, *dst;
    sg_exec_t *e;
    double *left, *piece;
} flow_set;

typedef struct {
    const scenario_config *s;
    const step_workload *w;
    int P, R, tp, cp, gpn;
    /* the DP replicas simulated (flow_replicas_of): 0 .. sim_R-1, all or folded (each standing for
     * `represent`); the groups an actor a lane replays in lockstep (flow_replica_groups): group g
     * is replicas group_begin[g] .. group_begin[g+1]-1, group_of[replica] its group */
    int sim_R, fold, groups;
    int *group_begin, *group_of;
    long represent;
    double *p2p_latency;       /* folded: a transfer's longest route over every replica, [stage][peer] */
    rank_grid grid;            /* the scenario's (config.h): where each (tp, cp, stage, replica) sits */
    sg_host_t *hosts;          /* by global rank */
    workload_index index;      /* each lane's tasks, each task's dependents (workload_graph.h) */
    sg_sem_t *done;            /* [task * groups + group_of[replica]], created on first use */
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
    flow_set slowest;          /* its end points (src, dst) */
    int flapping;              /* flapping links (faults.degraded_links with a period) */
    flap_arg *flaps;           /* the flapping links' state, per degraded link */
    sg_host_t *cpu, *mem, *nvme; /* ZeRO-Offload: per node (railzone.cpp), NULL without offload */
    progress_meter *meter;     /* dtsim run's progress (run.flow_progress), NULL: none */
    long tasks_done, tasks_total; /* (task, replica group) pairs replayed, of all */
    int failed;                /* faults.step_failure has happened */
    double failed_at, detected_at;
} flow_ctx;

typedef struct {
    flow_ctx *c;
    int stage, replica, lane; /* replica: the first of those it replays, up to replica_end */
    int replica_end;
    flow_set flows;
} actor_arg;

static inline int rank_of(const flow_ctx *c, int stage, int replica, int t, int cpi)
{
    return (int)rank_grid_rank(&c->grid, t, cpi, stage, replica);
}

/* Whether the flows leaving this rank are simulated (flow_options.all_rails). */
static inline int simulated(const flow_ctx *c, int rank)
{
    return c->rail_on[rank % c->gpn];
}

/* Degraded and flapping NICs, the failure inside the step and the stragglers' slowdowns (c->slow),
 * set up before the run (flow_faults.c). */
void flow_faults_start(flow_ctx *c);
/* When the first flapping link now down comes back up; INFINITY while none is down. */
double flap_next_up(const flow_ctx *c);

#endif
