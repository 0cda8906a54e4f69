/* What one dtrain run is asked to do (the command line's values, dtrain_main.c): the options
 * train_run (train.h) runs with and run tracking (run_dir.h) records. Types only. */
#ifndef DTSIM_ENGINE_TRAIN_OPTIONS_H
#define DTSIM_ENGINE_TRAIN_OPTIONS_H
#include "comm.h"
#include "kernels.h"

enum { LR_SCHEDULE_REFUSE = 0, LR_SCHEDULE_OVERRIDE = 1, LR_SCHEDULE_CHECKPOINT = 2 };

typedef struct {
    const char *device;          /* "cpu" | "cuda" */
    const char *model;           /* tiny | small | FILE.json */
    const char *data;            /* token file */
    const char *log_json;        /* NULL, "-" or a path */
    const char *profile;         /* NULL or a path */
    int micro_batch, global_batch, steps, warmup;
    int lr_decay_steps;          /* the cosine decay's length (Megatron-LM's --lr-decay-iters); 0: steps */
    int lr_schedule_from;        /* on --resume, when the checkpoint's schedule (lr, warmup, decay
                                    steps) differs from this run's: LR_SCHEDULE_REFUSE (exit 2),
                                    _OVERRIDE (this run's, Megatron's --override-opt_param-scheduler)
                                    or _CHECKPOINT (the checkpoint's, --use-checkpoint-opt_param-scheduler) */
    unsigned long long seed;
    double lr, weight_decay, grad_clip;
    kernels_precision precision;
    double loss_scale;           /* initial fp16 loss scale */
    int loss_scale_window;       /* good steps before the scale doubles */
    int inject_overflow_step;    /* test aid: put an inf into the gradients at this step (0 = never) */
    int inject_nan_step;         /* test aid: a NaN into layer 0's first norm weight before this step's
                                    forward, so the loss is NaN (0 = never) */
    int no_nan_check;            /* Megatron-LM's --no-check-for-nan-in-loss-and-grad: train on past a
                                    non-finite loss (default: stop with exit 3) */
    int log_crc;                 /* add "params_crc32" to every step line */
    const char *ckpt_dir;        /* NULL: no checkpoints */
    int ckpt_every, ckpt_keep;   /* steps between checkpoints; complete checkpoints kept */
    int ckpt_sync;               /* write on the step loop instead of in the background */
    int resume;                  /* start from the newest good checkpoint in ckpt_dir */
    int stop_after;              /* test aid: stop as if killed after this step (0 = never) */
    int test_plain_attention;    /* test aid: no optional attention kernels (CUDA's CP fallbacks on CPU) */
    int kill_rank, kill_step;    /* test aid: rank kill_rank SIGKILLs itself after kill_step (-1: never) */
    const char *kill_marker;     /* ... only while this file does not exist (it creates it) */
    int kill_signal;             /* SIGKILL (a crash) or SIGSTOP (a hang) */
    double comm_timeout_s;       /* a collective blocked this long stops the rank with a message */
    comm_ctx *comm;              /* the ranks and groups (DP only in this build) */
    const char *dump_params;     /* test aid: write the final fp32 parameters (single-rank layout) */
    const char *rank_params;     /* write {tp, pp, dp, params_total, params_per_rank} here */
    int zero;                    /* ZeRO stage 0-3 */
    int sequence_parallel;       /* --sequence-parallel (with --tp 2+) */
    int tp_comm_overlap;         /* --tp-comm-overlap (with --sequence-parallel, MPI) */
    int cp_all_gather;           /* --cp-comm-type all_gather (0: p2p, ring attention, the default) */
    int cp_a2a;                  /* --cp-comm-type a2a (DeepSpeed-Ulysses: heads all-to-all) */
    int recompute;               /* GPT_RECOMPUTE_NONE | _SELECTIVE | _FULL (--recompute-granularity) */
    int recompute_block;         /* --recompute-method block (0: uniform) */
    int recompute_layers;        /* --recompute-num-layers (default 1) */
    double moe_aux_loss_coeff;   /* --moe-aux-loss-coeff (Megatron-LM's; default 0) */
    int grad_reduce_bf16;        /* DP gradient reduction in bf16 (compression by precision) */
    int grad_compress_rank;      /* PowerSGD rank of the DP reduction (0 = none; ZeRO-0 only) */
    int offload_optimizer;       /* AdamW and its state on the host (ZeRO-Offload style) */
    int comm_nccl;               /* TP, DP/ZeRO, tied-embedding collectives by NCCL (--comm nccl) */
    int overlap_grad_reduce;     /* DP gradient buckets started during the backward (ZeRO-0/1, MPI) */
    int overlap_param_gather;    /* ZeRO-1 parameter all-gather in buckets, waited for by the next forward */
    double bucket_mb;            /* their size in MiB of fp32 gradients */
    int vpp;                     /* model chunks per pipeline stage (interleaved 1F1B) */
    int schedule;                /* pipeline_kind */
    const int *stage_layers;     /* NULL: equal split; else one layer count per stage */
    const char *run_dir;         /* --run-dir: run tracking folder (NULL: none; engine/run_dir.h) */
    double peak_tflops;          /* --peak-tflops: per-device peak for MFU (0: from the device table) */
    struct run_dir *run;         /* world rank 0's open run folder (NULL elsewhere and without --run-dir) */
} train_options;
#endif
