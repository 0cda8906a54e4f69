/* Tasks that both the passes (workload.c) and the step's start and end (workload_step.c) add:
 * a collective or transfer task at its idle-fabric time, the pipeline pair between two stages,
 * and the DP gradient buckets with their host copies under ZeRO-Offload. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "host_offload.h"
#include "workload_internal.h"

/* The two GPUs of a pipeline transfer between stages a and b (same TP and CP rank, replica 0, as
 * the rank grid places them): on one node, the transfer goes over NVLink. Stages
 * that share a node when TP x CP is smaller than a node are common (TP 1, PP 16 puts eight
 * stages on each node), and only the boundaries between nodes cross the network. */
coll_group workload_pp_pair(const builder *b, int a, int c)
{
    rank_grid grid = scenario_rank_grid(b->s);
    int same = b->gpn > 0 && rank_grid_rank(&grid, 0, 0, a, 0) / b->gpn == rank_grid_rank(&grid, 0, 0, c, 0) / b->gpn;
    coll_group g = {2, same ? 1 : 2, same ? 2 : 1};
    return g;
}

/* The memo of workload_collective_s: per thread (the planner builds graphs on several), valid
 * for one build (workload_builder_init starts a new generation: another scenario, another
 * platform). Keyed by everything collective_time reads besides the scenario: the call. */
#define COLL_MEMO_SLOTS 256
typedef struct {
    unsigned long long generation;
    int coll, ranks, nodes, per_node;
    double bytes, time_s;
} coll_memo;
static _Thread_local coll_memo memo[COLL_MEMO_SLOTS];
static _Thread_local unsigned long long generation;

void workload_collective_memo_reset(void)
{
    generation++;
}

double workload_collective_s(const builder *b, coll_kind coll, double bytes, coll_group g)
{
    /* splitmix64's finaliser over the whole key: sizes that differ by a power of two (a gather's
     * k calls and their total) differ only in exponent bits, which a fold of a few shifts left
     * out, so such pairs took one slot and evicted each other on every call */
    uint64_t h;
    memcpy(&h, &bytes, sizeof h);
    h ^= (uint64_t)coll * 0x9e3779b97f4a7c15ull ^ (uint64_t)g.ranks << 20 ^ (uint64_t)g.nodes << 40 ^
         (uint64_t)g.per_node << 52;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    coll_memo *m = &memo[h % COLL_MEMO_SLOTS];
    if (m->generation == generation && generation && m->coll == (int)coll && m->ranks == g.ranks &&
        m->nodes == g.nodes && m->per_node == g.per_node && m->bytes == bytes)
        return m->time_s;
    double t = collective_time(&b->s->platform, &b->s->calibration, coll, bytes, g).time_s;
    *m = (coll_memo){generation, (int)coll, g.ranks, g.nodes, g.per_node, bytes, t};
    return t;
}

int workload_add_comm(step_workload *w, const builder *b, int stage, task_lane lane, const char *name,
                      comm_class cls, coll_kind coll, double bytes, coll_group g, int dep)
{
    sim_task t = workload_task(lane == LANE_P2P ? TASK_P2P : TASK_COLLECTIVE, lane, stage, name);
    t.comm = cls;
    t.coll = coll;
    t.group = g.ranks;
    t.span_nodes = g.nodes;
    t.bytes = bytes;
    t.duration_s = workload_collective_s(b, coll, bytes, g);
    int id = workload_add_task(w, &t);
    if (dep >= 0)
        workload_add_dep(w, id, dep);
    return id;
}


/* Tiny buckets in closed form. What a bucket's boundary can change in this timing model:
 *  - when a reduction may start: a bucket waits for the backward pass that filled it;
 *  - how many collective calls pay a call's fixed cost (launch, the alpha of collective.c);
 *  - the size each call's algorithm choice and bandwidth term see.
 * What it cannot change: the order on the stage's one communication stream, or the bytes in all.
 * The full buckets one flush emits all wait for the same pass and then run back to back on that
 * stream, each the same call of the same size. So k of them end when one task of k times a
 * call's time ends, whichever k, and the work (tasks, memory) need not grow with k: past
 * WORKLOAD_BUCKET_TASKS full buckets, a flush emits them as one task standing for all their calls
 * (its time k x one call's, in the analytic replay exactly what k tasks give). Compressed buckets
 * are the exception: each one's compression on the compute stream runs beside the previous one's
 * collective, so they are grouped into WORKLOAD_BUCKET_TASKS tasks instead, and a group of n runs
 * its compression before its collectives: later by at most (n - 1) x one bucket's compression,
 * under 1/WORKLOAD_BUCKET_TASKS of the flush's time.
 * bucket_size_mb = 1e-9 gives GPT-3 175B ~2e8 buckets per layer (a bucket is at least one
 * element, workload_costs.c): each still pays a call's fixed cost, computed, not materialised.
 * The analytic replay takes every flush's full buckets as one task: the same times, and a step's
 * fixed work no longer a stage's hundred-odd bucket tasks (GPT-3 175B at TP 2 x PP 32: 4,353 of
 * the 8,511 tasks of 33 micro-batches, as much as 35 micro-batches' worth, which the planner's
 * fold replays twice). The flow replay keeps a task a bucket up to the bound: its buckets are
 * flows that share links with other traffic as they go. */
double workload_bucket_group(double full, int pipelined, int flow)
{
    if (pipelined)
        return full <= WORKLOAD_BUCKET_TASKS ? 1 : ceil(full / WORKLOAD_BUCKET_TASKS);
    return full <= (flow ? WORKLOAD_BUCKET_TASKS : 1) ? 1 : full;
}

/* The scenario's collective calls a bucket of `one` bytes holds, its calls `call` bytes each: the
 * flow replay's coarse buckets hold several (run.c), as many as the scenario's buckets their bytes
 * fill, a fraction where a coarse bucket ends inside one of them (rounded up, each coarse bucket
 * would add a call the scenario does not make: 16 of them cost Llama-sized DP rings 2% at 65,536
 * GPUs, bench/fidelity_scale.sh); a bucket of the scenario's own size or smaller is one. */
static double calls_in(double one, double call)
{
    return one > call ? one / call : 1;
}

int workload_add_buckets(step_workload *w, const builder *b, int stage, const char *name, comm_class cls,
                         coll_kind coll, double one, double repeat, double call, int dep)
{
    int id = workload_add_comm(w, b, stage, LANE_COMM, name, cls, coll, repeat * one, b->dp, dep);
    if (repeat > 1)
        w->tasks[id].duration_s =
            repeat * workload_collective_s(b, coll, one, b->dp);
    w->tasks[id].calls = repeat * calls_in(one, call);
    return id;
}

static void flush_bucket(step_workload *w, const builder *b, stage_state *st, int stage, int dep,
                         int force)
{
    const scenario_config *s = b->s;
    if (s->parallel.dp * s->parallel.cp <= 1) {
        st->pending_grad = 0;
        return;
    }
    /* ZeRO-1/2 reduce-scatter; DeepSpeed's BF16_Optimizer, though it shards its optimizer
     * states, all-reduces the whole gradient (the pipeline engine's _bf16_reduce_grads:
     * buffered_allreduce_fallback over the optimizer's fp32 gradients, sent in the
     * communication dtype); so did DeepSpeed's stage 3 up to v0.5 with that release's default
     * contiguous_gradients false (stage3.py, reduce_ipg_grads -> buffered_reduce_fallback, an
     * all-reduce a bucket: parallel.stage3_list_collectives, zero3.h); so does nanotron's ZeRO-1
     * (config.h, framework nanotron) */
    int all_reduce = b->bf16_optimizer || (b->z3.active && b->z3.list_collectives) ||
                     framework_all_reduces_zero1(s->parallel.framework, s->parallel.zero_stage);
    coll_kind coll = s->parallel.zero_stage >= 1 && !all_reduce ? COLL_REDUCE_SCATTER : COLL_ALL_REDUCE;
    double unit = b->bucket_bytes, full = floor(st->pending_grad / unit);
    double group = workload_bucket_group(full, b->comp.active, s->run.fidelity_flow);
    while (st->pending_grad >= unit || (force && st->pending_grad > 0)) {
        double n = fmin(group, floor(st->pending_grad / unit)); /* full buckets; 0: the last, partial */
        double one = n >= 1 ? unit : st->pending_grad, repeat = n >= 1 ? n : 1;
        if (b->comp.active) { /* compressed: the bucket becomes compress, collective(s), decompress */
            st->last_comm = compression_emit_bucket(w, &b->comp, stage, dep, one / b->grad_elem,
                                                    st->pending_embedding, b->dp, calls_in(one, b->call_bytes), repeat);
            st->pending_grad -= repeat * one;
            st->last_comm_lane = st->last_comm;
            continue;
        }
        const char *name = coll == COLL_ALL_REDUCE ? "dp_grad_allreduce" : "dp_grad_reduce_scatter";
        st->last_comm = st->last_comm_lane =
            workload_add_buckets(w, b, stage, name, COMM_DP, coll, one, repeat, b->call_bytes, dep);
        if (b->compress_s_per_byte > 0) /* packing to the narrower type and back, on the comm lane */
            w->tasks[st->last_comm].duration_s += repeat * one * b->compress_s_per_byte;
        st->pending_grad -= repeat * one;
    }
}

/* flush_bucket, then (ZeRO-Offload) the reduced gradients' copy to the host (host_offload.h). */
void workload_flush_and_offload(step_workload *w, const builder *b, stage_state *st, int stage, int dep, int force)
{
    double before = st->pending_grad;
    int last_comm = st->last_comm;
    flush_bucket(w, b, st, stage, dep, force);
    double elements = (before - st->pending_grad) / b->grad_elem;
    int copy = offload_grads_to_host(w, b->s, stage, elements, st->last_comm != last_comm ? st->last_comm : dep);
    if (copy >= 0)
        st->last_host_lane = copy;
}
