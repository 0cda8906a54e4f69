/* Memory per GPU: model states (weights, gradients, optimizer states under ZeRO 0-3),
 * activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
 * Transformer Models", generalised to any FFN width and GQA), and communication buffers. */
#ifndef DTSIM_SIM_MEMORY_H
#define DTSIM_SIM_MEMORY_H

#include "config.h"

typedef struct {
    double weights, gradients, optimizer, activations, buffers; /* bytes */
    double total, capacity;                                      /* bytes */
    int oom;
} memory_breakdown;

/* Model states of `params` parameters held by one GPU, sharded over `shards` data-parallel
 * ranks as ZeRO stage `zero_stage` says (0: DDP, 1: optimizer, 2: + gradients, 3: + weights).
 * Mixed precision (fp16/bf16/fp8) keeps 2-byte weights and gradients and, for Adam, 12 bytes
 * of fp32 master weights and moments per parameter (ZeRO paper accounting: 2 + 2 + 12). */
void memory_model_states(double params, int shards, int zero_stage, precision_kind prec,
                         optimizer_kind opt, memory_breakdown *out);

/* Activation bytes one layer keeps for one micro-batch on one GPU under the scenario's
 * TP/SP/CP split and recomputation. */
double memory_layer_activations(const scenario_config *s);

/* One pipeline stage, holding `in_flight` (chunk, micro-batch) activations at its peak. */
int memory_model_stage(const scenario_config *s, int stage, int in_flight, memory_breakdown *out);

/* The stage with the largest total under the schedule (in-flight counts from the schedule). */
int memory_model_worst_stage(const scenario_config *s, const pipeline_schedule *sched,
                             memory_breakdown *out, int *worst_stage);

#endif
