/* What goes wrong inside a step at flow fidelity: degraded and flapping NICs, a GPU failure, and
 * stragglers; see flow_ctx.h. */
#include <math.h>
#include <simgrid/actor.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <stdio.h>
#include <stdlib.h>
#include "flow_ctx.h"

double flap_next_up(const flow_ctx *c)
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

void flow_faults_start(flow_ctx *c)
{
    char name[64];
    /* Degraded NICs: both directions of the NIC link at a fraction of their bandwidth. */
    flap_arg *flaps = calloc((size_t)c->s->faults.degraded_count + 1, sizeof *flaps);
    c->flaps = flaps;
    int nodes_used = (scenario_gpus(c->s) + c->gpn - 1) / c->gpn;
    for (int i = 0; i < c->s->faults.degraded_count; i++) {
        const degraded_link *d = &c->s->faults.degraded[i];
        const char *dir[2] = {"UP", "DOWN"};
        flaps[i].up_at = INFINITY;
        /* a NIC the job does not use carries none of its traffic (its node's links are not built:
         * SimGrid's sg_link_by_name would throw) */
        if (d->node >= nodes_used || d->nic >= c->gpn)
            continue;
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
        if (d->flap_period_s > 0 && (flaps[i].link[0] || flaps[i].link[1])) {
            flaps[i].d = d;
            snprintf(name, sizeof name, "flap%d", i);
            sg_actor_t act = sg_actor_init(name, c->hosts[0]);
            sg_actor_set_data(act, &flaps[i]);
            sg_actor_daemonize(act);
            sg_actor_start(act, flapper_actor, 0, NULL);
            c->flapping++;
        }
    }
    if (c->s->faults.step_failure) {
        sg_actor_t act = sg_actor_init("failure", c->hosts[0]);
        sg_actor_set_data(act, c);
        sg_actor_daemonize(act);
        sg_actor_start(act, failure_actor, 0, NULL);
    }
    c->slow = malloc((size_t)c->P * c->R * sizeof *c->slow);
    for (int i = 0; i < c->P * c->R; i++)
        c->slow[i] = 1;
    for (int i = 0; i < c->s->faults.straggler_count; i++) {
        int r = c->s->faults.stragglers[i].gpu;
        int stage = rank_grid_coord(&c->grid, r, GRID_PP), replica = rank_grid_coord(&c->grid, r, GRID_DP);
        double *sl = &c->slow[stage * c->R + replica];
        if (c->s->faults.stragglers[i].slowdown > *sl) /* the lockstep group goes at its slowest GPU */
            *sl = c->s->faults.stragglers[i].slowdown;
    }
}
