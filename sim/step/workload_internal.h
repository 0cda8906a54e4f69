/* What the workload's builders share (workload_costs.c: the costs, computed once; workload.c:
 * the passes; workload_emit.c: the tasks both add; workload_step.c: the step's start and end).
 * Private to those files. */
#ifndef DTSIM_SIM_WORKLOAD_INTERNAL_H
#define DTSIM_SIM_WORKLOAD_INTERNAL_H

#include "collective.h"
#include "compression.h"
#include "cost.h"
#include "host_issue.h"
#include "moe_overlap.h"
#include "workload.h"
#include "zero3.h"

/* Time and work of one pass of one layer. */
typedef struct {
    double time_s, comm_s, flops;
    double comm_cls_s[COMM_CLASS_COUNT]; /* comm_s by kind */
    double comm_hidden_cls_s[COMM_CLASS_COUNT]; /* communication beside the compute, not in time_s */
    double overlap_cost_s; /* what running beside communication added to the compute (in time_s) */
    double tp_ring_bytes; /* per GPU, over its TP ring */
} pass_cost;

typedef struct {
    const scenario_config *s;
    cost_model cm;
    int P, V, m, gpn;
    int *layers;                  /* layers per virtual stage */
    pass_cost layer_fwd, layer_bwd, layer_recompute;
    pass_cost embed_fwd, embed_bwd, head_fwd, head_bwd;
    moe_layer_parts moe_fwd, moe_bwd; /* a layer's passes cut at the EP all-to-alls (combined 1F1B) */
    coll_group tp, cp, ep, pp, dp;
    double p2p_bytes;
    double p2p_gather_s;  /* the receiver's all-gather of what TP ranks sent in slices */
    double grad_bytes_per_layer;  /* gradient bytes one GPU reduces per layer */
    double grad_elem;             /* bytes per reduced gradient element */
    double bucket_bytes;   /* gradient bytes per bucket task */
    double call_bytes;     /* the scenario's bucket: one collective call each */
    double compress_s_per_byte; /* grad_reduce_dtype narrower than the gradients: conversion
                                   time per reduced byte (0: none) */
    grad_compressor comp;  /* int8 / top-k / PowerSGD buckets (sim/step/compression.c) */
    int chunks;            /* parallel.tp_comm_overlap_chunks */
    double overlap_slowdown; /* a GEMM beside a collective: the calibration's factor (1: none) */
    zero3_plan z3;         /* ZeRO-3's units, prefetch and buckets (sim/step/zero3.h) */
    int bf16_optimizer;    /* DeepSpeed's BF16_Optimizer (workload_costs.c says when): fp32 gradients
                              accumulated after every backward and all-reduced whole */
    host_issue host;       /* the host's time to issue each piece's kernels (host_issue.h; 0: none) */
    double fp32_accumulate_bytes; /* bytes a parameter of the pass adding each backward's gradients
                                     into fp32 ones (workload.c, accumulate_fp32_grads); 0: none */
    int p2p_drains_device;  /* a pipeline transfer waits for the whole device (params.h,
                               params_p2p_drains_device): the pass after it starts from an idle GPU */
} builder;

/* Per-stage state while emitting. */
#define Z3_HISTORY 32 /* > the deepest ZeRO-3 prefetch (zero3.c caps it at 16) + 1 */
typedef struct {
    int next;              /* next action index */
    int last_compute;      /* last compute task emitted on this stage */
    int last_comm;         /* last DP/ZeRO comm task */
    int last_comm_lane;    /* last task of any kind on the stage's comm lane (ZeRO-3's gathers too),
                              which a device-wide synchronisation waits for */
    int last_host_lane;    /* the same on its host lane (ZeRO-Offload's copies) */
    int last_phase;        /* the phase of the stage's last pass (-1: none yet) */
    int all_warmup;        /* every forward of the stage comes before its first backward */
    int pair_input;        /* the transfer the backward after this forward receives, where one
                              synchronising exchange received both (-1: none; emission loop) */
    double pending_grad;   /* gradient bytes produced, not yet in a bucket */
    int pending_embedding; /* they are the embedding's (PowerSGD compresses its own matrix shape) */
    int *backwards_left;   /* per chunk: backward passes still to run */
    int backwards_run;     /* backward passes emitted on this stage, all chunks */
    int *gather_first, *gather_last; /* overlap_param_gather: per chunk, its first and last
                                        parameter all-gather (-1: none) */
    int *forwards_done;    /* per chunk: forward passes emitted */
    int *z3_held;          /* per chunk: ZeRO-3 as FSDP2 runs it, its layers still gathered */
    int last_send;         /* the stage's last pipeline send, which a blocking send waits for */
    int z3_epilogue;       /* ZeRO-3: the last backward's final reduction, which the next pass waits for */
    int z3_units;          /* ZeRO-3: units (pass pieces) run so far, and the compute task of */
    int z3_history[Z3_HISTORY]; /* each of the last Z3_HISTORY (the prefetch depth's dependencies) */
} stage_state;

/* The builder: every cost and size the graph needs, computed once from the scenario
 * (workload_costs.c). 0, or -1 with err. */
int workload_builder_init(builder *b, const scenario_config *s, config_error *err);

/* One collective's time on b's platform: collective_time, remembered for the build (a graph asks
 * for the same few calls, every pipeline send and bucket alike, and each answer weighs NCCL's
 * algorithms one by one). */
double workload_collective_s(const builder *b, coll_kind coll, double bytes, coll_group g);
void workload_collective_memo_reset(void); /* workload_builder_init: a new build */

/* A collective task of `stage` on `lane` over group g, after dep (-1: none); returns its index. */
int workload_add_comm(step_workload *w, const builder *b, int stage, task_lane lane, const char *name,
                      comm_class cls, coll_kind coll, double bytes, coll_group g, int dep);
/* The gradient bytes one collective call reduces (call) and one bucket task of the graph carries
 * (bucket: coarser for the flow replay, run.flow_bucket_mb), from the scenario's bucket_size_mb
 * or DeepSpeed stage 3's reduce_bucket_size, one element at least (workload_costs.c). */
void workload_bucket_bytes(const scenario_config *s, const zero3_plan *z3, double grad_elem, double *call,
                           double *bucket);
/* Gradient buckets one flush emits as separate tasks at most for the flow replay (and compressed,
 * pipelined ones for both); past it they are one task (a group of WORKLOAD_BUCKET_TASKS tasks for
 * compressed ones) standing for their calls in closed form (workload_emit.c says why that is
 * exact). The analytic replay groups every flush's full buckets into one task. */
#define WORKLOAD_BUCKET_TASKS 64
/* Buckets each task of a flush of `full` whole buckets stands for: 1, or more (flow: the replay's
 * fidelity). */
double workload_bucket_group(double full, int pipelined, int flow);
/* A DP-group collective task on the comm lane standing for `repeat` back-to-back buckets of
 * `one` bytes each (repeat x one bytes, repeat x one call's time), each bucket ceil(one / call)
 * of the scenario's calls; returns its index. */
int workload_add_buckets(step_workload *w, const builder *b, int stage, const char *name, comm_class cls,
                         coll_kind coll, double one, double repeat, double call, int dep);
/* Reduces the stage's pending gradients in full buckets (all with force), then (ZeRO-Offload)
 * copies them to the host. */
void workload_flush_and_offload(step_workload *w, const builder *b, stage_state *st, int stage, int dep, int force);
/* The two GPUs of a pipeline transfer between stages a and c. */
coll_group workload_pp_pair(const builder *b, int a, int c);

/* The step's start and end (workload_step.c). */
void workload_emit_param_gathers(step_workload *w, const builder *b, stage_state *st, int stage);
void workload_emit_grad_flush(step_workload *w, const builder *b, stage_state *st, int stage);
void workload_emit_step_sync(step_workload *w, const builder *b, stage_state *st);
void workload_emit_optimizer(step_workload *w, const builder *b, stage_state *st, int stage);

#endif
