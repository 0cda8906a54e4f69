/* The flow replay (DESIGN.md, "flow" fidelity): the step's task graph replayed on SimGrid 3.32
 * over a model of the cluster (railzone.cpp), so flows share links: DP rings of many replicas
 * crossing the spines, pipeline transfers meeting gradient buckets, degraded NICs, stragglers.
 *
 * Granularity (docs/flow.md): one actor per (pipeline stage, lane) and group of DP replicas
 * replayed in lockstep where the replicas are identical (no straggler, degraded link or failure),
 * else one per (pipeline stage, DP replica, lane); where nothing above the NICs binds, a few
 * replicas stand for all (folded, flow_replicas_of). The TP (and CP) ranks of a stage move in
 * lockstep, so compute is one exec per group (on its first GPU's host)
 * and TP communication stays inside it (NVLink, nothing else contends there); a pipeline
 * transfer is one flow per rail (one per lockstep GPU; identical independent rails are
 * represented by one, see flow_options); a DP/ZeRO collective is one flow per node-crossing
 * ring edge carrying the bytes the algorithm the analytic replay picks sends through a NIC
 * (collective_split in sim/step/collective.h), with as many parallel rings (channels) as NICs the
 * group has per node, plus that algorithm's fixed terms and NVLink time as the shared model gives
 * them.
 * SimGrid can be initialised once per process: each replay runs in a child process. */
#ifndef DTSIM_SIM_FLOW_H
#define DTSIM_SIM_FLOW_H

#include "replay.h"

typedef struct {
    double wall_s;            /* the SimGrid run itself */
    double platform_load_s;
    long actors, flows, waits;
    double peak_rss_mib;
    /* the longest communication of the step and the slowest link on its routes */
    char slowest_comm[64];
    int slowest_comm_stage;
    double slowest_comm_s;
    char slowest_link[64];
    double slowest_link_gbs;
    /* flows the step stands for: `flows` counts those simulated, which is fewer where
     * identical independent rails are represented by one (see flow_options.all_rails) */
    long flows_represented;
    int rails_simulated;      /* of the node's GPUs' rails; 0 when not rail-aligned (all) */
    int flapping_links;       /* links that flapped during the step */
    /* faults.step_failure: the GPU went off at failed_at_s and the watchdog (detect_s) ended
     * the step at detected_at_s; the step is lost (failed = 1). failed = -1: the failure was
     * due after the step had ended. */
    int failed;
    double failed_at_s, detected_at_s;
} flow_report;

/* What flow_fits and the replays return when this machine cannot hold the replay: the caller
 * refuses (exit 2) with err, before anything ran. */
#define FLOW_REFUSED (-2)


/* Replays w on the scenario's cluster. t must be allocated for w->n_tasks. Returns 0, or -1
 * with err (SimGrid missing, platform module not found, child failure), or FLOW_REFUSED (above). */
int replay_flow(const scenario_config *s, const step_workload *w, replay_times *t, flow_report *r,
                config_error *err);

/* The same at a finer level, to measure what the lockstep granularity costs (docs/flow.md):
 * the TP communication inside compute tasks becomes NVLink ring flows between the group's
 * GPUs (the embedding's and LM head's small TP all-reduces stay folded in). */
int replay_flow_fine(const scenario_config *s, const step_workload *w, replay_times *t, flow_report *r,
                     config_error *err);

/* How finely to replay (defaults: zeros). */
typedef struct {
    /* TP communication as NVLink ring flows between the group's GPUs, as replay_flow_fine */
    int fine;
    /* Simulate every rail. By default, when every flow of the step is rail-aligned (TP x CP a
     * multiple of the node's GPUs, so transfers and DP rings join GPUs of the same index) on a
     * fabric whose rails share no link (rail_optimized_fat_tree, single_switch), the rails are
     * independent and, without faults, identical: rail 0 stands for all, and a rail with a
     * degraded NIC is simulated beside it. Exact there (tests/flow), and ~8x fewer flows. */
    int all_rails;
    /* One actor per DP replica even where the replicas are identical. By default an actor per
     * (stage, lane) replays a group of the stage's replicas in lockstep, those a straggler or a
     * degraded link touches alone, every replica alone with a failure inside the step: the same flows, a
     * compute exec per task and group in place of one per replica, fewer actors meeting at a DP
     * collective's barriers. A group is as many replicas as start 64 flows a communication
     * (flow_replicas_of). A group waits for its slowest replica's transfer, latency included,
     * where each replica would otherwise go on at its own pace until the next DP collective: the
     * two part by the latency differences of the replicas' routes and by uneven contention
     * (microseconds, tests/flow). */
    int per_replica;
    /* Simulate every replica where folding would stand a few for all (flow_replicas_of): on a
     * fabric where nothing above the NICs binds (one switch, one leaf, adaptive routing at 1:1),
     * rail-aligned, with identical replicas, the replicas congruent mod k see the same rates, and
     * the replay simulates k of them (k = 2 for an even DP). Exact there (tests/flow). */
    int no_fold;
} flow_options;

/* Whether this machine can hold the flow replay of w (with o; NULL: defaults), before it starts:
 * its actors (one per pipeline stage and lane with work, times the data-parallel replicas where
 * they are replayed one actor each) each take a SimGrid context whose stack is one memory map
 * (its mmap; the replay asks SimGrid for no guard page), and the kernel allows a process
 * vm.max_map_count of them, some already in use. 0, or FLOW_REFUSED with err naming the count,
 * the limit and what to do. max_map_count <= 0 reads /proc/sys/vm/max_map_count (none: no
 * check). */
int flow_fits(const scenario_config *s, const step_workload *w, const flow_options *o, long max_map_count,
              config_error *err);
/* The same rule for any SimGrid simulation started by flow_simgrid_start (one map an actor):
 * whether `actors` fit under *max_map_count (<= 0: read from /proc, and written back; none
 * there: they fit), with *need the maps they would take beside those in use. 1 fits, 0 not. */
int flow_actors_fit(long actors, long *max_map_count, long *need);
/* Which DP replicas the replay simulates and how: replicas 0 .. simulated-1 (all, or, folded, the
 * first k of them standing for every replica congruent mod k), per_actor of them an actor in
 * lockstep (the last group of a stage may have fewer). */
typedef struct {
    int simulated, per_actor, fold;
} flow_replicas;
flow_replicas flow_replicas_of(const scenario_config *s, const flow_options *o);
/* Whether rail 0 stands for every rail (flow_options.all_rails): the layout's flows all stay on
 * their rail, the rails share no link, and o asks for neither TP flows nor every rail. */
int flow_one_rail(const scenario_config *s, const flow_options *o);
/* The groups the lane actors replay, in lockstep each: runs of at most r->per_actor replicas that
 * no fault singles out, and each replica a straggler or a degraded NIC touches alone. Group g is
 * replicas begin[g] .. begin[g+1]-1 (begin holds r->simulated + 1 entries). Returns the count, or
 * -1 out of memory. */
int flow_replica_groups(const scenario_config *s, const flow_replicas *r, int *begin);

int replay_flow_with(const scenario_config *s, const step_workload *w, const flow_options *o, replay_times *t,
                     flow_report *r, config_error *err);

/* What the platform module builds for a cluster, without replaying anything (tests, benchmark). */
#define FLOW_ROUTE_MAX 512
typedef struct {
    long hosts, links;        /* links count each direction of a split-duplex link, + loopback */
    double load_s;            /* simgrid_load_platform() */
    double peak_rss_mib;      /* of the process that loaded it */
} flow_platform_info;

/* Loads p's first `nodes` nodes in a child process; fills info and, for each of the n_pairs
 * GPU pairs (global GPU indices pairs[2i] -> pairs[2i+1], node-major), routes[i] with the
 * route's link names separated by spaces. Returns 0, or -1 with err. */
int flow_platform_probe(const platform_config *p, int nodes, const int *pairs, int n_pairs,
                        char (*routes)[FLOW_ROUTE_MAX], flow_platform_info *info, config_error *err);
#endif
