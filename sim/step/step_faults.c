/* Stragglers and degraded links on the analytic replay's tasks; see step_faults.h. */
#include <stdlib.h>
#include "collective.h"
#include "host_offload.h"
#include "step_faults.h"

int step_faults_apply(const scenario_config *s, step_workload *w)
{
    int P = s->parallel.pp, gpus = scenario_gpus(s), gpn = s->platform.node.gpus > 0 ? s->platform.node.gpus : 1;
    if (s->faults.straggler_count == 0 && s->faults.degraded_count == 0)
        return 0;
    double *slow = malloc((size_t)P * sizeof *slow), *rate = malloc((size_t)P * sizeof *rate);
    if (!slow || !rate) {
        free(slow);
        free(rate);
        return -1;
    }
    rank_grid grid = scenario_rank_grid(s);
    for (int p = 0; p < P; p++)
        slow[p] = rate[p] = 1;
    for (int i = 0; i < s->faults.straggler_count; i++) {
        const straggler *g = &s->faults.stragglers[i];
        if (g->gpu < 0 || g->gpu >= gpus)
            continue;
        int p = rank_grid_coord(&grid, g->gpu, GRID_PP);
        if (g->slowdown > slow[p])
            slow[p] = g->slowdown;
    }
    for (int i = 0; i < s->faults.degraded_count; i++) {
        const degraded_link *d = &s->faults.degraded[i];
        long r = (long)d->node * gpn + d->nic; /* rail-optimised: NIC i serves GPU i of its node */
        if (d->nic < 0 || d->nic >= gpn || r >= gpus)
            continue;
        double down = d->flap_period_s > 0 ? d->flap_down_s / d->flap_period_s : 1;
        double f = 1 - down + down * d->bandwidth_factor;
        int p = rank_grid_coord(&grid, r, GRID_PP);
        if (f < rate[p])
            rate[p] = f;
    }
    int changed = 0;
    for (int i = 0; i < w->n_tasks; i++) {
        sim_task *k = &w->tasks[i];
        if (k->kind == TASK_COMPUTE) {
            if (slow[k->stage] > 1 && offload_task_route(s, k) == OFFLOAD_ROUTE_NONE) {
                k->duration_s *= slow[k->stage];
                k->comm_inside_s *= slow[k->stage];
                k->overlap_cost_s *= slow[k->stage];
                /* its parts by kind (shared with other tasks) stay: the metrics split
                 * comm_inside_s in their proportions, which a common factor leaves */
                changed++;
            }
            continue;
        }
        if (k->span_nodes <= 1 || offload_task_route(s, k) != OFFLOAD_ROUTE_NONE)
            continue;
        double f = rate[k->stage];
        if (k->kind == TASK_P2P && k->peer_stage >= 0 && rate[k->peer_stage] < f)
            f = rate[k->peer_stage];
        if (f >= 1)
            continue;
        /* a group of tiny buckets (workload_emit.c) is that many calls of its bytes / calls each */
        coll_split x = workload_task_call_split(s, k);
        k->duration_s += workload_task_calls(k) * x.net_s * (1 / f - 1);
        changed++;
    }
    free(slow);
    free(rate);
    return changed;
}
