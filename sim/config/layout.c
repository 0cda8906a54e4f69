/* The layout a scenario resolves to: GPU count, micro-batches, rank grid, layer split and pipeline
 * schedule, each computed here from the scenario and nowhere else. See config.h. */
#include <stdio.h>
#include <stdlib.h>
#include "config.h"

int scenario_gpus(const scenario_config *s)
{
    return s->parallel.tp * s->parallel.pp * s->parallel.dp * s->parallel.cp;
}

long long scenario_micro_batches(const scenario_config *s)
{
    long long per = s->training.micro_batch_size * s->parallel.dp;
    return per > 0 ? s->training.global_batch_size / per : 0;
}

scenario_config scenario_with_micro_batches(const scenario_config *s, long long micro_batches)
{
    scenario_config c = *s;
    scenario_set_micro_batches(&c, micro_batches);
    return c;
}

void scenario_set_micro_batches(scenario_config *s, long long micro_batches)
{
    s->training.global_batch_size = micro_batches * s->training.micro_batch_size * s->parallel.dp;
}

rank_grid scenario_rank_grid(const scenario_config *s)
{
    return rank_grid_make(s->parallel.tp, s->parallel.cp, s->parallel.pp, s->parallel.dp);
}

int scenario_layer_split(const scenario_config *s, int *counts, char *why, size_t len)
{
    int P = s->parallel.pp > 0 ? s->parallel.pp : 1, V = s->parallel.vpp > 0 ? s->parallel.vpp : 1;
    return pipeline_layer_split((int)s->model.num_layers, P, V, s->parallel.pipeline_layers, counts, why, len);
}

int scenario_stage_layers(const scenario_config *s, int stage)
{
    int P = s->parallel.pp > 0 ? s->parallel.pp : 1, V = s->parallel.vpp > 0 ? s->parallel.vpp : 1;
    char why[256];
    return pipeline_stage_layer_count((int)s->model.num_layers, P, V, s->parallel.pipeline_layers, stage, why,
                                      sizeof why);
}

int scenario_schedule(const scenario_config *s, pipeline_schedule *out, config_error *err)
{
    int P = s->parallel.pp > 0 ? s->parallel.pp : 1, V = s->parallel.vpp > 0 ? s->parallel.vpp : 1;
    char why[256];
    if (pipeline_schedule_build(out, s->parallel.schedule, P, (int)scenario_micro_batches(s), V, why, sizeof why) != 0) {
        snprintf(err->msg, sizeof err->msg, "scenario.parallel.schedule: %s", why);
        return -1;
    }
    return 0;
}

int scenario_recomputed_layers(const scenario_config *s, int chunk_layers)
{
    if (s->training.recompute == RECOMPUTE_NONE)
        return 0;
    if (s->training.recompute == RECOMPUTE_FULL && s->training.recompute_block) {
        long long n = s->training.recompute_num_layers > 0 ? s->training.recompute_num_layers : 1;
        return n < chunk_layers ? (int)n : chunk_layers;
    }
    return chunk_layers;
}

int scenario_activation_bytes(const scenario_config *s)
{
    if (s->training.activation_bytes > 0)
        return s->training.activation_bytes;
    return s->training.precision == PREC_FP32 || s->training.precision == PREC_TF32 ? 4 : 2;
}

double scenario_head_dim(const scenario_config *s)
{
    if (s->model.kv_channels > 0)
        return (double)s->model.kv_channels;
    return (double)s->model.hidden_size / (double)s->model.num_attention_heads;
}

double scenario_query_width(const scenario_config *s)
{
    return (double)s->model.num_attention_heads * scenario_head_dim(s);
}

double scenario_kv_width(const scenario_config *s)
{
    long long g = s->model.num_query_groups > 0 ? s->model.num_query_groups : s->model.num_attention_heads;
    return (double)g * scenario_head_dim(s);
}

int scenario_expert_tp(const scenario_config *s)
{
    return s->parallel.etp > 0 ? s->parallel.etp : (s->parallel.tp > 0 ? s->parallel.tp : 1);
}

int scenario_expert_dp(const scenario_config *s)
{
    long long w = (long long)(s->parallel.tp > 0 ? s->parallel.tp : 1) * (s->parallel.cp > 0 ? s->parallel.cp : 1) *
                  (s->parallel.dp > 0 ? s->parallel.dp : 1);
    long long e = (long long)scenario_expert_tp(s) * (s->parallel.ep > 0 ? s->parallel.ep : 1);
    return e > 0 && w % e == 0 ? (int)(w / e) : 1;
}
