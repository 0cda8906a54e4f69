/* The scenario of a dtrain run: the engine's GPT model with its batch, precision and layout,
 * on a platform and calibration given by the caller. One construction for `dtcal validate`
 * (the closed loop) and `dtsim report --measured RUN_DIR` without a scenario, so both simulate
 * exactly what the engine ran. */
#ifndef DTSIM_SIM_ENGINE_SCENARIO_H
#define DTSIM_SIM_ENGINE_SCENARIO_H

#include "config.h"

typedef struct {
    long long num_layers, hidden, heads, seq_len, vocab, ffn_hidden; /* ffn_hidden 0: 4 x hidden */
    long long kv_groups;       /* num_query_groups; 0: heads */
    int swiglu, rmsnorm, rope, untied; /* the Llama choices (engine/gpt.h), each 0 for GPT-2's */
    int num_experts, moe_topk;         /* mixture of experts (0: a dense MLP) */
    double moe_capacity_factor;        /* 0: dropless */
    long long micro_batch, global_batch;
    int tp, pp, dp, vpp, zero;
    int cp;                    /* dtrain --cp (0 or 1: none) */
    const char *cp_comm_type;  /* dtrain --cp-comm-type: p2p | all_gather | a2a; NULL: p2p, dtrain's default */
    int ep;                    /* dtrain --expert-model-parallel-size (0 or 1: every expert on each rank) */
    const char *precision;     /* fp32 | bf16 | fp16 */
    const char *schedule;      /* gpipe | 1f1b | interleaved; NULL: 1f1b */
    const char *grad_reduce;   /* fp32 | bf16; NULL: fp32 */
    int powersgd_rank;         /* 0: none */
    int overlap_grad_reduce;   /* dtrain --overlap-grad-reduce: DP buckets during the backward */
    double bucket_mb;          /* their size (MiB) with overlap; 0: dtrain's default, 40 */
    int sequence_parallel;     /* dtrain --sequence-parallel */
    int overlap_param_gather;  /* dtrain --overlap-param-gather (ZeRO-1) */
    int tp_comm_overlap;       /* dtrain --tp-comm-overlap (with sequence_parallel) */
    const char *recompute;     /* dtrain --recompute-granularity: none | selective | full; NULL: none */
    const char *recompute_method; /* full: uniform | block; NULL: uniform */
    int recompute_num_layers;  /* full: 0 = 1 */
} engine_run_shape;

/* Loads the scenario: the platform file's node grown to hold every rank (the engine runs them on
 * one machine, its "GPUs" joined by the memory MPI uses), its node.gpus kept as the devices the
 * ranks then share (node.compute_devices, unless the file sets it), its default calibration replaced by
 * calibration_path; flash attention, as the engine's kernel keeps no T x T matrix. Returns 0,
 * or -1 with err naming what is wrong. The caller frees with scenario_free. */
int engine_scenario_load(const engine_run_shape *r, const char *platform_path, const char *calibration_path,
                         scenario_config *out, config_error *err);

#endif
