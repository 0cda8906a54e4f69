/* Tasks that both the passes (workload.c) and the step's start and end (workload_step.c) add:
 * a collective or transfer task at its idle-fabric time, the pipeline pair between two stages,
 * and the DP gradient buckets with their host copies under ZeRO-Offload. */
#include <math.h>
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

int workload_add_comm(step_workload *w, const builder *b, int stage, task_lane lane, const char *name,
                      comm_class cls, coll_kind coll, double bytes, coll_group g, int dep)
{
    sim_task t = workload_task(lane == LANE_P2P ? TASK_P2P : TASK_COLLECTIVE, lane, stage, name);
    t.comm = cls;
    t.coll = coll;
    t.group = g.ranks;
    t.span_nodes = g.nodes;
    t.bytes = bytes;
    t.duration_s = collective_time(&b->s->platform, &b->s->calibration, coll, bytes, g).time_s;
    int id = workload_add_task(w, &t);
    if (dep >= 0)
        workload_add_dep(w, id, dep);
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
    coll_kind coll = s->parallel.zero_stage >= 1 ? COLL_REDUCE_SCATTER : COLL_ALL_REDUCE;
    while (st->pending_grad >= b->bucket_bytes || (force && st->pending_grad > 0)) {
        double bytes = fmin(st->pending_grad, b->bucket_bytes);
        if (b->comp.active) { /* compressed: the bucket becomes compress, collective(s), decompress */
            st->last_comm = compression_emit_bucket(w, &b->comp, stage, dep, bytes / b->grad_elem,
                                                    st->pending_embedding, b->dp, (int)ceil(bytes / b->call_bytes));
            st->pending_grad -= bytes;
            continue;
        }
        const char *name = coll == COLL_ALL_REDUCE ? "dp_grad_allreduce" : "dp_grad_reduce_scatter";
        st->last_comm = workload_add_comm(w, b, stage, LANE_COMM, name, COMM_DP, coll, bytes, b->dp, dep);
        w->tasks[st->last_comm].calls = (int)ceil(bytes / b->call_bytes);
        if (b->compress_s_per_byte > 0) /* packing to the narrower type and back, on the comm lane */
            w->tasks[st->last_comm].duration_s += bytes * b->compress_s_per_byte;
        st->pending_grad -= bytes;
    }
}

/* flush_bucket, then (ZeRO-Offload) the reduced gradients' copy to the host (host_offload.h). */
void workload_flush_and_offload(step_workload *w, const builder *b, stage_state *st, int stage, int dep, int force)
{
    double before = st->pending_grad;
    int last_comm = st->last_comm;
    flush_bucket(w, b, st, stage, dep, force);
    double elements = (before - st->pending_grad) / b->grad_elem;
    offload_grads_to_host(w, b->s, stage, elements, st->last_comm != last_comm ? st->last_comm : dep);
}
