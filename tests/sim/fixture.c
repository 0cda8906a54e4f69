#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

    s->model.num_layers = layers;
    s->model.hidden_size = 1024;
    s->model.num_attention_heads = 16;
    s->model.num_query_groups = 16;
    s->model.ffn_hidden_size = 4096;
    s->model.seq_length = 1024;
    s->model.vocab_size = 32000;
    s->training.global_batch_size = 8;
    s->training.micro_batch_size = 1;
    s->training.precision = PREC_BF16;
    s->training.recompute = RECOMPUTE_NONE;
    s->parallel.tp = s->parallel.pp = s->parallel.dp = s->parallel.cp = s->parallel.ep = 1;
    s->parallel.vpp = 1;
    s->parallel.schedule = PIPELINE_1F1B;
    s->parallel.overlap_grad_reduce = 1;
    s->parallel.bucket_size_mb = 40;
    s->parallel.scatter_gather_p2p = 1; /* the loader's defaults */
    s->parallel.stage3_prefetch_bucket_size = 5e7;
    s->parallel.stage3_param_persistence_threshold = 1e5;
    s->parallel.stage3_max_live_parameters = 1e9;
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
    s->platform.gpu.hbm_bandwidth_gbs = 1e12;
    for (int i = 0; i < OPCLASS_COUNT; i++)
        s->calibration.op_gbs[i] = 1e12;
    s->model.vocab_size = 8; /* the LM head and embedding become negligible */
}

void fixture_free(scenario_config *s)
{
    for (int i = 0; i < PREC_COUNT; i++)
        free(s->calibration.gemm[i].points);
    free(s->parallel.pipeline_layers);
}

int fixture_first_task(const scenario_config *s, const char *name, sim_task *out)
{
    step_workload w;
    config_error err;
    if (workload_build(s, &w, &err) != 0) {
        fprintf(stderr, "fixture: %s\n", err.msg);
        return -1;
    }
    int rc = -1;
    for (int i = 0; i < w.n_tasks && rc != 0; i++)
        if (!strcmp(w.tasks[i].name, name)) {
            *out = w.tasks[i];
            rc = 0;
        }
    workload_free(&w);
    return rc;
}
