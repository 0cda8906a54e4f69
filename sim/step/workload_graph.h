/* The step graph itself: its tasks (kind, lane, stage, duration, what communication they
 * stand for) and dependencies, and the calls that add to it. What the graph means and how it
 * is replayed: workload.h. Techniques that add tasks to a step (compression.h, host_offload.h)
 * include this header only, not the builder (workload.c), which includes them.
 *
 * Ordering rules, the same for every replay:
 *  - tasks of one (stage, lane) run one at a time, in array order;
 *  - a task also waits for every task in its dependency list;
 *  - task indices in dependency lists are always smaller than the task's own index
 *    (the array is a topological order). */
#ifndef DTSIM_SIM_STEP_WORKLOAD_GRAPH_H
#define DTSIM_SIM_STEP_WORKLOAD_GRAPH_H

#include "collective.h"
#include "config.h"

typedef enum {
    LANE_COMPUTE = 0, /* the GPU's compute stream; TP comm inside a layer runs here too (blocking) */
    LANE_COMM = 1,    /* DP / ZeRO collectives that overlap compute (separate stream); ZeRO-3's
                         gathers and reduce-scatters share it in the order they share a NIC */
    LANE_P2P = 2,     /* pipeline sends, on the sending stage */
    LANE_HOST = 3,    /* ZeRO-Offload: PCIe / NVMe transfers and the CPU optimizer step (host_offload.h) */
    LANE_COUNT
} task_lane;

typedef enum { TASK_COMPUTE = 0, TASK_COLLECTIVE, TASK_P2P } task_kind;

/* The communication folded into a compute task, by kind: read by the metrics and the trace only,
 * so it is kept beside the tasks (step_workload.parts), not in them. The passes over every task
 * (the build, the index, the replay's costs, the metrics) stream the task records, so their size
 * is what those passes cost: 96 bytes more made GPT-3 175B's plan search 48% slower. With these
 * parts beside the tasks and sim_task's enums in a byte each, a task is 112 bytes, not 216
 * (2026-11-27, back to back on the 2-core VM, with two passes fewer in the replay and metrics:
 * the plan search about 1.3 times as fast; GPT-3 175B's 6.1M-task step at batch 1,572,864 in
 * 1.06 GiB, from 1.65: docs/planning.md). Tasks with the same parts share one entry. */
typedef struct {
    double inside[COMM_CLASS_COUNT]; /* comm_inside_s by kind (TP, CP all-gathers and ring passes,
                                        EP all-to-alls, small per-step reductions booked as DP); they
                                        sum to it as built, and read as its proportions (a slowed
                                        stage scales comm_inside_s alone: step_faults.c) */
    double hidden[COMM_CLASS_COUNT]; /* communication running beside this task's compute and hidden
                                        by it (ring attention's K/V passes): total, never exposed */
} task_comm_parts;

/* The enums are stored in a byte each: the passes over every task stream these records, and
 * their size is what those passes cost (task_comm_parts). */
typedef struct {
    unsigned char kind;   /* task_kind */
    unsigned char lane;   /* task_lane */
    unsigned char comm;   /* comm_class (communication) */
    unsigned char coll;   /* coll_kind (communication) */
    signed char phase;    /* PIPE_FORWARD, PIPE_BACKWARD, or -1 (optimizer, grad sync) */
    int chunk;            /* model chunk, -1 when not tied to one (up to 50,000: 100,000 layers on
                             two stages) */
    int stage;            /* pipeline stage that runs it (P2P: the sender) */
    int peer_stage;       /* P2P: the receiving stage; -1 otherwise */
    int micro_batch;      /* -1 when not tied to one */
    int parts;            /* its communication by kind: step_workload.parts[parts]; -1: none (all of
                             comm_inside_s is TP). Set by workload_add_task_parts */
    const char *name;     /* static string: "fwd", "bwd", "recompute", "optimizer", "dp_grad_allreduce", ... */
    /* compute */
    double flops;         /* hardware FLOPs on one GPU (includes recomputation) */
    /* communication */
    int group;            /* ranks taking part */
    int span_nodes;       /* nodes the group spans: 1 = inside a node (NVLink) */
    double bytes;         /* payload bytes per rank (nccl-tests "size") */
    /* analytic time on an idle cluster, seconds (computed by the cost model) */
    double duration_s;
    /* what part of duration_s is communication inside a compute task (TP comm folded in; by kind
     * in its parts), and the bytes each GPU sends over its TP ring for it (for the flow replay's
     * fine mode) */
    double comm_inside_s;
    double overlap_cost_s;  /* part of duration_s: the compute's slowdown beside overlapped communication */
    double tp_ring_bytes;
    double calls;         /* collective calls it stands for (a flow-fidelity gradient bucket made of
                             several of the scenario's, or a group of tiny buckets: workload_emit.c);
                             0 or 1: one. A double: one-element buckets are billions */
    int dep_begin, dep_count; /* into step_workload.deps */
} sim_task;

typedef struct {
    int stages;
    double overlap_slowdown; /* calibration overlap_slowdown (1: none): what communication running
                                beside the compute lane costs it (cost_overlap_compute_share) */
    int n_tasks, cap_tasks;
    sim_task *tasks;
    int n_deps, cap_deps;
    int *deps;
    int n_parts, cap_parts;
    task_comm_parts *parts;
} step_workload;

void workload_free(step_workload *w);

/* Builders (used by workload_build, the techniques, and tests that make small graphs by hand). */
int workload_add_task(step_workload *w, const sim_task *t); /* returns the index; no parts (a task
                                                                copied from another workload is
                                                                added with its parts, below) */
/* The same with the task's communication by kind (NULL or all zero: none). */
int workload_add_task_parts(step_workload *w, const sim_task *t, const task_comm_parts *parts);
/* Task k's communication by kind (all zero when it has none). */
const task_comm_parts *workload_task_parts(const step_workload *w, const sim_task *k);
/* The calls collective task k stands for (at least 1: a coarsened or grouped bucket is several)
 * and one of them as the workload priced it: its group (GPUs per node rounded up, as
 * coll_group_of has it) and its share of the bytes, split as the replays need it. */
double workload_task_calls(const sim_task *k);
coll_split workload_task_call_split(const scenario_config *s, const sim_task *k);
/* A task of `stage` tied to no micro-batch, chunk or phase, its group one rank in one node:
 * the fields a builder then fills in. */
static inline sim_task workload_task(task_kind kind, task_lane lane, int stage, const char *name)
{
    /* inline: a graph has millions of tasks, and the call and its copies were a fifth of a plan */
    sim_task t = {0};
    t.kind = kind;
    t.lane = lane;
    t.stage = stage;
    t.peer_stage = -1;
    t.micro_batch = -1;
    t.chunk = -1;
    t.phase = -1;
    t.parts = -1;
    t.name = name;
    t.group = 1;
    t.span_nodes = 1;
    return t;
}
void workload_add_dep(step_workload *w, int task, int dep);  /* only while task is the last added */

/* The graph indexed for a replay, built once: each (stage, lane)'s tasks in graph order, and
 * each task's dependents (the reverse of its dependency lists), as offsets into flat arrays. */
typedef struct {
    int *lane_begin;      /* stages x LANE_COUNT + 1 offsets into lane_task (lane q = stage x
                             LANE_COUNT + lane) */
    int *lane_task;       /* task indices */
    int *dependent_begin; /* n_tasks + 1 offsets into dependent */
    int *dependent;       /* task indices, one per dependency edge */
    int *lane_of;         /* each task's lane: a replay that follows dependents reads these few
                             bytes, not the dependent's whole task record */
} workload_index;

int workload_index_build(const step_workload *w, workload_index *x); /* 0, or -1 out of memory */
void workload_index_free(workload_index *x);

#endif
