#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "fixture.h"

void fixture_scenario(scenario_config *s, int layers)
{
    memset(s, 0, sizeof *s);
    strcpy(s->name, "fixture");
    platform_config *p = &s->platform;
    strcpy(p->name, "fixture-cluster");
    strcpy(p->gpu.name, "ideal-gpu");
    p->gpu.memory_gib = 80;
    p->gpu.hbm_bandwidth_gbs = 2000;
    p->gpu.peak_tflops[PREC_BF16] = 100;
    p->gpu.peak_tflops[PREC_FP16] = 100;
    p->gpu.peak_tflops[PREC_FP32] = 20;
    p->node.gpus = 8;
    p->node.nvlink_bandwidth_gbs = 300;
    p->node.nvlink_latency_us = 1;
    p->node.nics = 8;
    p->node.nic_bandwidth_gbps = 200;
    p->network.nodes = 128;
    p->network.topology = TOPO_RAIL_OPTIMIZED_FAT_TREE;
    p->network.tiers = 2;
    p->network.leaf_radix = 32;
    p->network.oversubscription = 1;
    p->network.link_latency_us = 0.5;
    p->network.switch_latency_us = 0.3;
    p->storage.checkpoint_write_gbs = 100;
    p->storage.checkpoint_read_gbs = 100;

    calibration_config *c = &s->calibration;
    strcpy(c->device, "ideal-gpu");
    strcpy(c->source, "datasheet");
    c->gemm[PREC_BF16].count = 1;
    c->gemm[PREC_BF16].points = calloc(1, sizeof(gemm_point));
    c->gemm[PREC_BF16].points[0] = (gemm_point){1024, 1024, 1024, 100}; /* 100% of peak */
    for (int i = 0; i < OPCLASS_COUNT; i++)
        c->op_gbs[i] = 1000;

    fixture_model(s, layers, 1024, 16, 4096);
    s->model.seq_length = 1024;
    s->model.vocab_size = 32000;
    fixture_single_gpu(s);
    s->training.global_batch_size = 8;
    s->parallel.overlap_grad_reduce = 1;
    s->parallel.scatter_gather_p2p = 1; /* the loader's defaults */
    s->parallel.stage3_prefetch_bucket_size = 5e7;
    s->parallel.stage3_param_persistence_threshold = 1e5;
    s->parallel.stage3_max_live_parameters = 1e9;
    s->parallel.stage3_max_reuse_distance = 1e9;
    s->parallel.reduce_bucket_size = 5e8;
    s->run.steps = 1;
}

void fixture_free_communication(scenario_config *s)
{
    s->platform.node.nvlink_bandwidth_gbs = 1e12;
    s->platform.node.nic_bandwidth_gbps = 1e13;
    s->platform.node.nvlink_latency_us = 0;
    s->platform.network.link_latency_us = 0;
    s->platform.network.switch_latency_us = 0;
    /* alpha-beta with no alpha and no hop latency: NCCL's tuner has latencies of its own */
    s->platform.collective_library = COLL_LIBRARY_MPI;
    s->platform.gpu.hbm_bandwidth_gbs = 1e12;
    for (int i = 0; i < OPCLASS_COUNT; i++)
        s->calibration.op_gbs[i] = 1e12;
    s->model.vocab_size = 8; /* the LM head and embedding become negligible */
}

void fixture_free(scenario_config *s)
{
    calibration_free(&s->calibration);
    free(s->parallel.pipeline_layers);
}

void fixture_model(scenario_config *s, long long layers, long long hidden, long long heads, long long ffn)
{
    s->model.num_layers = layers;
    s->model.hidden_size = hidden;
    s->model.num_attention_heads = heads;
    s->model.num_query_groups = heads;
    s->model.ffn_hidden_size = ffn;
}

void fixture_single_gpu(scenario_config *s)
{
    s->training.micro_batch_size = 1;
    s->training.precision = PREC_BF16;
    s->training.recompute = RECOMPUTE_NONE;
    s->parallel.tp = s->parallel.pp = s->parallel.dp = s->parallel.cp = s->parallel.ep = 1;
    s->parallel.vpp = 1;
    s->parallel.schedule = PIPELINE_1F1B;
    s->parallel.bucket_size_mb = 40;
}

void fixture_layout(scenario_config *s, int tp, int pp, int dp, int global_batch_size)
{
    s->parallel.tp = tp;
    s->parallel.pp = pp;
    s->parallel.dp = dp;
    s->training.global_batch_size = global_batch_size;
}

void fixture_tp_comm_overlap(scenario_config *s, int chunks, double slowdown)
{
    s->parallel.sequence_parallel = 1;
    s->parallel.tp_comm_overlap = 1;
    s->parallel.tp_comm_overlap_chunks = chunks;
    s->calibration.overlap_slowdown = slowdown;
}

void fixture_host_links(scenario_config *s)
{
    s->platform.node.host_memory_bandwidth_gbs = 400;
    s->platform.node.pcie_bandwidth_gbs = 32;
    s->platform.node.nvme_read_gbs = 50;
    s->platform.node.nvme_write_gbs = 25;
}

int fixture_setup(void **state)
{
    scenario_config *s = malloc(sizeof *s);
    if (!s)
        return -1;
    fixture_scenario(s, 1);
    *state = s;
    return 0;
}

int fixture_teardown(void **state)
{
    fixture_free(*state);
    free(*state);
    return 0;
}

void fixture_degrade(scenario_config *s, degraded_link *d)
{
    s->faults.degraded = d;
    s->faults.degraded_count = d != NULL;
}

run_result fixture_run(const scenario_config *s)
{
    run_result r;
    config_error err;
    if (run_scenario(s, &r, &err) != 0)
        fail_msg("%s", err.msg);
    return r;
}

run_result fixture_run_at(scenario_config *s, int flow)
{
    s->run.fidelity_flow = flow;
    return fixture_run(s);
}

run_result fixture_run_free(scenario_config *s)
{
    run_result r = fixture_run(s);
    fixture_free(s);
    return r;
}

void fixture_run_both(scenario_config *s, run_result *analytic, run_result *flow)
{
    *analytic = fixture_run_at(s, 0);
    *flow = fixture_run_at(s, 1);
}

void fixture_build(const scenario_config *s, step_workload *w)
{
    config_error err;
    if (workload_build(s, w, &err) != 0)
        fail_msg("%s", err.msg);
}

int fixture_find_task(const step_workload *w, const char *name)
{
    for (int i = 0; i < w->n_tasks; i++)
        if (!strcmp(w->tasks[i].name, name))
            return i;
    return -1;
}

int fixture_first_task(const scenario_config *s, const char *name, sim_task *out, task_comm_parts *parts)
{
    step_workload w;
    config_error err;
    if (workload_build(s, &w, &err) != 0) {
        fprintf(stderr, "fixture: %s\n", err.msg);
        return -1;
    }
    int i = fixture_find_task(&w, name);
    if (i >= 0) {
        *out = w.tasks[i];
        out->parts = -1; /* its index points into the workload freed below */
        if (parts)
            *parts = *workload_task_parts(&w, &w.tasks[i]);
    }
    workload_free(&w);
    return i >= 0 ? 0 : -1;
}

void fixture_graph(step_workload *w, int stages)
{
    memset(w, 0, sizeof *w);
    w->stages = stages;
}

sim_task fixture_compute(int stage, const char *name, double duration_s)
{
    sim_task t = workload_task(TASK_COMPUTE, LANE_COMPUTE, stage, name);
    t.duration_s = duration_s;
    return t;
}

sim_task fixture_transfer(int stage, int peer, const char *name, double bytes, double duration_s)
{
    sim_task t = workload_task(TASK_P2P, LANE_P2P, stage, name);
    t.peer_stage = peer;
    t.comm = COMM_PP;
    t.coll = COLL_SEND_RECV;
    t.group = t.span_nodes = 2;
    t.bytes = bytes;
    t.duration_s = duration_s;
    return t;
}

sim_task fixture_collective(int stage, const char *name, comm_class comm, coll_kind coll, int group, double bytes,
                            double duration_s)
{
    sim_task t = workload_task(TASK_COLLECTIVE, LANE_COMM, stage, name);
    t.comm = comm;
    t.coll = coll;
    t.group = t.span_nodes = group;
    t.bytes = bytes;
    t.duration_s = duration_s;
    return t;
}

int fixture_add(step_workload *w, sim_task t, int dep)
{
    int i = workload_add_task(w, &t);
    if (dep >= 0)
        workload_add_dep(w, i, dep);
    return i;
}

void fixture_replay_analytic(const step_workload *w, replay_times *t)
{
    assert_int_equal(replay_times_alloc(t, w->n_tasks), 0);
    assert_int_equal(replay_analytic(w, t), 0);
}

void fixture_replay_flow(const scenario_config *s, const step_workload *w, const flow_options *o, replay_times *t,
                         flow_report *rep)
{
    flow_options defaults = {0};
    config_error err;
    assert_int_equal(replay_times_alloc(t, w->n_tasks), 0);
    if (replay_flow_with(s, w, o ? o : &defaults, t, rep, &err) != 0)
        fail_msg("%s", err.msg);
}

double fixture_end(const replay_times *t, int n)
{
    double end = 0;
    for (int i = 0; i < n; i++)
        end = fmax(end, t->finish[i]);
    return end;
}

double fixture_flow_finish(const scenario_config *s, step_workload *w, const flow_options *o, int task)
{
    replay_times t;
    fixture_replay_flow(s, w, o, &t, NULL);
    double finish = task < 0 ? fixture_end(&t, w->n_tasks) : t.finish[task];
    replay_times_free(&t);
    workload_free(w);
    return finish;
}

void fixture_zero3(scenario_config *s, int layers)
{
    fixture_scenario(s, layers);
    fixture_layout(s, 1, 1, 8, 16);
    s->parallel.zero_stage = 3;
}

void fixture_zero3_bytes(const scenario_config *s, double *gathered, double *reduced, int *gathers)
{
    step_workload w;
    fixture_build(s, &w);
    *gathered = *reduced = 0;
    *gathers = 0;
    for (int i = 0; i < w.n_tasks; i++) {
        if (!strcmp(w.tasks[i].name, "zero3_param_allgather")) {
            *gathered += w.tasks[i].bytes;
            (*gathers)++;
        } else if (!strcmp(w.tasks[i].name, "dp_grad_reduce_scatter")) {
            *reduced += w.tasks[i].bytes;
        }
    }
    workload_free(&w);
}

void fixture_pass_s_by_stage(const scenario_config *s, const char *name, double sum[2], int tasks[2])
{
    step_workload w;
    fixture_build(s, &w);
    sum[0] = sum[1] = 0;
    tasks[0] = tasks[1] = 0;
    for (int i = 0; i < w.n_tasks; i++)
        if (!strcmp(w.tasks[i].name, name)) {
            sum[w.tasks[i].stage] += w.tasks[i].duration_s;
            tasks[w.tasks[i].stage]++;
        }
    workload_free(&w);
}
