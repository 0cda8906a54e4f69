/* Whether the flow replay fits this machine before it starts (flow_fits), and which DP replicas
 * it simulates, how many an actor (flow_replicas_of); see flow.h. */
#include <stdio.h>
#include <stdlib.h>
#include "collective.h"
#include "flow.h"

/* memory maps one SimGrid actor's stack takes: its mmap, no guard page (flow_simgrid_start) */
#define FLOW_MAPS_PER_ACTOR 1

/* Flows one actor keeps pending at most. SimGrid 3.32 takes an ended activity out of its actor's
 * list with std::list::remove (a walk of the whole list), so an actor with n flows pending pays
 * O(n^2): one actor starting the rings of 512 replicas spent an eighth of a 65,536-GPU replay
 * there (perf, 2026-11-27). A few dozen cost nothing beside SimGrid's own work per flow. */
#define FLOW_PENDING_PER_ACTOR 64

/* Whether nothing above the NICs can slow a flow: one switch, one leaf, or leaves whose uplinks
 * adaptive routing bundles into as much bandwidth as the leaf's NICs have (oversubscription 1;
 * the tier above the leaves is non-blocking, railzone.cpp). A flow leaving a leaf started at one
 * of its NICs, so the flows on a bundle carry at most what those NICs do: the bundle never binds. */
static int nonblocking_above_nics(const platform_config *p, int nodes)
{
    int radix = p->network.leaf_radix > 0 ? p->network.leaf_radix : 1;
    return p->network.topology == TOPO_SINGLE_SWITCH || nodes <= radix ||
           (p->network.adaptive_routing && p->network.oversubscription <= 1);
}

int flow_one_rail(const scenario_config *s, const flow_options *o)
{
    int gpn = s->platform.node.gpus > 0 ? s->platform.node.gpus : 1, tp = s->parallel.tp > 0 ? s->parallel.tp : 1;
    /* a TP group filling whole nodes keeps every transfer and ring edge between GPUs of the same
     * index (the CP-extended gradient ring too); fat_tree's rails share their leaf's uplinks */
    return tp % gpn == 0 && s->platform.network.topology != TOPO_FAT_TREE && !(o && (o->fine || o->all_rails));
}

flow_replicas flow_replicas_of(const scenario_config *s, const flow_options *o)
{
    int dp = s->parallel.dp > 0 ? s->parallel.dp : 1, tp = s->parallel.tp > 0 ? s->parallel.tp : 1;
    int cp = s->parallel.cp > 0 ? s->parallel.cp : 1, gpn = s->platform.node.gpus > 0 ? s->platform.node.gpus : 1;
    flow_replicas r = {dp, 1, 0};
    /* a failure inside the step stops every lane at once: a replica an actor */
    if ((o && o->per_replica) || s->faults.step_failure)
        return r;
    /* A straggler or a degraded link makes the replicas it touches differ from the others: they go
     * apart (flow_replica_groups), and nothing folds. The others stay grouped where their flows
     * cannot meet a touched replica's above the NICs and nothing changes while they run; where an
     * oversubscribed or statically routed uplink is shared, or a link flaps, lockstep parted from a
     * replica an actor by up to 1.4% of the step (a review's 180 layouts, 2026-11-27): every
     * replica goes alone there. */
    int faulty = s->faults.straggler_count > 0 || s->faults.degraded_count > 0;
    long nodes = ((long)scenario_gpus(s) + gpn - 1) / gpn;
    int flapping = 0;
    for (int i = 0; i < s->faults.degraded_count; i++)
        flapping |= s->faults.degraded[i].flap_period_s > 0;
    if (faulty && (flapping || !nonblocking_above_nics(&s->platform, (int)nodes)))
        return r;
    /* the flows a replica starts for one communication, at most: one per simulated rail of its TP
     * ranks (flow_replay.c's rail representation), per CP rank, per ring channel */
    int one_rail = flow_one_rail(s, o);
    rank_grid grid = scenario_rank_grid(s);
    coll_group g = coll_group_of(dp, (int)rank_grid_stride(&grid, GRID_DP), gpn);
    int nics = s->platform.node.nics > 0 ? s->platform.node.nics : 1;
    int channels = g.per_node > 1 ? (g.per_node < nics ? g.per_node : nics) : 1;
    long per_replica = (long)cp * (one_rail ? tp / gpn : tp) * channels;
    if (one_rail && s->faults.degraded_count > 0) /* a degraded NIC's rail is simulated beside rail 0 */
        per_replica *= 1 + (s->faults.degraded_count < gpn - 1 ? s->faults.degraded_count : gpn - 1);
    if (s->parallel.offload_optimizer != OFFLOAD_NONE && per_replica < (long)cp * tp)
        per_replica = (long)cp * tp; /* ZeRO-Offload's host transfers: one per GPU, every rail */
    /* Folded: a (stage, replica) fills whole nodes of its own, every flow stays on rail 0, and
     * nothing above the NICs binds. A flow's rate then depends only on what shares its NICs, and
     * shifting every replica by k (d -> d + k mod DP) maps the step's flows onto themselves: the
     * replicas congruent mod k see the same rates. The replay simulates replicas 0 .. k-1, their
     * ring edge from replica k-1 wrapping to replica 0, with k the smallest divisor >= 2 of DP (k = 2
     * where DP is even; 1 would send a ring edge to its own NIC). Route latencies still differ
     * between replicas (a crossing of the spines or of pods): flow_replay.c charges the longest
     * over every replica. */
    if (one_rail && !faulty && !(o && o->no_fold) && nonblocking_above_nics(&s->platform, (int)nodes) &&
        s->parallel.offload_optimizer == OFFLOAD_NONE) {
        int k = 2;
        while (k < dp && dp % k)
            k++;
        if (k < dp) {
            r.simulated = k;
            r.fold = 1;
        }
    }
    long group = FLOW_PENDING_PER_ACTOR / per_replica;
    r.per_actor = group < 1 ? 1 : group > r.simulated ? r.simulated : (int)group;
    return r;
}

/* Marks the replicas a fault touches: a straggler's, and every replica with a GPU on a node whose
 * NIC is degraded (its rings and transfers go through that NIC, PXN included). */
static void mark_touched(const scenario_config *s, unsigned char *touched, int replicas)
{
    rank_grid grid = scenario_rank_grid(s);
    int gpn = s->platform.node.gpus > 0 ? s->platform.node.gpus : 1;
    long gpus = scenario_gpus(s);
    for (int i = 0; i < s->faults.straggler_count; i++) {
        long d = rank_grid_coord(&grid, s->faults.stragglers[i].gpu, GRID_DP);
        if (d >= 0 && d < replicas)
            touched[d] = 1;
    }
    for (int i = 0; i < s->faults.degraded_count; i++)
        for (long r = (long)s->faults.degraded[i].node * gpn; r < ((long)s->faults.degraded[i].node + 1) * gpn; r++) {
            long d = r < gpus ? rank_grid_coord(&grid, r, GRID_DP) : -1;
            if (d >= 0 && d < replicas)
                touched[d] = 1;
        }
}

int flow_replica_groups(const scenario_config *s, const flow_replicas *r, int *begin)
{
    unsigned char *touched = calloc((size_t)r->simulated, 1);
    if (!touched)
        return -1;
    mark_touched(s, touched, r->simulated);
    int groups = 0;
    for (int d = 0; d < r->simulated;) {
        begin[groups++] = d;
        if (touched[d]) {
            d++;
            continue;
        }
        int end = d;
        while (end < r->simulated && end - d < r->per_actor && !touched[end])
            end++;
        d = end;
    }
    begin[groups] = r->simulated;
    free(touched);
    return groups;
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

int flow_actors_fit(long actors, long *max_map_count, long *need)
{
    if (*max_map_count <= 0) {
        FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
        if (!f || fscanf(f, "%ld", max_map_count) != 1)
            *max_map_count = 0;
        if (f)
            fclose(f);
    }
    long in_use = count_lines("/proc/self/maps");
    /* what SimGrid, its platform module and the child's own allocations map besides the stacks
     * (measured: a small replay's child holds under 1,000 maps) */
    long margin = 2048;
    *need = FLOW_MAPS_PER_ACTOR * actors + (in_use > 0 ? in_use : 0) + margin;
    return *max_map_count <= 0 || *need <= *max_map_count; /* no such limit here, or within it */
}

int flow_fits(const scenario_config *s, const step_workload *w, const flow_options *o, long max_map_count,
              config_error *err)
{
    /* the lane actors of child_run: a (stage, lane) with tasks, once per group of replicas; the
     * flappers and the failure actor beside them */
    long lanes = 0;
    unsigned char *used = calloc((size_t)(w->stages > 0 ? w->stages : 1) * LANE_COUNT, 1);
    for (int i = 0; used && i < w->n_tasks; i++) {
        unsigned char *u = &used[(size_t)w->tasks[i].stage * LANE_COUNT + w->tasks[i].lane];
        lanes += !*u;
        *u = 1;
    }
    free(used);
    flow_replicas rep = flow_replicas_of(s, o);
    int *begin = malloc(((size_t)rep.simulated + 1) * sizeof *begin);
    long groups = begin ? flow_replica_groups(s, &rep, begin) : rep.simulated;
    free(begin);
    long actors = lanes * groups + s->faults.degraded_count + 1, need;
    if (flow_actors_fit(actors, &max_map_count, &need))
        return 0;
    snprintf(err->msg, sizeof err->msg,
             "flow fidelity needs about %ld SimGrid actors (%ld stage lanes with work x %ld groups of up to %d "
             "data-parallel replicas), "
             "each a context stack in %d memory map(s): %ld maps with those in use, over this machine's "
             "vm.max_map_count of %ld. Run it at analytic fidelity (--fidelity analytic), simulate fewer ranks, or "
             "raise the limit (sysctl -w vm.max_map_count=%ld)",
             actors, lanes, groups, rep.per_actor, FLOW_MAPS_PER_ACTOR, need, max_map_count, need + need / 4);
    return FLOW_REFUSED;
}

