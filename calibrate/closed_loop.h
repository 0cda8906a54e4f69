/* dtcal validate: the closed loop. Runs dtrain for a few profiled steps, simulates the same
 * configuration with the calibration given on the platform given, and compares the measured
 * step time (median of the steps after the first) with the predicted one, op by op. With
 * experts the simulation takes the run's routing: model.moe_load_imbalance is the median of the
 * same steps' logged moe_load_imbalance. */
#ifndef DTSIM_CALIBRATE_CLOSED_LOOP_H
#define DTSIM_CALIBRATE_CLOSED_LOOP_H

typedef struct {
    const char *dtrain;        /* the dtrain binary */
    const char *model;         /* tiny | small | FILE */
    const char *platform;      /* platform file */
    const char *calibration;   /* calibration file */
    const char *device;        /* cpu | cuda */
    const char *precision;     /* fp32 | bf16 | fp16: dtrain --precision and the scenario's precision */
    int micro_batch, steps;
    const char *json_path;     /* NULL, "-" or a file */
    const char *dtrain_log;    /* NULL (a temporary file, removed) or where dtrain's --log-json is kept */
    int tp, pp, dp;            /* the layout: more than one rank runs under mpirun on this machine */
    int cp;                    /* dtrain --cp and the scenario's context_parallel_size (0: 1) */
    const char *cp_comm_type;  /* dtrain --cp-comm-type and the scenario's cp_comm_type: p2p | all_gather */
    int ep;                    /* dtrain --expert-model-parallel-size and the scenario's (0: 1) */
    const char *grad_reduce;   /* fp32 | bf16: the DP gradient reduction's precision */
    const char *mpirun;
    int powersgd_rank;         /* 0: none; else dtrain --grad-compress powersgd:R and the scenario's
                                  parallel.grad_compression {"method": "powersgd", "powersgd_rank": R} */
    int overlap_grad_reduce;   /* dtrain --overlap-grad-reduce and the scenario's overlap_grad_reduce */
    double bucket_mb;          /* --bucket-mb and bucket_size_mb */
    int sequence_parallel;     /* dtrain --sequence-parallel and the scenario's sequence_parallel */
    int zero;                  /* dtrain --zero and the scenario's zero_stage (default 0) */
    int overlap_param_gather;  /* dtrain --overlap-param-gather and the scenario's overlap_param_gather */
    int tp_comm_overlap;       /* dtrain --tp-comm-overlap and the scenario's tp_comm_overlap */
    const char *recompute;     /* none | selective | full: dtrain --recompute-granularity and the
                                  scenario's training.recompute_granularity (full: uniform, 1 layer) */
} closed_loop_options;

/* Returns the process exit code. */
int closed_loop_run(const closed_loop_options *o);
#endif
