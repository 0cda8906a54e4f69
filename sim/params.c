/* Parameter counts; see params.h. */
#include <stdlib.h>
#include "params.h"

static layer_params layer_params_split(const scenario_config *s, int tp, int ep)
{
    double h = (double)s->model.hidden_size, f = (double)s->model.ffn_hidden_size;
    double kv = h * (double)s->model.num_query_groups / (double)s->model.num_attention_heads;
    /* QKV (column-parallel, weights and biases split) and projection (row-parallel: the
     * bias is replicated). */
    double attn = (h * (h + 2 * kv) + (h + 2 * kv)) / tp + h * h / tp + h;
    double mlp_mats = s->model.swiglu ? 3 : 2;
    double mlp = (mlp_mats * h * f + (s->model.swiglu ? 2 : 1) * f) / tp + h;
    double norms = 4 * h;
    layer_params p = {attn + norms, 0};
    if (s->model.num_experts > 0) {
        p.expert = (double)s->model.num_experts * mlp / ep;
        p.dense += h * (double)s->model.num_experts; /* router */
    } else {
        p.dense += mlp;
    }
    return p;
}

layer_params params_layer_per_gpu(const scenario_config *s)
{
    return layer_params_split(s, s->parallel.tp, s->parallel.ep);
}

static double embedding_split(const scenario_config *s, int tp)
{
    double h = (double)s->model.hidden_size;
    double positions = s->model.swiglu ? 0 : (double)s->model.seq_length * h;
    return (double)s->model.vocab_size * h / tp + positions;
}

double params_embedding_per_gpu(const scenario_config *s)
{
    return embedding_split(s, s->parallel.tp);
}

double params_stage_per_gpu(const scenario_config *s, int stage)
{
    int P = s->parallel.pp, V = s->parallel.vpp > 0 ? s->parallel.vpp : 1;
    int *layers = calloc((size_t)P * V, sizeof(int));
    char err[256];
    double n = 0;
    if (layers && pipeline_layer_split((int)s->model.num_layers, P, V, s->parallel.pipeline_layers,
                                       layers, err, sizeof err) == 0) {
        layer_params lp = params_layer_per_gpu(s);
        for (int c = 0; c < V; c++)
            n += layers[pipeline_virtual_stage(P, stage, c)] * (lp.dense + lp.expert);
    }
    free(layers);
    return n + params_stage_outside_layers_per_gpu(s, stage);
}

double params_stage_outside_layers_per_gpu(const scenario_config *s, int stage)
{
    int P = s->parallel.pp;
    double h = (double)s->model.hidden_size, n = 0;
    if (stage == 0)
        n += params_embedding_per_gpu(s);
    if (stage == P - 1) {
        n += 2 * h; /* final norm */
        if (P > 1)
            n += (double)s->model.vocab_size * h / s->parallel.tp; /* LM head copy */
    }
    return n;
}

double params_total(const scenario_config *s)
{
    layer_params lp = layer_params_split(s, 1, 1);
    return (double)s->model.num_layers * (lp.dense + lp.expert) + embedding_split(s, 1)
           + 2.0 * (double)s->model.hidden_size;
}
